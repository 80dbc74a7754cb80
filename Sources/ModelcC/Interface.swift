#if canImport(Glibc)
import Glibc
#endif
import Dispatch
import Foundation
import ModelCompiler
import ModelFeatures
import ModelFetch
import ModelRuntime
import ModelSpec
import SystemIO

// The C interface declared in include/modelc.h. Every function returns a
// status (0 or a class of failure numbered as the CLI's exit codes) and
// leaves a one-line message for `modelc_last_error`; nothing throws or traps
// across it. Handles are retained Swift objects passed as opaque pointers.

/// A `modelc_model`: an opened model and its inputs by name.
final class ModelHandle: Sendable {
    let model: Model
    let descriptions: ModelDescriptions

    init(_ model: Model) {
        self.model = model
        descriptions = ModelDescriptions(model.summary)
    }
}

/// A `modelc_state`: the persistent tensors of one stream of predictions of a
/// stateful program (Core ML's `MLState`), zero when made. One prediction at
/// a time reads and updates it: callers on several threads take turns.
final class StateHandle {
    let owner: ObjectIdentifier
    let state: ModelState
    let turn = NSLock()

    init(owner: ModelHandle, state: ModelState) {
        self.owner = ObjectIdentifier(owner)
        self.state = state
    }
}

func retained(_ object: AnyObject) -> OpaquePointer {
    OpaquePointer(Unmanaged.passRetained(object).toOpaque())
}

func object<T: AnyObject>(_ handle: OpaquePointer?, as type: T.Type, _ what: String) throws(Failure) -> T {
    guard let handle else { throw Failure(.usage, "\(what) is NULL") }
    guard let object = Unmanaged<AnyObject>.fromOpaque(UnsafeRawPointer(handle)).takeUnretainedValue() as? T else {
        throw Failure(.usage, "\(what) is not a \(type) handle")
    }
    return object
}

private func string(_ pointer: UnsafePointer<CChar>?, _ what: String) throws(Failure) -> String {
    guard let pointer else { throw Failure(.usage, "\(what) is NULL") }
    return String(cString: pointer)
}

func output<T>(_ pointer: UnsafeMutablePointer<T>?, _ what: String) throws(Failure) -> UnsafeMutablePointer<T> {
    guard let pointer else { throw Failure(.usage, "\(what) is NULL") }
    return pointer
}

// MARK: Errors and strings

/// The version of this interface (`MODELC_ABI_VERSION` in the header it was built with).
@_cdecl("modelc_abi_version")
public func modelc_abi_version() -> Int32 { 1 }

/// The calling thread's last error message ("" after a success).
@_cdecl("modelc_last_error")
public func modelc_last_error() -> UnsafePointer<CChar>? { LastError.message }

/// The calling thread's last status (0 after a success).
@_cdecl("modelc_last_status")
public func modelc_last_status() -> Int32 { LastError.status }

/// Frees a string the interface returned.
@_cdecl("modelc_string_free")
public func modelc_string_free(_ text: UnsafeMutablePointer<CChar>?) { free(text) }

// MARK: Models

/// The bundle to open for `path`: a bundle as it is, a source model compiled into the cache.
private func bundlePath(_ path: String) throws(Failure) -> String {
    if FileManager.default.fileExists(atPath: path + "/manifest.json") { return path }
    guard let root = FetchCache.defaultRoot() else { return path }
    do {
        return try ModelCompilation.compiledBundle(for: path, cacheDirectory: root)
    } catch {
        throw compileFailure(error)
    }
}

private func compileFailure(_ error: CompileError) -> Failure {
    if case .invalid(let source, let diagnostics) = error, let first = diagnostics.first {
        let more = diagnostics.count > 1 ? " (and \(diagnostics.count - 1) more problems)" : ""
        return Failure(.invalidModel, "\(source): \(first)\(more)")
    }
    return Failure(Status(error), error.description)
}

/// Opens a model: a compiled bundle, or an .mlmodel/.mlpackage compiled into
/// the cache first ($MODELC_CACHE/compiled). `threads` ≤ 0 uses every core.
@_cdecl("modelc_open")
public func modelc_open(_ path: UnsafePointer<CChar>?, _ threads: Int32, _ model: UnsafeMutablePointer<OpaquePointer?>?) -> Int32 {
    guarded { () throws(Failure) in
        let out = try output(model, "model")
        out.pointee = nil
        let source = try string(path, "path")
        let bundle = try bundlePath(source)
        var configuration = ModelConfiguration()
        if threads > 0 { configuration.threads = Int(threads) }
        do throws(ModelError) {
            out.pointee = retained(ModelHandle(try Model(contentsOf: bundle, configuration: configuration)))
        } catch {
            throw Failure(error)
        }
    }
}

/// Releases a model (NULL is ignored). Predictions running on other threads keep it alive until they end.
@_cdecl("modelc_close")
public func modelc_close(_ model: OpaquePointer?) {
    guard let model else { return }
    Unmanaged<AnyObject>.fromOpaque(UnsafeRawPointer(model)).release()
}

/// The model's description as JSON (`modelc inspect --json`'s form), freed with `modelc_string_free`.
@_cdecl("modelc_describe")
public func modelc_describe(_ model: OpaquePointer?, _ json: UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>?) -> Int32 {
    guarded { () throws(Failure) in
        let out = try output(json, "json")
        out.pointee = nil
        let handle = try object(model, as: ModelHandle.self, "model")
        out.pointee = strdup(handle.model.summary.jsonText())
    }
}

/// Compiles a source model into a bundle at `output_path`, or into the cache
/// when it is NULL; the bundle's path is returned (free it with `modelc_string_free`).
@_cdecl("modelc_compile")
public func modelc_compile(_ source: UnsafePointer<CChar>?, _ outputPath: UnsafePointer<CChar>?,
                           _ bundle: UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>?) -> Int32 {
    guarded { () throws(Failure) in
        let out = try output(bundle, "bundle")
        out.pointee = nil
        let path = try string(source, "source")
        if let outputPath {
            let target = String(cString: outputPath)
            do throws(CompileError) {
                _ = try BundleCompiler(options: CompileOptions()).compile(path, to: target)
            } catch {
                throw compileFailure(error)
            }
            out.pointee = strdup(target)
        } else {
            guard let root = FetchCache.defaultRoot() else {
                throw Failure(.cannotWrite, "no cache directory: set MODELC_CACHE or HOME")
            }
            do throws(CompileError) {
                out.pointee = strdup(try ModelCompilation.compiledBundle(for: path, cacheDirectory: root))
            } catch {
                throw compileFailure(error)
            }
        }
    }
}

/// Fetches `url` into the cache (as `modelc fetch`), checking `sha256` when
/// given; `offline` ≠ 0 never touches the network. Returns the cached model's path.
@_cdecl("modelc_fetch")
public func modelc_fetch(_ url: UnsafePointer<CChar>?, _ sha256: UnsafePointer<CChar>?, _ offline: Int32,
                         _ path: UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>?) -> Int32 {
    guarded { () throws(Failure) in
        let out = try output(path, "path")
        out.pointee = nil
        let address = try string(url, "url")
        guard let root = FetchCache.defaultRoot() else {
            throw Failure(.cannotWrite, "no cache directory: set MODELC_CACHE or HOME")
        }
        let options = FetchOptions(download: DownloadOptions(expectedSHA256: sha256.map { String(cString: $0) }), offline: offline != 0)
        do throws(FetchError) {
            out.pointee = strdup(try Fetcher.fetch(address, cache: FetchCache(root: root), options: options).path)
        } catch {
            throw Failure(Status(error), error.description)
        }
    }
}

// MARK: Feature sets

/// A new, empty set of inputs.
@_cdecl("modelc_features_new")
public func modelc_features_new() -> OpaquePointer? { retained(FeatureSet()) }

/// Frees a set of features (NULL is ignored).
@_cdecl("modelc_features_free")
public func modelc_features_free(_ features: OpaquePointer?) { modelc_close(features) }

private func adding(_ features: OpaquePointer?, _ name: UnsafePointer<CChar>?,
                    _ make: (String) throws(Failure) -> FeatureSet.Input) -> Int32 {
    guarded { () throws(Failure) in
        let set = try object(features, as: FeatureSet.self, "features")
        let key = try string(name, "name")
        set.add(key, try make(key))
    }
}

/// Adds a multi-array input: `rank` dimensions, row-major elements of `data_type` copied from `data`.
@_cdecl("modelc_features_add_array")
public func modelc_features_add_array(_ features: OpaquePointer?, _ name: UnsafePointer<CChar>?, _ dataType: Int32,
                                      _ shape: UnsafePointer<Int64>?, _ rank: Int32, _ data: UnsafeRawPointer?) -> Int32 {
    adding(features, name) { key throws(Failure) in
        guard let element = ElementType(rawValue: dataType) else {
            throw Failure(.usage, "input \"\(key)\": unknown data type \(dataType)")
        }
        guard let type = element.dataType else {
            throw Failure(.badInput, "input \"\(key)\": int64 is not a multi-array element type (give int32, float16, float32 or float64)")
        }
        guard rank >= 0, rank <= 32 else { throw Failure(.usage, "input \"\(key)\": rank \(rank) out of range") }
        guard rank == 0 || shape != nil else { throw Failure(.usage, "input \"\(key)\": shape is NULL") }
        var dimensions: [Int] = []
        var count = 1
        for axis in 0..<Int(rank) {
            let dimension = shape?[axis] ?? 0
            guard dimension >= 0, dimension < Int64(Int32.max) else {
                throw Failure(.badInput, "input \"\(key)\": dimension \(axis) is \(dimension)")
            }
            dimensions.append(Int(dimension))
            let (product, overflow) = count.multipliedReportingOverflow(by: Int(dimension))
            guard !overflow, product <= 1 << 40 else { throw Failure(.badInput, "input \"\(key)\": too many elements") }
            count = product
        }
        guard count == 0 || data != nil else { throw Failure(.usage, "input \"\(key)\": data is NULL") }
        let bytes = UnsafeRawBufferPointer(start: data, count: count * type.size)
        return .value(.multiArray(MultiArray(copying: bytes, shape: dimensions,
                                             strides: MultiArray.rowMajorStrides(dimensions), dataType: type)))
    }
}

/// Adds a double input.
@_cdecl("modelc_features_add_double")
public func modelc_features_add_double(_ features: OpaquePointer?, _ name: UnsafePointer<CChar>?, _ value: Double) -> Int32 {
    adding(features, name) { _ throws(Failure) in .value(.double(value)) }
}

/// Adds an int64 input.
@_cdecl("modelc_features_add_int64")
public func modelc_features_add_int64(_ features: OpaquePointer?, _ name: UnsafePointer<CChar>?, _ value: Int64) -> Int32 {
    adding(features, name) { _ throws(Failure) in .value(.int64(value)) }
}

/// Adds a string input (UTF-8, NUL-terminated).
@_cdecl("modelc_features_add_string")
public func modelc_features_add_string(_ features: OpaquePointer?, _ name: UnsafePointer<CChar>?, _ value: UnsafePointer<CChar>?) -> Int32 {
    adding(features, name) { key throws(Failure) in .value(.string(try string(value, "input \"\(key)\" value"))) }
}

/// Adds an image input of 8-bit pixels in `layout` (`MODELC_PIXELS_RGB`, …), copied.
@_cdecl("modelc_features_add_pixels")
public func modelc_features_add_pixels(_ features: OpaquePointer?, _ name: UnsafePointer<CChar>?, _ layout: Int32,
                                       _ width: Int64, _ height: Int64, _ bytesPerRow: Int64, _ data: UnsafeRawPointer?) -> Int32 {
    adding(features, name) { key throws(Failure) in
        guard let pixels = PixelLayout(rawValue: layout) else { throw Failure(.usage, "input \"\(key)\": unknown pixel layout \(layout)") }
        guard width > 0, height > 0, width < 1 << 20, height < 1 << 20 else {
            throw Failure(.badInput, "input \"\(key)\": a \(width)×\(height) image")
        }
        let rowBytes = bytesPerRow > 0 ? Int(bytesPerRow) : Int(width) * pixels.format.bytesPerPixel
        guard let data else { throw Failure(.usage, "input \"\(key)\": data is NULL") }
        let count = rowBytes * Int(height)
        let bytes = [UInt8](UnsafeRawBufferPointer(start: data, count: count))
        guard let image = PixelBuffer(width: Int(width), height: Int(height), pixelFormat: pixels.format,
                                      bytesPerRow: rowBytes, bytes: bytes) else {
            throw Failure(.badInput, "input \"\(key)\": \(rowBytes) bytes per row is too few for \(width) \(pixels.format.rawValue) pixels")
        }
        return .value(.image(image))
    }
}

/// Adds an image input as an encoded file (JPEG, PNG, …) in memory, copied;
/// decoded, turned upright and center-cropped to the model's size at prediction.
@_cdecl("modelc_features_add_encoded_image")
public func modelc_features_add_encoded_image(_ features: OpaquePointer?, _ name: UnsafePointer<CChar>?,
                                              _ data: UnsafeRawPointer?, _ size: Int) -> Int32 {
    adding(features, name) { key throws(Failure) in
        guard let data, size > 0 else { throw Failure(.badImage, "input \"\(key)\": the encoded image is empty") }
        return .encodedImage([UInt8](UnsafeRawBufferPointer(start: data, count: size)))
    }
}

/// Adds a dictionary input with string keys.
@_cdecl("modelc_features_add_string_dictionary")
public func modelc_features_add_string_dictionary(_ features: OpaquePointer?, _ name: UnsafePointer<CChar>?, _ count: Int,
                                                  _ keys: UnsafePointer<UnsafePointer<CChar>?>?, _ values: UnsafePointer<Double>?) -> Int32 {
    adding(features, name) { key throws(Failure) in
        guard count >= 0, count == 0 || (keys != nil && values != nil) else { throw Failure(.usage, "input \"\(key)\": keys or values are NULL") }
        var entries: [String: Double] = [:]
        for index in 0..<count {
            entries[try string(keys?[index], "input \"\(key)\" key \(index)")] = values?[index] ?? 0
        }
        return .value(.dictionary(.strings(entries)))
    }
}

/// Adds a dictionary input with int64 keys.
@_cdecl("modelc_features_add_int64_dictionary")
public func modelc_features_add_int64_dictionary(_ features: OpaquePointer?, _ name: UnsafePointer<CChar>?, _ count: Int,
                                                 _ keys: UnsafePointer<Int64>?, _ values: UnsafePointer<Double>?) -> Int32 {
    adding(features, name) { key throws(Failure) in
        guard count >= 0, count == 0 || (keys != nil && values != nil) else { throw Failure(.usage, "input \"\(key)\": keys or values are NULL") }
        var entries: [Int64: Double] = [:]
        for index in 0..<count { entries[keys?[index] ?? 0] = values?[index] ?? 0 }
        return .value(.dictionary(.int64s(entries)))
    }
}

/// Adds a sequence-of-strings input.
@_cdecl("modelc_features_add_string_sequence")
public func modelc_features_add_string_sequence(_ features: OpaquePointer?, _ name: UnsafePointer<CChar>?, _ count: Int,
                                                _ values: UnsafePointer<UnsafePointer<CChar>?>?) -> Int32 {
    adding(features, name) { key throws(Failure) in
        guard count >= 0, count == 0 || values != nil else { throw Failure(.usage, "input \"\(key)\": values are NULL") }
        var strings: [String] = []
        for index in 0..<count { strings.append(try string(values?[index], "input \"\(key)\" element \(index)")) }
        return .value(.sequence(.strings(strings)))
    }
}

/// Adds a sequence-of-int64s input.
@_cdecl("modelc_features_add_int64_sequence")
public func modelc_features_add_int64_sequence(_ features: OpaquePointer?, _ name: UnsafePointer<CChar>?, _ count: Int,
                                               _ values: UnsafePointer<Int64>?) -> Int32 {
    adding(features, name) { key throws(Failure) in
        guard count >= 0, count == 0 || values != nil else { throw Failure(.usage, "input \"\(key)\": values are NULL") }
        return .value(.sequence(.int64s(Array(UnsafeBufferPointer(start: values, count: count)))))
    }
}

// MARK: Predictions

private func inputs(of set: FeatureSet, model: ModelHandle) throws(Failure) -> [String: FeatureValue] {
    try set.values(for: model.descriptions)
}

/// One prediction. `state` is NULL, or a state made by `modelc_make_state`
/// for this model. The outputs are a new set, freed with `modelc_features_free`.
@_cdecl("modelc_predict")
public func modelc_predict(_ model: OpaquePointer?, _ features: OpaquePointer?, _ state: OpaquePointer?,
                           _ outputs: UnsafeMutablePointer<OpaquePointer?>?) -> Int32 {
    guarded { () throws(Failure) in
        let out = try output(outputs, "outputs")
        out.pointee = nil
        let handle = try object(model, as: ModelHandle.self, "model")
        let set = try object(features, as: FeatureSet.self, "inputs")
        if state != nil {
            let stateHandle = try object(state, as: StateHandle.self, "state")
            guard stateHandle.owner == ObjectIdentifier(handle) else {
                throw Failure(.badInput, "the state was made by another model")
            }
            let values = try inputs(of: set, model: handle)
            stateHandle.turn.lock()
            defer { stateHandle.turn.unlock() }
            do throws(RuntimeError) {
                out.pointee = retained(FeatureSet(outputs: try handle.model.prediction(from: values, using: stateHandle.state)))
            } catch {
                throw Failure(error)
            }
            return
        }
        let values = try inputs(of: set, model: handle)
        do throws(RuntimeError) {
            out.pointee = retained(FeatureSet(outputs: try handle.model.prediction(from: values)))
        } catch {
            throw Failure(error)
        }
    }
}

/// Many predictions, in order, on every thread the model was opened with.
/// `outputs[i]` receives row i's outputs, or a set holding its error
/// (`modelc_features_status`); the others still run. Returns 0 when every
/// row succeeded, else the first failed row's status.
@_cdecl("modelc_predict_many")
public func modelc_predict_many(_ model: OpaquePointer?, _ features: UnsafePointer<OpaquePointer?>?, _ count: Int,
                                _ outputs: UnsafeMutablePointer<OpaquePointer?>?) -> Int32 {
    var firstFailure: (row: Int, failure: Failure)?
    return guarded { () throws(Failure) in
        let handle = try object(model, as: ModelHandle.self, "model")
        guard count >= 0 else { throw Failure(.usage, "count is \(count)") }
        guard count == 0 || (features != nil && outputs != nil) else { throw Failure(.usage, "inputs or outputs are NULL") }
        var handles: [FeatureSet?] = []
        for index in 0..<count {
            outputs?[index] = nil
            handles.append(try? object(features?[index], as: FeatureSet.self, "inputs"))
        }
        // Only read while the workers run, and the caller keeps the sets alive during the call.
        nonisolated(unsafe) let sets = handles
        // Inputs are read (encoded images decoded) on every thread too.
        let prepared = Locked([Result<[String: FeatureValue], Failure>?](repeating: nil, count: count))
        let workers = max(1, min(handle.model.configuration.threads, count))
        let chunk = (count + workers - 1) / workers
        DispatchQueue.concurrentPerform(iterations: workers) { worker in
            var part: [Result<[String: FeatureValue], Failure>] = []
            let range = min(count, worker * chunk)..<min(count, (worker + 1) * chunk)
            for index in range {
                guard let set = sets[index] else {
                    part.append(.failure(Failure(.usage, "inputs \(index) is not a features handle")))
                    continue
                }
                part.append(Result { () throws(Failure) in try inputs(of: set, model: handle) })
            }
            prepared.withLock { slots in
                for (offset, result) in part.enumerated() { slots[range.lowerBound + offset] = result }
            }
        }
        let ready = prepared.withLock { $0 }
        let batch = ready.compactMap { result -> [String: FeatureValue]? in try? result?.get() }
        var computed = handle.model.predictions(from: batch).makeIterator()
        for (index, result) in ready.enumerated() {
            let set: FeatureSet
            switch result {
            case .success?:
                switch computed.next() {
                case .success(let values)?: set = FeatureSet(outputs: values)
                case .failure(let error)?: set = FeatureSet(failure: Failure(error))
                case nil: set = FeatureSet(failure: Failure(.internalError, "row \(index) was not computed"))
                }
            case .failure(let failure)?: set = FeatureSet(failure: failure)
            case nil: set = FeatureSet(failure: Failure(.internalError, "row \(index) was not computed"))
            }
            if firstFailure == nil, let failure = set.failure { firstFailure = (index, failure) }
            outputs?[index] = retained(set)
        }
        if let firstFailure {
            throw Failure(firstFailure.failure.status, "row \(firstFailure.row): " + firstFailure.failure.message)
        }
    }
}

/// A batch given as columns: every input an array whose first axis is the
/// row. Tree ensembles and SVM classifiers read the columns directly; other
/// models row by row. Outputs are columns: arrays with a first row axis
/// (a classifier's probabilities rows × classes in label order), int64
/// labels an int64 array, string labels a `MODELC_KIND_STRINGS` value.
@_cdecl("modelc_predict_columns")
public func modelc_predict_columns(_ model: OpaquePointer?, _ features: OpaquePointer?,
                                   _ outputs: UnsafeMutablePointer<OpaquePointer?>?) -> Int32 {
    guarded { () throws(Failure) in
        let out = try output(outputs, "outputs")
        out.pointee = nil
        let handle = try object(model, as: ModelHandle.self, "model")
        let set = try object(features, as: FeatureSet.self, "columns")
        var columns: [String: MultiArray] = [:]
        for (name, input) in set.inputs {
            guard case .value(.multiArray(let array)) = input else {
                throw Failure(.badInput, "column \"\(name)\" is not an array (columns carry numbers only)")
            }
            columns[name] = array
        }
        do throws(RuntimeError) {
            out.pointee = retained(FeatureSet(columns: try handle.model.predictions(columns: columns)))
        } catch {
            throw Failure(error)
        }
    }
}

// MARK: States

/// A new state for a stateful program (its state tensors zero-filled); free it with `modelc_state_free`.
@_cdecl("modelc_make_state")
public func modelc_make_state(_ model: OpaquePointer?, _ state: UnsafeMutablePointer<OpaquePointer?>?) -> Int32 {
    guarded { () throws(Failure) in
        let out = try output(state, "state")
        out.pointee = nil
        let handle = try object(model, as: ModelHandle.self, "model")
        let states = handle.model.summary.states
        guard !states.isEmpty else {
            throw Failure(.badInput, "\(handle.model.path): the model declares no state")
        }
        guard let state = handle.model.makeState() else {
            throw Failure(.unsupportedModel, "\(handle.model.path): the model declares states but its engine keeps none")
        }
        out.pointee = retained(StateHandle(owner: handle, state: state))
    }
}

/// Frees a state (NULL is ignored).
@_cdecl("modelc_state_free")
public func modelc_state_free(_ state: OpaquePointer?) { modelc_close(state) }

// MARK: Reading features

private func entry(_ features: OpaquePointer?, _ index: Int) throws(Failure) -> ExportedValue {
    let set = try object(features, as: FeatureSet.self, "features")
    guard index >= 0, index < set.outputs.count else {
        throw Failure(.usage, "feature index \(index) out of range (\(set.outputs.count) features)")
    }
    return set.outputs[index]
}

/// The number of output values in a set (0 for a set of inputs or a failed row).
@_cdecl("modelc_features_count")
public func modelc_features_count(_ features: OpaquePointer?) -> Int {
    (try? object(features, as: FeatureSet.self, "features"))?.outputs.count ?? 0
}

/// A failed row's status (0 for a set of outputs).
@_cdecl("modelc_features_status")
public func modelc_features_status(_ features: OpaquePointer?) -> Int32 {
    (try? object(features, as: FeatureSet.self, "features"))?.failure?.status.rawValue ?? 0
}

/// A failed row's message (NULL for a set of outputs); owned by the set.
@_cdecl("modelc_features_error")
public func modelc_features_error(_ features: OpaquePointer?) -> UnsafePointer<CChar>? {
    (try? object(features, as: FeatureSet.self, "features"))?.failureMessage.map { UnsafePointer($0) }
}

/// Value `index`'s name (NULL when out of range); owned by the set.
@_cdecl("modelc_features_name")
public func modelc_features_name(_ features: OpaquePointer?, _ index: Int) -> UnsafePointer<CChar>? {
    (try? entry(features, index))?.name.map { UnsafePointer($0) }
}

/// Value `index`'s kind (`MODELC_KIND_…`; 0 when out of range).
@_cdecl("modelc_features_kind")
public func modelc_features_kind(_ features: OpaquePointer?, _ index: Int) -> Int32 {
    (try? entry(features, index))?.kind.rawValue ?? 0
}

/// A double or int64 value as a double, an int64 as itself.
@_cdecl("modelc_features_get_number")
public func modelc_features_get_number(_ features: OpaquePointer?, _ index: Int, _ double: UnsafeMutablePointer<Double>?,
                                       _ int64: UnsafeMutablePointer<Int64>?) -> Int32 {
    guarded { () throws(Failure) in
        let value = try entry(features, index)
        switch value.kind {
        case .double: double?.pointee = value.number; int64?.pointee = Int64(exactly: value.number.rounded(.towardZero)) ?? 0
        case .int64: double?.pointee = Double(value.integer); int64?.pointee = value.integer
        default: throw Failure(.usage, "feature \(index) is not a number")
        }
    }
}

/// A string value (NULL when not a string); owned by the set.
@_cdecl("modelc_features_get_string")
public func modelc_features_get_string(_ features: OpaquePointer?, _ index: Int) -> UnsafePointer<CChar>? {
    guard let value = try? entry(features, index), value.kind == .string, value.strings.count == 1 else { return nil }
    return value.strings[0]
}

/// An array value: element type, rank, dimensions and row-major elements, owned by the set.
@_cdecl("modelc_features_get_array")
public func modelc_features_get_array(_ features: OpaquePointer?, _ index: Int, _ dataType: UnsafeMutablePointer<Int32>?,
                                      _ rank: UnsafeMutablePointer<Int32>?, _ shape: UnsafeMutablePointer<UnsafePointer<Int64>?>?,
                                      _ data: UnsafeMutablePointer<UnsafeRawPointer?>?) -> Int32 {
    guarded { () throws(Failure) in
        let value = try entry(features, index)
        guard value.kind == .array else { throw Failure(.usage, "feature \(index) is not an array") }
        dataType?.pointee = value.elementType.rawValue
        rank?.pointee = Int32(value.shape.count)
        shape?.pointee = UnsafePointer(value.shape.baseAddress)
        data?.pointee = UnsafeRawPointer(value.bytes.baseAddress)
    }
}

/// An image value: pixel layout, size, row length and pixels, owned by the set.
@_cdecl("modelc_features_get_image")
public func modelc_features_get_image(_ features: OpaquePointer?, _ index: Int, _ layout: UnsafeMutablePointer<Int32>?,
                                      _ width: UnsafeMutablePointer<Int64>?, _ height: UnsafeMutablePointer<Int64>?,
                                      _ bytesPerRow: UnsafeMutablePointer<Int64>?,
                                      _ data: UnsafeMutablePointer<UnsafeRawPointer?>?) -> Int32 {
    guarded { () throws(Failure) in
        let value = try entry(features, index)
        guard value.kind == .image else { throw Failure(.usage, "feature \(index) is not an image") }
        layout?.pointee = value.pixelLayout.rawValue
        width?.pointee = value.width
        height?.pointee = value.height
        bytesPerRow?.pointee = value.bytesPerRow
        data?.pointee = UnsafeRawPointer(value.bytes.baseAddress)
    }
}

/// The entries of a dictionary (keys and values), the elements of a sequence
/// or the rows of a string column: `count`, and each pointer that applies
/// (the others are set to NULL), owned by the set.
@_cdecl("modelc_features_get_entries")
public func modelc_features_get_entries(_ features: OpaquePointer?, _ index: Int, _ count: UnsafeMutablePointer<Int>?,
                                        _ stringKeys: UnsafeMutablePointer<UnsafePointer<UnsafePointer<CChar>?>?>?,
                                        _ int64Keys: UnsafeMutablePointer<UnsafePointer<Int64>?>?,
                                        _ values: UnsafeMutablePointer<UnsafePointer<Double>?>?) -> Int32 {
    guarded { () throws(Failure) in
        let value = try entry(features, index)
        switch value.kind {
        case .stringDictionary, .int64Dictionary, .stringSequence, .int64Sequence, .strings: break
        default: throw Failure(.usage, "feature \(index) has no entries")
        }
        count?.pointee = value.entryCount
        stringKeys?.pointee = value.strings.isEmpty ? nil : UnsafePointer(value.strings.baseAddress)
        int64Keys?.pointee = value.int64s.isEmpty ? nil : UnsafePointer(value.int64s.baseAddress)
        values?.pointee = value.doubles.isEmpty ? nil : UnsafePointer(value.doubles.baseAddress)
    }
}
