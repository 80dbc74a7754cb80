import ArgumentParsing
import Foundation
import ImageDecoding

/// Options shared by the commands that run models on images.
enum ImageOptions {
    /// `--crop-and-scale MODE`: center-crop (default), scale-fit or scale-fill.
    static func cropAndScale(_ arguments: ParsedArguments) throws(UsageError) -> CropAndScale {
        guard let text = arguments.value("crop-and-scale") else { return .centerCrop }
        let modes: [String: CropAndScale] = ["center-crop": .centerCrop, "scale-fit": .scaleFit, "scale-fill": .scaleFill]
        guard let mode = modes[text] else {
            throw .invalidValue(option: "crop-and-scale", value: text, reason: "expected center-crop, scale-fit or scale-fill")
        }
        return mode
    }

    /// `--roi X,Y,W,H`: normalized, origin at the lower left.
    static func regionOfInterest(_ arguments: ParsedArguments) throws(UsageError) -> NormalizedRect {
        guard let text = arguments.value("roi") else { return .full }
        let parts = text.split(separator: ",", omittingEmptySubsequences: false).map { Double($0.trimmingCharacters(in: .whitespaces)) }
        guard parts.count == 4, let x = parts[0], let y = parts[1], let width = parts[2], let height = parts[3] else {
            throw .invalidValue(option: "roi", value: text, reason: "expected four numbers X,Y,W,H")
        }
        let rect = NormalizedRect(x: x, y: y, width: width, height: height)
        guard rect.isValid else {
            throw .invalidValue(option: "roi", value: text, reason: "expected a non-empty rectangle within 0,0,1,1")
        }
        return rect
    }

    /// A number from 0 to 1 given as `--name`, if given.
    static func unitInterval(_ arguments: ParsedArguments, _ name: String) throws(UsageError) -> Double? {
        guard let text = arguments.value(name) else { return nil }
        guard let value = Double(text), value >= 0, value <= 1 else {
            throw .invalidValue(option: name, value: text, reason: "expected a number from 0 to 1")
        }
        return value
    }

    /// A rectangle as JSON: `{"x": …, "y": …, "width": …, "height": …}`.
    static func json(_ rect: (x: Double, y: Double, width: Double, height: Double)) -> String {
        "{\"x\": \(number(rect.x)), \"y\": \(number(rect.y)), \"width\": \(number(rect.width)), \"height\": \(number(rect.height))}"
    }

    static func json(_ rect: NormalizedRect) -> String {
        json((rect.x, rect.y, rect.width, rect.height))
    }

    /// A number as JSON: its shortest decimal form, `null` when not finite.
    static func number(_ value: Double) -> String {
        value.isFinite ? "\(value)" : "null"
    }

    /// A confidence as JSON: its shortest decimal form as a Float, `null` when not finite.
    static func number(_ value: Float) -> String {
        value.isFinite ? "\(value)" : "null"
    }

    /// A rectangle for people: "x 12.0 y 30.5 w 40.0 h 20.0".
    static func text(_ rect: (x: Double, y: Double, width: Double, height: Double), digits: Int) -> String {
        let format = "%.\(digits)f"
        return "x \(String(format: format, rect.x)) y \(String(format: format, rect.y)) "
            + "w \(String(format: format, rect.width)) h \(String(format: format, rect.height))"
    }

    /// Where `--draw DIR` (or `--output-dir DIR`) writes the file made from
    /// `image`: its name in DIR, with the extension of `format`.
    static func outputPath(directory: String, image: String, format: ImageDrawing.EncodedFormat, suffix: String = "") -> String {
        let name = (image as NSString).lastPathComponent
        let base = (name as NSString).deletingPathExtension
        let keeps = format == .jpeg ? [".jpg", ".jpeg"] : [".png"]
        let ext = (name as NSString).pathExtension.lowercased()
        let fileExtension = suffix.isEmpty && keeps.contains("." + ext) ? "." + (name as NSString).pathExtension : format.fileExtension
        return (directory as NSString).appendingPathComponent(base + suffix + fileExtension)
    }

    /// Creates DIR if needed.
    static func prepareDirectory(_ directory: String) -> String? {
        do {
            try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
            return nil
        } catch {
            return "\(directory): cannot create the directory: \(error.localizedDescription)"
        }
    }
}
