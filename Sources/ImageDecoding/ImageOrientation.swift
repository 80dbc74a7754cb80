/// How a stored image is turned to be shown upright: the EXIF orientation
/// tag, with the raw values (1–8) and names of Apple's
/// `CGImagePropertyOrientation`.
public enum ImageOrientation: UInt32, Sendable, CaseIterable {
    /// 1: as stored.
    case up = 1
    /// 2: mirrored left to right.
    case upMirrored = 2
    /// 3: turned 180°.
    case down = 3
    /// 4: mirrored top to bottom.
    case downMirrored = 4
    /// 5: mirrored along the top-left to bottom-right diagonal (transposed).
    case leftMirrored = 5
    /// 6: turned 90° clockwise to be shown.
    case right = 6
    /// 7: mirrored along the top-right to bottom-left diagonal (transversed).
    case rightMirrored = 7
    /// 8: turned 90° counterclockwise to be shown.
    case left = 8

    /// Whether showing the image swaps its width and height.
    public var swapsWidthAndHeight: Bool { rawValue >= 5 }
}
