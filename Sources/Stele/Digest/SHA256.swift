/// SHA-256 from the cryptographic backend (``CryptoBackend``), reusing one
/// state: digests are computed for many small messages (a leaf per write, a
/// fingerprint per entity of a ledger pass), where setting up a state would
/// dominate. Public for the ledger benchmark's baseline (hashing what a pass
/// hashes, the same way).
/// Not `Sendable`: one hasher per replica, used from its owner.
public final class SHA256 {
    private let state = Crypto.Hasher()

    public init() {}

    /// The SHA-256 digest of `bytes`.
    func hash(_ bytes: UnsafeRawBufferPointer) -> Hash32 { state.hash(bytes) }

    public func hash(_ bytes: [UInt8]) -> Hash32 {
        bytes.withUnsafeBytes { hash($0) }
    }
}

/// One SHA-256 over a sequence of byte strings, each prefixed with its length
/// (so two sequences that concatenate alike still differ): a fingerprint of
/// every frame a run delivered, in order (`stele simulate --json`'s `wireDigest`).
public final class RunningDigest {
    private let state = Crypto.Running()

    public init() {}

    /// Adds one byte string.
    public func add(_ bytes: [UInt8]) {
        withUnsafeBytes(of: UInt64(bytes.count).bigEndian) { state.add($0) }
        bytes.withUnsafeBytes { state.add($0) }
    }

    /// The digest of everything added so far (more may be added after).
    public var value: Hash32 { state.value }
}
