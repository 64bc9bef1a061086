/// An error from the replica store: bad input, a file that is not ours, a rule
/// the caller broke. Each message says what happened and what to do; none of
/// these errors leaves the store modified.
///
/// SQLite failures (disk full, I/O errors, busy) surface as `SteleSQL.SQLiteError`.
public struct ReplicaError: Error, Sendable, CustomStringConvertible {
    /// What kind of error this is. New codes may be added without breaking callers.
    public struct Code: Hashable, Sendable, CustomStringConvertible {
        private enum Value: String {
            case notAStore, corrupt, newerFormat, storeExists, storeMissing
            case accountMismatch, deviceMismatch
            case kindMismatch, undeclaredNamespace, invalidName, limitExceeded
            case appendOnlyIsFinal, groupBuried, invalidRecord, notDecodable, readOnly
            case messageExists, messageMissing, messageDeleted, notAuthor, conversationMismatch
            case stampFloorUnavailable, folderNotWritable
        }
        private let value: Value
        private init(_ value: Value) { self.value = value }

        /// The file is not a Stele store (not SQLite, or another application's database).
        public static let notAStore = Code(.notAStore)
        /// A Stele store whose bookkeeping is damaged; sync must stop (G5).
        public static let corrupt = Code(.corrupt)
        /// The store was written by a newer Stele.
        public static let newerFormat = Code(.newerFormat)
        /// `create` found a store already at the path.
        public static let storeExists = Code(.storeExists)
        /// `open` found no store at the path.
        public static let storeMissing = Code(.storeMissing)
        /// The store's folder cannot be written, and SQLite keeps a store's `-wal`
        /// and `-shm` files beside it: it cannot be opened to write. (A read-only
        /// open of a store with neither file reads it as it is.)
        public static let folderNotWritable = Code(.folderNotWritable)
        /// The store belongs to another account.
        public static let accountMismatch = Code(.accountMismatch)
        /// The store belongs to another device.
        public static let deviceMismatch = Code(.deviceMismatch)
        /// A post reused the id of a message this store already holds.
        public static let messageExists = Code(.messageExists)
        /// An edit, delete or reaction named a message this store does not hold.
        public static let messageMissing = Code(.messageMissing)
        /// An edit or reaction named a deleted message (a delete is absorbing, 000 §6).
        public static let messageDeleted = Code(.messageDeleted)
        /// A conversation declared with another contact before, with this account
        /// itself, or a delivery from an account the conversation is not with.
        public static let conversationMismatch = Code(.conversationMismatch)
        /// An edit, or a delete for everyone, of a message a contact wrote.
        public static let notAuthor = Code(.notAuthor)
        /// A namespace was declared with a different kind before.
        public static let kindMismatch = Code(.kindMismatch)
        /// No namespace of that name is declared.
        public static let undeclaredNamespace = Code(.undeclaredNamespace)
        /// A namespace, key or group name that is empty, too long, or has characters not allowed.
        public static let invalidName = Code(.invalidName)
        /// A key or value over the size limit.
        public static let limitExceeded = Code(.limitExceeded)
        /// A second write to an `appendOnly` record, or a delete of one.
        public static let appendOnlyIsFinal = Code(.appendOnlyIsFinal)
        /// An append to a `log` group that has been buried.
        public static let groupBuried = Code(.groupBuried)
        /// A remote record that breaks the format (a vector without its writer, a timestamp out of range).
        public static let invalidRecord = Code(.invalidRecord)
        /// A stored value that does not decode as the requested type.
        public static let notDecodable = Code(.notDecodable)
        /// A write to a store opened read-only.
        public static let readOnly = Code(.readOnly)
        /// The key store could not record the stamp floor (``StampFloor``), so the
        /// write was not made: without it, a restore could make the device issue
        /// a stamp twice.
        public static let stampFloorUnavailable = Code(.stampFloorUnavailable)

        public var description: String { value.rawValue }
    }

    public let code: Code
    /// What happened and what to do.
    public let message: String
    /// The underlying error, when there is one.
    public let cause: (any Error)?

    public init(_ code: Code, _ message: String, cause: (any Error)? = nil) {
        self.code = code
        self.message = message
        self.cause = cause
    }

    public var description: String {
        guard let cause else { return message }
        return "\(message) (\(cause))"
    }
}

/// An underlying error kept as its description, for causes that are not `Sendable`
/// (Foundation's coding errors carry coding paths).
public struct DescribedError: Error, Sendable, CustomStringConvertible {
    public let description: String

    public init(_ description: String) { self.description = description }
}
