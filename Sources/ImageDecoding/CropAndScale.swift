import ModelFeatures

/// How an image is fitted to a model's input size, as Vision's
/// `VNImageCropAndScaleOption` does it.
public enum CropAndScale: String, Sendable, CaseIterable {
    /// Scale so the shorter side fits, then keep the centre (Vision's default).
    case centerCrop
    /// Scale so the whole image fits, keeping the aspect ratio; the rest is
    /// black and the image sits in the middle.
    case scaleFit
    /// Stretch to the size, ignoring the aspect ratio.
    case scaleFill
}

/// A rectangle in normalized image coordinates, as Vision's: (0, 0) is the
/// lower-left corner of the upright image and (1, 1) the upper right.
public struct NormalizedRect: Sendable, Equatable {
    public var x: Double
    public var y: Double
    public var width: Double
    public var height: Double

    public init(x: Double, y: Double, width: Double, height: Double) {
        self.x = x
        self.y = y
        self.width = width
        self.height = height
    }

    /// The whole image (0, 0, 1, 1).
    public static let full = NormalizedRect(x: 0, y: 0, width: 1, height: 1)

    /// Whether the rectangle is non-empty and inside the unit square (up to
    /// a rounding error of 1e-9).
    public var isValid: Bool {
        let tolerance = 1e-9
        return [x, y, width, height].allSatisfy(\.isFinite) && x >= -tolerance && y >= -tolerance
            && width > 0 && height > 0 && x + width <= 1 + tolerance && y + height <= 1 + tolerance
    }

    /// The size in pixels of what this rectangle covers in an upright image
    /// of the given size (edges rounded to the nearest pixel, at least 1×1).
    public func pixelSize(width imageWidth: Int, height imageHeight: Int) -> (width: Int, height: Int) {
        let area = pixelArea(width: imageWidth, height: imageHeight)
        return (area.width, area.height)
    }

    /// The pixels this rectangle covers in an upright image of the given size:
    /// the edges rounded to the nearest pixel, at least one pixel each way,
    /// with the top row first.
    func pixelArea(width imageWidth: Int, height imageHeight: Int) -> PixelArea {
        func edge(_ value: Double, _ size: Int) -> Int { min(size, max(0, Int((value * Double(size)).rounded()))) }
        var left = edge(x, imageWidth)
        var right = edge(x + width, imageWidth)
        var top = edge(1 - (y + height), imageHeight)
        var bottom = edge(1 - y, imageHeight)
        if right <= left { (left, right) = right < imageWidth ? (right, right + 1) : (imageWidth - 1, imageWidth) }
        if bottom <= top { (top, bottom) = bottom < imageHeight ? (bottom, bottom + 1) : (imageHeight - 1, imageHeight) }
        return PixelArea(left: left, top: top, width: right - left, height: bottom - top)
    }
}

/// A rectangle of whole pixels, top row first.
struct PixelArea: Equatable {
    var left: Int
    var top: Int
    var width: Int
    var height: Int
}

/// The size an image is brought to and how: Vision's crop-and-scale option
/// and region of interest.
public struct ImageFitting: Sendable, Equatable {
    /// The size of the result, in pixels.
    public var width: Int
    public var height: Int
    public var cropAndScale: CropAndScale
    /// The part of the upright image to use, applied before cropping and scaling.
    public var regionOfInterest: NormalizedRect

    public init(width: Int, height: Int, cropAndScale: CropAndScale = .centerCrop, regionOfInterest: NormalizedRect = .full) {
        self.width = width
        self.height = height
        self.cropAndScale = cropAndScale
        self.regionOfInterest = regionOfInterest
    }

    /// Checks the size and the region of interest.
    func validate() throws(ImageError) {
        guard width > 0, height > 0 else { throw .invalidSize(width: width, height: height) }
        guard regionOfInterest.isValid else { throw .invalidRegionOfInterest(regionOfInterest) }
    }

    /// How a `sourceWidth` × `sourceHeight` image (the region of interest,
    /// already cut out) is brought to the target: the size it is resized to,
    /// then where the target sits in it (centerCrop) or it sits in the target
    /// (scaleFit).
    func plan(sourceWidth: Int, sourceHeight: Int) -> ResizePlan {
        let scaleX = Double(width) / Double(sourceWidth)
        let scaleY = Double(height) / Double(sourceHeight)
        func scaled(_ size: Int, _ scale: Double) -> Int { max(1, Int((Double(size) * scale).rounded())) }
        switch cropAndScale {
        case .scaleFill:
            return ResizePlan(resizedWidth: width, resizedHeight: height, offsetX: 0, offsetY: 0)
        case .centerCrop:
            let scale = max(scaleX, scaleY)
            let resizedWidth = max(width, scaled(sourceWidth, scale))
            let resizedHeight = max(height, scaled(sourceHeight, scale))
            return ResizePlan(resizedWidth: resizedWidth, resizedHeight: resizedHeight,
                              offsetX: (resizedWidth - width) / 2, offsetY: (resizedHeight - height) / 2)
        case .scaleFit:
            let scale = min(scaleX, scaleY)
            let resizedWidth = min(width, scaled(sourceWidth, scale))
            let resizedHeight = min(height, scaled(sourceHeight, scale))
            return ResizePlan(resizedWidth: resizedWidth, resizedHeight: resizedHeight,
                              offsetX: (width - resizedWidth) / 2, offsetY: (height - resizedHeight) / 2)
        }
    }

    /// The smallest scale from the upright region of interest to the
    /// target that keeps every target pixel covered: what shrink-on-load may
    /// go down to.
    func requiredScale(sourceWidth: Int, sourceHeight: Int) -> Double {
        let scaleX = Double(width) / Double(sourceWidth)
        let scaleY = Double(height) / Double(sourceHeight)
        return cropAndScale == .scaleFit ? min(scaleX, scaleY) : max(scaleX, scaleY)
    }
}

/// The resize step of a fitting: resize to `resizedWidth` × `resizedHeight`,
/// then crop at (offsetX, offsetY) when larger than the target, or place at
/// (offsetX, offsetY) on black when smaller.
struct ResizePlan: Equatable {
    var resizedWidth: Int
    var resizedHeight: Int
    var offsetX: Int
    var offsetY: Int
}

/// An image brought to a fitting, with what it was made from: enough to map
/// a point of the fitted image back to the upright image.
public struct FittedImage: Sendable {
    /// The pixels given to the model.
    public var image: PixelBuffer
    /// The fitting applied; `nil` when the image kept its size.
    public var fitting: ImageFitting?
    /// The size of the upright image the fitting was applied to (for a JPEG
    /// shrunk while decoding, the shrunk size).
    public var sourceWidth: Int
    public var sourceHeight: Int
    /// The size of the upright image as stored, before any shrinking.
    public var uprightWidth: Int
    public var uprightHeight: Int

    public init(image: PixelBuffer, fitting: ImageFitting?, sourceWidth: Int, sourceHeight: Int,
                uprightWidth: Int, uprightHeight: Int) {
        self.image = image
        self.fitting = fitting
        self.sourceWidth = sourceWidth
        self.sourceHeight = sourceHeight
        self.uprightWidth = uprightWidth
        self.uprightHeight = uprightHeight
    }

    /// The rectangle in normalized upright-image coordinates (origin at the
    /// lower left, as Vision's bounding boxes) of a rectangle given in the
    /// fitted image's normalized coordinates with its origin at the top left
    /// (as detectors give their boxes): the crop or letterbox and the scale
    /// are undone, then the region of interest.
    ///
    /// The result is not clipped: a box reaching past the model's view
    /// reaches past the image.
    public func uprightRect(fromTopLeftX left: Double, y top: Double, width: Double, height: Double) -> NormalizedRect {
        guard let fitting else {
            return NormalizedRect(x: left, y: 1 - (top + height), width: width, height: height)
        }
        let area = fitting.regionOfInterest.pixelArea(width: sourceWidth, height: sourceHeight)
        let plan = fitting.plan(sourceWidth: area.width, sourceHeight: area.height)
        let sign: Double = switch fitting.cropAndScale {
        case .centerCrop: 1
        case .scaleFit: -1
        case .scaleFill: 0
        }
        // Fitted pixels → resized pixels → region pixels → source pixels.
        func sourceX(_ normalized: Double) -> Double {
            let resized = normalized * Double(fitting.width) + sign * Double(plan.offsetX)
            return Double(area.left) + resized * Double(area.width) / Double(plan.resizedWidth)
        }
        func sourceY(_ normalized: Double) -> Double {
            let resized = normalized * Double(fitting.height) + sign * Double(plan.offsetY)
            return Double(area.top) + resized * Double(area.height) / Double(plan.resizedHeight)
        }
        let x0 = sourceX(left) / Double(sourceWidth), x1 = sourceX(left + width) / Double(sourceWidth)
        let y0 = sourceY(top) / Double(sourceHeight), y1 = sourceY(top + height) / Double(sourceHeight)
        return NormalizedRect(x: x0, y: 1 - y1, width: x1 - x0, height: y1 - y0)
    }
}

extension NormalizedRect {
    /// This rectangle in the pixels of an upright image of `width` × `height`,
    /// origin at the top left: (left, top, width, height), not rounded.
    public func topLeftPixels(width imageWidth: Int, height imageHeight: Int) -> (x: Double, y: Double, width: Double, height: Double) {
        let w = Double(imageWidth), h = Double(imageHeight)
        return (x * w, (1 - y - height) * h, width * w, height * h)
    }
}
