import Foundation
import ModelFeatures

/// One finished span of a trace, as OpenTelemetry defines it.
public struct TraceSpan: Sendable, Equatable {
    /// OTLP's `SpanKind` numbers.
    public enum Kind: Int, Sendable {
        case `internal` = 1
        case server = 2
    }

    /// OTLP's `Status`: `code` 0 unset, 1 ok, 2 error.
    public enum Status: Sendable, Equatable {
        case unset
        case ok
        case error(String)
    }

    /// An attribute's value (OTLP's `AnyValue`, the kinds modelc uses).
    public enum Value: Sendable, Equatable {
        case string(String)
        case int(Int64)
        case bool(Bool)
    }

    /// 32 lower-case hex digits.
    public var traceID: String
    /// 16 lower-case hex digits.
    public var spanID: String
    /// The parent's span id; nil for a trace's root.
    public var parentSpanID: String?
    public var name: String
    public var kind: Kind
    /// Nanoseconds since 1970.
    public var startUnixNanoseconds: UInt64
    public var endUnixNanoseconds: UInt64
    /// In order; keys as OpenTelemetry's semantic conventions name them.
    public var attributes: [(key: String, value: Value)]
    public var status: Status

    public init(traceID: String, spanID: String, parentSpanID: String?, name: String, kind: Kind,
                startUnixNanoseconds: UInt64, endUnixNanoseconds: UInt64,
                attributes: [(key: String, value: Value)] = [], status: Status = .unset) {
        self.traceID = traceID
        self.spanID = spanID
        self.parentSpanID = parentSpanID
        self.name = name
        self.kind = kind
        self.startUnixNanoseconds = startUnixNanoseconds
        self.endUnixNanoseconds = endUnixNanoseconds
        self.attributes = attributes
        self.status = status
    }

    public static func == (left: TraceSpan, right: TraceSpan) -> Bool {
        left.traceID == right.traceID && left.spanID == right.spanID && left.parentSpanID == right.parentSpanID
            && left.name == right.name && left.kind == right.kind && left.startUnixNanoseconds == right.startUnixNanoseconds
            && left.endUnixNanoseconds == right.endUnixNanoseconds && left.status == right.status
            && left.attributes.map(\.key) == right.attributes.map(\.key) && left.attributes.map(\.value) == right.attributes.map(\.value)
    }
}

/// The OTLP/HTTP JSON encoding of spans: an `ExportTraceServiceRequest` as the OTLP specification's
/// JSON mapping writes it (lowerCamelCase keys, hex trace and span ids, enums as integers, 64-bit
/// integers as decimal strings).
public enum OTLPTraceEncoding {
    /// Who sends the spans: the resource's `service.name` and `service.version`, the scope's name.
    public struct Source: Sendable {
        public var serviceName: String
        public var serviceVersion: String
        public var scopeName: String

        public init(serviceName: String, serviceVersion: String, scopeName: String = "modelc.serve") {
            self.serviceName = serviceName
            self.serviceVersion = serviceVersion
            self.scopeName = scopeName
        }
    }

    /// The request body for `spans`, one resource and one scope. Written directly rather than
    /// through JSONSerialization (about 10 times slower), on the exporter's thread.
    public static func encode(_ spans: [TraceSpan], source: Source) -> [UInt8] {
        var text = "{\"resourceSpans\":[{\"resource\":{\"attributes\":["
        text += attribute("service.name", .string(source.serviceName)) + "," + attribute("service.version", .string(source.serviceVersion))
        text += "]},\"scopeSpans\":[{\"scope\":{\"name\":" + FeatureJSON.quoted(source.scopeName)
            + ",\"version\":" + FeatureJSON.quoted(source.serviceVersion) + "},\"spans\":["
        text.reserveCapacity(text.utf8.count + spans.count * 400)
        for (index, span) in spans.enumerated() {
            if index > 0 { text += "," }
            text += "{\"traceId\":\"" + span.traceID + "\",\"spanId\":\"" + span.spanID + "\""
            if let parent = span.parentSpanID { text += ",\"parentSpanId\":\"" + parent + "\"" }
            text += ",\"name\":" + FeatureJSON.quoted(span.name) + ",\"kind\":" + String(span.kind.rawValue)
            text += ",\"startTimeUnixNano\":\"" + String(span.startUnixNanoseconds) + "\",\"endTimeUnixNano\":\""
                + String(span.endUnixNanoseconds) + "\",\"attributes\":["
            text += span.attributes.map { attribute($0.key, $0.value) }.joined(separator: ",") + "]"
            switch span.status {
            case .unset: break
            case .ok: text += ",\"status\":{\"code\":1}"
            case .error(let message): text += ",\"status\":{\"code\":2,\"message\":" + FeatureJSON.quoted(message) + "}"
            }
            text += "}"
        }
        text += "]}]}]}"
        return Array(text.utf8)
    }

    private static func attribute(_ key: String, _ value: TraceSpan.Value) -> String {
        let encoded = switch value {
        case .string(let text): "{\"stringValue\":" + FeatureJSON.quoted(text) + "}"
        case .int(let number): "{\"intValue\":\"" + String(number) + "\"}"
        case .bool(let flag): "{\"boolValue\":" + (flag ? "true" : "false") + "}"
        }
        return "{\"key\":" + FeatureJSON.quoted(key) + ",\"value\":" + encoded + "}"
    }
}
