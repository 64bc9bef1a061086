/// One namespace's digest, kept in memory: the leaf sum and count of the whole
/// namespace (its root), and of each of up to 4,096 contiguous key ranges.
///
/// Leaves are ordered by key bytes, exactly as the namespace's table is, so a
/// key range is a contiguous range of the table: reconcile reads only the rows
/// of the ranges that differ (range-based set reconciliation: Aljoscha Meyer's
/// thesis and the negentropy protocol, hoytech/negentropy). A range's
/// fingerprint is the sum modulo 2^256 of its leaf hashes, so a write changes
/// one range and the root by one addition each: O(log n) to find the range, no
/// rehashing, no rescan, and equal leaf sets give equal sums whatever order they
/// arrived in.
///
/// The range boundaries are this device's own: another device's ranges differ,
/// which is fine because reconcile frames name their bounds explicitly and each
/// side sums its own ranges inside the bounds, scanning only the two partial
/// ranges at the edges. Boundaries are chosen at open (and again when ranges
/// grow lopsided) at quantiles of the keys, so each range holds a few dozen rows.
struct RangeIndex {
    /// Lower bounds of the ranges, ascending; the first is empty (the minimum key).
    private(set) var bounds: [[UInt8]] = [[]]
    private(set) var sums: [Hash32] = [.zero]
    private(set) var counts: [Int] = [0]
    private(set) var totalSum: Hash32 = .zero
    private(set) var totalCount = 0
    /// Set when a range has grown far beyond its share; ``rebuilt(from:)`` fixes it.
    /// Only reconcile cares (it reads a differing range's rows), so rebuilding waits
    /// until a reconcile needs the index: a bulk load never pays for it.
    private(set) var isLopsided = false

    static let maximumRanges = 4_096
    /// Rows a range should hold once there are enough rows.
    static let targetRowsPerRange = 32

    var rangeCount: Int { bounds.count }

    /// The range holding `key`: the last whose lower bound is not above it.
    func range(of key: some Collection<UInt8>) -> Int {
        guard bounds.count > 1 else { return 0 }
        var low = 0
        var high = bounds.count
        while high - low > 1 {
            let middle = (low + high) / 2
            if key.lexicographicallyPrecedes(bounds[middle]) { high = middle } else { low = middle }
        }
        return low
    }

    mutating func add(_ leaf: Hash32, toRange index: Int) {
        sums[index] = sums[index] + leaf
        counts[index] += 1
        totalSum = totalSum + leaf
        totalCount += 1
        // Eight times a range's share: reconcile would read too many rows per range.
        if counts[index] > 8 * max(Self.targetRowsPerRange, totalCount / bounds.count) { isLopsided = true }
    }

    mutating func remove(_ leaf: Hash32, fromRange index: Int) {
        sums[index] = sums[index] - leaf
        counts[index] -= 1
        totalSum = totalSum - leaf
        totalCount -= 1
    }

    /// The lower bound of range `index`, and its upper bound (`nil`: unbounded).
    func bounds(ofRange index: Int) -> (lower: [UInt8], upper: [UInt8]?) {
        (bounds[index], index + 1 < bounds.count ? bounds[index + 1] : nil)
    }

    /// A fresh index over `leaves`, which must be sorted by key with no key twice:
    /// boundaries at quantiles so each range holds about ``targetRowsPerRange`` rows.
    static func rebuilt(from leaves: [(key: [UInt8], leaf: Hash32)]) -> RangeIndex {
        var index = RangeIndex()
        let rangeCount = min(maximumRanges, max(1, leaves.count / targetRowsPerRange))
        let perRange = max(1, (leaves.count + rangeCount - 1) / rangeCount)
        index.bounds = [[]]
        index.sums = [.zero]
        index.counts = [0]
        for (position, item) in leaves.enumerated() {
            if position > 0 && position % perRange == 0 {
                index.bounds.append(item.key)
                index.sums.append(.zero)
                index.counts.append(0)
            }
            let last = index.sums.count - 1
            index.sums[last] = index.sums[last] + item.leaf
            index.counts[last] += 1
            index.totalSum = index.totalSum + item.leaf
            index.totalCount += 1
        }
        return index
    }
}

/// The sum and count of a set of hashes: the fingerprint of a namespace's
/// tombstone set, which reconcile compares before shipping the set.
struct SetFingerprint: Equatable {
    var sum: Hash32 = .zero
    var count: Int = 0

    mutating func add(_ hash: Hash32) {
        sum = sum + hash
        count += 1
    }
}
