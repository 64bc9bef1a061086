/// Suggestions for typos, in scenarios and on the command line.
public enum Spelling {
    /// The known word within edit distance 2 of `word`, if any (the first in
    /// sorted order among the closest).
    public static func closest(_ word: String, in candidates: some Collection<String>) -> String? {
        var best: (word: String, distance: Int)?
        for candidate in candidates.sorted() {
            let distance = editDistance(word, candidate)
            if distance <= 2 && distance < (best?.distance ?? Int.max) { best = (candidate, distance) }
        }
        return best?.word
    }

    /// Levenshtein distance over characters.
    static func editDistance(_ a: String, _ b: String) -> Int {
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

    /// `"; did you mean 'x'?"`, or nothing.
    public static func hint(_ word: String, in candidates: some Collection<String>) -> String {
        closest(word, in: candidates).map { "; did you mean '\($0)'?" } ?? ""
    }
}
