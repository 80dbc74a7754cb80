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

    /// Where the fitting takes an upright image of `width` × `height` from:
    /// the exact, real-valued source window and the target pixels it fills.
    ///
    /// centerCrop scales the region of interest by s = max(target / region)
    /// on both axes and keeps its centre: the window is the centred
    /// (target ÷ s)-sized part of the region. scaleFill stretches the region
    /// over the target. scaleFit fills the whole-pixel rectangle of the
    /// region scaled by s = min(target / region) (its size rounded, at most
    /// the target's, centred, the rest black) with the region: the letterbox
    /// edges fall on whole pixels, so no row or column is partly black.
    func geometry(width: Int, height: Int) -> FittingGeometry {
        let region = regionOfInterest.topLeftPixels(width: width, height: height)
        let full = FittingGeometry(windowX: region.x, windowY: region.y, windowWidth: region.width, windowHeight: region.height,
                                   contentLeft: 0, contentTop: 0, contentWidth: self.width, contentHeight: self.height)
        let scaleX = Double(self.width) / region.width
        let scaleY = Double(self.height) / region.height
        switch cropAndScale {
        case .scaleFill:
            return full
        case .centerCrop:
            let scale = max(scaleX, scaleY)
            let (cropWidth, cropHeight) = (Double(self.width) / scale, Double(self.height) / scale)
            var geometry = full
            geometry.windowX = region.x + (region.width - cropWidth) / 2
            geometry.windowY = region.y + (region.height - cropHeight) / 2
            (geometry.windowWidth, geometry.windowHeight) = (cropWidth, cropHeight)
            return geometry
        case .scaleFit:
            let scale = min(scaleX, scaleY)
            func scaled(_ size: Double, _ target: Int) -> Int { min(target, max(1, Int((size * scale).rounded()))) }
            var geometry = full
            (geometry.contentWidth, geometry.contentHeight) = (scaled(region.width, self.width), scaled(region.height, self.height))
            geometry.contentLeft = (self.width - geometry.contentWidth) / 2
            geometry.contentTop = (self.height - geometry.contentHeight) / 2
            return geometry
        }
    }

    /// The smallest scale from the upright region of interest of a `width`
    /// × `height` image to the target that keeps every target pixel
    /// covered: what shrink-on-load may go down to.
    func requiredScale(width: Int, height: Int) -> Double {
        let scaleX = Double(self.width) / (regionOfInterest.width * Double(width))
        let scaleY = Double(self.height) / (regionOfInterest.height * Double(height))
        return cropAndScale == .scaleFit ? min(scaleX, scaleY) : max(scaleX, scaleY)
    }
}

/// The geometry of a fitting: the target's content rectangle (whole
/// pixels; all of the target but for scaleFit's letterbox) shows the
/// source window (real-valued, in upright pixels from the top left) scaled
/// to it. Target point (u, v) shows source point
/// (windowX + (u − contentLeft) · windowWidth / contentWidth, likewise down).
struct FittingGeometry: Equatable {
    var windowX: Double
    var windowY: Double
    var windowWidth: Double
    var windowHeight: Double
    var contentLeft: Int
    var contentTop: Int
    var contentWidth: Int
    var contentHeight: Int

    /// The source x of target x `u` (in target pixels, edges at integers).
    func sourceX(_ u: Double) -> Double { windowX + (u - Double(contentLeft)) * windowWidth / Double(contentWidth) }
    /// The source y of target y `v`.
    func sourceY(_ v: Double) -> Double { windowY + (v - Double(contentTop)) * windowHeight / Double(contentHeight) }
}

/// An image brought to a fitting, with what it was made from: enough to map
/// a point of the fitted image back to the upright image.
public struct FittedImage: Sendable {
    /// The pixels given to the model.
    public var image: PixelBuffer
    /// The fitting applied; `nil` when the image kept its size.
    public var fitting: ImageFitting?
    /// The size of the upright image the pixels were resampled from (for a
    /// JPEG shrunk while decoding, the shrunk size, which covers the same
    /// image: the fitting's geometry is in `uprightWidth` × `uprightHeight`).
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
    /// (as detectors give their boxes), through the fitting's exact
    /// geometry: the crop or letterbox and the scale undone, then the
    /// region of interest.
    ///
    /// The result is not clipped: a box reaching past the model's view
    /// reaches past the image.
    public func uprightRect(fromTopLeftX left: Double, y top: Double, width: Double, height: Double) -> NormalizedRect {
        guard let fitting else {
            return NormalizedRect(x: left, y: 1 - (top + height), width: width, height: height)
        }
        let geometry = fitting.geometry(width: uprightWidth, height: uprightHeight)
        let (targetWidth, targetHeight) = (Double(fitting.width), Double(fitting.height))
        let x0 = geometry.sourceX(left * targetWidth) / Double(uprightWidth)
        let x1 = geometry.sourceX((left + width) * targetWidth) / Double(uprightWidth)
        let y0 = geometry.sourceY(top * targetHeight) / Double(uprightHeight)
        let y1 = geometry.sourceY((top + height) * targetHeight) / Double(uprightHeight)
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
