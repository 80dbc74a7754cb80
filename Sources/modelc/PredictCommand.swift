import ArgumentParsing
import ExitCodes
import Foundation
import ImageDecoding
import ModelCompiler
import ModelFeatures
import ModelFetch
import ModelRuntime
import ModelSpec

/// `modelc predict MODEL [--input NAME=VALUE]... [--inputs FILE] [--json] [--threads N] [--top K]
/// [--output-dir DIR] [--function NAME] [--engine E]`.
enum PredictCommand {
    static let spec = CommandSpec(
        name: "predict",
        abstract: "Run a model on inputs given on the command line or as JSON, and print its outputs.",
        discussion: """
            MODEL is a compiled bundle, or an .mlmodel/.mlpackage, which is compiled on the fly into the
            cache ($MODELC_CACHE/compiled, reused while up to date). Inputs are checked against the
            model's description before anything runs.
            VALUE is JSON (a number, [1,2,3], {"a":1}, "text"), plain text for a string input, or
            @PATH: a .npy file for a multi-array input, or a JSON file.
            --inputs FILE (- for standard input) holds one JSON object of NAME: VALUE, or one such
            object per line (.jsonl): one result per line, in order; a line that fails prints its
            error and the others still run.
            --output-dir DIR writes each image output as a PNG file: DIR/OUTPUT.png for one case,
            DIR/N-OUTPUT.png for case N (from 1) of several.
            --function NAME runs that function of a multi-function ML program (default: the
            model's default function). --engine auto|tensor|layer is kept from when modelc had two
            engines: every value runs the tensor engine; layer is deprecated (the layer engine was
            removed) and prints a warning.
            """,
        arguments: [PositionalSpec(name: "MODEL", help: "A compiled bundle, .mlmodel or .mlpackage.")],
        options: [
            OptionSpec(name: "input", valueName: "NAME=VALUE", help: "An input value (repeatable).", repeatable: true),
            OptionSpec(name: "inputs", valueName: "FILE", help: "A JSON object, or JSON lines, of inputs (- for standard input)."),
            OptionSpec(name: "json", help: "One JSON object per case: {\"outputs\": {...}} or {\"error\": \"...\"}."),
            OptionSpec(name: "threads", valueName: "N", help: "Threads for a batch of cases (default: every core)."),
            OptionSpec(name: "top", valueName: "K", help: "Classifiers: how many labels to show (default 5)."),
            OptionSpec(name: "output-dir", valueName: "DIR", help: "Write image outputs into DIR as PNG files."),
            OptionSpec(name: "function", valueName: "NAME", help: "The function of a multi-function ML program to run."),
            OptionSpec(name: "engine", valueName: "E", help: "auto (default) or tensor: the tensor engine; layer: deprecated, the same."),
        ])

    static func run(_ arguments: ParsedArguments) -> ExitCode {
        guard let path = arguments[positional: "MODEL"] else { return .usage }
        let usage = Modelc.usageLine(for: spec)
        var configuration = ModelConfiguration()
        let top: Int
        do throws(UsageError) {
            configuration.threads = try arguments.positiveInteger("threads") ?? configuration.threads
            top = try arguments.positiveInteger("top") ?? 5
            configuration.functionName = arguments.value("function")
            // Kept for scripts: every value runs the tensor engine, the one engine left.
            if let engine = arguments.value("engine") {
                guard ["auto", "tensor", "layer"].contains(engine) else {
                    throw UsageError.invalidValue(option: "engine", value: engine, reason: "expected auto, tensor or layer")
                }
                if engine == "layer" {
                    Output.error("\(Modelc.toolName): warning: --engine layer is deprecated: the layer engine was removed; "
                        + "the tensor engine runs the model\n")
                }
            }
        } catch {
            return Modelc.usageFailure(error, usage: usage)
        }
        let givenInputs = arguments.values["input"] ?? []
        guard !givenInputs.isEmpty || arguments.value("inputs") != nil else {
            return Modelc.usageFailure(.missingArgument(name: "inputs (--input NAME=VALUE or --inputs FILE)", command: "predict"), usage: usage)
        }
        guard givenInputs.isEmpty || arguments.value("inputs") == nil else {
            return Modelc.usageFailure(.conflictingOptions("input", "inputs"), usage: usage)
        }

        let model: Model
        switch open(path, configuration: configuration) {
        case .opened(let opened): model = opened
        case .failed(let code): return code
        }
        let parser = PredictionInputs(model: model)

        // The cases to run: one from --input, or each line/object of --inputs.
        var cases: [Result<[String: FeatureValue], RuntimeError>] = []
        if let file = arguments.value("inputs") {
            guard let read = readCases(file, parser: parser) else { return .cannotRead }
            cases = read
        } else {
            cases = [Result { () throws(RuntimeError) in
                var inputs: [String: FeatureValue] = [:]
                for argument in givenInputs {
                    let (name, value) = try parser.parse(argument: argument)
                    inputs[name] = value
                }
                return inputs
            }]
        }

        let ready = cases.compactMap { try? $0.get() }
        var computed = model.predictions(from: ready).makeIterator()
        let results: [Result<[String: FeatureValue], RuntimeError>] = cases.map { parsed in
            switch parsed {
            case .failure(let error): .failure(error)
            case .success: computed.next() ?? .failure(.invalidValue(feature: "inputs", detail: "not computed"))
            }
        }

        if let directory = arguments.value("output-dir") {
            if let problem = ImageOptions.prepareDirectory(directory) {
                Output.error("\(Modelc.toolName): error: \(problem)\n")
                return .cannotWrite
            }
            for (number, result) in results.enumerated() {
                guard case .success(let outputs) = result else { continue }
                let images = model.summary.outputs.compactMap { output -> (name: String, image: PixelBuffer)? in
                    if case .image(let image)? = outputs[output.name] { (output.name, image) } else { nil }
                }
                do {
                    _ = try ImageOutputs.write(images, prefix: results.count > 1 ? String(number + 1) : "", into: directory)
                } catch {
                    Output.error("\(Modelc.toolName): error: \(error)\n")
                    return .cannotWrite
                }
            }
        }

        let report = PredictionReport(model: model, top: top)
        var failures: [RuntimeError] = []
        // Results are written in blocks, not a system call per case.
        var pending = ""
        for result in results {
            switch result {
            case .success(let outputs):
                pending += arguments.has("json") ? report.json(outputs) + "\n" : report.text(outputs)
            case .failure(let error):
                failures.append(error)
                if arguments.has("json") {
                    pending += "{\"error\": \(FeatureJSON.quoted(error.description))}\n"
                } else {
                    Output.print(pending)
                    pending = ""
                    Output.error("\(Modelc.toolName): error: \(error)\n")
                }
            }
            if pending.utf8.count >= 1 << 16 {
                Output.print(pending)
                pending = ""
            }
        }
        if !pending.isEmpty { Output.print(pending) }
        guard let first = failures.first else { return .success }
        if results.count > 1, !arguments.has("json") {
            Output.error("\(Modelc.toolName): \(failures.count) of \(results.count) cases failed\n")
        }
        return ExitCode(first)
    }

    enum Opening {
        case opened(Model)
        case failed(ExitCode)
    }

    /// Opens MODEL: a bundle as it is, a source model through the compile cache.
    static func open(_ path: String, configuration: ModelConfiguration) -> Opening {
        var bundle = path
        let isBundle = FileManager.default.fileExists(atPath: path + "/manifest.json")
        if !isBundle, let root = FetchCache.defaultRoot() {
            do throws(CompileError) {
                bundle = try ModelCompilation.compiledBundle(for: path, cacheDirectory: root)
            } catch {
                if case .invalid(let source, let diagnostics) = error {
                    Output.error(diagnostics.map { "\(source): \($0)\n" }.joined())
                }
                return .failed(Modelc.failure(error))
            }
        }
        do throws(ModelError) {
            return .opened(try Model(contentsOf: bundle, configuration: configuration))
        } catch {
            Output.error("\(Modelc.toolName): error: \(error)\n")
            return .failed(ExitCode(error))
        }
    }

    /// The cases of an --inputs file: one JSON object, or one per line;
    /// `nil` (after saying why) when the file cannot be read or holds none.
    static func readCases(_ file: String, parser: PredictionInputs) -> [Result<[String: FeatureValue], RuntimeError>]? {
        func fail(_ message: String) -> [Result<[String: FeatureValue], RuntimeError>]? {
            Output.error("\(Modelc.toolName): error: \(message)\n")
            return nil
        }
        let data: Data
        if file == "-" {
            data = FileHandle.standardInput.readDataToEndOfFile()
        } else {
            guard let contents = FileManager.default.contents(atPath: file) else {
                return fail("\(file): cannot read the inputs file")
            }
            data = contents
        }
        if !file.hasSuffix(".jsonl"), let object = try? JSONSerialization.jsonObject(with: data) {
            return [Result { () throws(RuntimeError) in try parser.parse(object: object) }]
        }
        var cases: [Result<[String: FeatureValue], RuntimeError>] = []
        // Blank lines are kept while splitting so that line numbers in messages are the file's.
        for (number, line) in data.split(separator: UInt8(ascii: "\n"), omittingEmptySubsequences: false).enumerated() {
            let trimmed = line.drop { $0 == UInt8(ascii: " ") || $0 == UInt8(ascii: "\r") }
            if trimmed.isEmpty { continue }
            guard let object = try? JSONSerialization.jsonObject(with: Data(trimmed)) else {
                cases.append(.failure(.invalidValue(feature: "inputs", detail: "\(file == "-" ? "standard input" : file) line \(number + 1): not a JSON object")))
                continue
            }
            cases.append(Result { () throws(RuntimeError) in try parser.parse(object: object) })
        }
        if cases.isEmpty { return fail("\(file == "-" ? "standard input" : file): no inputs (expected a JSON object, or one per line)") }
        return cases
    }
}

/// How `modelc predict` shows one case's outputs.
struct PredictionReport {
    let model: Model
    let top: Int
    let labels: [String]

    init(model: Model, top: Int) {
        self.model = model
        self.top = top
        labels = model.classLabels
    }

    func json(_ outputs: [String: FeatureValue]) -> String {
        "{\"outputs\": \(FeatureJSON.text(outputs, keyOrder: labels))}"
    }

    func text(_ outputs: [String: FeatureValue]) -> String {
        var lines: [String] = []
        let summary = model.summary
        if let labelName = summary.predictedFeatureName, let label = outputs[labelName] {
            lines.append("\(labelName): \(plain(label))")
            if let probabilitiesName = summary.predictedProbabilitiesName,
               case .dictionary(let dictionary)? = outputs[probabilitiesName] {
                let entries: [(String, Double)] = switch dictionary {
                case .strings(let values): values.map { ($0.key, $0.value) }
                case .int64s(let values): values.map { (String($0.key), $0.value) }
                }
                let best = entries.sorted { $0.1 > $1.1 || ($0.1 == $1.1 && $0.0 < $1.0) }.prefix(top)
                let width = best.map(\.0.count).max() ?? 0
                for (label, probability) in best {
                    lines.append("  " + label.padding(toLength: width, withPad: " ", startingAt: 0) + "  " + String(format: "%.4f", probability))
                }
            }
        }
        for name in outputs.keys.sorted() where name != summary.predictedFeatureName && name != summary.predictedProbabilitiesName {
            guard let value = outputs[name] else { continue }
            lines.append("\(name) (\(describe(value))): \(abbreviated(value))")
        }
        return lines.joined(separator: "\n") + "\n"
    }

    private func plain(_ value: FeatureValue) -> String {
        switch value {
        case .string(let text): text
        case .int64(let number): String(number)
        case .double(let number): FeatureJSON.numberText(number)
        default: abbreviated(value)
        }
    }

    func describe(_ value: FeatureValue) -> String {
        switch value {
        case .multiArray(let array): "\(array.dataType.schemaName) \(array.shape.map(String.init).joined(separator: "×"))"
        case .double: "double"
        case .int64: "int64"
        case .string: "string"
        case .dictionary(let dictionary): "dictionary of \(dictionary.count)"
        case .sequence(let sequence): "sequence of \(sequence.count)"
        case .image(let image): "image \(image.width)×\(image.height)"
        }
    }

    /// Values as JSON, long arrays cut to their first and last elements.
    func abbreviated(_ value: FeatureValue) -> String {
        if case .image(let image) = value {
            return "\(image.pixelFormat.rawValue) pixels (--output-dir DIR writes them as PNG)"
        }
        guard case .multiArray(let array) = value, array.count > 12 else {
            return FeatureJSON.text(value, keyOrder: labels)
        }
        let values = array.doubles
        let head = values.prefix(6).map(FeatureJSON.numberText)
        let tail = values.suffix(3).map(FeatureJSON.numberText)
        return "[" + head.joined(separator: ", ") + ", … " + tail.joined(separator: ", ") + "] (\(array.count) values)"
    }
}
