import Foundation
import ModelFeatures

/// The memory of one running prediction: the plan's arena slots, the
/// channel-last scratch of convolutions, and XNNPACK operators (which hold
/// per-run setup and so cannot be shared between concurrent runs). Taken from
/// a pool and returned, so a steady stream of predictions allocates nothing.
final class NetworkState {
    let plan: NetworkPlan
    let slots: [UnsafeMutableBufferPointer<Float>]
    let scratchInput: UnsafeMutableBufferPointer<Float>
    let scratchOutput: UnsafeMutableBufferPointer<Float>
    private var operators: [Int: XNNOperator] = [:]
    private var bindings: [Int: DNNLKernel.Binding] = [:]
    private var stream: DNNLStream?

    init(plan: NetworkPlan) {
        self.plan = plan
        slots = plan.slotSizes.map { size in
            let buffer = UnsafeMutableBufferPointer<Float>.allocate(capacity: size)
            buffer.initialize(repeating: 0)
            return buffer
        }
        scratchInput = .allocate(capacity: max(1, plan.scratch.input))
        scratchOutput = .allocate(capacity: max(1, plan.scratch.output))
    }

    deinit {
        for slot in slots { slot.deallocate() }
        scratchInput.deallocate()
        scratchOutput.deallocate()
    }

    /// Bytes this state holds, for accounting: see `NetworkPlan.stateBytes`.
    var residentBytes: Int { plan.stateBytes }

    /// Runs every step of the plan over the slots.
    func run(pool: ThreadPool) throws(RuntimeError) {
        for (index, step) in plan.steps.enumerated() {
            let output = slots[step.output]
            if let prepared = step.kind.prepared {
                guard let source = slots[step.inputs[0]].baseAddress, let target = output.baseAddress else { continue }
                try runPrepared(prepared, step: index, input: source, output: target, threads: pool.threads)
                continue
            }
            let inputs = step.inputs.map { UnsafeBufferPointer(slots[$0]) }
            guard case .batched(let inner, let count, let sizes, let strides, let outputSize) = step.kind else {
                try run(step.kind, step: index, inputs: inputs, output: output, pool: pool)
                continue
            }
            // One item at a time, each reading and writing its own part of the slots.
            for item in 0..<count {
                var parts: [UnsafeBufferPointer<Float>] = []
                for (input, buffer) in inputs.enumerated() {
                    let start = item * strides[input]
                    parts.append(UnsafeBufferPointer(rebasing: buffer[start..<(start + sizes[input])]))
                }
                let target = UnsafeMutableBufferPointer(rebasing: output[(item * outputSize)..<((item + 1) * outputSize)])
                try run(inner, step: index, inputs: parts, output: target, pool: pool)
            }
        }
    }

    /// Runs one step (or one item of a batched step) that oneDNN does not run.
    private func run(_ kind: StepKind, step index: Int, inputs: [UnsafeBufferPointer<Float>],
                     output: UnsafeMutableBufferPointer<Float>, pool: ThreadPool) throws(RuntimeError) {
        switch kind {
        case .convolution(let conv):
            let op = try xnnOperator(index) { () throws(RuntimeError) in
                let make = conv.deconvolutionAdjustment == nil ? XNNKernels.convolution : XNNKernels.deconvolution
                return try make(conv.padding, conv.kernel, conv.stride, conv.dilation, conv.groups,
                                conv.input.channels / conv.groups, conv.output.channels / conv.groups,
                                conv.weights, conv.bias, conv.outputRange)
            }
            guard let source = inputs[0].baseAddress, let target = output.baseAddress else { return }
            if conv.channelsLast {
                try runConvolution(op, conv, input: source, output: target, pool: pool)
                return
            }
            guard let staged = scratchInput.baseAddress, let result = scratchOutput.baseAddress else { return }
            Layout.chwToHWC(source, staged, channels: conv.input.channels, pixels: conv.input.height * conv.input.width)
            try runConvolution(op, conv, input: staged, output: result, pool: pool)
            Layout.hwcToCHW(result, target, channels: conv.output.channels, pixels: conv.output.height * conv.output.width)
        case .fullyConnected(let inputCount, let outputs, let rows, let weights, let bias, let range, _):
            let op = try xnnOperator(index) { () throws(RuntimeError) in
                try XNNKernels.fullyConnected(inputs: inputCount, outputs: outputs, weights: weights, bias: bias, outputRange: range)
            }
            guard let source = inputs[0].baseAddress, let target = output.baseAddress else { return }
            try XNNKernels.runFullyConnected(op, rows: rows, input: source, output: target, pool: pool)
        default:
            ReferenceKernels.run(kind, inputs: inputs, output: output)
        }
    }

    private func runConvolution(_ op: XNNOperator, _ conv: StepKind.Convolution, input: UnsafePointer<Float>,
                                output: UnsafeMutablePointer<Float>, pool: ThreadPool) throws(RuntimeError) {
        if let adjustment = conv.deconvolutionAdjustment {
            try XNNKernels.runDeconvolution(op, height: conv.input.height, width: conv.input.width, adjustment: adjustment,
                                            input: input, output: output, pool: pool)
        } else {
            try XNNKernels.runConvolution(op, height: conv.input.height, width: conv.input.width, input: input, output: output, pool: pool)
        }
    }

    private func runPrepared(_ prepared: DNNLKernel, step: Int, input: UnsafeMutablePointer<Float>,
                             output: UnsafeMutablePointer<Float>, threads: Int) throws(RuntimeError) {
        let binding: DNNLKernel.Binding
        if let existing = bindings[step] {
            binding = existing
        } else {
            binding = try prepared.bind(input: input, output: output)
            bindings[step] = binding
        }
        if stream == nil { stream = DNNLStream() }
        guard let stream else { throw .invalidParameters(model: "oneDNN", detail: "creating a stream failed") }
        try prepared.run(binding, stream: stream, threads: threads)
    }

    private func xnnOperator(_ index: Int, make: () throws(RuntimeError) -> XNNOperator) throws(RuntimeError) -> XNNOperator {
        if let existing = operators[index] { return existing }
        let created = try make()
        operators[index] = created
        return created
    }
}
