import CVectorMath
import CWeightKernels
import ModelFeatures

/// Elements moved between storages (`ElementStorage`): values held narrower
/// than operations compute them (an fp16 state's halves) widened to floats
/// for a kernel, and floats rounded into such storage when it is written.
enum ElementConversion {
    /// `count` elements held as `storage` at `source`, as computed (floats or
    /// 4-byte integers) at `target`.
    static func widen(_ source: UnsafeRawPointer, storage: ElementStorage = .float16, count: Int, into target: UnsafeMutableRawPointer) {
        switch storage {
        case .float16: modelc_decode_halves(source, count, target.assumingMemoryBound(to: Float.self))
        case .float32, .int32: target.copyMemory(from: source, byteCount: storage.bytes(count))
        }
    }

    /// `count` floats at `source` as `storage` at `target` (halves rounded to nearest, ties to even).
    static func narrow(_ source: UnsafePointer<Float>, count: Int, into target: UnsafeMutableRawPointer, storage: ElementStorage = .float16) {
        switch storage {
        case .float16: modelc_halves_from_floats(source, count, target)
        case .float32, .int32: target.copyMemory(from: source, byteCount: storage.bytes(count))
        }
    }

    /// The half at element `index` of `halves`, as a float.
    @inline(__always)
    static func half(_ halves: UnsafeRawPointer, _ index: Int) -> Float {
        Float(Float16(bitPattern: halves.load(fromByteOffset: index * 2, as: UInt16.self)))
    }

    /// Stores `value` rounded to a half as element `index` of `halves`.
    @inline(__always)
    static func storeHalf(_ value: Float, _ halves: UnsafeMutableRawPointer, _ index: Int) {
        halves.storeBytes(of: Float16(value).bitPattern, toByteOffset: index * 2, as: UInt16.self)
    }
}

extension MultiArray {
    /// Elements `range` as floats, halves widened by the CPU's conversion
    /// instructions (F16C) rather than one at a time in software: a
    /// decoder's fp16 logits, its whole vocabulary at every step.
    public func widenedFloats(_ range: Range<Int>) -> [Float] {
        guard dataType == .float16 else { return floats(range) }
        precondition(range.lowerBound >= 0 && range.upperBound <= count, "elements \(range) of \(count)")
        return withUnsafeBytes { bytes in
            [Float](unsafeUninitializedCapacity: range.count) { floats, initialized in
                if let source = bytes.baseAddress, let target = floats.baseAddress, !range.isEmpty {
                    ElementConversion.widen(source + range.lowerBound * 2, count: range.count, into: UnsafeMutableRawPointer(target))
                }
                initialized = range.count
            }
        }
    }
}
