/// Something known of some of a plan's values, by value id: what the
/// planner would keep in a dictionary keyed by id, kept in an array
/// instead — ids are dense (0 ..< values), and a decoder plans each step
/// anew, so a lookup by hashing showed in every step's planning.
struct ValueTable<Element> {
    private var slots: [Element?] = []

    /// What is known of value `id`; `nil` for none. Setting `nil` forgets it.
    subscript(id: Int) -> Element? {
        get { id < slots.count ? slots[id] : nil }
        set {
            if id >= slots.count {
                guard newValue != nil else { return }
                slots.append(contentsOf: repeatElement(nil, count: id - slots.count + 1))
            }
            slots[id] = newValue
        }
    }

    /// The values something is known of, with it, by increasing id.
    var entries: [(id: Int, element: Element)] {
        slots.indices.compactMap { id in slots[id].map { (id, $0) } }
    }
}
