import FixtureSupport
import Foundation
import ModelFeatures
import ModelRuntime
import Testing

/// Compares a computed feature value with the JSON a reference engine wrote.
enum ParityComparison {
    /// `nil` when equal within `tolerance`, else what differs. A multi-array
    /// may have another shape of as many elements unless `exactShape`.
    static func difference(_ got: FeatureValue, _ want: Any, tolerance: Double, exactShape: Bool = false) -> String? {
        switch got {
        case .string(let text):
            return text == want as? String ? nil : "got \"\(text)\", want \(want)"
        case .int64(let number):
            guard let expected = (want as? NSNumber)?.doubleValue else { return "got \(number), want \(want)" }
            return Double(number) == expected ? nil : "got \(number), want \(expected)"
        case .double(let number):
            return numbers([number], flatten(want), tolerance: tolerance)
        case .multiArray(let array):
            let expected = flatten(want)
            guard shape(want) == array.shape || (!exactShape && expected.count == array.count) else {
                return "got shape \(array.shape), want \(shape(want))"
            }
            return numbers(array.doubles, expected, tolerance: tolerance)
        case .dictionary(let dictionary):
            guard let object = want as? [String: Any] else { return "got a dictionary, want \(want)" }
            let entries: [String: Double] = switch dictionary {
            case .strings(let values): values
            case .int64s(let values): Dictionary(uniqueKeysWithValues: values.map { (String($0.key), $0.value) })
            }
            guard Set(entries.keys) == Set(object.keys) else {
                return "got keys \(entries.keys.sorted()), want \(object.keys.sorted())"
            }
            for key in object.keys.sorted() {
                if let problem = numbers([entries[key] ?? .nan], flatten(object[key] ?? NSNull()), tolerance: tolerance) {
                    return "key \"\(key)\": \(problem)"
                }
            }
            return nil
        case .sequence(let sequence):
            // In order, element by element: item ids (strings or int64s).
            guard let expected = want as? [Any] else { return "got a sequence, want \(want)" }
            let texts: [String] = switch sequence {
            case .strings(let values): values
            case .int64s(let values): values.map(String.init)
            }
            let wanted = expected.map { ($0 as? String) ?? ($0 as? NSNumber).map { String($0.int64Value) } ?? "\($0)" }
            return texts == wanted ? nil : "got \(texts), want \(wanted)"
        case .image:
            return "unexpected \(got.kindText)"
        }
    }

    private static func numbers(_ got: [Double], _ want: [Double], tolerance: Double) -> String? {
        guard got.count == want.count else { return "got \(got.count) values, want \(want.count)" }
        for (index, (g, w)) in zip(got, want).enumerated() {
            if g.isNaN && w.isNaN { continue }
            if !(abs(g - w) <= tolerance * max(1, abs(w))) {
                return "element \(index): got \(g), want \(w) (tolerance \(tolerance))"
            }
        }
        return nil
    }

    private static func flatten(_ json: Any) -> [Double] {
        if let array = json as? [Any] { return array.flatMap(flatten) }
        if json is NSNull { return [.nan] }
        return [(json as? NSNumber)?.doubleValue ?? .nan]
    }

    private static func shape(_ json: Any) -> [Int] {
        guard let array = json as? [Any] else { return [] }
        return [array.count] + (array.first.map(shape) ?? [])
    }
}
