/// The bounds every decoder enforces before it allocates (DESIGN §5). Input
/// beyond them is a ``CodecError``, never a trap and never a huge allocation.
public enum WireLimits {
    /// The largest frame, after decompression: 64 MiB.
    public static let maximumFrameBytes = 64 << 20
    /// Namespaces in one advertisement.
    public static let maximumNamespaces = 1_024
    /// Records (rows, tombstones, events) in one frame.
    public static let maximumRecords = 2_000_000
    /// Ranges in one reconcile message.
    public static let maximumRanges = 65_536
    /// Leaves in one range, and wanted keys in one message.
    public static let maximumLeaves = 1_000_000
    /// Distinct devices named in one frame.
    public static let maximumDevices = VersionVector.maximumEntries
}
