/// One problem the validator found in a model.
///
/// Reads as one line: `layer 0 "conv1" (convolution): weights hold 215
/// values, expected 216 = …`. The CLI prefixes the model's path.
public struct Diagnostic: Equatable, Sendable, CustomStringConvertible, Encodable {
    /// How serious the problem is: an error means Core ML refuses the model.
    public enum Severity: String, Sendable, Encodable {
        case error, warning
    }

    public var severity: Severity
    /// Stable identifier of the rule, e.g. "nn.weights.count", "feature.name.duplicate".
    public var rule: String
    /// Where, outermost first: ["pipeline model 1", "layer 12 \"conv2\" (convolution)"]; empty for the whole model.
    public var location: [String]
    /// What is wrong, one line, lower-case start, naming expected and found values.
    public var message: String

    public init(severity: Severity, rule: String, location: [String], message: String) {
        self.severity = severity
        self.rule = rule
        self.location = location
        self.message = message
    }

    /// The location and the message joined by `": "`.
    public var description: String {
        (location + [message]).joined(separator: ": ")
    }

    private enum CodingKeys: String, CodingKey {
        case severity, rule, location, message
    }
}

/// Collects diagnostics while the rules walk a model, tracking where they are.
struct DiagnosticSink {
    private(set) var diagnostics: [Diagnostic] = []
    private var location: [String] = []

    mutating func error(_ rule: String, _ message: String) {
        diagnostics.append(Diagnostic(severity: .error, rule: rule, location: location, message: message))
    }

    mutating func warning(_ rule: String, _ message: String) {
        diagnostics.append(Diagnostic(severity: .warning, rule: rule, location: location, message: message))
    }

    /// Runs `body` with `place` appended to the location.
    mutating func at(_ place: String, _ body: (inout DiagnosticSink) -> Void) {
        location.append(place)
        body(&self)
        location.removeLast()
    }
}

/// `"name"` with quotes, for locations and messages.
func quoted(_ name: String) -> String {
    "\"\(name)\""
}

/// `1 value` / `3 values`.
func counted(_ count: some BinaryInteger, _ noun: String) -> String {
    count == 1 ? "1 \(noun)" : "\(count) \(noun)s"
}

/// The product of `factors`, or `nil` when it overflows `UInt64`.
func product(_ factors: [UInt64]) -> UInt64? {
    var result: UInt64 = 1
    for factor in factors {
        let (next, overflow) = result.multipliedReportingOverflow(by: factor)
        if overflow { return nil }
        result = next
    }
    return result
}
