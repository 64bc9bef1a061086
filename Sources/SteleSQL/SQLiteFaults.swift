import Synchronization

/// The fallible SQLite entry points, as the fault funnel names them.
public enum SQLiteOperation: String, Sendable, CaseIterable {
    case open, configure, prepare, bind, step, execute
    case begin, commit, rollback, savepoint, release
    case backupInit = "backup-init", backupStep = "backup-step", backupFinish = "backup-finish"
}

/// One fallible SQLite call about to be made, as seen by a fault plan.
public struct SQLiteCall: Sendable {
    public let operation: SQLiteOperation
    /// The statement's SQL text when the call concerns one.
    public let sql: String?
}

/// A deterministic plan of failures forced through the funnel every fallible
/// `sqlite3_*` call goes through (STYLE "SQLite": tests and the simulator force
/// `SQLITE_BUSY`, `SQLITE_IOERR`, `SQLITE_FULL` on a chosen step).
///
/// A rule fires on the `n`-th call that matches it, counting from when it was
/// added, and then as many more times as its `count` allows. A forced failure
/// replaces the call: SQLite never sees it.
public final class SQLiteFaultPlan: Sendable {
    private struct Rule {
        var operation: SQLiteOperation?
        var sqlContains: String?
        var skip: Int
        var remaining: Int
        var code: SQLiteResultCode
    }

    private let rules = Mutex<[Rule]>([])
    private let firedCount = Mutex(0)
    private let pauses = Mutex(0)

    public init() {}

    /// Fails a matching call with `code`.
    /// - Parameters:
    ///   - operation: the call to fail, or `nil` for any.
    ///   - sqlContains: only calls whose SQL contains this text, or `nil` for any.
    ///   - after: how many matching calls to let through first.
    ///   - count: how many matching calls to fail once it starts.
    public func fail(
        _ operation: SQLiteOperation?, with code: SQLiteResultCode,
        sqlContains: String? = nil, after: Int = 0, count: Int = 1
    ) {
        precondition(after >= 0 && count >= 1, "a fault rule needs after >= 0 and count >= 1")
        rules.withLock {
            $0.append(Rule(operation: operation, sqlContains: sqlContains, skip: after, remaining: count, code: code))
        }
    }

    /// Removes every rule that has not fired yet.
    public func clear() { rules.withLock { $0.removeAll() } }

    /// Holds every rule back until the matching ``resume()``: calls made
    /// meanwhile (an observer's reads) neither fail nor count toward `after`.
    /// Pauses nest.
    public func pause() { pauses.withLock { $0 += 1 } }

    /// Ends one ``pause()``.
    public func resume() { pauses.withLock { $0 = max(0, $0 - 1) } }

    /// How many calls this plan has failed so far.
    public var fired: Int { firedCount.withLock { $0 } }

    /// Rules that have not used up their failures.
    public var pendingRules: Int { rules.withLock { $0.count } }

    /// Decides the fate of one call: the code to force, or `nil` to let it run.
    func intercept(_ call: SQLiteCall) -> SQLiteResultCode? {
        guard pauses.withLock({ $0 }) == 0 else { return nil }
        let forced: SQLiteResultCode? = rules.withLock { rules in
            for index in rules.indices {
                let rule = rules[index]
                if let operation = rule.operation, operation != call.operation { continue }
                if let needle = rule.sqlContains, !(call.sql?.contains(needle) ?? false) { continue }
                if rule.skip > 0 {
                    rules[index].skip -= 1
                    continue
                }
                rules[index].remaining -= 1
                if rules[index].remaining == 0 { rules.remove(at: index) }
                return rule.code
            }
            return nil
        }
        if forced != nil { firedCount.withLock { $0 += 1 } }
        return forced
    }
}
