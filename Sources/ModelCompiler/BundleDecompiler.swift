import BundleFormat
import CoreMLSchema
import Foundation
import Glibc
import ModelSpec
import SystemIO

/// Rebuilds the Core ML model a bundle was compiled from: the specification
/// with every weight's values put back where the source held them.
///
/// Without `--fp16` the result holds the same messages and values as the
/// source. ML programs become `.mlpackage` directories whose weight file is
/// the bundle's; everything else becomes an `.mlmodel` file.
public enum BundleDecompiler {
    /// What decompiling wrote.
    public struct Report: Equatable, Sendable {
        public var output: String
        public var format: ModelFile.Format
        public var weightCount: Int
    }

    /// Decompiles the bundle at `bundle` into `output` (an `.mlmodel` file or
    /// `.mlpackage` directory, which must not exist).
    public static func decompile(_ bundle: String, to output: String) throws(DecompileError) -> Report {
        guard !FileManager.default.fileExists(atPath: output) else { throw .outputExists(path: output) }
        let contents: BundleContents
        do {
            contents = try BundleContents.open(bundle, verifyDigests: true)
        } catch {
            throw .bundle(error)
        }
        let root = UnsafeMutablePointer(mutating: contents.specification.root)
        let sites = Dictionary(WeightLocator(root: root).locations.map { ($0.path, $0) }, uniquingKeysWith: { first, _ in first })
        var needsWeightFile = false
        for entry in contents.index.weights {
            guard let site = sites[entry.path] else {
                throw .bundle(.inconsistentIndex(path: bundle + "/" + BundleLayout.weightIndex,
                                                 detail: "weight \(entry.path) is not in \(BundleLayout.specification)"))
            }
            let data: UnsafeRawBufferPointer
            do {
                data = try contents.data(for: entry)
            } catch {
                throw .bundle(error)
            }
            switch site.holder {
            case .weightParams(let params):
                restore(params, entry: entry, data: data)
            case .programValue(let value):
                if entry.source == "immediateValue", restoreInline(value, entry: entry, data: data) { continue }
                needsWeightFile = true
            }
        }
        let bytes = withExtendedLifetime(contents) { SpecificationPacker.pack(root) }
        if needsWeightFile {
            guard output.hasSuffix(".mlpackage") else { throw .needsPackage(path: output) }
            try writePackage(specification: bytes, weightFile: bundle + "/" + BundleLayout.weightFile, to: output)
            return Report(output: output, format: .mlpackage, weightCount: contents.index.weights.count)
        }
        try writeFile(bytes, to: output)
        return Report(output: output, format: .mlmodel, weightCount: contents.index.weights.count)
    }

    /// Puts a neural-network weight's values back into its `WeightParams`.
    private static func restore(
        _ params: UnsafeMutablePointer<CoreML__Specification__WeightParams>, entry: WeightIndex.Entry, data: UnsafeRawBufferPointer
    ) {
        switch (entry.source, entry.dataType) {
        case ("floatValue", "float32"):
            let (values, count) = cArray(fromLittleEndian: data, Float.init(bitPattern:))
            free(params.pointee.floatvalue)
            params.pointee.floatvalue = values
            params.pointee.n_floatvalue = count
        case ("floatValue", _), ("float16Value", _):
            // Float32 weights stored as float16 (--fp16) come back as float16.
            replace(&params.pointee.float16value, with: data)
        case ("rawValue", _):
            replace(&params.pointee.rawvalue, with: data)
        default:
            replace(&params.pointee.int8rawvalue, with: data)
        }
    }

    private static func replace(_ field: inout ProtobufCBinaryData, with data: UnsafeRawBufferPointer) {
        let copy = cArray(UInt8.self, count: data.count)
        if let base = data.baseAddress { copy.update(from: base.assumingMemoryBound(to: UInt8.self), count: data.count) }
        free(field.data)
        field.data = copy
        field.len = data.count
    }

    /// Memory for `count` elements from `malloc`: the tree is freed by
    /// protobuf-c, which releases everything in it with `free`.
    private static func cArray<Element>(_ type: Element.Type, count: Int) -> UnsafeMutablePointer<Element> {
        guard let memory = malloc(max(count, 1) * MemoryLayout<Element>.stride) else {
            fatalError("out of memory allocating \(count) \(Element.self) values")
        }
        return memory.bindMemory(to: Element.self, capacity: max(count, 1))
    }

    /// The 32-bit little-endian values of `data`, decoded, in `malloc` memory.
    private static func cArray<Element>(
        fromLittleEndian data: UnsafeRawBufferPointer, _ decode: (UInt32) -> Element
    ) -> (UnsafeMutablePointer<Element>, Int) {
        let count = data.count / 4
        let values = cArray(Element.self, count: count)
        for index in 0..<count {
            values[index] = decode(UInt32(littleEndian: data.loadUnaligned(fromByteOffset: index * 4, as: UInt32.self)))
        }
        return (values, count)
    }

    /// Turns a program constant the compiler moved to the weight file back
    /// into an inline tensor; `false` when its type cannot be inline.
    private static func restoreInline(
        _ value: UnsafeMutablePointer<CoreML__Specification__MILSpec__Value>, entry: WeightIndex.Entry, data: UnsafeRawBufferPointer
    ) -> Bool {
        let tensor = cArray(CoreML__Specification__MILSpec__TensorValue.self, count: 1)
        core_ml__specification__milspec__tensor_value__init(tensor)
        switch entry.dataType {
        case "float32":
            let floats = cArray(CoreML__Specification__MILSpec__TensorValue__RepeatedFloats.self, count: 1)
            core_ml__specification__milspec__tensor_value__repeated_floats__init(floats)
            (floats.pointee.values, floats.pointee.n_values) = cArray(fromLittleEndian: data, Float.init(bitPattern:))
            tensor.pointee.value_case = CORE_ML__SPECIFICATION__MILSPEC__TENSOR_VALUE__VALUE_FLOATS
            tensor.pointee.floats = floats
        case "int32":
            let ints = cArray(CoreML__Specification__MILSpec__TensorValue__RepeatedInts.self, count: 1)
            core_ml__specification__milspec__tensor_value__repeated_ints__init(ints)
            (ints.pointee.values, ints.pointee.n_values) = cArray(fromLittleEndian: data, Int32.init(bitPattern:))
            tensor.pointee.value_case = CORE_ML__SPECIFICATION__MILSPEC__TENSOR_VALUE__VALUE_INTS
            tensor.pointee.ints = ints
        default:
            let bytes = cArray(CoreML__Specification__MILSpec__TensorValue__RepeatedBytes.self, count: 1)
            core_ml__specification__milspec__tensor_value__repeated_bytes__init(bytes)
            replace(&bytes.pointee.values, with: data)
            tensor.pointee.value_case = CORE_ML__SPECIFICATION__MILSPEC__TENSOR_VALUE__VALUE_BYTES
            tensor.pointee.bytes = bytes
        }
        let immediate = cArray(CoreML__Specification__MILSpec__Value__ImmediateValue.self, count: 1)
        core_ml__specification__milspec__value__immediate_value__init(immediate)
        immediate.pointee.value_case = CORE_ML__SPECIFICATION__MILSPEC__VALUE__IMMEDIATE_VALUE__VALUE_TENSOR
        immediate.pointee.tensor = tensor
        if let blob = value.pointee.blobfilevalue {
            protobuf_c_message_free_unpacked(UnsafeMutableRawPointer(blob).assumingMemoryBound(to: ProtobufCMessage.self), nil)
        }
        value.pointee.value_case = CORE_ML__SPECIFICATION__MILSPEC__VALUE__VALUE_IMMEDIATE_VALUE
        value.pointee.immediatevalue = immediate
        return true
    }

    private static func writeFile(_ bytes: [UInt8], to output: String) throws(DecompileError) {
        do {
            try AtomicFile.write(bytes, to: output)
        } catch {
            throw .write(error)
        }
    }

    /// Writes an `.mlpackage` atomically (replacing a package already at
    /// `output`): manifest, specification, and a copy of the weight file.
    package static func writePackage(specification: [UInt8], weightFile: String?, to output: String) throws(DecompileError) {
        // Opened first, so that an unreadable weight file is reported as the
        // bundle's fault rather than as a failure to write the package.
        if let weightFile {
            do {
                _ = try MappedFile(path: weightFile)
            } catch {
                throw .bundle(.unreadable(path: weightFile, reason: error.description))
            }
        }
        do throws(SystemCallError) {
            let staging = try StagingDirectory(for: output)
            let directories = ["Data", "Data/com.apple.CoreML"] + (weightFile == nil ? [] : ["Data/com.apple.CoreML/weights"])
            for directory in directories {
                try staging.makeDirectory(directory)
            }
            let specificationFile = try FileWriter(path: staging.path + "/Data/com.apple.CoreML/model.mlmodel")
            try specificationFile.write(specification)
            try specificationFile.finish()
            if let weightFile {
                // In the kernel where the file system allows (copy_file_range).
                try FileCopy.copyFile(weightFile, to: staging.path + "/Data/com.apple.CoreML/weights/weight.bin")
            }
            let manifest = try FileWriter(path: staging.path + "/Manifest.json")
            try manifest.write(PackageManifestText.make(withWeights: weightFile != nil))
            try manifest.finish()
            try staging.commit(syncing: directories.reversed())
        } catch {
            throw .write(error)
        }
    }
}

/// The `Manifest.json` of a package modelc writes, with identifiers derived
/// from the item paths so the same model always gives the same bytes.
enum PackageManifestText {
    /// The manifest, listing the weights folder when the package has one.
    static func make(withWeights: Bool = true) -> String {
        let model = identifier("com.apple.CoreML/model.mlmodel")
        var items = [item(model, name: "model.mlmodel", description: "CoreML Model Specification")]
        if withWeights {
            items.append(item(identifier("com.apple.CoreML/weights"), name: "weights", description: "CoreML Model Weights"))
        }
        return """
            {
                "fileFormatVersion": "1.0.0",
                "itemInfoEntries": {
            \(items.joined(separator: ",\n"))
                },
                "rootModelIdentifier": "\(model)"
            }

            """
    }

    /// One entry of `itemInfoEntries`, indented as it stands in the manifest.
    private static func item(_ identifier: String, name: String, description: String) -> String {
        """
                "\(identifier)": {
                    "author": "com.apple.CoreML",
                    "description": "\(description)",
                    "name": "\(name)",
                    "path": "com.apple.CoreML/\(name)"
                }
        """
    }

    /// A UUID-shaped identifier from the SHA-256 of `path`.
    static func identifier(_ path: String) -> String {
        let hex = Array(SHA256Digest.of(Array(path.utf8)).description.uppercased())
        return [hex[0..<8], hex[8..<12], hex[12..<16], hex[16..<20], hex[20..<32]].map { String($0) }.joined(separator: "-")
    }
}
