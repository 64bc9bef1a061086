/// Events ordered by deadline, then by insertion: the same inputs always run in
/// the same order (STYLE "Concurrency"; swift-nio's embedded loop does the same).
struct EventQueue<Payload> {
    private struct Entry {
        let deadline: Int64
        let sequence: UInt64
        let payload: Payload

        func precedes(_ other: Entry) -> Bool { (deadline, sequence) < (other.deadline, other.sequence) }
    }

    private var heap: [Entry] = []
    private var nextSequence: UInt64 = 0


    /// The earliest deadline, if any.
    var nextDeadline: Int64? { heap.first?.deadline }

    /// Adds an event; returns its sequence number (unique, increasing).
    @discardableResult
    mutating func push(_ payload: Payload, at deadline: Int64) -> UInt64 {
        let entry = Entry(deadline: deadline, sequence: nextSequence, payload: payload)
        nextSequence += 1
        heap.append(entry)
        var child = heap.count - 1
        while child > 0 {
            let parent = (child - 1) / 2
            guard heap[child].precedes(heap[parent]) else { break }
            heap.swapAt(child, parent)
            child = parent
        }
        return entry.sequence
    }

    /// Removes and returns the earliest event.
    mutating func pop() -> (deadline: Int64, sequence: UInt64, payload: Payload)? {
        guard !heap.isEmpty else { return nil }
        heap.swapAt(0, heap.count - 1)
        let entry = heap.removeLast()
        var parent = 0
        while true {
            let left = 2 * parent + 1
            let right = left + 1
            var smallest = parent
            if left < heap.count && heap[left].precedes(heap[smallest]) { smallest = left }
            if right < heap.count && heap[right].precedes(heap[smallest]) { smallest = right }
            guard smallest != parent else { break }
            heap.swapAt(parent, smallest)
            parent = smallest
        }
        return (entry.deadline, entry.sequence, entry.payload)
    }

    /// Whether any queued payload matches.
    func contains(where matches: (Payload) -> Bool) -> Bool { heap.contains { matches($0.payload) } }

    /// Every queued event with its sequence number, in no particular order.
    var entries: [(sequence: UInt64, payload: Payload)] { heap.map { ($0.sequence, $0.payload) } }

    /// Removes the events `shouldRemove` picks.
    /// - Returns: the sequence numbers of the removed events.
    @discardableResult
    mutating func removeAll(where shouldRemove: (Payload) -> Bool) -> [UInt64] {
        var kept: [Entry] = []
        var removed: [UInt64] = []
        for entry in heap {
            if shouldRemove(entry.payload) { removed.append(entry.sequence) } else { kept.append(entry) }
        }
        heap = kept.sorted { $0.precedes($1) }
        return removed.sorted()
    }
}
