import Foundation
import ImageDecoding
import ImageRequests
import ModelFeatures

/// Image outputs written to files, and segmentation outputs drawn as masks.
enum ImageOutputs {
    /// Writes each image output of `outputs` into `directory` as PNG,
    /// named `PREFIX-OUTPUT.png` (`OUTPUT.png` without a prefix); the paths written.
    static func write(_ outputs: [(name: String, image: PixelBuffer)], prefix: String,
                      into directory: String) throws(ImageError) -> [String] {
        var written: [String] = []
        for (name, image) in outputs {
            let file = (directory as NSString).appendingPathComponent((prefix.isEmpty ? "" : prefix + "-") + name + ".png")
            let bytes = try ImageDrawing.png(image, name: file)
            guard FileManager.default.createFile(atPath: file, contents: Data(bytes)) else {
                throw .unreadable(file: file, reason: "cannot write the output image")
            }
            written.append(file)
        }
        return written
    }

    /// Writes the image outputs of one image's result (`--output-dir`), named after the image.
    static func write(_ result: ImageRequestResult, image path: String, into directory: String) throws(ImageRequestError) {
        let base = ((path as NSString).lastPathComponent as NSString).deletingPathExtension
        do { _ = try write(result.images, prefix: base, into: directory) } catch { throw .image(error) }
    }

    /// The first multi-array output that reads as a segmentation (classes ×
    /// height × width scores, or a height × width map of classes) as a colour mask.
    static func mask(_ result: ImageRequestResult) -> PixelBuffer? {
        for observation in result.featureValues {
            if case .multiArray(let array) = observation.featureValue, let mask = SegmentationMask.colours(of: array) {
                return mask
            }
        }
        return nil
    }

    /// `--draw` for a model that is not a detector: its segmentation mask over
    /// the part of the image the model saw; nothing for other outputs.
    static func drawMask(_ result: ImageRequestResult, image path: String, into directory: String) throws(ImageRequestError) {
        guard let mask = mask(result) else { return }
        let format = ImageDrawing.EncodedFormat(path: path)
        do throws(ImageError) {
            let upright = try ImageDecoder(pixelFormat: .rgb).decode(file: path)
            let bytes = try ImageDrawing.draw([], on: upright, overlay: mask, overlayRegion: result.inputRegion,
                                              format: format, name: path)
            let output = ImageOptions.outputPath(directory: directory, image: path, format: format)
            guard FileManager.default.createFile(atPath: output, contents: Data(bytes)) else {
                throw ImageError.unreadable(file: output, reason: "cannot write the drawn image")
            }
        } catch {
            throw .image(error)
        }
    }
}
