import Stele

/// Statements printed back as scenario lines, by the ``ScenarioGrammar`` row
/// that parses them: `ScenarioParser` reads every line printed here as the
/// statement it came from (property tests hold it to that), so a run's
/// transcript can be built from its statements.
extension Statement: CustomStringConvertible {
    public var description: String { ScenarioGrammar.standard.printed(self) ?? ScenarioGrammar.hub.line(for: self) }
}

extension Expectation: CustomStringConvertible {
    /// The expectation as written after `expect`.
    public var description: String { ScenarioGrammar.standard.printed(.expect(self), from: 1) ?? ScenarioGrammar.hub.line(for: .expect(self), from: 1) }
}
