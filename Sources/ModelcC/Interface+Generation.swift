import Foundation
import ModelRuntime

// Token generation with a decoder (`modelc generate`), one token per call,
// so that a binding can hand each token on as soon as it is chosen.

/// A `modelc_generation`: one generation in progress and the model it runs on.
final class GenerationHandle {
    let model: ModelHandle
    let generation: Generation
    let turn = NSLock()

    init(model: ModelHandle, generation: Generation) {
        self.model = model
        self.generation = generation
    }
}

extension Failure {
    init(_ error: GenerationError) { self.init(Status(error), error.description) }
}

/// Starts generating up to `max_new_tokens` tokens after the `count` ids of
/// `prompt` (greedy at `temperature` 0; otherwise sampled from the `top_k`
/// likeliest, 0 for all, seeded by `seed`). Checks the prompt now: 107 not a
/// decoder, 108 a token outside the vocabulary, 109 past the context.
@_cdecl("modelc_generate_start")
public func modelc_generate_start(_ model: OpaquePointer?, _ prompt: UnsafePointer<Int64>?, _ count: Int, _ maxNewTokens: Int32,
                                  _ temperature: Double, _ topK: Int32, _ seed: UInt64,
                                  _ generation: UnsafeMutablePointer<OpaquePointer?>?) -> Int32 {
    guarded { () throws(Failure) in
        let out = try output(generation, "generation")
        out.pointee = nil
        let handle = try object(model, as: ModelHandle.self, "model")
        guard let prompt, count > 0 else { throw Failure(.usage, "the prompt has no tokens") }
        guard maxNewTokens > 0 else { throw Failure(.usage, "max_new_tokens must be at least 1, got \(maxNewTokens)") }
        guard temperature >= 0, temperature.isFinite else { throw Failure(.usage, "temperature must be 0 or more, got \(temperature)") }
        guard topK >= 0 else { throw Failure(.usage, "top_k must be 0 or more, got \(topK)") }
        let ids = UnsafeBufferPointer(start: prompt, count: count).map { Int(clamping: $0) }
        let options = GenerationOptions(maxNewTokens: Int(maxNewTokens), temperature: temperature, topK: Int(topK), seed: seed)
        do throws(GenerationError) {
            let started = try TextGenerator(model: handle.model).start(prompt: ids, options: options)
            out.pointee = retained(GenerationHandle(model: handle, generation: started))
        } catch {
            throw Failure(error)
        }
    }
}

/// The next token into `token` (and the milliseconds its prediction took into
/// `milliseconds`, if not NULL), with `*done` 0; `*done` 1 once every token
/// was generated (then `token` is untouched).
@_cdecl("modelc_generate_next")
public func modelc_generate_next(_ generation: OpaquePointer?, _ token: UnsafeMutablePointer<Int64>?,
                                 _ milliseconds: UnsafeMutablePointer<Double>?, _ done: UnsafeMutablePointer<Int32>?) -> Int32 {
    guarded { () throws(Failure) in
        let handle = try object(generation, as: GenerationHandle.self, "generation")
        let token = try output(token, "token"), done = try output(done, "done")
        handle.turn.lock()
        defer { handle.turn.unlock() }
        do throws(GenerationError) {
            guard let step = try handle.generation.next() else {
                done.pointee = 1
                return
            }
            token.pointee = Int64(step.token)
            milliseconds?.pointee = step.milliseconds
            done.pointee = 0
        } catch {
            throw Failure(error)
        }
    }
}

/// Frees a generation (NULL is ignored).
@_cdecl("modelc_generation_free")
public func modelc_generation_free(_ generation: OpaquePointer?) { modelc_close(generation) }
