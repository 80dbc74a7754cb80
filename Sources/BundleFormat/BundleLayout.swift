/// The files of a compiled modelc bundle (`NAME.mlmodelc/`), as specified in
/// docs/bundle-format.md.
public enum BundleLayout {
    /// The format version this modelc writes and the newest it reads.
    public static let formatVersion = 1

    /// What made the bundle and from what, with every other file's size and SHA-256.
    public static let manifest = "manifest.json"
    /// Apple-style model metadata (an array of one object).
    public static let metadata = "metadata.json"
    /// The Core ML specification with every weight's values moved to the weight file.
    public static let specification = "model.spec"
    public static let weightsDirectory = "weights"
    /// The weight values, in MIL blob storage format version 2.
    public static let weightFile = "weights/weight.bin"
    /// Where each weight of the specification lives in the weight file.
    public static let weightIndex = "weights/index.json"
    /// ML programs only: the program as MIL text.
    public static let programText = "model.mil"
    /// How ML programs in `model.spec` name the weight file.
    public static let programWeightReference = "@model_path/weights/weight.bin"
}
