import CSystemShims
import Foundation
import ModelSpec
import ModelValidation

/// Reads hostile bytes the way modelc reads a downloaded model: check and
/// unpack, summarize (and print as JSON), print an ML program as MIL text,
/// read its graph (as `inspect --graph` does), and validate. Any crash, hang or sanitizer report here is a bug.
func exercise(_ bytes: UnsafeRawBufferPointer) {
    guard let specification = try? Specification.unpack(bytes, path: "fuzz.mlmodel") else { return }
    let model = ModelFile(unpacked: specification, path: "fuzz.mlmodel")
    _ = ModelSummary(model).jsonText()
    _ = model.programText()
    _ = ModelGraph(model).allNodes.count
    _ = ModelValidator.validate(model)
}

/// Runs one input; the signature libFuzzer calls.
func fuzzOneInput(_ data: UnsafePointer<UInt8>?, _ size: Int) -> Int32 {
    exercise(UnsafeRawBufferPointer(start: data, count: data == nil ? 0 : size))
    return 0
}

/// `make fuzz` builds with `-sanitize=fuzzer -DMODELC_FUZZING`: main hands
/// control to libFuzzer. Plain builds replay the files given (saved crashes,
/// a corpus) and exit 0 when none of them crashes.
@main
enum ModelFuzzer {
    static func main() {
        #if MODELC_FUZZING
        var argc = CommandLine.argc
        var argv: UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>? = CommandLine.unsafeArgv
        exit(LLVMFuzzerRunDriver(&argc, &argv) { data, size in fuzzOneInput(data, size) })
        #else
        let paths = CommandLine.arguments.dropFirst()
        guard !paths.isEmpty else {
            FileHandle.standardError.write(Data("usage: ModelFuzzer FILE...  (replays inputs through the fuzz target)\n".utf8))
            exit(64)
        }
        for path in paths {
            guard let data = FileManager.default.contents(atPath: path) else {
                FileHandle.standardError.write(Data("ModelFuzzer: cannot read \(path)\n".utf8))
                exit(66)
            }
            data.withUnsafeBytes(exercise)
        }
        print("replayed \(paths.count) inputs")
        #endif
    }
}
