extension Array {
    /// Every ordering of the elements (for arrival-order tests; keep arrays small).
    public func permutations() -> [[Element]] {
        guard count > 1 else { return [self] }
        var result: [[Element]] = []
        for index in indices {
            var rest = self
            let head = rest.remove(at: index)
            for tail in rest.permutations() { result.append([head] + tail) }
        }
        return result
    }
}
