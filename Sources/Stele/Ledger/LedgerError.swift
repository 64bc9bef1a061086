/// Why a ledger refused, halted, or could not go on.
public struct LedgerError: Error, Sendable, Equatable, CustomStringConvertible {
    public enum Code: String, Sendable, Equatable, CaseIterable {
        /// The app's store reports another identity than the one the ledger knows:
        /// it was wiped or replaced. Sync refuses until ``Ledger/reset()``.
        case storeReplaced = "store_replaced"
        /// The app's store is empty under a ledger that stamps live entities: a
        /// wipe, not a deletion of everything. Sync refuses until ``Ledger/reset()``.
        case storeEmptied = "store_emptied"
        /// A pass would turn most of the store's entities into tombstones at once, more
        /// than the app confirmed its user deleted: a wipe followed by new writes looks
        /// like this. Sync refuses until a pass confirms the deletions, or ``Ledger/reset()``.
        case massDeletion = "mass_deletion"
        /// The ledger's file failed an integrity check (a page checksum, a stamp
        /// that does not parse, a cursor beyond the hub's history). Sync is halted,
        /// the file kept as evidence; ``Ledger/reset()`` starts a fresh ledger beside it.
        case corrupt
        /// A newer Stele wrote the ledger: halted as ``corrupt`` is.
        case newerFormat = "newer_format"
        /// The file is not a ledger (another program's database).
        case notALedger = "not_a_ledger"
        /// The ledger belongs to another account or another hub.
        case wrongAccount = "wrong_account"
        /// The source reported one identity twice in one pass.
        case duplicateEntity = "duplicate_entity"
        /// An entity is larger than the hub takes, or has an empty or too long kind or id.
        case invalidEntity = "invalid_entity"
        /// A value did not encode.
        case encoding
        /// The app's store failed (its own error is in the message).
        case source
        /// The ledger's own file could not be read or written.
        case storage
    }

    public let code: Code
    public let message: String
    /// The ledger file the error is about, when it is about the file.
    public let file: String?

    public init(_ code: Code, _ message: String, file: String? = nil) {
        self.code = code
        self.message = message
        self.file = file
    }

    /// Whether sync stays stopped until ``Ledger/reset()``.
    public var halts: Bool { [.storeReplaced, .storeEmptied, .massDeletion, .corrupt, .newerFormat].contains(code) }

    public var description: String { message }
}
