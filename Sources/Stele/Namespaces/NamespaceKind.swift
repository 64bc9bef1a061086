/// The merge rule a namespace follows (DESIGN §4). Chosen when the namespace is
/// declared, fixed for its lifetime, and the same on every device of an account.
public enum NamespaceKind: String, Sendable, CaseIterable, CustomStringConvertible {
    /// Rows merged by version vectors; concurrent delete vs edit: add-wins (000 §4-5).
    case causal
    /// Last writer wins on hybrid timestamps; an exact tie: delete wins (000 §5).
    case lww
    /// Append-only events with groups; a tombstone event buries its group (000 §1-3).
    case log
    /// Records whose first live write is final; tombstones never beat them (002).
    case appendOnly
    /// Messages: a fold over immutable ops whose deletes are absorbing (000 §6, DESIGN §7).
    case messages
    /// Device-local state, never replicated (000 §7).
    case local

    /// Whether the namespace takes part in sync.
    public var isReplicated: Bool { self != .local }

    public var description: String { rawValue }
}
