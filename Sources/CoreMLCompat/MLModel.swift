import Foundation
import ModelCompiler
import ModelFeatures
import ModelRuntime
import ModelSpec
import SystemIO

/// Where Core ML may run a model. modelc runs every model on the CPU;
/// every value is accepted.
public enum MLComputeUnits: Int, Sendable {
    case cpuOnly = 0, cpuAndGPU = 1, all = 2, cpuAndNeuralEngine = 3
}

/// How a model is loaded (Core ML's `MLModelConfiguration`).
public final class MLModelConfiguration: Sendable {
    private let settings = Locked((units: MLComputeUnits.all, threads: ProcessInfo.processInfo.activeProcessorCount))

    public init() {}

    /// Accepted and kept; modelc runs on the CPU whatever it says.
    public var computeUnits: MLComputeUnits {
        get { settings.withLock { $0.units } }
        set { settings.withLock { $0.units = newValue } }
    }

    /// modelc's own setting: the threads one prediction may use (default: every core).
    public var threads: Int {
        get { settings.withLock { $0.threads } }
        set { settings.withLock { $0.threads = max(1, newValue) } }
    }
}

/// Options for one prediction (Core ML's `MLPredictionOptions`); none change what modelc does.
public final class MLPredictionOptions: Sendable {
    public init() {}
}

/// Why Core ML failed, with Apple's error codes (Core ML's `MLModelError`).
public struct MLModelError: Error, LocalizedError, CustomStringConvertible, Sendable {
    public enum Code: Int, Sendable {
        case generic = 0, featureType = 1, io = 3, customLayer = 4, customModel = 5, update = 6, parameters = 7
        case modelDecryptionKeyFetch = 8, modelDecryption = 9, modelCollection = 10, predictionCancelled = 11
    }

    public let code: Code
    /// The message: what failed, naming the model, file or feature.
    public let description: String

    public init(_ code: Code, _ description: String) {
        self.code = code
        self.description = description
    }

    public var errorDescription: String? { description }

    init(_ error: ModelError) {
        switch error {
        case .bundle, .source, .invalid: self.init(.io, error.description)
        case .runtime(let runtime): self.init(runtime)
        }
    }

    init(_ error: RuntimeError) {
        switch error {
        case .missingInput, .wrongType, .wrongShape, .wrongImageSize, .invalidValue:
            self.init(.featureType, error.description)
        case .unsupportedModel, .unsupportedLayer, .invalidParameters, .unknownFunction:
            self.init(.parameters, error.description)
        case .cannotOpen:
            self.init(.io, error.description)
        case .cancelled:
            self.init(.generic, error.description)
        }
    }
}

/// A model ready to run (Core ML's `MLModel`), over modelc's `Model`.
public final class MLModel: Sendable {
    /// The model in modelc's terms.
    public let model: Model
    public let modelDescription: MLModelDescription
    private let units: MLComputeUnits

    /// Opens a compiled model (`.mlmodelc`); modelc also opens an `.mlmodel`
    /// or `.mlpackage`, compiling it first.
    ///
    /// - Throws: `MLModelError` (`.io` for a missing or damaged model,
    ///   `.parameters` for one that cannot run here, naming the layer).
    public convenience init(contentsOf url: URL) throws {
        try self.init(contentsOf: url, configuration: MLModelConfiguration())
    }

    public init(contentsOf url: URL, configuration: MLModelConfiguration) throws {
        do {
            model = try Model(contentsOf: url.path, configuration: ModelConfiguration(threads: configuration.threads))
        } catch {
            throw MLModelError(error)
        }
        modelDescription = MLModelDescription(model.summary)
        units = configuration.computeUnits
    }

    /// Opens a model off the caller's task (Core ML's `load(contentsOf:configuration:)`).
    public static func load(contentsOf url: URL, configuration: MLModelConfiguration = MLModelConfiguration()) async throws -> MLModel {
        let units = configuration.computeUnits, threads = configuration.threads
        return try await Self.offTask {
            let configuration = MLModelConfiguration()
            configuration.computeUnits = units
            configuration.threads = threads
            return try MLModel(contentsOf: url, configuration: configuration)
        }
    }

    /// The configuration the model was opened with.
    public var configuration: MLModelConfiguration {
        let configuration = MLModelConfiguration()
        configuration.computeUnits = units
        configuration.threads = model.configuration.threads
        return configuration
    }

    /// The outputs for `input`, checked against the model's description.
    ///
    /// - Throws: `MLModelError` (`.featureType`) naming the input at fault.
    public func prediction(from input: MLFeatureProvider) throws -> MLFeatureProvider {
        do {
            return Self.provider(try model.prediction(from: Self.values(input)))
        } catch {
            throw MLModelError(error)
        }
    }

    public func prediction(from input: MLFeatureProvider, options: MLPredictionOptions) throws -> MLFeatureProvider {
        try prediction(from: input)
    }

    /// The outputs for `input`, computed off the caller's task.
    public func prediction(from input: MLFeatureProvider) async throws -> MLFeatureProvider {
        let values = Self.values(input)
        do {
            return Self.provider(try await model.prediction(from: values))
        } catch {
            throw MLModelError(error)
        }
    }

    static func values(_ provider: MLFeatureProvider) -> [String: FeatureValue] {
        var values: [String: FeatureValue] = [:]
        for name in provider.featureNames {
            if let value = provider.featureValue(for: name)?.value { values[name] = value }
        }
        return values
    }

    static func provider(_ outputs: [String: FeatureValue]) -> MLDictionaryFeatureProvider {
        MLDictionaryFeatureProvider(values: outputs.mapValues(MLFeatureValue.init))
    }

    // MARK: - Compiling

    /// Compiles an `.mlmodel` or `.mlpackage` into a new `.mlmodelc` in a
    /// temporary directory and returns its URL, as Core ML does: move it
    /// somewhere lasting to keep it.
    ///
    /// - Throws: `MLModelError` (`.io` for an unreadable or invalid source,
    ///   naming it and the first problem; `.generic` when writing fails).
    public static func compileModel(at modelURL: URL) throws -> URL {
        let name = modelURL.deletingPathExtension().lastPathComponent
        let directory = FileManager.default.temporaryDirectory
            .appendingPathComponent("modelc-compiled-" + UUID().uuidString, isDirectory: true)
        let output = directory.appendingPathComponent(name + ".mlmodelc", isDirectory: true)
        do {
            try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        } catch {
            throw MLModelError(.generic, "\(directory.path): cannot create the directory: \(error.localizedDescription)")
        }
        do {
            _ = try BundleCompiler().compile(modelURL.path, to: output.path)
        } catch {
            try? FileManager.default.removeItem(at: directory)
            switch error {
            case .source, .invalid, .sourceWeights, .float16Overflow: throw MLModelError(.io, error.description)
            default: throw MLModelError(.generic, error.description)
            }
        }
        return output
    }

    /// Compiles off the caller's task; see `compileModel(at:)`.
    public static func compileModel(at modelURL: URL) async throws -> URL {
        try await offTask { try compileModel(at: modelURL) }
    }

    private static func offTask<T: Sendable>(_ work: @escaping @Sendable () throws -> T) async throws -> T {
        try await withCheckedThrowingContinuation { continuation in
            DispatchQueue.global().async {
                continuation.resume(with: Result { try work() })
            }
        }
    }
}

/// What a model takes and gives (Core ML's `MLModelDescription`).
public final class MLModelDescription: Sendable {
    public let inputDescriptionsByName: [String: MLFeatureDescription]
    public let outputDescriptionsByName: [String: MLFeatureDescription]
    public let predictedFeatureName: String?
    public let predictedProbabilitiesName: String?
    /// Classifiers' labels, `String`s or `Int64`s; `nil` for other models.
    public let classLabels: [any Sendable]?
    /// The model's metadata: description, author, license, version, creator-defined.
    public let metadata: [MLModelMetadataKey: any Sendable]

    init(_ summary: ModelSummary) {
        inputDescriptionsByName = Dictionary(uniqueKeysWithValues: summary.inputs.map { ($0.name, MLFeatureDescription($0)) })
        outputDescriptionsByName = Dictionary(uniqueKeysWithValues: summary.outputs.map { ($0.name, MLFeatureDescription($0)) })
        predictedFeatureName = summary.predictedFeatureName.flatMap { $0.isEmpty ? nil : $0 }
        predictedProbabilitiesName = summary.predictedProbabilitiesName.flatMap { $0.isEmpty ? nil : $0 }
        classLabels = switch summary.classLabels {
        case .strings(let labels)?: labels
        case .int64s(let labels)?: labels
        case nil: nil
        }
        var metadata: [MLModelMetadataKey: any Sendable] = [:]
        if let source = summary.metadata {
            metadata[.description] = source.shortDescription
            metadata[.author] = source.author
            metadata[.license] = source.license
            metadata[.versionString] = source.versionString
            metadata[.creatorDefinedKey] = source.userDefined
        }
        self.metadata = metadata
    }
}

/// Keys of `MLModelDescription.metadata`, with Apple's names.
public struct MLModelMetadataKey: RawRepresentable, Hashable, Sendable {
    public let rawValue: String
    public init(rawValue: String) { self.rawValue = rawValue }

    public static let description = MLModelMetadataKey(rawValue: "MLModelDescriptionKey")
    public static let author = MLModelMetadataKey(rawValue: "MLModelAuthorKey")
    public static let license = MLModelMetadataKey(rawValue: "MLModelLicenseKey")
    public static let versionString = MLModelMetadataKey(rawValue: "MLModelVersionStringKey")
    public static let creatorDefinedKey = MLModelMetadataKey(rawValue: "MLModelCreatorDefinedKey")
}

/// One input or output of a model (Core ML's `MLFeatureDescription`).
public final class MLFeatureDescription: Sendable, CustomStringConvertible {
    public let name: String
    public let type: MLFeatureType
    public let isOptional: Bool
    /// Image features: the declared size (`pixelsWide`, `pixelsHigh`).
    public let imageConstraint: MLImageConstraint?
    /// Multi-array features: the declared shape and element type.
    public let multiArrayConstraint: MLMultiArrayConstraint?

    init(_ feature: FeatureDescription) {
        name = feature.name
        isOptional = feature.isOptional
        switch feature.type {
        case .int64: type = .int64
        case .double: type = .double
        case .string: type = .string
        case .image: type = .image
        case .multiArray: type = .multiArray
        case .dictionary: type = .dictionary
        case .sequence: type = .sequence
        case .state: type = .state
        case .unset: type = .invalid
        }
        if case .image(let image) = feature.type {
            imageConstraint = MLImageConstraint(pixelsWide: Int(image.width), pixelsHigh: Int(image.height))
        } else {
            imageConstraint = nil
        }
        if case .multiArray(let array) = feature.type {
            multiArrayConstraint = MLMultiArrayConstraint(
                shape: array.shape.map { NSNumber(value: $0) },
                dataType: MultiArray.DataType(schemaName: array.dataType).map(MLMultiArrayDataType.init) ?? .double)
        } else {
            multiArrayConstraint = nil
        }
    }

    public var description: String { "\(name) (\(type))" }
}

/// The size of an image feature.
public struct MLImageConstraint: Sendable {
    public let pixelsWide: Int
    public let pixelsHigh: Int
}

/// The shape and element type of a multi-array feature.
public struct MLMultiArrayConstraint: @unchecked Sendable {
    /// `NSNumber`s, as Core ML gives them (immutable).
    public let shape: [NSNumber]
    public let dataType: MLMultiArrayDataType
}
