import ImageDecoding
import ModelFeatures

/// Segmentation outputs drawn as colour masks.
public enum SegmentationMask {
    /// A colour per pixel of a segmentation output: for scores of shape
    /// classes × height × width (leading ones allowed, at least 2 classes),
    /// the colour of the class with the highest score; for a height × width
    /// map of class indices, the colour of each index. `nil` for any other shape.
    public static func colours(of array: MultiArray) -> PixelBuffer? {
        let shape = Array(array.shape.drop { $0 == 1 })
        let values = array.doubles
        let classIndex: [Int]
        let width: Int, height: Int
        if shape.count == 3, shape[0] >= 2 {
            let classes = shape[0]
            (height, width) = (shape[1], shape[2])
            let plane = width * height
            classIndex = (0..<plane).map { pixel in
                var best = 0
                for index in 1..<classes where values[index * plane + pixel] > values[best * plane + pixel] { best = index }
                return best
            }
        } else if shape.count == 2 {
            (height, width) = (shape[0], shape[1])
            classIndex = values.map { $0.isFinite ? Int($0.rounded()) : 0 }
        } else {
            return nil
        }
        guard width > 0, height > 0 else { return nil }
        var bytes = [UInt8](repeating: 0, count: width * height * 3)
        for (pixel, index) in classIndex.enumerated() {
            let colour = DrawnBox.color(index)
            bytes[pixel * 3] = colour.red
            bytes[pixel * 3 + 1] = colour.green
            bytes[pixel * 3 + 2] = colour.blue
        }
        return PixelBuffer(width: width, height: height, pixelFormat: .rgb, bytes: bytes)
    }
}
