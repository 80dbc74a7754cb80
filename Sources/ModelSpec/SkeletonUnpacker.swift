import CoreMLSchema
import Glibc

/// Unpacks a specification without ever holding its large weight payloads
/// twice: protobuf-c unpacks a *skeleton* of the input in which each large
/// `WeightParams` value field is an 8-byte marker, then each payload is
/// copied from the input into a buffer of its own, and the input's pages
/// behind it may be released at once.
///
/// The markers are checked strictly (magic, index in range, field matches,
/// each used once, all found); when anything does not match, for instance a
/// field repeated in the input, `unpack` returns `nil` and the caller unpacks
/// the plain input instead.
enum SkeletonUnpacker {
    /// "MODL", little-endian: the first four bytes of every marker.
    static let magic: UInt32 = 0x4C44_4F4D

    /// - Parameter release: called with each payload's range once it has been
    ///   copied, so a memory-mapped input can drop those pages.
    static func unpack(
        _ bytes: UnsafeRawBufferPointer, fields: [WireFormatGuard.LargeWeightField],
        descriptor: UnsafePointer<ProtobufCMessageDescriptor>, release: (Range<Int>) -> Void
    ) -> UnsafeMutablePointer<ProtobufCMessage>? {
        var skeleton: [UInt8] = []
        skeleton.reserveCapacity(bytes.count - fields.reduce(0) { $0 + $1.payload.count } + fields.count * 16)
        var next = 0
        emit(bytes, 0..<bytes.count, fields: fields, next: &next, into: &skeleton)
        guard next == fields.count else { return nil }
        let unpacked = skeleton.withUnsafeBufferPointer { buffer in
            protobuf_c_message_unpack(descriptor, nil, buffer.count, buffer.baseAddress)
        }
        guard let message = unpacked else { return nil }
        var filler = Filler(bytes: bytes, fields: fields)
        filler.visit(MessageView(UnsafeRawPointer(message)), release: release)
        guard filler.isConsistent, filler.filled.allSatisfy({ $0 }) else {
            protobuf_c_message_free_unpacked(message, nil)
            return nil
        }
        return message
    }

    /// Copies the fields of `range` into `out`, with each large field
    /// replaced by a marker and every enclosing length rewritten.
    private static func emit(
        _ bytes: UnsafeRawBufferPointer, _ range: Range<Int>, fields: [WireFormatGuard.LargeWeightField],
        next: inout Int, into out: inout [UInt8]
    ) {
        var index = range.lowerBound
        while index < range.upperBound {
            let start = index
            let tag = varint(bytes, &index)
            switch tag & 7 {
            case 0: _ = varint(bytes, &index)
            case 1: index += 8
            case 5: index += 4
            default:
                let length = Int(varint(bytes, &index))
                let payload = index..<(index + length)
                index = payload.upperBound
                if next < fields.count, fields[next].payload == payload {
                    appendVarint(tag, to: &out)
                    appendVarint(8, to: &out)
                    appendLittleEndian(magic, to: &out)
                    appendLittleEndian(UInt32(next), to: &out)
                    next += 1
                    continue
                }
                if next < fields.count, payload.contains(fields[next].payload.lowerBound) {
                    var body: [UInt8] = []
                    emit(bytes, payload, fields: fields, next: &next, into: &body)
                    appendVarint(tag, to: &out)
                    appendVarint(UInt64(body.count), to: &out)
                    out += body
                    continue
                }
            }
            out.append(contentsOf: UnsafeRawBufferPointer(rebasing: bytes[start..<index]))
        }
    }

    /// Puts each large payload into the `WeightParams` field its marker stands in.
    private struct Filler {
        let bytes: UnsafeRawBufferPointer
        let fields: [WireFormatGuard.LargeWeightField]
        var filled: [Bool]
        var isConsistent = true
        private let weightParams = messageDescriptor(core_ml__specification__weight_params__init,
                                                     CoreML__Specification__WeightParams())

        init(bytes: UnsafeRawBufferPointer, fields: [WireFormatGuard.LargeWeightField]) {
            self.bytes = bytes
            self.fields = fields
            filled = Array(repeating: false, count: fields.count)
        }

        mutating func visit(_ message: MessageView, release: (Range<Int>) -> Void) {
            guard isConsistent else { return }
            if message.descriptor == weightParams {
                let params = message.pointer.assumingMemoryBound(to: CoreML__Specification__WeightParams.self)
                fill(UnsafeMutablePointer(mutating: params), release: release)
                return
            }
            for field in message.fields where field.type == PROTOBUF_C_TYPE_MESSAGE {
                for child in message.messages(in: field) { visit(child, release: release) }
            }
        }

        private mutating func fill(_ params: UnsafeMutablePointer<CoreML__Specification__WeightParams>, release: (Range<Int>) -> Void) {
            if params.pointee.n_floatvalue == 2, let values = params.pointee.floatvalue, values[0].bitPattern == magic {
                guard let payload = claim(Int(values[1].bitPattern), field: 1), payload.count % 4 == 0,
                      let copy = copyOut(payload, release: release)
                else { return }
                free(values)
                params.pointee.floatvalue = copy.assumingMemoryBound(to: Float.self)
                params.pointee.n_floatvalue = payload.count / 4
            }
            fillBinary(&params.pointee.float16value, field: 2, release: release)
            fillBinary(&params.pointee.rawvalue, field: 30, release: release)
            fillBinary(&params.pointee.int8rawvalue, field: 31, release: release)
        }

        private mutating func fillBinary(_ binary: inout ProtobufCBinaryData, field: UInt32, release: (Range<Int>) -> Void) {
            guard binary.len == 8, let data = binary.data,
                  UnsafeRawPointer(data).loadUnaligned(as: UInt32.self) == magic.littleEndian
            else { return }
            let index = Int(UInt32(littleEndian: UnsafeRawPointer(data).loadUnaligned(fromByteOffset: 4, as: UInt32.self)))
            guard let payload = claim(index, field: field), let copy = copyOut(payload, release: release) else { return }
            free(data)
            binary.data = copy.assumingMemoryBound(to: UInt8.self)
            binary.len = payload.count
        }

        /// The payload of marker `index` in field `field`, once; any other use
        /// marks the unpack inconsistent.
        private mutating func claim(_ index: Int, field: UInt32) -> Range<Int>? {
            guard index < fields.count, !filled[index], fields[index].fieldNumber == field else {
                isConsistent = false
                return nil
            }
            filled[index] = true
            return fields[index].payload
        }

        /// Payloads this large are copied into 2 MiB-aligned buffers backed by
        /// transparent huge pages where the kernel allows it (`MADV_HUGEPAGE`).
        static let hugePage = 2 << 20

        /// Maps the pages of a fresh large buffer in one call
        /// (`MADV_POPULATE_WRITE`, Linux 5.14) instead of one fault per page
        /// during the copy, as huge pages where the buffer spans them. For
        /// 80 MB here: 60 ms faulting 4 KiB pages one by one, 48 ms populating
        /// them; with huge pages the whole compile's system time fell from
        /// 0.12 to 0.07 s. Kernels without either advice fault the pages in
        /// during the copy, as before.
        private static func prefault(_ memory: UnsafeMutableRawPointer, count: Int) {
            guard count >= 1 << 20 else { return }
            let page = Int(sysconf(Int32(_SC_PAGESIZE)))
            let start = (Int(bitPattern: memory) + page - 1) / page * page
            let end = (Int(bitPattern: memory) + count) / page * page
            guard end > start, let first = UnsafeMutableRawPointer(bitPattern: start) else { return }
            // Only whole huge pages inside the buffer: one straddling its end
            // would make up to 2 MiB past it resident.
            let hugeEnd = (Int(bitPattern: memory) + count) / hugePage * hugePage
            if hugeEnd - start >= hugePage { _ = madvise(first, hugeEnd - start, MADV_HUGEPAGE) }
            _ = madvise(first, end - start, MADV_POPULATE_WRITE)
        }

        /// A 64-byte (huge payloads: 2 MiB) aligned `malloc` copy (protobuf-c
        /// frees it with `free`).
        private func copyOut(_ payload: Range<Int>, release: (Range<Int>) -> Void) -> UnsafeMutableRawPointer? {
            var memory: UnsafeMutableRawPointer?
            let alignment = payload.count >= Self.hugePage ? Self.hugePage : 64
            guard posix_memalign(&memory, alignment, max(payload.count, 1)) == 0, let memory, let base = bytes.baseAddress else {
                return nil
            }
            Self.prefault(memory, count: payload.count)
            memory.copyMemory(from: base + payload.lowerBound, byteCount: payload.count)
            release(payload)
            return memory
        }
    }

    private static func varint(_ bytes: UnsafeRawBufferPointer, _ index: inout Int) -> UInt64 {
        var value: UInt64 = 0
        var shift: UInt64 = 0
        while index < bytes.count, shift < 64 {
            let byte = bytes[index]
            index += 1
            value |= UInt64(byte & 0x7F) << shift
            if byte & 0x80 == 0 { break }
            shift += 7
        }
        return value
    }

    private static func appendVarint(_ value: UInt64, to out: inout [UInt8]) {
        var value = value
        repeat {
            var byte = UInt8(value & 0x7F)
            value >>= 7
            if value != 0 { byte |= 0x80 }
            out.append(byte)
        } while value != 0
    }

    private static func appendLittleEndian(_ value: UInt32, to out: inout [UInt8]) {
        withUnsafeBytes(of: value.littleEndian) { out.append(contentsOf: $0) }
    }
}
