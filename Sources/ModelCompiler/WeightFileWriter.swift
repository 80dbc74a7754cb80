import Dispatch
import ModelSpec
import SystemIO

/// The bytes of the weight file a plan describes, produced in order as
/// segments: the header, then per blob zero padding, its record and its data
/// (float16 conversions in chunks). The writer and the hasher both walk it,
/// so what is hashed is exactly what is written.
struct WeightFileBytes {
    static let chunk = 8 << 20
    let plan: WeightPlan

    /// Calls `body` with each segment in file order. `converted`, when given,
    /// sees each float16 conversion (source values, their halves, blob index).
    func forEach(
        converted: ((UnsafeBufferPointer<Float>, UnsafeBufferPointer<UInt16>, Int) throws(CompileError) -> Void)? = nil,
        blobWritten: ((Int) -> Void)? = nil,
        _ body: (UnsafeRawBufferPointer) throws(CompileError) -> Void
    ) throws(CompileError) {
        var header = [UInt8](repeating: 0, count: MILBlobFile.headerSize)
        store(UInt32(plan.blobs.count), into: &header, at: 0)
        store(MILBlobFile.version, into: &header, at: 4)
        try emit(header, body)
        var offset = UInt64(header.count)
        let zeros = [UInt8](repeating: 0, count: MILBlobFile.alignment)
        var halves = [UInt16](repeating: 0, count: 16_384)
        for (index, blob) in plan.blobs.enumerated() {
            try emit(Array(zeros.prefix(Int(blob.recordOffset - offset))), body)
            var record = [UInt8](repeating: 0, count: MILBlobFile.metadataSize)
            store(MILBlobFile.sentinel, into: &record, at: 0)
            store(blob.dataType.rawValue, into: &record, at: 4)
            store(UInt64(blob.data.storedByteCount), into: &record, at: 8)
            store(blob.dataOffset, into: &record, at: 16)
            store(blob.paddingBits, into: &record, at: 24)
            try emit(record, body)
            switch blob.data {
            case .bytes(let bytes):
                var start = 0
                repeat {
                    let end = min(start + Self.chunk, bytes.count)
                    try body(UnsafeRawBufferPointer(rebasing: bytes[start..<end]))
                    start = end
                } while start < bytes.count
            case .float32AsFloat16(let values):
                var start = 0
                while start < values.count {
                    let end = min(start + halves.count, values.count)
                    for index in start..<end { halves[index - start] = Float16(values[index]).bitPattern.littleEndian }
                    let count = end - start
                    let result = halves.withUnsafeBufferPointer { buffer in
                        Result { () throws(CompileError) in
                            let part = UnsafeBufferPointer(rebasing: buffer[0..<count])
                            try converted?(UnsafeBufferPointer(rebasing: values[start..<end]), part, index)
                            try body(UnsafeRawBufferPointer(part))
                        }
                    }
                    try result.get()
                    start = end
                }
            }
            offset = blob.dataOffset + UInt64(blob.data.storedByteCount)
            blobWritten?(index)
        }
    }

    private func emit(_ bytes: [UInt8], _ body: (UnsafeRawBufferPointer) throws(CompileError) -> Void) throws(CompileError) {
        guard !bytes.isEmpty else { return }
        let result = bytes.withUnsafeBytes { raw in Result { () throws(CompileError) in try body(raw) } }
        try result.get()
    }

    private func store<T: FixedWidthInteger>(_ value: T, into bytes: inout [UInt8], at offset: Int) {
        withUnsafeBytes(of: value.littleEndian) { raw in
            for (index, byte) in raw.enumerated() { bytes[offset + index] = byte }
        }
    }
}

/// Writes a `WeightPlan` as a MIL blob storage file (version 2), streaming
/// each blob from where it lives in memory, while another thread computes
/// the file's SHA-256 from the same bytes; no second copy of the weights is
/// made.
struct WeightFileWriter {
    /// The largest relative error float16 conversion introduced, and where.
    struct ConversionError: Equatable {
        var maximum: Double = 0
        var owner = ""
        var role = ""
    }

    /// The plan, handed to the hashing thread. Unchecked: the plan and the
    /// memory it points into are only read, and `write` waits for the
    /// hashing thread before it returns.
    private struct SharedPlan: @unchecked Sendable {
        let plan: WeightPlan
    }

    /// Writes `plan` to `path`; returns the file's digest and, with `--fp16`,
    /// the largest relative conversion error.
    static func write(
        _ plan: WeightPlan, to path: String, progress: (@Sendable (CompileProgress) -> Void)? = nil
    ) throws(CompileError) -> (SHA256Digest, ConversionError) {
        let digest = Locked<SHA256Digest?>(nil)
        let hashed = DispatchSemaphore(value: 0)
        let shared = SharedPlan(plan: plan)
        DispatchQueue.global(qos: .userInitiated).async {
            var hasher = SHA256Hasher()
            // Conversion errors are reported by the writer; here they cannot occur differently.
            try? WeightFileBytes(plan: shared.plan).forEach { segment in hasher.update(segment) }
            let result = hasher.finalize()
            digest.withLock { $0 = result }
            hashed.signal()
        }
        defer { hashed.wait() }

        // The weight each blob was first planned for names it in messages.
        var firstWeight: [Int: WeightLocation] = [:]
        for weight in plan.weights where firstWeight[weight.blob] == nil { firstWeight[weight.blob] = weight.site }
        var conversion = ConversionError()
        let total = plan.fileSize
        let file = try writing { () throws(SystemCallError) in try FileWriter(path: path, hashing: false) }
        try WeightFileBytes(plan: plan).forEach(
            converted: { (values: UnsafeBufferPointer<Float>, halves: UnsafeBufferPointer<UInt16>, blob: Int) throws(CompileError) in
                let site = firstWeight[blob]
                for (value, half) in zip(values, halves) {
                    let converted = Float(Float16(bitPattern: UInt16(littleEndian: half)))
                    if value.isFinite && !converted.isFinite {
                        throw .float16Overflow(owner: site?.owner ?? "", role: site?.role ?? "", value: value)
                    }
                    guard value != 0, value.isFinite else { continue }
                    let error = Double(abs(converted - value) / abs(value))
                    if error > conversion.maximum {
                        conversion = ConversionError(maximum: error, owner: site?.owner ?? "", role: site?.role ?? "")
                    }
                }
            },
            blobWritten: { _ in progress?(CompileProgress(bytesWritten: file.offset, totalBytes: total)) }
        ) { (segment: UnsafeRawBufferPointer) throws(CompileError) in
            try writing { () throws(SystemCallError) in try file.write(segment) }
            if segment.count >= WeightFileBytes.chunk { progress?(CompileProgress(bytesWritten: file.offset, totalBytes: total)) }
        }
        _ = try writing { () throws(SystemCallError) in try file.finish() }
        hashed.wait()
        hashed.signal()
        guard let result = digest.withLock({ $0 }) else { preconditionFailure("hashing finished without a digest") }
        return (result, conversion)
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
