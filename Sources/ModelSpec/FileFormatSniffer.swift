/// Names common file formats by their first bytes, so a user who points
/// modelc at the wrong file hears what the file is.
enum FileFormatSniffer {
    private static let signatures: [(magic: [UInt8], name: String)] = [
        ([0x89, 0x50, 0x4E, 0x47, 0x0D, 0x0A, 0x1A, 0x0A], "a PNG image"),
        ([0xFF, 0xD8, 0xFF], "a JPEG image"),
        (Array("GIF8".utf8), "a GIF image"),
        ([0x50, 0x4B, 0x03, 0x04], "a ZIP archive (a zipped .mlpackage must be unpacked first)"),
        ([0x1F, 0x8B], "gzip-compressed data"),
        ([0xFD, 0x37, 0x7A, 0x58, 0x5A, 0x00], "xz-compressed data"),
        (Array("%PDF".utf8), "a PDF document"),
        (Array("<!DOCTYPE".utf8), "an HTML page (a download that returned a web page?)"),
        (Array("<html".utf8), "an HTML page (a download that returned a web page?)"),
        (Array("<?xml".utf8), "an XML document"),
        (Array("version https://git-lfs".utf8), "a Git LFS pointer, not the model it points to"),
        ([0x7F, 0x45, 0x4C, 0x46], "an ELF executable"),
    ]

    /// A description of the format `bytes` start with, or `nil` if none is known.
    static func identify(_ bytes: UnsafeRawBufferPointer) -> String? {
        for (magic, name) in signatures where bytes.count >= magic.count {
            if zip(magic, bytes).allSatisfy({ $0 == $1 }) { return name }
        }
        if bytes.count >= 262, Array(bytes[257..<262]) == Array("ustar".utf8) {
            return "a tar archive"
        }
        if let first = bytes.first(where: { ![0x20, 0x09, 0x0A, 0x0D].contains($0) }), first == UInt8(ascii: "{") {
            return "JSON text"
        }
        return nil
    }
}
