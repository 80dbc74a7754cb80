import Foundation
import ModelFeatures

/// `rnn`, `gru` and `lstm` over [sequence, batch, input]: the input
/// projections of every step in one OpenBLAS product, the recurrent ones per
/// step. Gate orders and formulas as coremltools defines them: GRU weights
/// [r | o | z] with o = act(W_o x + R_o (r ⊙ h) + b_o); LSTM weights
/// [i | f | o | g] with optional peepholes [i | f | o] and cell clipping. A
/// reverse direction gives its outputs in the order it processed them;
/// bidirectional outputs are aligned in time (forward then reverse halves).
enum RecurrentOperations: OperationFamily {
    static let definitions: [String: OperationDefinition] = [
        "rnn": OperationDefinition(["x", "initial_h", "weight_ih", "weight_hh", "bias", "direction", "output_sequence", "activation"]) { context throws(RuntimeError) in
            try recurrent(context, kind: .rnn)
        }.withFacts(FactsRules.ranks([3, 2], typeFrom: "x")),
        "gru": OperationDefinition(["x", "initial_h", "weight_ih", "weight_hh", "bias", "direction", "output_sequence", "recurrent_activation",
                                    "activation", "reset_after", "input_bias"]) { context throws(RuntimeError) in
            try recurrent(context, kind: .gru)
        }.withFacts(FactsRules.ranks([3, 2], typeFrom: "x")),
        "lstm": OperationDefinition(["x", "initial_h", "initial_c", "weight_ih", "weight_hh", "bias", "peephole", "weight_ih_back",
                                     "weight_hh_back", "bias_back", "peephole_back", "direction", "output_sequence",
                                     "recurrent_activation", "cell_activation", "activation", "clip"]) { context throws(RuntimeError) in
            try recurrent(context, kind: .lstm)
        }.withFacts(FactsRules.ranks([3, 2, 2], typeFrom: "x")),
    ]

    enum Kind: Sendable { case rnn, gru, lstm }

    typealias Activation = @Sendable (Float) -> Float

    static func activation(_ context: OperationContext, _ key: String, _ fallback: String) throws(RuntimeError) -> Activation {
        let name = try context.string(key, fallback)
        switch name.lowercased() {
        case "sigmoid": return { 1 / (1 + exp(-$0)) }
        case "tanh", "scaled_tanh": return { tanh($0) }
        case "relu": return { max($0, 0) }
        case "hard_sigmoid": return { min(max(0.2 * $0 + 0.5, 0), 1) }
        case "linear": return { $0 }
        default: throw context.unsupported("\(key) \(name) is not one MIL defines")
        }
    }

    /// One direction's constant parameters.
    struct Weights: Sendable {
        var input: [Float]      // [gates·H, I]
        var hidden: [Float]     // [gates·H, H]
        var bias: [Float]       // [gates·H]
        var inputBias: [Float]  // [gates·H] (GRU of iOS18: added to the input's projection)
        var peephole: [Float]   // [3H] (LSTM)
    }

    private static func recurrent(_ context: OperationContext, kind: Kind) throws(RuntimeError) {
        let x = try context.input()
        guard x.rank == 3, x.isFloat else { throw context.invalid("x must be a float tensor [sequence, batch, input], got \(x.shape)") }
        let (steps, batch, inputSize) = (x.shape[0], x.shape[1], x.shape[2])
        let gates = kind == .rnn ? 1 : (kind == .gru ? 3 : 4)
        let direction = try context.string("direction", "forward")
        guard ["forward", "reverse", "bidirectional"].contains(direction), kind == .lstm || direction != "bidirectional" else {
            throw context.unsupported("direction \(direction) is not supported for \(context.op.type)")
        }
        func weights(_ suffix: String) throws(RuntimeError) -> Weights {
            guard let input = try context.constant("weight_ih" + suffix), let hidden = try context.constant("weight_hh" + suffix),
                  input.shape.count == 2, input.shape[1] == inputSize, input.shape[0] % gates == 0 else {
                throw context.invalid("weight_ih\(suffix) and weight_hh\(suffix) must be constant [\(gates)·H, \(inputSize)] and [\(gates)·H, H]")
            }
            let hiddenSize = input.shape[0] / gates
            guard hidden.shape == [gates * hiddenSize, hiddenSize] else { throw context.invalid("weight_hh\(suffix) has shape \(hidden.shape)") }
            let bias = try context.constant("bias" + suffix)?.floats ?? [Float](repeating: 0, count: gates * hiddenSize)
            let peephole = try context.constant("peephole" + suffix)?.floats ?? [Float](repeating: 0, count: 3 * hiddenSize)
            guard bias.count == gates * hiddenSize, peephole.count == 3 * hiddenSize else {
                throw context.invalid("bias\(suffix) has \(bias.count) values, peephole\(suffix) \(peephole.count); expected \(gates * hiddenSize) and \(3 * hiddenSize)")
            }
            let inputBias = try context.constant("input_bias" + suffix)?.floats ?? [Float](repeating: 0, count: gates * hiddenSize)
            guard inputBias.count == gates * hiddenSize else {
                throw context.invalid("input_bias\(suffix) has \(inputBias.count) values; expected \(gates * hiddenSize)")
            }
            return Weights(input: input.floats, hidden: hidden.floats, bias: bias, inputBias: inputBias, peephole: peephole)
        }
        var directions = [try weights("")]
        if direction == "bidirectional" { directions.append(try weights("_back")) }
        let hidden = directions[0].bias.count / gates
        let count = directions.count
        let sequence = try context.bool("output_sequence", false)
        let initialH = try context.input("initial_h")
        let initialC = kind == .lstm ? try context.input("initial_c") : nil
        // An initial state of more rows than the batch is read by its first rows: coremltools converts a packed
        // sequence's LSTM with zero states of (longest sequence, H) rows, made at run time, which Core ML runs.
        func fits(_ state: PlanValue) -> Bool {
            state.count == batch * hidden * count || (state.count > batch * hidden * count && state.shape.last == hidden * count)
        }
        guard fits(initialH), initialC.map(fits) ?? true else {
            throw context.invalid("initial states need \(batch) × \(hidden * count) values")
        }
        let recurrentActivation = try activation(context, "recurrent_activation", "sigmoid")
        let cellActivation = try activation(context, "cell_activation", "tanh")
        let outputActivation = try activation(context, "activation", "tanh")
        let clip: Float? = try context.has("clip") ? context.float("clip", 0) : nil
        // GRU of iOS18: reset_after applies r to R_o·h + bias_o (PyTorch's GRU) instead of to h before R_o.
        let resetAfter = try context.bool("reset_after", false)
        let width = hidden * count
        let y = try context.output([sequence ? steps : 1, batch, width])
        let finalH = try context.output([batch, width])
        let finalC = kind == .lstm ? try context.output([batch, width]) : nil
        let from = x.id, h0 = initialH.id, c0 = initialC?.id
        let reverseOnly = direction == "reverse", planned = directions
        _ = LinearAlgebraOperations.singleThreaded
        context.run(reads: [x, initialH] + (initialC.map { [$0] } ?? []), writes: [y, finalH] + (finalC.map { [$0] } ?? [])) { buffers in
            let input = buffers.floats(from), output = buffers.floats(y)
            var projected = [Float](repeating: 0, count: steps * batch * gates * hidden)
            var recurrent = [Float](repeating: 0, count: batch * gates * hidden)
            var h = [Float](repeating: 0, count: batch * hidden), c = h, reset = h
            for (d, weights) in planned.enumerated() {
                let backward = reverseOnly || d == 1
                for b in 0..<batch {
                    for j in 0..<hidden {
                        h[b * hidden + j] = buffers.floats(h0)[b * width + d * hidden + j]
                        c[b * hidden + j] = c0.map { buffers.floats($0)[b * width + d * hidden + j] } ?? 0
                    }
                }
                projected.withUnsafeMutableBufferPointer { p in
                    weights.input.withUnsafeBufferPointer { w in
                        guard let pp = p.baseAddress, let ww = w.baseAddress else { return }
                        LinearAlgebraOperations.gemm(input, transposeA: false, ww, transposeB: true, pp, m: steps * batch, n: gates * hidden, k: inputSize)
                    }
                }
                for k in 0..<steps {
                    let t = backward ? steps - 1 - k : k
                    // The recurrent products: every gate for RNN and LSTM; r and z for GRU (o needs r ⊙ h).
                    h.withUnsafeBufferPointer { hp in
                        recurrent.withUnsafeMutableBufferPointer { rp in
                            weights.hidden.withUnsafeBufferPointer { wp in
                                guard let hh = hp.baseAddress, let rr = rp.baseAddress, let ww = wp.baseAddress else { return }
                                LinearAlgebraOperations.gemm(hh, transposeA: false, ww, transposeB: true, rr, m: batch, n: gates * hidden, k: hidden)
                            }
                        }
                    }
                    for b in 0..<batch {
                        let px = (t * batch + b) * gates * hidden, pr = b * gates * hidden, ph = b * hidden
                        switch kind {
                        case .rnn:
                            for j in 0..<hidden {
                                h[ph + j] = outputActivation(projected[px + j] + recurrent[pr + j] + weights.bias[j])
                            }
                        case .lstm:
                            for j in 0..<hidden {
                                func gate(_ g: Int) -> Float { projected[px + g * hidden + j] + recurrent[pr + g * hidden + j] + weights.bias[g * hidden + j] }
                                let i = recurrentActivation(gate(0) + c[ph + j] * weights.peephole[j])
                                let f = recurrentActivation(gate(1) + c[ph + j] * weights.peephole[hidden + j])
                                let g = cellActivation(gate(3))
                                var cell = f * c[ph + j] + i * g
                                if let clip { cell = min(max(cell, -clip), clip) }
                                c[ph + j] = cell
                                let o = recurrentActivation(gate(2) + cell * weights.peephole[2 * hidden + j])
                                h[ph + j] = o * outputActivation(cell)
                            }
                        case .gru:
                            for j in 0..<hidden {
                                let r = recurrentActivation(projected[px + j] + weights.inputBias[j] + recurrent[pr + j] + weights.bias[j])
                                reset[ph + j] = resetAfter ? r : r * h[ph + j]
                            }
                        }
                    }
                    if kind == .gru && !resetAfter {
                        // R_o (r ⊙ h), written over the o block of `recurrent`.
                        for b in 0..<batch {
                            for j in 0..<hidden {
                                var sum: Float = 0
                                let row = (hidden + j) * hidden
                                for m in 0..<hidden { sum += weights.hidden[row + m] * reset[b * hidden + m] }
                                recurrent[b * gates * hidden + hidden + j] = sum
                            }
                        }
                    }
                    if kind == .gru {
                        for b in 0..<batch {
                            let px = (t * batch + b) * gates * hidden, pr = b * gates * hidden, ph = b * hidden
                            for j in 0..<hidden {
                                let z = recurrentActivation(projected[px + 2 * hidden + j] + weights.inputBias[2 * hidden + j]
                                                            + recurrent[pr + 2 * hidden + j] + weights.bias[2 * hidden + j])
                                let fromHidden = recurrent[pr + hidden + j] + weights.bias[hidden + j]
                                let o = outputActivation(projected[px + hidden + j] + weights.inputBias[hidden + j]
                                                         + (resetAfter ? reset[ph + j] * fromHidden : fromHidden))
                                h[ph + j] = (1 - z) * o + z * h[ph + j]
                            }
                        }
                    }
                    if sequence {
                        // Bidirectional outputs are aligned in time; one reverse direction keeps its processing order.
                        let slot = count == 2 ? t : k
                        for b in 0..<batch { for j in 0..<hidden { output[(slot * batch + b) * width + d * hidden + j] = h[b * hidden + j] } }
                    }
                }
                for b in 0..<batch {
                    for j in 0..<hidden {
                        buffers.floats(finalH)[b * width + d * hidden + j] = h[b * hidden + j]
                        if let finalC { buffers.floats(finalC)[b * width + d * hidden + j] = c[b * hidden + j] }
                        if !sequence { output[b * width + d * hidden + j] = h[b * hidden + j] }
                    }
                }
            }
        }
    }
}
