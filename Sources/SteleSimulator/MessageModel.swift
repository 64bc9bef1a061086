import Stele

/// What a message's ops imply, by the rules of 000 §6 as README states them,
/// written apart from ``MessageFold`` (which the replica runs): the oracle judges
/// the replica against this, so a mistake in the fold's order or its rules shows
/// as a finding instead of being agreed with.
///
/// Each property is a selection over the whole set of ops, not a replay in
/// order: the message is its earliest post; the scope is the strongest delete
/// (for everyone only from the post's account); the text is the post's or the
/// latest edit of the post's account, none on a deleted message; each reactor
/// shows their latest reaction, a removal winning a tie, then the larger emoji,
/// none on a deleted message; delivered when a receipt names the post.
struct MessageModel {
    let post: MessageOp
    let scope: DeleteScope
    let body: [UInt8]
    let reactions: [String: String]
    let isDelivered: Bool

    var isDeleted: Bool { scope != .live }

    /// `nil` while no post of the message is among `ops`.
    init?(_ ops: [MessageOp]) {
        func earlier(_ a: MessageOp, _ b: MessageOp) -> Bool { a.time != b.time ? a.time < b.time : a.id < b.id }
        let posts = ops.filter { if case .post = $0.action { true } else { false } }
        guard let post = posts.min(by: earlier), case .post(_, let postBody) = post.action else { return nil }
        let mine = ops.filter { $0.message == post.message }
        self.post = post
        var scope = DeleteScope.live
        for op in mine {
            guard case .delete(let wanted) = op.action else { continue }
            if wanted == .everyone && op.account != post.account { continue }
            if wanted > scope { scope = wanted }
        }
        self.scope = scope
        isDelivered = mine.contains { op in
            if case .receipt(let target) = op.action { target == post.id } else { false }
        }
        guard scope == .live else {
            body = []
            reactions = [:]
            return
        }
        let edits = mine.filter { op in
            if case .edit = op.action { op.account == post.account } else { false }
        }
        if let latest = edits.max(by: earlier), case .edit(let edited) = latest.action { body = edited } else { body = postBody }
        // Per reactor: (time, removal first on a tie, then the larger emoji).
        var registers: [String: (time: Int64, emoji: String?)] = [:]
        for op in mine {
            let reactor: String
            let emoji: String?
            switch op.action {
            case let .react(who, what): (reactor, emoji) = (who, what)
            case .unreact(let who): (reactor, emoji) = (who, nil)
            default: continue
            }
            guard let current = registers[reactor] else {
                registers[reactor] = (op.time, emoji)
                continue
            }
            let wins: Bool =
                if op.time != current.time { op.time > current.time }
                else if emoji == nil { current.emoji != nil }
                else if let held = current.emoji, let emoji { held.utf8.lexicographicallyPrecedes(emoji.utf8) }
                else { false }
            if wins { registers[reactor] = (op.time, emoji) }
        }
        reactions = registers.compactMapValues(\.emoji)
    }

    /// How `row` differs from what the ops imply, or `nil` when it does not.
    func difference(from row: MessageRow) -> String? {
        let show = { (bytes: [UInt8]) in "\"\(String(decoding: bytes, as: UTF8.self))\"" }
        if row.scope != scope { return "shows it \(row.isDeleted ? "deleted (\(row.scope))" : "live"), expected \(isDeleted ? "deleted (\(scope))" : "live")" }
        if row.body != body { return "shows \(show(row.body)), expected \(show(body))" }
        if row.shownReactions != reactions { return "shows reactions \(row.shownReactions.sorted { $0.key < $1.key }), expected \(reactions.sorted { $0.key < $1.key })" }
        if row.isDelivered != isDelivered { return "shows it \(row.isDelivered ? "" : "not ")delivered, expected \(isDelivered ? "" : "not ")delivered" }
        if row.author != author { return "shows author \(row.author), expected \(author)" }
        return nil
    }

    private var author: String {
        if case .post(let author, _) = post.action { author } else { "" }
    }
}
