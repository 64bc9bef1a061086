/// Suggestions for typos, in scenarios and on the command line.
public enum Spelling {
    /// Levenshtein distance over characters.
    public static func editDistance(_ a: String, _ b: String) -> Int {
        let a = Array(a)
        let b = Array(b)
        if a.isEmpty { return b.count }
        if b.isEmpty { return a.count }
        var previous = Array(0...b.count)
        for i in 1...a.count {
            var current = [i] + Array(repeating: 0, count: b.count)
            for j in 1...b.count {
                current[j] = min(previous[j] + 1, current[j - 1] + 1, previous[j - 1] + (a[i - 1] == b[j - 1] ? 0 : 1))
            }
            previous = current
        }
        return previous[b.count]
    }

    /// Every known word within edit distance 2 of `word` at the smallest distance found, sorted.
    public static func closestAll(_ word: String, in candidates: some Collection<String>) -> [String] {
        let scored = Set(candidates).map { ($0, editDistance(word, $0)) }.filter { $0.1 <= 2 }
        guard let best = scored.map(\.1).min() else { return [] }
        return scored.filter { $0.1 == best }.map(\.0).sorted()
    }

    /// `"; did you mean 'x'?"` (or `'x' or 'y'` when two are as close), or nothing.
    public static func hint(_ word: String, in candidates: some Collection<String>) -> String {
        let closest = closestAll(word, in: candidates)
        guard !closest.isEmpty else { return "" }
        return "; did you mean " + closest.map { "'\($0)'" }.joined(separator: " or ") + "?"
    }
}
