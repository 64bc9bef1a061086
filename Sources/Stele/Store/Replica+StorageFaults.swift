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
