import ModelSpec
import SystemIO

/// Writes a `WeightPlan` as a MIL blob storage file (version 2), streaming
/// each blob from where it lives in memory; float16 conversion happens in
/// small chunks, so no second copy of the weights is made.
struct WeightFileWriter {
    /// The largest relative error float16 conversion introduced, and where.
    struct ConversionError: Equatable {
        var maximum: Double = 0
        var owner = ""
        var role = ""
    }

    /// Writes `plan` to `path`; returns the file's digest and, with `--fp16`,
    /// the largest relative conversion error.
    static func write(
        _ plan: WeightPlan, to path: String, progress: (@Sendable (CompileProgress) -> Void)? = nil
    ) throws(CompileError) -> (SHA256Digest, ConversionError) {
        var conversion = ConversionError()
        let total = plan.fileSize
        let chunk = 8 << 20
        let file = try writing { () throws(SystemCallError) in try FileWriter(path: path) }
        var header = [UInt8](repeating: 0, count: MILBlobFile.headerSize)
        store(UInt32(plan.blobs.count), into: &header, at: 0)
        store(MILBlobFile.version, into: &header, at: 4)
        try writing { () throws(SystemCallError) in try file.write(header) }
        // The weight each blob was first planned for names it in messages.
        var firstWeight: [Int: WeightSite] = [:]
        for weight in plan.weights where firstWeight[weight.blob] == nil { firstWeight[weight.blob] = weight.site }
        for (index, blob) in plan.blobs.enumerated() {
            var record = [UInt8](repeating: 0, count: MILBlobFile.metadataSize)
            store(MILBlobFile.sentinel, into: &record, at: 0)
            store(blob.dataType.rawValue, into: &record, at: 4)
            store(UInt64(blob.data.storedByteCount), into: &record, at: 8)
            store(blob.dataOffset, into: &record, at: 16)
            store(blob.paddingBits, into: &record, at: 24)
            try writing { () throws(SystemCallError) in
                try file.writeZeros(Int(blob.recordOffset - file.offset))
                try file.write(record)
            }
            switch blob.data {
            case .bytes(let bytes):
                var start = 0
                repeat {
                    let end = min(start + chunk, bytes.count)
                    try writing { () throws(SystemCallError) in try file.write(UnsafeRawBufferPointer(rebasing: bytes[start..<end])) }
                    start = end
                    progress?(CompileProgress(bytesWritten: file.offset, totalBytes: total))
                } while start < bytes.count
            case .float32AsFloat16(let values):
                let site = firstWeight[index]
                let error = try writeAsFloat16(values, to: file, owner: site?.owner ?? "", role: site?.role ?? "")
                if error > conversion.maximum {
                    conversion = ConversionError(maximum: error, owner: site?.owner ?? "", role: site?.role ?? "")
                }
                progress?(CompileProgress(bytesWritten: file.offset, totalBytes: total))
            }
        }
        return (try writing { () throws(SystemCallError) in try file.finish() }, conversion)
    }

    /// Converts `values` to float16 in chunks and writes them; returns the
    /// largest relative error (0 when every value is exactly representable).
    private static func writeAsFloat16(
        _ values: UnsafeBufferPointer<Float>, to file: FileWriter, owner: String, role: String
    ) throws(CompileError) -> Double {
        let chunk = 16_384
        var converted = [UInt16](repeating: 0, count: chunk)
        var largest: Double = 0
        var start = 0
        while start < values.count {
            let end = min(start + chunk, values.count)
            for index in start..<end {
                let value = values[index]
                let half = Float16(value)
                if value.isFinite && !half.isFinite {
                    throw .float16Overflow(owner: owner, role: role, value: value)
                }
                if value != 0, value.isFinite {
                    let error = Double(abs(Float(half) - value) / abs(value))
                    if error > largest { largest = error }
                }
                converted[index - start] = half.bitPattern.littleEndian
            }
            let count = (end - start) * 2
            let result = converted.withUnsafeBytes { bytes in
                Result { () throws(SystemCallError) in try file.write(UnsafeRawBufferPointer(rebasing: bytes[0..<count])) }
            }
            try writing { () throws(SystemCallError) in try result.get() }
            start = end
        }
        return largest
    }

    private static func store<T: FixedWidthInteger>(_ value: T, into bytes: inout [UInt8], at offset: Int) {
        withUnsafeBytes(of: value.littleEndian) { raw in
            for (index, byte) in raw.enumerated() { bytes[offset + index] = byte }
        }
    }
}

/// Runs a file-system step, reporting its failure as `CompileError.write`.
func writing<T>(_ body: () throws(SystemCallError) -> T) throws(CompileError) -> T {
    do {
        return try body()
    } catch {
        throw .write(error)
    }
}
