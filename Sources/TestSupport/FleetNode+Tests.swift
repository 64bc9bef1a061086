import Stele

extension FleetNode {
    /// Handles an input at the same monotonic instant as the last one: for
    /// tests in which no time passes (one that needs time to pass says `at:`).
    public mutating func handle(_ input: FleetInput) -> [FleetOutput] {
        handle(input, at: monotonicNow)
    }
}
