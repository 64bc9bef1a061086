/// A small cache of one caller's hot statements, found by slot number (an
/// array index) instead of by hashing SQL text: the statements of one namespace,
/// say. Statements are prepared on first use and prepared afresh after a failed step.
///
/// Statements come back reset but with their previous bindings: callers bind
/// every parameter each time.
public final class StatementSlots {
    private unowned let connection: Connection
    private var statements: [Statement?]

    public init(connection: Connection, count: Int) {
        self.connection = connection
        statements = Array(repeating: nil, count: count)
    }

    /// The statement in `slot`, preparing `sql` if the slot is empty or its statement failed.
    /// - Precondition: `slot` is below the count given at creation.
    public func statement(_ slot: Int, _ sql: @autoclosure () -> String) throws -> Statement {
        if let statement = statements[slot], !statement.hasFailed {
            statement.resetKeepingBindings()
            return statement
        }
        let statement = try connection.prepare(sql())
        statements[slot] = statement
        return statement
    }
}
