import FixtureSupport
import Foundation
import Testing
@testable import ModelSpec

/// The graph read from each fixture agrees with what coremltools recorded
/// about it (Fixtures/index.json): every input, output, layer and operation
/// is a node, and every value a layer reads from another is an edge.
@Suite struct ModelGraphTests {
    @Test(arguments: Fixtures.models)
    func everyFeatureLayerAndOperationIsDrawn(entry: Fixtures.Entry) throws {
        let graph = ModelGraph(try ModelFile.open(Fixtures.path(entry.file)))
        let nodes = graph.allNodes
        let ids = nodes.map(\.id)
        #expect(Set(ids).count == ids.count, "node ids repeat")
        let clusterIDs = graph.allClusters.map(\.id)
        #expect(Set(clusterIDs).count == clusterIDs.count && clusterIDs.allSatisfy { $0.hasPrefix("cluster_") })
        for edge in graph.edges {
            #expect(ids.contains(edge.from) && ids.contains(edge.to), "edge \(edge) names a missing node")
        }
        let inputs = nodes.filter { $0.kind == .input }.map(\.title)
        let outputs = nodes.filter { $0.kind == .output }.map(\.title)
        for case let input as [String: Any] in entry.facts["inputs"] as? [Any] ?? [] {
            #expect(inputs.contains(input["name"] as? String ?? "?"))
        }
        for case let output as [String: Any] in entry.facts["outputs"] as? [Any] ?? [] {
            let name = try #require(output["name"] as? String)
            #expect(outputs.contains(name))
            // Every model output is produced by something.
            let node = try #require(nodes.first { $0.kind == .output && $0.title == name })
            #expect(graph.edges.contains { $0.to == node.id }, "\(entry.file): output \(name) has no producer")
        }
        let operations = nodes.filter { $0.kind == .operation }
        if let layers = entry.facts["layers"] as? [[String: Any]] {
            for layer in layers {
                let name = layer["name"] as? String ?? "", kind = layer["kind"] as? String ?? ""
                let node = try #require(operations.first { $0.name == name && $0.title == kind }, "layer \(name) missing")
                // Each of its inputs that some layer or feature makes arrives as an edge.
                for input in layer["inputs"] as? [String] ?? [] {
                    let produced = inputs.contains(input) || layers.contains { ($0["outputs"] as? [String] ?? []).contains(input) }
                    if produced { #expect(graph.edges.contains { $0.to == node.id && $0.value == input }, "\(name) reads \(input)") }
                }
            }
        }
        if let histogram = entry.facts["operations"] as? [String: Int] {
            let drawn = histogram.filter { $0.key != "const" && !$0.key.hasPrefix("constexpr_") }
            var counted: [String: Int] = [:]
            for node in operations { counted[node.title, default: 0] += 1 }
            #expect(counted == drawn, "\(entry.file)")
        }
    }

    @Test func networkLayersShowParametersAndWeightShapes() throws {
        let graph = ModelGraph(try ModelFile.open(Fixtures.path("Models/ImageClassifier.mlmodel")))
        let conv = try #require(graph.allNodes.first { $0.name == "conv1" })
        #expect(conv.title == "convolution")
        #expect(conv.details.contains("outputChannels = 8"))
        #expect(conv.details.contains("kernelSize = [3, 3]"))
        #expect(conv.weights.contains("weights: float32 [8, 3, 3, 3]"))
        #expect(graph.allNodes.contains { $0.title == "classifier" && $0.details == ["3 string labels"] })
    }

    @Test func pipelineStagesAreClusters() throws {
        let graph = ModelGraph(try ModelFile.open(Fixtures.path("Models/PipelineClassifier.mlmodel")))
        #expect(graph.root.clusters.map(\.label) == ["stage 0: featureVectorizer", "stage 1: scaler", "stage 2: glmClassifier"])
        let stages = graph.root.clusters.map { $0.nodes.map(\.id) }
        // Each stage feeds the next.
        for (from, to) in zip(stages, stages.dropFirst()) {
            #expect(graph.edges.contains { from.contains($0.from) && to.contains($0.to) })
        }
    }

    @Test func controlFlowBlocksAreNestedClusters() throws {
        let graph = ModelGraph(try ModelFile.open(Fixtures.path("Graph/ControlFlowProgram.mlpackage")))
        #expect(graph.root.label == "mlProgram · func main<ios17>")
        let labels = graph.allClusters.map(\.label)
        #expect(labels.contains("cond choose · block 0") && labels.contains("cond choose · block 1"))
        #expect(labels.filter { $0.hasPrefix("while_loop ") }.count == 2)
        let dense = try #require(graph.allNodes.first { $0.name == "dense_then" })
        #expect(dense.weights == ["weight: tensor<fp32, [4, 4]>"])
        #expect(dense.details.contains("→ tensor<fp32, [1, 4]>"))
        // The then-block reads x from outside it; its result goes back to cond.
        let x = try #require(graph.allNodes.first { $0.kind == .input && $0.title == "x" })
        let cond = try #require(graph.allNodes.first { $0.title == "cond" })
        #expect(graph.edges.contains { $0.from == x.id && $0.to == dense.id })
        let relu = try #require(graph.allNodes.first { $0.name == "relu_then" })
        #expect(graph.edges.contains { $0.from == relu.id && $0.to == cond.id })
    }

    @Test func functionsOfAMultifunctionProgramAreClusters() throws {
        let graph = ModelGraph(try ModelFile.open(Fixtures.path("Models/MultiFunctionProgram.mlpackage")))
        #expect(graph.root.clusters.count == 2)
        #expect(graph.root.clusters.allSatisfy { $0.label.hasPrefix("func ") })
    }

    @Test func longProgramHasAThousandOperations() throws {
        let graph = ModelGraph(try ModelFile.open(Fixtures.path("Graph/LongProgram.mlpackage")))
        #expect(graph.allNodes.filter { $0.kind == .operation }.count == 1000)
    }
}
