import FixtureSupport
import Foundation
import ModelCompiler

/// Real bundles, compiled from hand-built networks, for cache tests.
enum TestBundles {
    /// Compiles one network per entry of `weightCounts` (a single inner
    /// product of that many float32 weights, values depending on `seed`) and
    /// returns the bundle paths.
    static func make(_ weightCounts: [Int], label: String, seed: Int = 0) throws -> [String] {
        let directory = try Fixtures.temporaryDirectory(label)
        return try weightCounts.enumerated().map { index, count in
            let values = (0..<count).map { Float(($0 + index * 31 + seed) % 251) / 251 }
            let source = directory.appendingPathComponent("m\(index).mlmodel").path
            try Data(Wire.innerProductNetwork(layers: [(UInt64(count), 1, values)])).write(to: URL(fileURLWithPath: source))
            let bundle = directory.appendingPathComponent("m\(index).mlmodelc").path
            _ = try BundleCompiler().compile(source, to: bundle)
            return bundle
        }
    }
}
