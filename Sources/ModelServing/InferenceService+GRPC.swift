import Dispatch
import ModelCompiler

/// The Open Inference Protocol's gRPC form (`inference.GRPCInferenceService`): the same models,
/// limits, key and metrics as REST, answered with gRPC status codes.
extension InferenceService {
    /// The service's methods are "/inference.GRPCInferenceService/NAME".
    static let grpcServicePrefix = "/inference.GRPCInferenceService/"

    /// Answers one gRPC call (any thread; blocks until answered).
    public func handle(_ call: GRPCRequest) -> GRPCResponse {
        handling.withLock { $0 += 1 }
        defer {
            answeredCount.withLock { $0 += 1 }
            handling.withLock { $0 -= 1 }
        }
        do {
            return .ok(try route(call))
        } catch {
            if error.grpcStatus == .internal {
                log.write("error", error.description, [("method", call.method), ("status", String(describing: error.grpcStatus))])
            }
            return .failure(error.grpcStatus, error.description)
        }
    }

    private func route(_ call: GRPCRequest) throws(RequestError) -> [UInt8] {
        let arrival = DispatchTime.now().uptimeNanoseconds
        guard call.method.hasPrefix(Self.grpcServicePrefix) else { throw .unservedMethod(call.method) }
        let method = String(call.method.dropFirst(Self.grpcServicePrefix.count))
        switch method {
        case "ServerLive": return GRPCMessages.flag(true)
        case "ServerReady": return GRPCMessages.flag(!isDraining && !starting.withLock { $0 })
        default: break
        }
        try authorize(authorization: call.authorization, apiKey: call.apiKey)
        switch method {
        case "ServerMetadata":
            return GRPCMessages.serverMetadata(name: Self.serverName, version: BundleCompiler.compilerVersion, extensions: Self.extensions)
        case "ModelReady":
            let (name, version) = try GRPCMessages.modelReference(call.message, method: method)
            // As Triton: a model or version that is unknown, unloaded or cannot be loaded is not ready.
            return GRPCMessages.flag((try? checkVersion(version, model: name)) != nil && (try? describe(name)) != nil)
        case "ModelMetadata":
            let (name, version) = try GRPCMessages.modelReference(call.message, method: method)
            try checkVersion(version, model: name)
            let (inputs, outputs) = try metadata(of: name)
            return GRPCMessages.modelMetadata(name: name, versions: [Self.version], platform: Self.platform, inputs: inputs, outputs: outputs)
        case "ModelInfer":
            let decoded = try GRPCMessages.infer(call.message, limits: .init(maxTensorBytes: options.maxTensorBytes))
            try checkVersion(decoded.version, model: decoded.model)
            // Not traced: the spans' attributes are HTTP's.
            let inference = InferCall(protocol: .grpc, arrival: arrival, clientDeadline: call.deadline, clientGone: call.clientGone,
                                      trace: nil, path: call.method)
            return try infer(decoded.model, inference) { () throws(RequestError) in
                try decoded.request.get()
            } encode: { answer in
                GRPCMessages.inferResponse(model: decoded.model, version: Self.version, id: answer.id, outputs: answer.outputs.map(\.tensor))
            }
        default:
            throw .unservedMethod(call.method)
        }
    }

    /// An empty version is the server's choice; modelc has "1" only.
    private func checkVersion(_ version: String, model: String) throws(RequestError) {
        guard version.isEmpty || version == Self.version else { throw .unknownVersion(model: model, version: version) }
    }
}
