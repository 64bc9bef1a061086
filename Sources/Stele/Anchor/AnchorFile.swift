/// The anchor's bytes on a substrate:
///
///     "STELEANC" (8) ‖ format 1 (1) ‖ account (16) ‖ generation (8, big-endian)
///     ‖ round nonce (16) ‖ digest (32) ‖ sealed snapshot (AES-256-GCM)
///
/// The header is in the clear (001 §7: "the check costs one download and no key
/// at all") and is the sealed body's associated data, so a header edited on the
/// substrate makes the body refuse to open: a recovery never trusts a header the
/// key did not seal.
public enum AnchorFile {
    static let magic = Array("STELEANC".utf8)
    static let format: UInt8 = 1
    static let headerCount = magic.count + 1 + AccountID.byteCount + 8 + RoundNonce.byteCount + Hash32.byteCount
    /// Bound on a whole anchor file (a snapshot larger than this is refused before reading).
    public static let maximumCount = 1 << 30

    public static func encode(_ anchor: Anchor, key: AccountKey) -> [UInt8] {
        let header = encode(anchor.header)
        return header + Sealing.seal(anchor.snapshot, key: key, associated: header)
    }

    /// With the nonce drawn from `generator` (cryptographically secure in an app;
    /// seeded in the simulator, so that a run replays the same bytes).
    public static func encode(_ anchor: Anchor, key: AccountKey, using generator: inout some RandomNumberGenerator) -> [UInt8] {
        let header = encode(anchor.header)
        return header + Sealing.seal(anchor.snapshot, key: key, associated: header, using: &generator)
    }

    static func encode(_ header: AnchorHeader) -> [UInt8] {
        var writer = ByteWriter(capacity: headerCount)
        writer.append(magic)
        writer.append(format)
        writer.append(header.account.bytes)
        writer.appendBigEndian(header.generation)
        writer.append(header.round.bytes)
        writer.append(header.digest.bytes)
        return writer.bytes
    }

    /// Whether an anchor with header `new` may land over `stored`, the header the
    /// substrate holds (`nil`: nothing, or bytes that are not an anchor).
    /// - Throws: ``AnchorError`` `superseded` unless ``AnchorHeader/mayReplace(_:)``.
    public static func checkReplaces(_ stored: AnchorHeader?, with new: AnchorHeader) throws {
        guard let stored, !new.mayReplace(stored) else { return }
        throw AnchorError(
            .superseded,
            "the substrate holds the anchor of generation \(stored.generation) (round \(stored.round)); one of generation \(new.generation) (round \(new.round)) may not replace it, as a generation is written by one round only; the stored anchor is unchanged")
    }

    /// Reads the cleartext header only.
    /// - Throws: ``AnchorError`` `damaged` or `newerFormat`.
    public static func header(_ bytes: [UInt8]) throws -> AnchorHeader {
        guard bytes.count >= headerCount + Sealing.overhead else {
            throw AnchorError(.damaged, "the anchor file is \(bytes.count) bytes, shorter than any anchor; it was cut short or is not an anchor")
        }
        guard Array(bytes.prefix(magic.count)) == magic else {
            throw AnchorError(.damaged, "the file is not a Stele anchor (its first bytes are not STELEANC)")
        }
        do {
            var reader = ByteReader(bytes)
            _ = try reader.readBytes(magic.count, "anchor magic")
            let version = try reader.readByte("anchor format")
            guard version == format else {
                throw AnchorError(
                    version > format ? .newerFormat : .damaged,
                    version > format ? "the anchor was written in format \(version) by a newer Stele; update this device" : "unknown anchor format \(version)")
            }
            let account = try AccountID(bytes: try reader.readBytes(AccountID.byteCount, "anchor account"))
            let generation = try reader.readBigEndianUInt64("anchor generation")
            let round = try RoundNonce(bytes: try reader.readBytes(RoundNonce.byteCount, "anchor round"))
            let digest = try Hash32(bytes: try reader.readBytes(Hash32.byteCount, "anchor digest"))
            return AnchorHeader(account: account, generation: generation, round: round, digest: digest)
        } catch let error as CodecError {
            throw AnchorError(.damaged, "the anchor header is malformed: \(error)")
        }
    }

    /// Reads and opens a whole anchor.
    /// - Throws: ``AnchorError`` `damaged`, `newerFormat`, or `notAuthentic` when the
    ///   body does not open under `key` with this header.
    public static func decode(_ bytes: [UInt8], key: AccountKey) throws -> Anchor {
        let header = try header(bytes)
        guard let snapshot = Sealing.open(bytes[headerCount...], key: key, associated: Array(bytes.prefix(headerCount))) else {
            throw AnchorError(
                .notAuthentic,
                "the anchor's snapshot does not open with this account key: the key is not the account's current one, or the file was changed; nothing was imported")
        }
        return Anchor(header: header, snapshot: snapshot)
    }
}
