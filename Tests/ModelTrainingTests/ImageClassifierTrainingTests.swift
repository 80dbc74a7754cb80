import FixtureSupport
import Foundation
import ModelCompiler
import ModelFeatures
import ModelRuntime
import ModelSpec
import ModelTraining
import ModelValidation
import Testing

/// Training on generated image folders with the tiny base network fixture.
@Suite struct ImageClassifierTrainingTests {
    static let base = Fixtures.path("Models/ImageFeatureBase.mlmodel")
    static let programBase = Fixtures.path("Models/ImageFeatureBaseProgram.mlpackage")
    static let labels = ["blue", "green", "red"]

    /// Training and held-back folders, written once per test.
    struct DataSet {
        let directory: TemporaryDirectory
        var training: String { directory.path + "/train" }
        var heldBack: String { directory.path + "/test" }
        var cache: String { directory.path + "/cache" }

        init(labels: [String] = ImageClassifierTrainingTests.labels, count: Int = 14) throws {
            directory = try TemporaryDirectory()
            try GeneratedImages.write(labels: labels, count: count, into: directory.path + "/train", seed: 1)
            try GeneratedImages.write(labels: labels, count: 8, into: directory.path + "/test", seed: 2)
        }

        func options(_ change: (inout TrainingOptions) -> Void = { _ in }) -> TrainingOptions {
            var options = TrainingOptions(basePath: ImageClassifierTrainingTests.base, seed: 7, cacheRoot: cache)
            change(&options)
            return options
        }
    }

    @Test func theFeatureOutputIsTheInputOfTheFinalInnerProduct() throws {
        let network = try FeatureNetwork(basePath: Self.base)
        #expect(network.featureName == "features")
        #expect(network.featureCount == 32)
        #expect(network.isAutomatic)
        #expect(network.consumer == "\"fc\" (innerProduct)")
        #expect(network.keptLayers == network.baseLayers - 2)
    }

    @Test func aNamedFeatureOutputCutsThere() throws {
        let network = try FeatureNetwork(basePath: Self.base, featureOutput: "relu3_out")
        #expect(network.featureCount == 32 * 8 * 8)
        #expect(!network.isAutomatic)
        #expect(throws: TrainingError.self) { try FeatureNetwork(basePath: Self.base, featureOutput: "nothing") }
    }

    @Test func anMLProgramIsCutAtTheInputOfItsFinalLinear() throws {
        let network = try FeatureNetwork(basePath: Self.programBase)
        #expect(network.isProgram)
        #expect(network.featureName == "features")
        #expect(network.featureCount == 32)
        #expect(network.isAutomatic)
        #expect(network.consumer == "\"fc\" (linear)")
        // mul (the image's scale), 3 conv, 3 relu, 2 max_pool, reduce_mean; not linear, softmax, classify.
        #expect(network.keptLayers == 10 && network.baseLayers == 13 && network.unitName == "operations")
        #expect(network.digest != (try FeatureNetwork(basePath: Self.programBase, featureOutput: "relu3")).digest)
    }

    @Test func aNamedProgramVariableCutsThereAndUnknownNamesAreRefused() throws {
        let relu = try FeatureNetwork(basePath: Self.programBase, featureOutput: "relu3")
        #expect(relu.featureCount == 32 * 8 * 8)
        #expect(!relu.isAutomatic && relu.consumer == nil)
        #expect(relu.keptLayers == 9)
        let pool = try FeatureNetwork(basePath: Self.programBase, featureOutput: "pool1")
        #expect(pool.featureCount == 8 * 16 * 16)
        #expect(pool.keptLayers == 4)
        #expect(throws: TrainingError.baseModel(path: Self.programBase, reason: "\"image\" is a model input, not an operation output")) {
            try FeatureNetwork(basePath: Self.programBase, featureOutput: "image")
        }
        do {
            _ = try FeatureNetwork(basePath: Self.programBase, featureOutput: "nothing")
            Issue.record("an unknown variable was accepted")
        } catch {
            #expect(error.description.contains("no operation of function main produces \"nothing\""), "\(error)")
        }
    }

    @Test func aCompiledProgramBundleIsCutAsItsSourceIsAndExports() throws {
        let data = try DataSet(labels: ["blue", "red"], count: 10)
        let bundle = data.directory.path + "/Base.mlmodelc"
        _ = try BundleCompiler(options: CompileOptions()).compile(Self.programBase, to: bundle)
        let fromBundle = try FeatureNetwork(basePath: bundle)
        let fromSource = try FeatureNetwork(basePath: Self.programBase)
        #expect(fromBundle.isProgram && fromBundle.featureName == fromSource.featureName)
        let image = try #require(PixelBuffer(width: 32, height: 32, pixelFormat: .rgb, bytes: (0..<3072).map { UInt8($0 % 251) }))
        #expect(try fromBundle.features(of: image) == fromSource.features(of: image))
        let trained = try ImageClassifierTrainer.train(dataDirectory: data.training, options: data.options { $0.basePath = bundle })
        let output = data.directory.path + "/FromBundle.mlpackage"
        try trained.write(to: output)
        #expect(ModelValidator.validate(try ModelFile.open(output)).filter { $0.severity == .error }.isEmpty)
    }

    @Test func aModelTrainedOnAnMLProgramLabelsHeldBackImagesAsAPackage() throws {
        let data = try DataSet()
        let trained = try ImageClassifierTrainer.train(dataDirectory: data.training, options: data.options {
            $0.basePath = Self.programBase
            $0.validation = .directory(data.heldBack)
        })
        let validation = try #require(trained.report.validation)
        #expect(validation.count == 24)
        #expect(validation.accuracy >= 0.95)

        #expect(throws: TrainingError.outputNeedsPackage(path: data.directory.path + "/Colors.mlmodel")) {
            try trained.write(to: data.directory.path + "/Colors.mlmodel")
        }
        let output = data.directory.path + "/Colors.mlpackage"
        try trained.write(to: output)
        let file = try ModelFile.open(output)
        #expect(file.format == .mlpackage)
        #expect(ModelValidator.validate(file).filter { $0.severity == .error }.isEmpty)
        let summary = ModelSummary(file)
        #expect(summary.modelType == "pipelineClassifier")
        #expect(summary.pipeline?.map(\.modelType) == ["mlProgram", "glmClassifier"])

        let model = try Model(contentsOf: output, configuration: ModelConfiguration(threads: 2))
        #expect(model.classLabels == Self.labels)
        let evaluation = try ClassifierEvaluation.evaluate(model, folders: LabelledImageFolders.scan(data.heldBack))
        #expect(evaluation.report.accuracy == validation.accuracy)
        #expect(evaluation.report.confusion == validation.confusion)
    }

    @Test func aFloat16ProgramFeatureIsCastToFloat32AndTrains() throws {
        let base = Fixtures.path("Models/ImageFeatureBaseProgramFP16.mlpackage")
        let network = try FeatureNetwork(basePath: base)
        #expect(network.featureName == "features_cast_fp16")
        #expect(network.featureCount == 32)
        #expect(network.consumer == "\"fc_cast_fp16\" (linear)")
        let data = try DataSet(labels: ["blue", "red", "yellow"], count: 10)
        let trained = try ImageClassifierTrainer.train(dataDirectory: data.training, options: data.options {
            $0.basePath = base
            $0.validation = .directory(data.heldBack)
        })
        #expect((trained.report.validation?.accuracy ?? 0) >= 0.95)
        let output = data.directory.path + "/Colors.mlpackage"
        try trained.write(to: output)
        let file = try ModelFile.open(output)
        #expect(ModelValidator.validate(file).filter { $0.severity == .error }.isEmpty)
        let cut = try #require(ModelSummary(file).pipeline?.first)
        #expect(cut.outputs.map(\.name) == ["features_cast_fp16_fp32"])
        let model = try Model(contentsOf: output, configuration: ModelConfiguration(threads: 1))
        let evaluation = try ClassifierEvaluation.evaluate(model, folders: LabelledImageFolders.scan(data.heldBack))
        #expect(evaluation.report.accuracy == trained.report.validation?.accuracy)
    }

    @Test func aCompiledBundleIsCutAsItsSourceIs() throws {
        let directory = try TemporaryDirectory()
        let bundle = directory.path + "/Base.mlmodelc"
        _ = try BundleCompiler(options: CompileOptions()).compile(Self.base, to: bundle)
        let fromBundle = try FeatureNetwork(basePath: bundle)
        let fromSource = try FeatureNetwork(basePath: Self.base)
        #expect(fromBundle.digest == fromSource.digest)
        let image = try #require(PixelBuffer(width: 32, height: 32, pixelFormat: .rgb, bytes: (0..<3072).map { UInt8($0 % 251) }))
        #expect(try fromBundle.features(of: image) == fromSource.features(of: image))
    }

    @Test func aTrainedModelLabelsHeldBackImagesAndRunsInTheRuntime() throws {
        let data = try DataSet()
        let trained = try ImageClassifierTrainer.train(dataDirectory: data.training, options: data.options {
            $0.validation = .directory(data.heldBack)
            $0.author = "tests"
            $0.version = "1.2"
        })
        let validation = try #require(trained.report.validation)
        #expect(validation.count == 24)
        #expect(validation.accuracy >= 0.95)
        #expect(trained.report.training.accuracy >= 0.95)

        let output = data.directory.path + "/Colors.mlmodel"
        try trained.write(to: output)
        let file = try ModelFile.open(output)
        #expect(ModelValidator.validate(file).filter { $0.severity == .error }.isEmpty)
        let summary = ModelSummary(file)
        #expect(summary.modelType == "pipelineClassifier")
        #expect(summary.metadata?.author == "tests")
        #expect(summary.metadata?.versionString == "1.2")
        #expect(summary.metadata?.userDefined["validationAccuracy"] == String(format: "%.4f", validation.accuracy))
        #expect(summary.metadata?.userDefined["trainingAccuracy"] != nil)

        // The written model agrees with the report on the held-back images.
        let model = try Model(contentsOf: output, configuration: ModelConfiguration(threads: 2))
        #expect(model.classLabels == Self.labels)
        let evaluation = try ClassifierEvaluation.evaluate(model, folders: LabelledImageFolders.scan(data.heldBack))
        #expect(evaluation.report.accuracy == validation.accuracy)
        #expect(evaluation.report.confusion == validation.confusion)
        #expect(evaluation.skipped.isEmpty)
    }

    @Test func moreThanTwoAndTwoLabelsBothExport() throws {
        for labels in [["blue", "red"], ["blue", "green", "red", "yellow"]] {
            let data = try DataSet(labels: labels, count: 10)
            let trained = try ImageClassifierTrainer.train(dataDirectory: data.training, options: data.options {
                $0.validation = .directory(data.heldBack)
            })
            let output = data.directory.path + "/Model.mlmodel"
            try trained.write(to: output)
            let model = try Model(contentsOf: output, configuration: ModelConfiguration(threads: 1))
            let evaluation = try ClassifierEvaluation.evaluate(model, folders: LabelledImageFolders.scan(data.heldBack))
            #expect(evaluation.report.accuracy >= 0.95, "\(labels)")
            #expect(evaluation.report.accuracy == trained.report.validation?.accuracy, "\(labels)")
        }
    }

    @Test func retrainingWithTheSameSeedGivesTheSameBytes() throws {
        let data = try DataSet(count: 12)
        var outputs: [Data] = []
        for run in 0..<2 {
            let trained = try ImageClassifierTrainer.train(dataDirectory: data.training, options: data.options {
                $0.augmentations = [.flip, .noise, .rotate]
                $0.cacheRoot = run == 0 ? data.cache : nil
            })
            let path = data.directory.path + "/run\(run).mlmodel"
            try trained.write(to: path)
            outputs.append(try Data(contentsOf: URL(fileURLWithPath: path)))
        }
        #expect(outputs[0] == outputs[1])
        // Another seed holds back other images.
        let other = try ImageClassifierTrainer.train(dataDirectory: data.training, options: data.options { $0.seed = 8 })
        try other.write(to: data.directory.path + "/other.mlmodel")
        #expect(try Data(contentsOf: URL(fileURLWithPath: data.directory.path + "/other.mlmodel")) != outputs[0])
    }

    @Test func theSecondRunReadsEveryFeatureFromTheCache() throws {
        let data = try DataSet(count: 10)
        let options = data.options { $0.augmentations = [.flip, .crop] }
        let first = try ImageClassifierTrainer.train(dataDirectory: data.training, options: options)
        #expect(first.report.extraction.cacheHits == 0)
        #expect(first.report.extraction.computed == 30 * 3 - 2 * 3)  // validation images get no copies
        let second = try ImageClassifierTrainer.train(dataDirectory: data.training, options: data.options {
            $0.augmentations = [.flip, .crop]
            $0.l2 = 0.01
        })
        #expect(second.report.extraction.computed == 0)
        #expect(second.report.extraction.cacheHits == first.report.extraction.computed)
        #expect(second.report.augmentedCopies == first.report.augmentedCopies)
    }

    @Test func oneLabelIsRefusedBeforeAnyWork() throws {
        let data = try DataSet(labels: ["red"], count: 10)
        #expect(throws: TrainingError.tooFewLabels(directory: data.training, labels: ["red"])) {
            try ImageClassifierTrainer.train(dataDirectory: data.training, options: data.options { $0.basePath = "/nonexistent" })
        }
    }

    @Test func threeImagesInAFolderAreRefusedNamingIt() throws {
        let data = try DataSet(labels: ["blue", "red"], count: 10)
        try GeneratedImages.write(labels: ["green"], count: 3, into: data.training, seed: 3)
        let error = #expect(throws: TrainingError.self) {
            try ImageClassifierTrainer.train(dataDirectory: data.training, options: data.options())
        }
        #expect(error == .tooFewImages(minimum: 10, folders: [.init(label: "green", count: 3)]))
        #expect(error?.description == "at least 10 images per label are needed; too few in \"green\" (3)")
    }

    @Test func unbalancedLabelsAreWarnedAboutWithTheRatio() throws {
        let data = try DataSet(labels: ["blue"], count: 25)
        try GeneratedImages.write(labels: ["red"], count: 10, into: data.training, seed: 4)
        let folders = try LabelledImageFolders.scan(data.training)
        let imbalance = try #require(folders.imbalance)
        #expect(imbalance.ratio == 2.5)
        #expect(imbalance.description.hasPrefix("labels are unbalanced: \"blue\" has 25 images, \"red\" 10 (2.5×)"))
        let warnings = Warnings()
        _ = try ImageClassifierTrainer.train(dataDirectory: data.training, options: data.options()) { event in
            if case .warning(let text) = event { warnings.append(text) }
        }
        #expect(warnings.all.contains(imbalance.description))
    }

    @Test func anUnreadableFileIsListedAndSkipped() throws {
        let data = try DataSet(labels: ["blue", "red"], count: 10)
        let broken = data.training + "/red/broken.png"
        try Data("not an image".utf8).write(to: URL(fileURLWithPath: broken))
        let warnings = Warnings()
        let trained = try ImageClassifierTrainer.train(dataDirectory: data.training, options: data.options {
            $0.validation = .split(0)
        }) { event in
            if case .warning(let text) = event { warnings.append(text) }
        }
        #expect(trained.report.skipped.map(\.path) == [broken])
        #expect(warnings.all.contains { $0.hasPrefix("\(broken): skipped: not an image") })
        #expect(trained.report.training.count == 20)
    }

    /// The Python of `make venv`, with coremltools.
    static let python = Fixtures.packageRoot.appendingPathComponent(".venv/bin/python").path

    /// The exported model, a file from a network base and a package from an
    /// ML program, loads in coremltools as a pipeline of the cut base and the
    /// GLM. Skipped (and reported so) where `make venv` has not been run.
    @Test(.enabled(if: FileManager.default.isExecutableFile(atPath: python), "needs `make venv` (coremltools)"),
          arguments: [("network", "Colors.mlmodel"), ("program", "Colors.mlpackage")])
    func theExportedModelLoadsInCoremltools(base: String, name: String) throws {
        let data = try DataSet(labels: ["blue", "red", "yellow"], count: 10)
        let trained = try ImageClassifierTrainer.train(dataDirectory: data.training, options: data.options {
            if base == "program" { $0.basePath = Self.programBase }
        })
        let output = data.directory.path + "/" + name
        try trained.write(to: output)
        let process = Process()
        process.executableURL = URL(fileURLWithPath: Self.python)
        process.arguments = ["-c", """
            import sys, coremltools as ct
            model = ct.models.MLModel(sys.argv[1], skip_model_load=True)
            spec = model.get_spec()
            assert spec.WhichOneof("Type") == "pipelineClassifier"
            kinds = [m.WhichOneof("Type") for m in spec.pipelineClassifier.pipeline.models]
            print(",".join(kinds), ",".join(spec.pipelineClassifier.pipeline.models[1].glmClassifier.stringClassLabels.vector))
            """, output]
        let pipe = Pipe()
        process.standardOutput = pipe
        process.standardError = FileHandle.nullDevice
        try process.run()
        process.waitUntilExit()
        #expect(process.terminationStatus == 0)
        let first = base == "program" ? "mlProgram" : "neuralNetwork"
        #expect(String(decoding: pipe.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self) == "\(first),glmClassifier blue,red,yellow\n")
    }
}

/// Warnings collected from training events (called on the training thread).
final class Warnings: @unchecked Sendable {
    private let lock = NSLock()
    private var texts: [String] = []

    func append(_ text: String) { lock.withLock { texts.append(text) } }
    var all: [String] { lock.withLock { texts } }
}
