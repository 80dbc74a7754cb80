import Foundation
import ModelPictures
import ModelSpec

/// `inspect --graph`: reading the graph, writing DOT, and Graphviz's layout
/// in process (libgvc opened with dlopen) against the `dot` program run on
/// the same DOT text, the choice docs/cli.md explains (`inspect --graph`).
enum GraphBenchmark {
    static func run(models: [String]) throws {
        print("graph: median of 5 runs; Graphviz in process (libgvc) against the dot program on the same DOT")
        let dotProgram = ["/usr/bin/dot", "/usr/local/bin/dot"].first { FileManager.default.isExecutableFile(atPath: $0) }
        for path in models {
            let file = try ModelFile.open(path)
            var graph = ModelGraph(file)
            let read = median(runs: 5) { graph = ModelGraph(file) }
            var dot = ""
            let write = median(runs: 5) { dot = GraphDOT.text(graph) }
            // Graphviz whatever the size (no fallback), then the fallback layout alone.
            let first = median(runs: 1) { _ = GraphRenderer.render(graph, format: .svg, title: path, nodeLimit: .max) }
            let inProcess = median(runs: 5) { _ = GraphRenderer.render(graph, format: .svg, title: path, nodeLimit: .max) }
            let layered = median(runs: 5) { _ = GraphRenderer.render(graph, format: .svg, title: path, nodeLimit: 0) }
            let name = URL(fileURLWithPath: path).lastPathComponent
            print("  \(name): \(graph.allNodes.count) nodes, \(graph.edges.count) edges, \(graph.allClusters.count) frames")
            print(String(format: "    read graph %.3f s, write DOT %.3f s, first layout (with dlopen) %.3f s", read, write, first))
            print(String(format: "    layout + SVG in process          %.3f s   (target < 1 s at 1,000 operations)", inProcess))
            print(String(format: "    fallback layered layout          %.3f s", layered))
            guard let dotProgram else {
                print("    dot program                      (not installed)")
                continue
            }
            let input = FileManager.default.temporaryDirectory.appendingPathComponent("modelc-bench-\(getpid()).dot")
            try Data(dot.utf8).write(to: input)
            defer { try? FileManager.default.removeItem(at: input) }
            let program = try median(runs: 5) {
                let process = Process()
                process.executableURL = URL(fileURLWithPath: dotProgram)
                process.arguments = ["-Tsvg", input.path, "-o", "/dev/null"]
                try process.run()
                process.waitUntilExit()
            }
            print(String(format: "    dot -Tsvg program                %.3f s   (dot / in process %.2f×)", program, program / inProcess))
        }
    }
}
