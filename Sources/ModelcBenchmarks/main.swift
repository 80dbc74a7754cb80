import Foundation

// In-process timings for `make bench` (process start-up would swamp them).
// Usage: ModelcBenchmarks open SMALL.mlmodelc LARGE.mlmodelc LARGE.mlmodel
//        ModelcBenchmarks network MODEL.mlmodelc IMAGE.rgb THREADS RUNS [--probabilities FILE]
//        ModelcBenchmarks classic MODEL ROWS.npy [RUNS]
//        ModelcBenchmarks classify MODEL.mlmodelc IMAGES_DIR THREADS
//        ModelcBenchmarks detect MODEL.mlmodelc IMAGES_DIR THREADS
//        ModelcBenchmarks training BASE.mlmodel DATA_DIR WORK_DIR L2 MAX_ITERATIONS
//        ModelcBenchmarks graph MODEL...
//        ModelcBenchmarks programs RUNS [--threads N] CASES.json...
//        ModelcBenchmarks transformer MODEL INPUTS.json THREADS RUNS [--output FILE]

let usage = """
    usage: ModelcBenchmarks open SMALL.mlmodelc LARGE.mlmodelc LARGE.mlmodel
           ModelcBenchmarks network MODEL.mlmodelc IMAGE.rgb THREADS RUNS [--probabilities FILE]
           ModelcBenchmarks classic MODEL ROWS.npy [RUNS]
           ModelcBenchmarks classify MODEL.mlmodelc IMAGES_DIR THREADS
           ModelcBenchmarks detect MODEL.mlmodelc IMAGES_DIR THREADS
           ModelcBenchmarks training BASE.mlmodel DATA_DIR WORK_DIR L2 MAX_ITERATIONS
           ModelcBenchmarks graph MODEL...
           ModelcBenchmarks programs RUNS [--threads N] CASES.json...
           ModelcBenchmarks transformer MODEL INPUTS.json THREADS RUNS [--output FILE]

    """

let arguments = Array(CommandLine.arguments.dropFirst())
if arguments.first == "classic" {
    exit(classic(arguments.dropFirst()))
}
do {
    switch arguments.first {
    case "open" where arguments.count == 4:
        try OpenBenchmark.run(small: arguments[1], large: arguments[2], source: arguments[3])
    case "network" where arguments.count == 5 || (arguments.count == 7 && arguments[5] == "--probabilities"):
        guard let threads = Int(arguments[3]), threads > 0, let runs = Int(arguments[4]), runs > 0 else {
            FileHandle.standardError.write(Data(usage.utf8))
            exit(64)
        }
        try NetworkBenchmark.run(bundle: arguments[1], image: arguments[2], threads: threads, runs: runs,
                                 probabilities: arguments.count == 7 ? arguments[6] : nil)
    case "classify" where arguments.count == 4:
        guard let threads = Int(arguments[3]), threads > 0 else {
            FileHandle.standardError.write(Data(usage.utf8))
            exit(64)
        }
        try ClassifyBenchmark.run(bundle: arguments[1], images: arguments[2], threads: threads)
    case "detect" where arguments.count == 4:
        guard let threads = Int(arguments[3]), threads > 0 else {
            FileHandle.standardError.write(Data(usage.utf8))
            exit(64)
        }
        try DetectBenchmark.run(bundle: arguments[1], images: arguments[2], threads: threads)
    case "training" where arguments.count == 6:
        guard let l2 = Double(arguments[4]), let iterations = Int(arguments[5]), iterations > 0 else {
            FileHandle.standardError.write(Data(usage.utf8))
            exit(64)
        }
        try TrainingBenchmark.run(base: arguments[1], data: arguments[2], work: arguments[3], l2: l2, maxIterations: iterations)
    case "graph" where arguments.count >= 2:
        try GraphBenchmark.run(models: Array(arguments.dropFirst()))
    case "programs" where arguments.count >= 3:
        guard let runs = Int(arguments[1]), runs > 0 else {
            FileHandle.standardError.write(Data(usage.utf8))
            exit(64)
        }
        var cases = Array(arguments[2...]), threads = 1
        if cases.first == "--threads" {
            guard cases.count >= 3, let count = Int(cases[1]), count > 0 else {
                FileHandle.standardError.write(Data(usage.utf8))
                exit(64)
            }
            threads = count
            cases.removeFirst(2)
        }
        try ProgramBenchmark.run(runs: runs, threads: threads, cases: cases)
    case "transformer" where arguments.count == 5 || (arguments.count == 7 && arguments[5] == "--output"):
        guard let threads = Int(arguments[3]), threads > 0, let runs = Int(arguments[4]), runs > 0 else {
            FileHandle.standardError.write(Data(usage.utf8))
            exit(64)
        }
        try TransformerBenchmark.run(model: arguments[1], inputs: arguments[2], threads: threads, runs: runs,
                                     outputFile: arguments.count == 7 ? arguments[6] : nil)
    default:
        FileHandle.standardError.write(Data(usage.utf8))
        exit(64)
    }
} catch {
    FileHandle.standardError.write(Data("ModelcBenchmarks: \(error)\n".utf8))
    exit(1)
}
