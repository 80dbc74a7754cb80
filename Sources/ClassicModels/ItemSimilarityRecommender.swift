import ModelFeatures
import ModelSpec

/// An item-item recommender (Core ML's `ItemSimilarityRecommender`, as Turi
/// Create exports it).
///
/// The score of item j is Σᵢ sim(i, j) · (sᵢ − shiftⱼ) over the input items i
/// with their ratings sᵢ (1 for a sequence input); unlisted pairs have
/// similarity 0. Every item that is not excluded (by the exclusion input
/// when given, else the input items themselves) and lies in the restriction
/// input when one is given is ranked by descending score, equal scores in
/// the model's item order; the first k (the numRecommendations input, else
/// all) are recommended. Input items the model does not know are ignored.
struct ItemSimilarityRecommenderEngine: PredictionEngine {
    enum Identifiers: Sendable {
        case strings([String: Int], [String])
        case int64s([Int64: Int], [Int64])
    }

    let identifiers: Identifiers
    /// similarities[i] lists (j, sim(i, j)).
    let similarities: [[(item: Int, score: Double)]]
    let shifts: [Double]
    let itemInput: String
    let countInput: String?
    let restrictionInput: String?
    let exclusionInput: String?
    let listOutput: String?
    let scoreOutput: String?

    init(_ model: ItemSimilarityRecommenderParameters, interface: ModelInterface) throws(RuntimeError) {
        let kind = interface.kind
        let entries = model.itemItemSimilarities
        let stringIds = model.itemStringIDs
        let int64Ids = model.itemInt64IDs
        // One past the largest item index named (capped: a larger one is refused below).
        func end(_ id: UInt64) -> Int { Int(min(id, UInt64(Int32.max))) + 1 }
        let listedItems = entries.reduce(0) { largest, entry in
            entry.similarItemList.reduce(max(largest, end(entry.itemID))) { max($0, end($1.itemID)) }
        }
        // Without an id list the items are 0, 1, …, n − 1 (int64 ids).
        let count: Int
        if !stringIds.isEmpty {
            count = stringIds.count
            identifiers = .strings(try Self.index(stringIds, kind: kind), stringIds)
        } else {
            let ids = int64Ids.isEmpty ? (0..<Int64(listedItems)).map { $0 } : int64Ids
            count = ids.count
            identifiers = .int64s(try Self.index(ids, kind: kind), ids)
        }
        guard listedItems <= count else {
            throw .invalidParameters(model: kind, detail: "the similarities name item \(listedItems - 1), the model lists \(count) items")
        }
        var similarities = [[(item: Int, score: Double)]](repeating: [], count: count)
        var shifts = [Double](repeating: 0, count: count)
        for entry in entries {
            let item = Int(entry.itemID)
            shifts[item] = entry.itemScoreAdjustment
            similarities[item] += entry.similarItemList.map { (Int($0.itemID), $0.similarityScore) }
        }
        self.similarities = similarities
        self.shifts = shifts
        func name(_ name: String) -> String? { name.isEmpty ? nil : name }
        guard let itemInput = name(model.itemInputFeatureName) else {
            throw .invalidParameters(model: kind, detail: "itemInputFeatureName is empty")
        }
        self.itemInput = itemInput
        countInput = name(model.numRecommendationsInputFeatureName)
        restrictionInput = name(model.itemRestrictionInputFeatureName)
        exclusionInput = name(model.itemExclusionInputFeatureName)
        listOutput = name(model.recommendedItemListOutputFeatureName)
        scoreOutput = name(model.recommendedItemScoreOutputFeatureName)
        guard listOutput != nil || scoreOutput != nil else {
            throw .invalidParameters(model: kind, detail: "neither recommendedItemListOutputFeatureName nor recommendedItemScoreOutputFeatureName is set")
        }
    }

    private static func index<ID: Hashable>(_ ids: [ID], kind: String) throws(RuntimeError) -> [ID: Int] {
        var index: [ID: Int] = [:]
        for (position, id) in ids.enumerated() {
            guard index[id] == nil else { throw .invalidParameters(model: kind, detail: "item id \(id) is listed twice") }
            index[id] = position
        }
        return index
    }

    func predict(_ inputs: [String: FeatureValue]) throws(RuntimeError) -> [String: FeatureValue] {
        guard let given = inputs[itemInput] else {
            throw .missingInput(feature: itemInput, expected: "a dictionary of item ratings or a sequence of items")
        }
        let observed = try ratings(given)
        var scores = [Double](repeating: 0, count: shifts.count)
        for (item, rating) in observed {
            for (other, similarity) in similarities[item] {
                scores[other] += similarity * (rating - shifts[other])
            }
        }
        var excluded = [Bool](repeating: false, count: shifts.count)
        if let name = exclusionInput, let value = inputs[name] {
            for item in try items(value, feature: name) { excluded[item] = true }
        } else {
            for (item, _) in observed { excluded[item] = true }
        }
        var allowed: [Bool]?
        if let name = restrictionInput, let value = inputs[name] {
            var mask = [Bool](repeating: false, count: shifts.count)
            for item in try items(value, feature: name) { mask[item] = true }
            allowed = mask
        }
        var ranked = shifts.indices.filter { !excluded[$0] && allowed?[$0] != false }
        ranked.sort { scores[$0] > scores[$1] || (scores[$0] == scores[$1] && $0 < $1) }
        if let name = countInput, let value = inputs[name] {
            guard let count = value.doubleValue, count >= 0, let limit = Int(exactly: count) else {
                throw .invalidValue(feature: name, detail: "the number of recommendations must be a non-negative integer")
            }
            ranked = Array(ranked.prefix(limit))
        }
        var outputs: [String: FeatureValue] = [:]
        switch identifiers {
        case .strings(_, let ids):
            if let listOutput { outputs[listOutput] = .sequence(.strings(ranked.map { ids[$0] })) }
            if let scoreOutput {
                outputs[scoreOutput] = .dictionary(.strings(Dictionary(ranked.map { (ids[$0], scores[$0]) }, uniquingKeysWith: { first, _ in first })))
            }
        case .int64s(_, let ids):
            if let listOutput { outputs[listOutput] = .sequence(.int64s(ranked.map { ids[$0] })) }
            if let scoreOutput {
                outputs[scoreOutput] = .dictionary(.int64s(Dictionary(ranked.map { (ids[$0], scores[$0]) }, uniquingKeysWith: { first, _ in first })))
            }
        }
        return outputs
    }

    /// The input items the model knows, with their ratings, in model order.
    private func ratings(_ value: FeatureValue) throws(RuntimeError) -> [(Int, Double)] {
        var rated: [(Int, Double)] = []
        switch (identifiers, value) {
        case (.strings(let index, _), .dictionary(.strings(let entries))):
            rated = entries.compactMap { id, rating in index[id].map { ($0, rating) } }
        case (.int64s(let index, _), .dictionary(.int64s(let entries))):
            rated = entries.compactMap { id, rating in index[id].map { ($0, rating) } }
        case (_, .sequence):
            rated = try items(value, feature: itemInput).map { ($0, 1) }
        default:
            throw .wrongType(feature: itemInput, expected: "items of the model's id type (\(idKind))", got: value.kindText)
        }
        return rated.sorted { $0.0 < $1.0 }
    }

    /// The positions of the items of a sequence the model knows.
    private func items(_ value: FeatureValue, feature: String) throws(RuntimeError) -> [Int] {
        switch (identifiers, value) {
        case (.strings(let index, _), .sequence(.strings(let ids))): ids.compactMap { index[$0] }
        case (.int64s(let index, _), .sequence(.int64s(let ids))): ids.compactMap { index[$0] }
        default: throw .wrongType(feature: feature, expected: "a sequence of \(idKind) item ids", got: value.kindText)
        }
    }

    private var idKind: String {
        if case .strings = identifiers { "string" } else { "int64" }
    }
}
