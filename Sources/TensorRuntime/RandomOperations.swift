import Foundation
import ModelFeatures

/// Random sampling with a seed: `random_uniform`, `random_normal`,
/// `random_bernoulli`, `random_categorical`. A seeded operation draws the
/// same numbers at every prediction (a SplitMix64 stream from the seed; not
/// Core ML's numbers, which are not documented). Without a seed (the default
/// −1) the operation is refused, its results could not be reproduced —
/// unless its distribution has one value (`prob` 0 or 1, `stddev` 0,
/// `low` equal to `high`), which every seed gives.
enum RandomOperations: OperationFamily {
    static let definitions: [String: OperationDefinition] = [
        "random_uniform": OperationDefinition(["shape", "low", "high", "seed"], hasEffects: true) { context throws(RuntimeError) in
            let low = try context.float("low", 0), high = try context.float("high", 1)
            try sample(context, certain: low == high) { generator in low + (high - low) * generator.unit() }
        }.withFacts(ShapeOperations.fillFacts),
        "random_normal": OperationDefinition(["shape", "mean", "stddev", "seed"], hasEffects: true) { context throws(RuntimeError) in
            let mean = try context.float("mean", 0), deviation = try context.float("stddev", 1)
            try sample(context, certain: deviation == 0) { generator in
                let u = max(generator.unit(), .leastNonzeroMagnitude), v = generator.unit()
                return mean + deviation * (-2 * log(u)).squareRoot() * cos(2 * .pi * v)
            }
        }.withFacts(ShapeOperations.fillFacts),
        "random_bernoulli": OperationDefinition(["shape", "prob", "seed"], hasEffects: true) { context throws(RuntimeError) in
            let probability = try context.float("prob", 0.5)
            try sample(context, certain: probability == 0 || probability == 1) { generator in generator.unit() < probability ? 1 : 0 }
        }.withFacts(ShapeOperations.fillFacts),
        "random_categorical": OperationDefinition(["x", "mode", "size", "seed"], hasEffects: true) { context throws(RuntimeError) in
            try categorical(context)
        }.withFacts(categoricalFacts),
    ]

    /// A SplitMix64 stream.
    struct Generator {
        var state: UInt64
        mutating func next() -> UInt64 {
            state &+= 0x9E37_79B9_7F4A_7C15
            var z = state
            z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
            z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
            return z ^ (z >> 31)
        }
        /// A float in [0, 1).
        mutating func unit() -> Float { Float(next() >> 40) / Float(1 << 24) }
    }

    private static func seed(_ context: OperationContext) throws(RuntimeError) -> UInt64 {
        let seed = try context.int("seed", -1)
        guard seed >= 0 else {
            throw context.unsupported("random sampling without a seed cannot be reproduced; modelc runs it only with a seed")
        }
        return UInt64(seed)
    }

    /// `certain`: the distribution has a single value, so no seed is needed.
    private static func sample(_ context: OperationContext, certain: Bool,
                               _ draw: @escaping @Sendable (inout Generator) -> Float) throws(RuntimeError) {
        let unseeded = try context.int("seed", -1) < 0
        let start = certain && unseeded ? 0 : try seed(context)
        guard let shape = try context.ints("shape"), shape.allSatisfy({ $0 >= 0 }) else { throw context.invalid("shape must be known and non-negative") }
        let out = try context.output(shape)
        let count = shape.reduce(1, *), isFloat = context.outputType().isFloat
        context.run(reads: [], writes: [out]) { buffers in
            var generator = Generator(state: start)
            for index in 0..<count {
                let value = draw(&generator)
                if isFloat { buffers.floats(out)[index] = value } else { buffers.ints(out)[index] = truncatedInt32(value) }
            }
        }
    }

    private static func categorical(_ context: OperationContext) throws(RuntimeError) {
        let start = try seed(context)
        let x = try context.input()
        guard x.rank >= 1, x.isFloat else { throw context.invalid("x must be a float tensor of rank 1 or more") }
        let size = try context.int("size", 1), logits = try context.string("mode", "logits") == "logits"
        let classes = x.shape[x.rank - 1], rows = x.count / max(classes, 1)
        let out = try context.output(Array(x.shape.dropLast()) + [size])
        let from = x.id, isFloat = context.outputType().isFloat
        context.run(reads: [x], writes: [out]) { buffers in
            var generator = Generator(state: start)
            var weights = [Double](repeating: 0, count: classes)
            for row in 0..<rows {
                let values = buffers.floats(from) + row * classes
                var largest = -Double.infinity
                for c in 0..<classes { largest = max(largest, Double(values[c])) }
                var total = 0.0
                for c in 0..<classes {
                    weights[c] = logits ? Foundation.exp(Double(values[c]) - largest) : max(Double(values[c]), 0)
                    total += weights[c]
                }
                for s in 0..<size {
                    var target = Double(generator.unit()) * total, chosen = classes - 1
                    for c in 0..<classes {
                        target -= weights[c]
                        if target < 0 { chosen = c; break }
                    }
                    let index = row * size + s
                    if isFloat { buffers.floats(out)[index] = Float(chosen) } else { buffers.ints(out)[index] = Int32(chosen) }
                }
            }
        }
    }
}

// MARK: Facts

extension RandomOperations {
    /// `random_categorical`: `x`'s dimensions with the last one the samples' count.
    static let categoricalFacts: OperationDefinition.FactsRule = { context throws(RuntimeError) in
        let x = try context.input()
        guard let dims = x.shape, !dims.isEmpty else { return [.unknownRank(x.element)] }
        return [ValueType(x.element, shape: dims.dropLast() + [context.int("size", 1)])]
    }
}
