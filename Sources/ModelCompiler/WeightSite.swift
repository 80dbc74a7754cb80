import CoreMLSchema
import ModelSpec

/// One place in a specification that holds weight values.
struct WeightSite {
    enum Holder {
        /// A neural-network `WeightParams`.
        case weightParams(UnsafeMutablePointer<CoreML__Specification__WeightParams>)
        /// An ML program `Value` (a constant operation's attribute) stored
        /// in a weight file or inline.
        case programValue(UnsafeMutablePointer<CoreML__Specification__MILSpec__Value>)
    }

    /// Field path from the root `Model` (see `WeightIndex.Entry.path`).
    let path: String
    /// Layer name or operation output name.
    let owner: String
    /// Role within the owner.
    let role: String
    let holder: Holder
    /// The neural-network layer holding the weight, if a layer does.
    var layer: UnsafePointer<CoreML__Specification__NeuralNetworkLayer>? = nil
}

/// Finds every weight site of a specification by walking all its messages
/// with the schema's descriptors, so weights inside any layer kind, pipeline
/// stage or nested program block are found without listing them.
struct WeightSiteFinder {
    private static let weightParams = "CoreML.Specification.WeightParams"
    private static let layer = "CoreML.Specification.NeuralNetworkLayer"
    private static let operation = "CoreML.Specification.MILSpec.Operation"
    private static let value = "CoreML.Specification.MILSpec.Value"

    private(set) var sites: [WeightSite] = []

    /// The owner in force while walking below a layer or an operation, and the
    /// path length at which its role begins.
    private struct Owner {
        var name: String
        var rolePathStart: Int
        var layer: UnsafePointer<CoreML__Specification__NeuralNetworkLayer>?
    }

    init(root: UnsafePointer<CoreML__Specification__Model>) {
        var path: [String] = []
        visit(MessageView(root), path: &path, owner: nil)
    }

    private mutating func visit(_ message: MessageView, path: inout [String], owner: Owner?) {
        let type = message.typeName
        var owner = owner
        if type == Self.weightParams {
            let params = UnsafeMutablePointer(mutating: message.pointer.assumingMemoryBound(to: CoreML__Specification__WeightParams.self))
            sites.append(WeightSite(path: path.joined(separator: "."), owner: owner?.name ?? "",
                                    role: role(path, owner), holder: .weightParams(params), layer: owner?.layer))
            return
        }
        if type == Self.value, let owner {
            let value = UnsafeMutablePointer(mutating: message.pointer.assumingMemoryBound(to: CoreML__Specification__MILSpec__Value.self))
            sites.append(WeightSite(path: path.joined(separator: "."), owner: owner.name,
                                    role: role(path, owner), holder: .programValue(value)))
            return
        }
        if type == Self.layer {
            let layer = message.pointer.assumingMemoryBound(to: CoreML__Specification__NeuralNetworkLayer.self)
            // Roles start below the layer's parameters message: "<path>.<kind>.".
            owner = Owner(name: text(layer.pointee.name), rolePathStart: path.count + 1, layer: layer)
        } else if type == Self.operation {
            let operation = message.pointer.assumingMemoryBound(to: CoreML__Specification__MILSpec__Operation.self).pointee
            let output = elements(operation.outputs, operation.n_outputs).first.map { text($0.pointee.name) } ?? ""
            owner = Owner(name: output, rolePathStart: path.count, layer: nil)
        }
        for field in message.fields where field.type == PROTOBUF_C_TYPE_MESSAGE {
            let name = String(cString: field.name)
            // Operation inputs name values, they hold none worth storing; nested
            // blocks and attributes are walked.
            if type == Self.operation, name == "inputs" { continue }
            let children = message.messages(in: field)
            let repeated = field.label == PROTOBUF_C_LABEL_REPEATED
            for (index, child) in children.enumerated() {
                let component: String
                if repeated, let key = mapKey(child) {
                    component = "\(name)[\(key)]"
                } else {
                    component = repeated ? "\(name)[\(index)]" : name
                }
                path.append(component)
                visit(child, path: &path, owner: owner)
                path.removeLast()
            }
        }
    }

    private func role(_ path: [String], _ owner: Owner?) -> String {
        guard let owner, owner.rolePathStart <= path.count else { return path.last ?? "" }
        var components = Array(path[owner.rolePathStart...])
        // ML program attributes: "attributes[val]" → "val"; the value itself
        // is the entry's "value" field.
        if components.last == "value" { components.removeLast() }
        if let last = components.last, last.hasPrefix("attributes["), last.hasSuffix("]") {
            return String(last.dropFirst("attributes[".count).dropLast())
        }
        return components.joined(separator: ".")
    }

    /// The key of a map entry message (a generated `…Entry` with a string `key`).
    private func mapKey(_ message: MessageView) -> String? {
        guard message.typeName.hasSuffix("Entry"), let field = message.field(named: "key"),
              field.pointee.type == PROTOBUF_C_TYPE_STRING
        else { return nil }
        let pointer = (message.pointer + Int(field.pointee.offset)).load(as: UnsafePointer<CChar>?.self)
        return text(pointer)
    }
}
