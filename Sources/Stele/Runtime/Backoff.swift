/// Capped exponential back-off with jitter: the first retry after about
/// ``initialSeconds``, each further one twice as long up to ``maximumSeconds``,
/// each drawn between half and all of that so a fleet that lost its hub at one
/// moment does not come back at one moment either.
struct Backoff {
    var initialSeconds: Double
    var maximumSeconds: Double
    /// Failures since the last success.
    private(set) var failures = 0

    init(initialSeconds: Double, maximumSeconds: Double) {
        self.initialSeconds = initialSeconds
        self.maximumSeconds = maximumSeconds
    }

    /// The pause before the next try, counting one more failure.
    mutating func next(using random: inout some RandomNumberGenerator) -> Double {
        let ceiling = min(maximumSeconds, initialSeconds * Double(1 << min(failures, 30)))
        failures += 1
        return ceiling / 2 + Double.random(in: 0...(ceiling / 2), using: &random)
    }

    mutating func reset() { failures = 0 }
}
