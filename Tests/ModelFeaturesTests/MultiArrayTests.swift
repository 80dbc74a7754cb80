import Foundation
import ModelFeatures
import Testing

@Suite("Multi-arrays")
struct MultiArrayTests {
    @Test("strided buffers are gathered into row-major order", arguments: [[2, 3], [3, 2], [1, 4], [2, 2, 2]])
    func gathersStrides(_ shape: [Int]) {
        // A column-major (Fortran) layout of 0, 1, 2, … in row-major order.
        let count = shape.reduce(1, *)
        var fortranStrides = [Int](repeating: 1, count: shape.count)
        for axis in 1..<shape.count { fortranStrides[axis] = fortranStrides[axis - 1] * shape[axis - 1] }
        var columnMajor = [Float](repeating: 0, count: count)
        let rowStrides = MultiArray(shape: shape, dataType: .float32).strides
        for index in 0..<count {
            var remainder = index, offset = 0
            for axis in shape.indices {
                offset += remainder / rowStrides[axis] * fortranStrides[axis]
                remainder %= rowStrides[axis]
            }
            columnMajor[offset] = Float(index)
        }
        let array = columnMajor.withUnsafeBytes {
            MultiArray(copying: $0, shape: shape, strides: fortranStrides, dataType: .float32)
        }
        #expect(array.floats == (0..<count).map(Float.init))
    }

    /// The one row-major stride rule the C interface and the engines share.
    @Test("row-major strides", arguments: [
        ([], []), ([5], [1]), ([2, 3], [3, 1]), ([2, 3, 4], [12, 4, 1]), ([1, 3, 224, 224], [150_528, 50_176, 224, 1]),
        ([2, 0, 3], [0, 3, 1]), ([4, 1, 1], [1, 1, 1]),
    ] as [([Int], [Int])])
    func rowMajorStrides(shape: [Int], strides: [Int]) {
        #expect(MultiArray.rowMajorStrides(shape) == strides)
        #expect(MultiArray(shape: shape, dataType: .float32).strides == strides)
    }

    @Test("conversions keep values and copies do not share writes", arguments: MultiArray.DataType.allCases)
    func conversions(_ type: MultiArray.DataType) {
        let source = MultiArray([1, -2, 3.5, 1024], shape: [2, 2])
        var converted = source.converted(to: type)
        let expected: [Double] = type == .int32 ? [1, -2, 3, 1024] : [1, -2, 3.5, 1024]
        #expect(converted.doubles == expected)
        let copy = converted
        converted[0] = 7
        #expect(copy[0] == 1)
        #expect(converted[0] == 7)
        #expect(source.reshaped([4])?.shape == [4])
        #expect(source.reshaped([3]) == nil)
    }

    @Test("a range of elements as floats is the same part of all of them", arguments: MultiArray.DataType.allCases)
    func floatRange(_ type: MultiArray.DataType) {
        let array = MultiArray([1, -2, 3, 1024, 5, -6], shape: [1, 2, 3]).converted(to: type)
        #expect(array.floats(3..<6) == Array(array.floats[3..<6]))
        #expect(array.floats(0..<0).isEmpty)
        #expect(array.floats(0..<6) == array.floats)
    }
}

@Suite("NumPy files")
struct NumPyArrayTests {
    /// A version 1 .npy file as NumPy writes it.
    static func npy(descr: String, fortran: Bool = false, shape: [Int], payload: [UInt8]) -> Data {
        let shapeText = shape.count == 1 ? "(\(shape[0]),)" : "(" + shape.map(String.init).joined(separator: ", ") + ")"
        var header = "{'descr': '\(descr)', 'fortran_order': \(fortran ? "True" : "False"), 'shape': \(shapeText), }"
        while (10 + header.utf8.count + 1) % 64 != 0 { header += " " }
        header += "\n"
        var bytes: [UInt8] = [0x93] + Array("NUMPY".utf8) + [1, 0, UInt8(header.utf8.count & 0xff), UInt8(header.utf8.count >> 8)]
        bytes += Array(header.utf8) + payload
        return Data(bytes)
    }

    @Test("float32, float64 and int64 arrays, C and Fortran order")
    func reads() throws {
        let floats: [Float] = [1, 2, 3, 4, 5, 6]
        let f4 = try NumPyArray.read(Self.npy(descr: "<f4", shape: [2, 3], payload: floats.withUnsafeBytes { Array($0) }), source: "a.npy", feature: "x")
        #expect(f4.dataType == .float32 && f4.shape == [2, 3] && f4.floats == floats)
        let doubles: [Double] = [1, 4, 2, 5, 3, 6]
        let fortran = try NumPyArray.read(Self.npy(descr: "<f8", fortran: true, shape: [2, 3], payload: doubles.withUnsafeBytes { Array($0) }), source: "b.npy", feature: "x")
        #expect(fortran.doubles == [1, 2, 3, 4, 5, 6])
        let longs: [Int64] = [-3, 7]
        let i8 = try NumPyArray.read(Self.npy(descr: "<i8", shape: [2], payload: longs.withUnsafeBytes { Array($0) }), source: "c.npy", feature: "x")
        #expect(i8.doubles == [-3, 7])
    }

    @Test("damaged files name the file and the problem")
    func refusesDamage() {
        #expect(throws: RuntimeError.invalidValue(feature: "x", detail: "d.npy: not a NumPy .npy file")) {
            try NumPyArray.read(Data("hello world".utf8), source: "d.npy", feature: "x")
        }
        #expect(throws: RuntimeError.invalidValue(feature: "x", detail: "e.npy: holds 4 bytes of data, shape [2, 3] needs 24")) {
            try NumPyArray.read(Self.npy(descr: "<f4", shape: [2, 3], payload: [0, 0, 0, 0]), source: "e.npy", feature: "x")
        }
        #expect(throws: RuntimeError.invalidValue(feature: "x", detail: "f.npy: element type >f4 is not supported (little-endian numbers and bool)")) {
            try NumPyArray.read(Self.npy(descr: ">f4", shape: [1], payload: [0, 0, 0, 0]), source: "f.npy", feature: "x")
        }
    }
}
