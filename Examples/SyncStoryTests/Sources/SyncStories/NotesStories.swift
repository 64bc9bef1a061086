import Stele

/// How the app keeps its notes: one namespace, declared alike on every device.
public enum NotesSchema {
    public static let namespace = "notes"
    public static let kind = NamespaceKind.causal

    /// Declares the app's namespaces in a device's replica (at every launch; declaring is idempotent).
    public static func declare(in replica: Replica) throws {
        try replica.declare(namespace, kind)
    }
}

/// What the app promises about sync, told as scenarios (the language of
/// `stele scenario`, one statement a line) over its own namespace, so the stories
/// and the app cannot drift apart. The tests run them in the simulator.
public enum NotesStories {
    /// The iPad sleeps for a week while the phone deletes a note: nothing is
    /// collected while it sleeps, and once it wakes the note stays deleted everywhere.
    public static let sleepingIPad = """
        fleet phone ipad
        namespace \(NotesSchema.namespace) \(NotesSchema.kind.rawValue)
        phone put notes groceries "milk"
        phone put notes todo "call the plumber"
        sync
        offline ipad
        phone delete notes groceries
        sync
        advance 7d
        expect phone gc blocked by ipad
        online ipad
        sync
        expect all notes groceries absent
        expect all notes todo = "call the plumber"
        expect phone tombstones 0
        expect ipad generation 1
        expect resurrections 0
        expect lost-writes 0
        """

    /// A delete that raced an edit it never saw loses to it (add-wins), and the
    /// merge reports the conflict (the app tells its user).
    public static let deleteRacedTheEdit = """
        fleet phone laptop
        namespace \(NotesSchema.namespace) \(NotesSchema.kind.rawValue)
        phone put notes todo "v1"
        sync
        partition phone / laptop
        phone put notes todo "v2"
        laptop delete notes todo
        heal
        sync
        expect all notes todo = "v2"
        expect phone conflict notes todo
        expect converged
        expect resurrections 0
        """
}
