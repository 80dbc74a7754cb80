/// The candidate closest to `word` by edit distance, if it is close enough to
/// be a likely typo (at most a third of the word's length, and at least 1).
/// Ties go to the earliest candidate.
public func closestMatch(to word: String, among candidates: [String]) -> String? {
    let limit = max(1, word.count / 3)
    let scored = candidates.map { ($0, editDistance(word, $0)) }.filter { $0.1 <= limit }
    return scored.min { $0.1 < $1.1 }?.0
}

/// `"; did you mean 'SUGGESTION'?"` to end a one-line message with, or nothing
/// when there is no suggestion.
public func didYouMean(_ suggestion: String?) -> String {
    suggestion.map { "; did you mean '\($0)'?" } ?? ""
}

/// Levenshtein distance between two strings, by characters.
func editDistance(_ a: String, _ b: String) -> Int {
    let a = Array(a), b = Array(b)
    guard !a.isEmpty else { return b.count }
    guard !b.isEmpty else { return a.count }
    var previous = Array(0...b.count)
    var current = [Int](repeating: 0, count: b.count + 1)
    for i in 1...a.count {
        current[0] = i
        for j in 1...b.count {
            let substitution = previous[j - 1] + (a[i - 1] == b[j - 1] ? 0 : 1)
            current[j] = min(previous[j] + 1, current[j - 1] + 1, substitution)
        }
        swap(&previous, &current)
    }
    return previous[b.count]
}
