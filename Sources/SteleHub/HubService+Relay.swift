import Stele
import SteleSQL

/// The relay (HUB-API "Relay"): one durable mailbox per device, acknowledged by
/// cursor, bounded. A frame answered `202` is committed before the answer.
extension HubService {
    /// The wakeup key of a device's mailbox.
    static func mailboxKey(_ account: String, _ device: String) -> String { "relay:\(account):\(device)" }

    /// The largest `after` a relay poll takes: 2^62, which no mailbox's numbers come
    /// near (one a nanosecond for a century is below 2^62), and which leaves 2^62
    /// numbers past it. A cursor beyond it would be taken as one from a lost history
    /// (``numberMailbox(of:past:_:)``) and leave the counter so near 2^63 that the
    /// next frames could not be numbered: the mailbox refused every frame for good.
    public static let largestRelayCursor: Int64 = 1 << 62

    /// The most bytes of frames one long-poll answer carries (at least one frame always).
    static let answerBytesLimit = 8 << 20

    /// `POST /v1/accounts/{a}/relay/{device}` (a member's session, `sender` set)
    /// and `POST /v1/accounts/{a}/contact-relay/{device}` (a contact's device, no
    /// token: the hub learns nothing of the sender the sealed channel hides).
    func deliver(_ account: AccountID, to recipientText: String, _ request: HubRequest, from sender: HubRequest?) throws -> HubResponse {
        let recipient = try Self.device(recipientText)
        let frame = request.body
        guard !frame.isEmpty else { throw HubRefusal.badRequest("the body is empty; send one sealed frame as application/octet-stream") }
        guard frame.count <= configuration.maximumFrameBytes else {
            throw HubRefusal(413, "too_large", "the frame is \(frame.count) bytes, over the relay's \(configuration.maximumFrameBytes)-byte limit")
        }
        let key = Self.mailboxKey(account.hex, recipient.hex)
        let response = try transaction(account) { sql in
            if let sender { _ = try authenticate(sender, account, sql) } else { try requireAccount(account, sql) }
            // One row update takes the sequence number and the bytes together, so two
            // hub processes on one PostgreSQL never hand out one number twice.
            let taken = try sql.query(
                """
                UPDATE devices SET mailbox_next = mailbox_next + 1, mailbox_bytes = mailbox_bytes + $3
                WHERE account = $1 AND device = $2 AND state = 'member' AND mailbox_bytes + $3 <= $4
                RETURNING mailbox_next
                """,
                [.text(account.hex), .text(recipient.hex), .integer(Int64(frame.count)), .integer(Int64(configuration.maximumMailboxBytes))])
            guard let seq = taken.first?[column: 0].int64 else {
                let state = try sql.query("SELECT state FROM devices WHERE account = $1 AND device = $2", [.text(account.hex), .text(recipient.hex)]).first?[column: 0].string
                switch state {
                case nil: throw HubRefusal.notFound("device \(recipient.hex) is not on account \(account.hex)'s roster")
                case "revoked": throw HubRefusal(410, "revoked", "device \(recipient.hex) was revoked; frames for it are refused")
                default:
                    throw HubRefusal(429, "mailbox_full", "device \(recipient.hex)'s mailbox holds its \(configuration.maximumMailboxBytes)-byte limit; retry after it reads",
                        headers: ["Retry-After": String(configuration.retryAfterSeconds)])
                }
            }
            try sql.execute(
                "INSERT INTO mailbox (account, device, seq, frame, created_ms) VALUES ($1, $2, $3, $4, $5)",
                [.text(account.hex), .text(recipient.hex), .integer(seq), .blob(frame), .integer(now())])
            // The relay's hot path: one integer needs no serializer (a third of this answer's cost through it).
            return HubResponse(status: 202, headers: ["Content-Type": "application/json"], body: Array("{\"seq\":\(seq)}".utf8))
        }
        announce(key)
        return response
    }

    /// `GET /v1/accounts/{a}/relay?after=SEQ&wait=SECONDS`: deletes the frames up
    /// to `after`, then answers the ones after it, or parks until one lands.
    func receive(_ account: AccountID, _ request: HubRequest) throws -> HubOutcome {
        let after = try Self.queryInteger(request, "after", default: 0, range: 0...Self.largestRelayCursor)
        let wait = try Self.queryInteger(request, "wait", default: 30, range: 0...Int64(configuration.maximumWaitSeconds))
        // The acknowledgement and the first look share one transaction.
        let (caller, first) = try transaction(account) { sql in
            let caller = try authenticate(request, account, sql)
            let parameters: [SQLValue] = [.text(caller.account), .text(caller.device), .integer(after)]
            // The cursor first: on PostgreSQL the row's lock keeps any frame from taking a
            // number until this transaction ends.
            let last = try sql.query(
                "UPDATE devices SET relay_cursor = CASE WHEN relay_cursor > $3 THEN relay_cursor ELSE $3 END, last_seen_ms = $4 WHERE account = $1 AND device = $2 RETURNING mailbox_next",
                parameters + [.integer(now())]
            ).first?[column: 0].int64
            if let last, after > last { try numberMailbox(of: caller, past: after, sql) }
            if try sql.execute("DELETE FROM mailbox WHERE account = $1 AND device = $2 AND seq <= $3", parameters) > 0 {
                try sql.execute(
                    "UPDATE devices SET mailbox_bytes = (SELECT CAST(COALESCE(sum(length(frame)), 0) AS BIGINT) FROM mailbox WHERE account = $1 AND device = $2) WHERE account = $1 AND device = $2",
                    [.text(caller.account), .text(caller.device)])
            }
            return (caller, try frames(of: caller, after: after, sql))
        }
        if let first { return .respond(first) }
        if wait == 0 { return .respond(Self.frames([], next: after)) }
        return .wait(
            HubWait(
                key: Self.mailboxKey(caller.account, caller.device), waitSeconds: Double(wait),
                poll: { [self] in
                    do {
                        return try pending(caller, request, account, after: after)
                    } catch {
                        return Self.answer(for: error)
                    }
                },
                expire: { Self.frames([], next: after) }))
    }

    /// A cursor past the last sequence number the mailbox handed out comes from
    /// another history of it: the hub's database was put back from a backup while
    /// the device kept its cursor. Taken as it is, the acknowledgement would delete
    /// unseen every frame numbered up to the cursor, those held and those sent until
    /// the numbers caught up (the device deaf meanwhile). So the frames held are
    /// numbered again past the cursor, in their order, and the counter moves past
    /// them: the ack deletes none of them, and every later frame is numbered past
    /// the cursor too. A frame the device read before the restore may come again;
    /// delivery is at least once (HUB-API "Relay").
    /// The caller holds the device's row (``receive(_:_:)``).
    /// - Throws: `400 bad_request` for a cursor so far out that numbering past it overflows.
    private func numberMailbox(of caller: Caller, past after: Int64, _ sql: any HubSQL) throws {
        let device: [SQLValue] = [.text(caller.account), .text(caller.device)]
        let held = try sql.query("SELECT MIN(seq), MAX(seq) FROM mailbox WHERE account = $1 AND device = $2", device).first
        var next = after
        if let lowest = held?[column: 0].int64, let highest = held?[column: 1].int64 {
            let (moved, overflow) = after.addingReportingOverflow(highest - lowest + 1)
            guard !overflow else {
                throw HubRefusal.badRequest(
                    "the query parameter \"after\" (\(after)) is past every sequence number this mailbox handed out, and too far to number its frames after it")
            }
            // Every new number is past every old one, so no two rows meet on the way.
            try sql.execute("UPDATE mailbox SET seq = seq + $3 WHERE account = $1 AND device = $2", device + [.integer(after - lowest + 1)])
            next = moved
        }
        try sql.execute("UPDATE devices SET mailbox_next = $3 WHERE account = $1 AND device = $2", device + [.integer(next)])
    }

    /// The caller's frames after `after`, or `nil` when there are none; the
    /// session is checked again, so a revocation ends a parked poll.
    private func pending(_ caller: Caller, _ request: HubRequest, _ account: AccountID, after: Int64) throws -> HubResponse? {
        try transaction(account) { sql in
            _ = try authenticate(request, account, sql)
            return try frames(of: caller, after: after, sql)
        }
    }

    /// The relay answer with `caller`'s frames after `after` (up to ``answerBytesLimit``
    /// bytes, at least one frame), or `nil` when there are none.
    private func frames(of caller: Caller, after: Int64, _ sql: any HubSQL) throws -> HubResponse? {
        let rows = try sql.query(
            "SELECT seq, frame FROM mailbox WHERE account = $1 AND device = $2 AND seq > $3 ORDER BY seq LIMIT 512",
            [.text(caller.account), .text(caller.device), .integer(after)])
        guard !rows.isEmpty else { return nil }
        var frames: [(Int64, [UInt8])] = []
        var bytes = 0
        for row in rows {
            guard let seq = row[column: 0].int64, let frame = row[column: 1].bytes else { continue }
            if !frames.isEmpty && bytes + frame.count > Self.answerBytesLimit { break }
            frames.append((seq, frame))
            bytes += frame.count
        }
        return Self.frames(frames, next: frames.last?.0 ?? after)
    }

    /// HUB-API's relay body: u64 next-seq, then per frame u64 seq, u32 length, bytes (big-endian).
    static func frames(_ frames: [(Int64, [UInt8])], next: Int64) -> HubResponse {
        var body: [UInt8] = []
        body.reserveCapacity(8 + frames.reduce(0) { $0 + 12 + $1.1.count })
        func append(_ value: UInt64, bytes: Int) {
            for shift in stride(from: (bytes - 1) * 8, through: 0, by: -8) { body.append(UInt8(truncatingIfNeeded: value >> UInt64(shift))) }
        }
        append(UInt64(next), bytes: 8)
        for (seq, frame) in frames {
            append(UInt64(seq), bytes: 8)
            append(UInt64(frame.count), bytes: 4)
            body.append(contentsOf: frame)
        }
        return HubResponse(status: 200, headers: ["Content-Type": "application/octet-stream"], body: body)
    }

    /// A query parameter as an integer in `range`, `fallback` when absent.
    static func queryInteger(_ request: HubRequest, _ name: String, default fallback: Int64, range: ClosedRange<Int64>) throws(HubRefusal) -> Int64 {
        guard let text = request.query[name] else { return fallback }
        guard let value = Int64(text), range.contains(value) else {
            throw .badRequest("the query parameter \"\(name)\" must be an integer from \(range.lowerBound) to \(range.upperBound)")
        }
        return value
    }
}
