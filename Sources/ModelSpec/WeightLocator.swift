import CoreMLSchema

/// One place in a specification that can hold weight values: a neural-network
/// `WeightParams`, or an ML program `Value` holding a tensor (inline or in a
/// weight file), wherever in the program it sits.
package struct WeightLocation {
    package enum Holder {
        /// A neural-network `WeightParams`.
        case weightParams(UnsafeMutablePointer<CoreML__Specification__WeightParams>)
        /// An ML program `Value`: an operation's attribute, an operation
        /// input's binding, or a function, block or program attribute.
        case programValue(UnsafeMutablePointer<CoreML__Specification__MILSpec__Value>)
    }

    /// Field path from the message the walk started at: schema field names
    /// joined by `.`, `[i]` for repeated elements, `[key]` for map entries.
    package let path: String
    /// Layer name, or the name of the operation's first output; empty for
    /// values outside any operation (function and program attributes).
    package let owner: String
    /// Role within the owner: the path below a layer's parameters message
    /// (`weights`, `bias`), an operation's attribute name (`val`) or input
    /// name (`data`, `scale`; `values[1]` for the second binding of a tuple
    /// input), or for values outside operations the path from the program.
    package let role: String
    package let holder: Holder
    /// The neural-network layer holding the weight, if a layer does.
    package var layer: UnsafePointer<CoreML__Specification__NeuralNetworkLayer>?

    /// For a program value held in a weight file: the file as the program names
    /// it and the offset of the blob's record.
    package var blobReference: (file: String, offset: UInt64)? {
        guard case .programValue(let value) = holder,
              value.pointee.value_case == CORE_ML__SPECIFICATION__MILSPEC__VALUE__VALUE_BLOB_FILE_VALUE,
              let blob = value.pointee.blobfilevalue?.pointee
        else { return nil }
        return (text(blob.filename), blob.offset)
    }

    /// For a program value, its tensor type when it declares one.
    package var tensorType: CoreML__Specification__MILSpec__TensorType? {
        guard case .programValue(let value) = holder,
              value.pointee.type?.pointee.type_case == CORE_ML__SPECIFICATION__MILSPEC__VALUE_TYPE__TYPE_TENSOR_TYPE
        else { return nil }
        return value.pointee.type?.pointee.tensortype?.pointee
    }

    /// How people name the weight: the owner for a `const` value (`val`),
    /// else `owner.role`.
    package var displayName: String {
        if owner.isEmpty { return role }
        return role == "val" ? owner : "\(owner).\(role)"
    }
}

/// Finds every place that can hold weights below a message by walking all its
/// fields with the schema's descriptors: weights inside any layer kind,
/// pipeline stage, program function, block specialization, nested block,
/// operation attribute or operation input are found without listing them.
///
/// Program values are reported when they hold a tensor (a weight file
/// reference or an inline tensor); tuples, lists and dictionaries of values
/// are walked into.
package struct WeightLocator {
    private static let weightParams = "CoreML.Specification.WeightParams"
    private static let layer = "CoreML.Specification.NeuralNetworkLayer"
    private static let operation = "CoreML.Specification.MILSpec.Operation"
    private static let argument = "CoreML.Specification.MILSpec.Argument"
    private static let value = "CoreML.Specification.MILSpec.Value"

    package private(set) var locations: [WeightLocation] = []

    /// The owner in force while walking below a layer or an operation, and the
    /// path length at which its role begins.
    private struct Owner {
        var name: String
        var rolePathStart: Int
        var layer: UnsafePointer<CoreML__Specification__NeuralNetworkLayer>?
        /// Bindings of the operation input being walked (a tuple has several).
        var bindingCount = 1
    }

    /// Walks the message at `root` (a `Model`, or any message below one).
    package init<Message>(root: UnsafePointer<Message>) {
        var path: [String] = []
        visit(MessageView(root), path: &path, owner: nil)
    }

    private mutating func visit(_ message: MessageView, path: inout [String], owner: Owner?) {
        let type = message.typeName
        var owner = owner
        if type == Self.weightParams {
            let params = UnsafeMutablePointer(mutating: message.pointer.assumingMemoryBound(to: CoreML__Specification__WeightParams.self))
            locations.append(WeightLocation(path: path.joined(separator: "."), owner: owner?.name ?? "",
                                            role: role(path, owner), holder: .weightParams(params), layer: owner?.layer))
            return
        }
        if type == Self.value {
            let value = UnsafeMutablePointer(mutating: message.pointer.assumingMemoryBound(to: CoreML__Specification__MILSpec__Value.self))
            if Self.holdsTensor(value.pointee) {
                locations.append(WeightLocation(path: path.joined(separator: "."), owner: owner?.name ?? "",
                                                role: role(path, owner), holder: .programValue(value), layer: nil))
                return
            }
        } else if type == Self.layer {
            let layer = message.pointer.assumingMemoryBound(to: CoreML__Specification__NeuralNetworkLayer.self)
            // Roles start below the layer's parameters message: "<path>.<kind>.".
            owner = Owner(name: text(layer.pointee.name), rolePathStart: path.count + 1, layer: layer)
        } else if type == Self.operation {
            let operation = message.pointer.assumingMemoryBound(to: CoreML__Specification__MILSpec__Operation.self).pointee
            let output = elements(operation.outputs, operation.n_outputs).first.map { text($0.pointee.name) } ?? ""
            owner = Owner(name: output, rolePathStart: path.count, layer: nil)
        } else if type == Self.argument {
            owner?.bindingCount = message.pointer.assumingMemoryBound(to: CoreML__Specification__MILSpec__Argument.self).pointee.n_arguments
        }
        for field in message.fields where field.type == PROTOBUF_C_TYPE_MESSAGE {
            let name = String(cString: field.name)
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

    /// Whether a program value holds a tensor: a weight file reference or an
    /// inline tensor (not a tuple, list or dictionary, which are walked into).
    private static func holdsTensor(_ value: CoreML__Specification__MILSpec__Value) -> Bool {
        switch value.value_case {
        case CORE_ML__SPECIFICATION__MILSPEC__VALUE__VALUE_BLOB_FILE_VALUE:
            return true
        case CORE_ML__SPECIFICATION__MILSPEC__VALUE__VALUE_IMMEDIATE_VALUE:
            return value.immediatevalue?.pointee.value_case == CORE_ML__SPECIFICATION__MILSPEC__VALUE__IMMEDIATE_VALUE__VALUE_TENSOR
        default:
            return false
        }
    }

    private func role(_ path: [String], _ owner: Owner?) -> String {
        guard let owner, owner.rolePathStart <= path.count else {
            // Outside layers and operations: the path, without map entries' "value".
            return path.filter { $0 != "value" }.joined(separator: ".")
        }
        let components = Array(path[owner.rolePathStart...])
        guard owner.layer == nil, let first = components.first else { return components.joined(separator: ".") }
        // ML program operations: "attributes[val].value" → "val";
        // "inputs[data].value.arguments[0].value" → "data" ("data[1]" for the
        // second binding of a tuple); anything deeper (a member of a tuple
        // value, a nested block) follows after a ".".
        var rest = components.dropFirst()
        var role: String
        if let key = bracketed(first, prefix: "attributes[") {
            role = key
            if rest.first == "value" { rest = rest.dropFirst() }
        } else if let key = bracketed(first, prefix: "inputs[") {
            role = key
            if rest.first == "value" { rest = rest.dropFirst() }
            if let binding = rest.first, let index = bracketed(binding, prefix: "arguments[") {
                if owner.bindingCount > 1 { role += "[\(index)]" }
                rest = rest.dropFirst()
                if rest.first == "value" { rest = rest.dropFirst() }
            }
        } else {
            return components.filter { $0 != "value" }.joined(separator: ".")
        }
        let nested = rest.filter { $0 != "value" }
        return nested.isEmpty ? role : ([role] + nested).joined(separator: ".")
    }

    private func bracketed(_ component: String, prefix: String) -> String? {
        guard component.hasPrefix(prefix), component.hasSuffix("]") else { return nil }
        return String(component.dropFirst(prefix.count).dropLast())
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

extension Specification {
    /// Every weight-file reference of the model, in the order `WeightLocator`
    /// finds them: the weight's `WeightLocation.displayName` and the file as
    /// the model names it (`@model_path/weights/weight.bin`).
    package var weightFileReferences: [(weight: String, file: String)] {
        withExtendedLifetime(self) {
            WeightLocator(root: root).locations.compactMap { location in
                location.blobReference.map { (location.displayName, $0.file) }
            }
        }
    }
}
