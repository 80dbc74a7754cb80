import FixtureSupport
import Foundation
import Testing

/// `modelc train image-classifier` and `modelc evaluate` run as a user runs
/// them, on generated image folders with the tiny base network fixture.
@Suite struct TrainCommandTests {
    static let base = "Fixtures/Models/ImageFeatureBase.mlmodel"
    static let programBase = "Fixtures/Models/ImageFeatureBaseProgram.mlpackage"

    struct Workspace {
        let directory: TemporaryDirectory
        var data: String { directory.path + "/data" }
        var cache: String { directory.path + "/cache" }
        var model: String { directory.path + "/Colors.mlmodel" }
        var package: String { directory.path + "/Colors.mlpackage" }

        init(labels: [String] = ["blue", "red", "yellow"], count: Int = 12) throws {
            directory = try TemporaryDirectory()
            try GeneratedImages.write(labels: labels, count: count, into: directory.path + "/data", seed: 11)
        }

        func run(_ arguments: [String]) throws -> ModelcProcess.Result {
            try ModelcProcess.run(arguments, environment: ["MODELC_CACHE": cache])
        }

        func train(_ extra: [String] = []) throws -> ModelcProcess.Result {
            try run(["train", "image-classifier", data, "--base", TrainCommandTests.base, "-o", model] + extra)
        }

        /// Trains on the ML-program base into `output` (by default `package`).
        func trainOnProgram(_ extra: [String] = [], output: String? = nil) throws -> ModelcProcess.Result {
            try run(["train", "image-classifier", data, "--base", TrainCommandTests.programBase, "-o", output ?? package] + extra)
        }
    }

    @Test func trainsReportsAndWritesAModelThatPredictAndEvaluateRun() throws {
        let work = try Workspace()
        let result = try work.train(["--seed", "5", "--author", "tests", "--augment", "flip,blur"])
        #expect(result.status == 0, "\(result.standardError)")
        #expect(result.standardError.contains("cut at \"features\" (32 values, found automatically: the input of \"fc\" (innerProduct))"))
        #expect(result.standardError.contains("validation: 3 validation images held back from the training folders (10.0% of each label, chosen with seed 5)"))
        #expect(result.standardError.contains("iteration 1: loss "))
        #expect(result.standardOutput.contains("plus 66 augmented copies for training"))
        #expect(result.standardOutput.contains("validation: 100.0% accuracy on 3 images"))
        #expect(result.standardOutput.contains("\(work.model): written ("))

        let predicted = try work.run(["predict", work.model, "--input", "image=@\(work.data)/red/red-4.png", "--top", "1"])
        #expect(predicted.status == 0, "\(predicted.standardError)")
        #expect(predicted.standardOutput.hasPrefix("classLabel: red\n  red  "))

        let evaluated = try work.run(["evaluate", work.model, work.data, "--json"])
        #expect(evaluated.status == 0, "\(evaluated.standardError)")
        let report = try #require(Fixtures.parseJSON(evaluated.standardOutput) as? [String: Any])
        #expect(report["images"] as? Int == 36)
        #expect((report["accuracy"] as? Double ?? 0) >= 0.95)
        let matrix = try #require(report["confusionMatrix"] as? [String: Any])
        #expect(matrix["labels"] as? [String] == ["blue", "red", "yellow"])
    }

    @Test func jsonReportsTheCacheAndTheSameOptionsGiveTheSameFile() throws {
        let work = try Workspace(labels: ["blue", "green"], count: 10)
        let first = try work.train(["--json", "--validation-split", "0.2"])
        #expect(first.status == 0, "\(first.standardError)")
        let bytes = try Data(contentsOf: URL(fileURLWithPath: work.model))
        let second = try work.train(["--json", "--validation-split", "0.2"])
        #expect(second.status == 0)
        #expect(try Data(contentsOf: URL(fileURLWithPath: work.model)) == bytes)
        // NDJSON: progress events, then the report as the "done" event.
        let report = try #require(Fixtures.parseJSON(String(second.standardOutput.split(separator: "\n").last ?? "")) as? [String: Any])
        #expect(report["event"] as? String == "done")
        let features = try #require(report["features"] as? [String: Int])
        #expect(features == ["vectors": 20, "cacheHits": 20, "computed": 0])
        #expect(report["validationAccuracy"] as? Double == 1)
        #expect(second.standardError.isEmpty)
    }

    @Test func badTreesGiveTheirErrorsAndExitCodes() throws {
        let one = try Workspace(labels: ["red"], count: 10)
        let refused = try one.train()
        #expect(refused.status == 98)
        #expect(refused.standardError == "modelc: error: \(one.data): at least 2 label folders with images are needed, found 1 (\"red\")\n")

        let few = try Workspace(labels: ["blue", "red"], count: 10)
        try GeneratedImages.write(labels: ["green"], count: 3, into: few.data, seed: 12)
        let short = try few.train()
        #expect(short.status == 98)
        #expect(short.standardError == "modelc: error: at least 10 images per label are needed; too few in \"green\" (3)\n")
        #expect(!FileManager.default.fileExists(atPath: few.model))

        let broken = try Workspace(labels: ["blue", "red"], count: 10)
        try Data("not an image".utf8).write(to: URL(fileURLWithPath: broken.data + "/red/notes.png"))
        let skipped = try broken.train(["--validation-split", "0"])
        #expect(skipped.status == 0, "\(skipped.standardError)")
        #expect(skipped.standardError.contains("modelc: warning: \(broken.data)/red/notes.png: skipped: not an image in a format modelc decodes\n"))

        let notNetwork = try broken.run(["train", "image-classifier", broken.data, "--base", "Fixtures/Models/GLMClassifier.mlmodel", "-o", broken.model])
        #expect(notNetwork.status == 99)
        let usage = try broken.run(["train", "text-classifier", broken.data, "--base", Self.base, "-o", broken.model])
        #expect(usage.status == 64)
        let augment = try broken.train(["--augment", "flip,zoom"])
        #expect(augment.status == 64)
        let evaluateGLM = try broken.run(["evaluate", "Fixtures/Models/GLMClassifier.mlmodel", broken.data])
        #expect(evaluateGLM.status == 100)
    }

    @Test func aModelTrainedOnTheNetworkBaseAnswersClassifyLabel() throws {
        let work = try Workspace(labels: ["blue", "red"], count: 10)
        let trained = try work.train(["--validation-split", "0"])
        #expect(trained.status == 0, "\(trained.standardError)")
        let image = work.data + "/red/red-3.png"
        let result = try work.run(["classify", work.model, image, "--label", "red", "--json"])
        #expect(result.status == 0, "\(result.standardError)")
        let object = try #require(Fixtures.parseJSON(result.standardOutput.trimmingCharacters(in: .newlines)) as? [String: Any])
        #expect(Set(object.keys) == ["image", "label", "confidence"])
        #expect(object["image"] as? String == image)
        #expect(object["label"] as? String == "red")
        let confidence = try #require(object["confidence"] as? Double)
        #expect(confidence > 0.5 && confidence <= 1)
    }

    @Test func aNetworkBaseWritesARealPackageWhenAskedForOne() throws {
        let work = try Workspace(labels: ["blue", "red"], count: 10)
        let trained = try work.run(["train", "image-classifier", work.data, "--base", Self.base, "-o", work.package,
                                    "--validation-split", "0"])
        #expect(trained.status == 0, "\(trained.standardError)")
        let files = try Self.tree(work.package)
        #expect(Set(files.keys) == ["Manifest.json", "Data/com.apple.CoreML/model.mlmodel"])
        let result = try work.run(["classify", work.package, work.data + "/blue/blue-3.png", "--label", "blue", "--json"])
        #expect(result.status == 0, "\(result.standardError)")
        let object = try #require(Fixtures.parseJSON(result.standardOutput.trimmingCharacters(in: .newlines)) as? [String: Any])
        #expect((object["confidence"] as? Double ?? 0) > 0.5)
        let verified = try work.run(["inspect", work.package])
        #expect(verified.status == 0, "\(verified.standardError)")
    }

    // MARK: - An ML-program base

    /// Every file of a package and its bytes.
    static func tree(_ path: String) throws -> [String: Data] {
        var files: [String: Data] = [:]
        for file in try FileManager.default.subpathsOfDirectory(atPath: path) {
            var isDirectory: ObjCBool = false
            guard FileManager.default.fileExists(atPath: path + "/" + file, isDirectory: &isDirectory), !isDirectory.boolValue else { continue }
            files[file] = try Data(contentsOf: URL(fileURLWithPath: path + "/" + file))
        }
        return files
    }

    @Test func anMLProgramBaseTrainsAPackageThatRunsAndReachesTheHeldBackImages() throws {
        let work = try Workspace()
        let heldBack = work.directory.path + "/held-back"
        try GeneratedImages.write(labels: ["blue", "red", "yellow"], count: 8, into: heldBack, seed: 99)
        let result = try work.trainOnProgram(["--seed", "5", "--author", "tests"])
        #expect(result.status == 0, "\(result.standardError)")
        #expect(result.standardError.contains("cut at \"features\" (32 values, found automatically: the input of \"fc\" (linear)); 10 of 13 operations kept"))
        #expect(result.standardOutput.contains("\(work.package): written ("))
        for part in ["Manifest.json", "Data/com.apple.CoreML/model.mlmodel", "Data/com.apple.CoreML/weights/weight.bin"] {
            #expect(FileManager.default.fileExists(atPath: work.package + "/" + part), "\(part)")
        }

        let evaluated = try work.run(["evaluate", work.package, heldBack, "--json"])
        #expect(evaluated.status == 0, "\(evaluated.standardError)")
        let report = try #require(Fixtures.parseJSON(evaluated.standardOutput) as? [String: Any])
        #expect(report["images"] as? Int == 24)
        #expect((report["accuracy"] as? Double ?? 0) >= 0.95)

        let predicted = try work.run(["predict", work.package, "--input", "image=@\(heldBack)/yellow/yellow-3.png", "--top", "1"])
        #expect(predicted.status == 0, "\(predicted.standardError)")
        #expect(predicted.standardOutput.hasPrefix("classLabel: yellow\n"))

        let image = heldBack + "/red/red-1.png"
        let classified = try work.run(["classify", work.package, image, "--label", "red", "--json"])
        #expect(classified.status == 0, "\(classified.standardError)")
        let object = try #require(Fixtures.parseJSON(classified.standardOutput.trimmingCharacters(in: .newlines)) as? [String: Any])
        #expect(Set(object.keys) == ["image", "label", "confidence"])
        #expect(object["label"] as? String == "red")
        #expect((object["confidence"] as? Double ?? 0) > 0.5)
        let unknown = try work.run(["classify", work.package, image, "--label", "green"])
        #expect(unknown.status == 96)
        #expect(unknown.standardError == "modelc: error: \(work.package): no label \"green\" (its labels: \"blue\", \"red\", \"yellow\")\n")

        let bundle = work.directory.path + "/Colors.bundle"
        let compiled = try work.run(["compile", work.package, bundle])
        #expect(compiled.status == 0, "\(compiled.standardError)")
        let verified = try work.run(["verify", bundle])
        #expect(verified.status == 0, "\(verified.standardError)")
    }

    @Test func retrainingOnAnMLProgramBaseWithTheSameSeedGivesTheSameFiles() throws {
        let work = try Workspace(labels: ["blue", "green"], count: 10)
        let first = try work.trainOnProgram(["--json", "--seed", "9", "--augment", "flip"])
        #expect(first.status == 0, "\(first.standardError)")
        let files = try Self.tree(work.package)
        #expect(Set(files.keys) == ["Manifest.json", "Data/com.apple.CoreML/model.mlmodel", "Data/com.apple.CoreML/weights/weight.bin"])
        let second = try work.trainOnProgram(["--json", "--seed", "9", "--augment", "flip"])
        #expect(second.status == 0)
        #expect(try Self.tree(work.package) == files)
        let report = try #require(Fixtures.parseJSON(String(second.standardOutput.split(separator: "\n").last ?? "")) as? [String: Any])
        let features = try #require(report["features"] as? [String: Int])
        #expect(features["computed"] == 0)
        // A fresh cache gives the same files too.
        let elsewhere = work.directory.path + "/Again.mlpackage"
        let third = try ModelcProcess.run(["train", "image-classifier", work.data, "--base", Self.programBase, "-o", elsewhere,
                                           "--json", "--seed", "9", "--augment", "flip"],
                                          environment: ["MODELC_CACHE": work.directory.path + "/other-cache"])
        #expect(third.status == 0, "\(third.standardError)")
        #expect(try Self.tree(elsewhere) == files)
    }

    @Test func anMLProgramBaseRefusesAnMLModelOutputBeforeAnyWork() throws {
        let work = try Workspace(labels: ["blue", "red"], count: 10)
        let refused = try work.trainOnProgram(output: work.model)
        #expect(refused.status == 64)
        #expect(refused.standardError == "modelc: error: -o \(work.model): the base is an ML program, whose weights stay in a weight file; "
                + "the trained model must be an .mlpackage (use -o NAME.mlpackage)\n")
        #expect(!FileManager.default.fileExists(atPath: work.model))
        #expect(!FileManager.default.fileExists(atPath: work.cache + "/features"))

        // A bundle compiled from the program is a program base too.
        let bundle = work.directory.path + "/Base.bundle"
        #expect(try work.run(["compile", Self.programBase, bundle]).status == 0)
        let fromBundle = try work.run(["train", "image-classifier", work.data, "--base", bundle, "-o", work.model])
        #expect(fromBundle.status == 64)
        #expect(fromBundle.standardError.hasPrefix("modelc: error: -o \(work.model): the base is an ML program"))
        #expect(!FileManager.default.fileExists(atPath: work.model))
    }
}
