import SteleSQL

/// A storage failure the simulator and tests can force on a replica.
public enum StorageFault: String, Sendable, CaseIterable {
    /// `SQLITE_BUSY`: another connection holds the lock.
    case busy
    /// `SQLITE_IOERR`: the disk failed to read or write.
    case ioError = "ioerr"
    /// `SQLITE_FULL`: the disk is full.
    case full

    var resultCode: SQLiteResultCode {
        switch self {
        case .busy: .busy
        case .ioError: .ioError
        case .full: .full
        }
    }
}

extension Replica {
    /// Makes the replica's next SQLite step fail with `fault`, after letting
    /// `afterSteps` steps through (the funnel every SQLite call goes through).
    package func injectStorageFault(_ fault: StorageFault, afterSteps: Int = 0) {
        let plan = faults ?? SQLiteFaultPlan()
        plan.fail(.step, with: fault.resultCode, after: afterSteps)
        faults = plan
    }

    /// How many forced storage faults have fired on this replica.
    package var storageFaultsFired: Int { faults?.fired ?? 0 }
}

extension Replica {
    /// Where the file stands: the rows changed through this handle (rolled-back
    /// ones too) and SQLite's count of other handles' commits. Equal at two
    /// moments, on the same handle, the content did not change in between (a file
    /// replaced behind SQLite's back excepted: the simulator reopens the store
    /// after it replaces a file). `nil` when it cannot be read. For the
    /// simulator's oracle, which reads again only what may have changed.
    package func standing() -> (changes: Int64, dataVersion: Int64)? {
        guard let version = try? connection.dataVersion() else { return nil }
        return (connection.totalChanges, version)
    }
}
