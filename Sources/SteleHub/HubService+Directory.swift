import Foundation
import Stele
import SteleSQL

/// Accounts, invites, sessions, the roster log, join requests and wrapped keys
/// (HUB-API "Accounts, devices, sessions"). The hub runs the library's roster
/// verification itself (``Roster/append(_:)``), so it stores only a log every
/// device would accept.
extension HubService {
    /// A one-time invite code (`stele-hub invite`); only its digest is stored.
    public func createInvite() throws -> String {
        let code = Self.secret(bytes: 12)
        try transaction { sql in
            try sql.execute("INSERT INTO invites (code_hash, created_ms) VALUES ($1, $2)", [.text(Self.digest(code)), .integer(now())])
        }
        return code
    }

    /// `POST /v1/accounts`: `{"invite", "genesis", "name"?}`, the genesis being the
    /// founding roster's bytes (``Roster/encoded``: the account id and the
    /// founder's self-approval); `name` (an addition to HUB-API) names the
    /// founding device in status.
    func createAccount(_ request: HubRequest) throws -> HubResponse {
        let body = try HubJSON.object(request.body)
        let genesisBytes = try body.bytes("genesis")
        let invite = try body.optionalString("invite")
        let name = try body.optionalString("name")
        try Self.checkName(name)
        let roster: Roster
        do {
            roster = try Roster(decoding: genesisBytes)
        } catch {
            throw HubRefusal(422, "invalid_change", "the genesis is not a founding roster entry that verifies: \(error)")
        }
        guard roster.changes.count == 1, let founder = roster.changes.first else {
            throw HubRefusal(422, "invalid_change", "the genesis must hold exactly the founder's self-approval, not \(roster.changes.count) changes")
        }
        // An account lives in its shard; invite codes live in the first (ShardedHubStorage).
        // On one database both go in one transaction; across two, a spent invite is given
        // back when the account cannot be made after all.
        let home = storage.shard(for: roster.account.hex)
        let separate = home !== storage.shards[0]
        func spendInvite(_ sql: any HubSQL) throws {
            guard !configuration.open else { return }
            guard let invite else { throw HubRefusal(403, "invite_required", "this hub creates accounts only with an invite code; ask its operator for one (stele-hub invite)") }
            let spent = try sql.execute("UPDATE invites SET spent_ms = $2 WHERE code_hash = $1 AND spent_ms IS NULL", [.text(Self.digest(invite)), .integer(now())])
            guard spent == 1 else { throw HubRefusal(403, "invite_required", "the invite code is unknown or already spent; ask the hub's operator for a new one") }
        }
        func exists(_ sql: any HubSQL) throws {
            // An account that exists is a conflict before any invite is spent on it.
            guard try sql.query("SELECT 1 FROM accounts WHERE id = $1", [.text(roster.account.hex)]).isEmpty else {
                throw HubRefusal(409, "conflict", "account \(roster.account.hex) already exists on this hub")
            }
        }
        if separate {
            try home.transaction { sql in try exists(sql) }
            try storage.shards[0].transaction { sql in try spendInvite(sql) }
        }
        do {
            return try home.transaction { sql in
                try exists(sql)
                if !separate { try spendInvite(sql) }
                return try insertAccount(roster, founder: founder, name: name, sql)
            }
        } catch {
            if separate, !configuration.open, let invite {
                _ = try? storage.shards[0].transaction { sql in
                    try sql.execute("UPDATE invites SET spent_ms = NULL WHERE code_hash = $1", [.text(Self.digest(invite))])
                }
            }
            throw error
        }
    }

    private func insertAccount(_ roster: Roster, founder: RosterChange, name: String?, _ sql: any HubSQL) throws -> HubResponse {
        try sql.execute("INSERT INTO accounts (id, created_ms, roster_version) VALUES ($1, $2, 1)", [.text(roster.account.hex), .integer(now())])
        try sql.execute("INSERT INTO roster_changes (account, idx, change) VALUES ($1, 0, $2)", [.text(roster.account.hex), .blob(founder.encoded)])
        try sql.execute(
            "INSERT INTO devices (account, device, signing_key, state, name) VALUES ($1, $2, $3, 'member', $4)",
            [.text(roster.account.hex), .text(founder.device.hex), .blob(founder.signingKey), name.map(SQLValue.text) ?? .null])
        return HubJSON.response(["account": roster.account.hex], status: 201)
    }

    /// `POST /v1/accounts/{a}/sessions`: a signed proof → a short-lived bearer token.
    func openSession(_ account: AccountID, _ request: HubRequest) throws -> HubResponse {
        let body = try HubJSON.object(request.body)
        let device = try Self.device(try body.string("device"), field: "device")
        let time = try body.integer("time")
        let signature = try body.bytes("signature")
        let hubTime = now()
        return try transaction(account) { sql in
            try requireAccount(account, sql)
            let rows = try sql.query("SELECT signing_key, state FROM devices WHERE account = $1 AND device = $2", [.text(account.hex), .text(device.hex)])
            guard let row = rows.first, let key = row[column: 0].bytes, let state = row[column: 1].string else {
                throw HubRefusal(403, "not_a_member", "device \(device.hex) is not on account \(account.hex)'s roster; a member must approve it first")
            }
            guard state == "member" else { throw HubRefusal(403, "revoked", "device \(device.hex) was revoked from this account; it cannot open sessions") }
            guard abs(time - hubTime) <= Int64(configuration.maximumProofSkewSeconds) * 1000 else {
                throw HubRefusal(403, "clock_skew", "the proof's time \(time) is more than \(configuration.maximumProofSkewSeconds) s from the hub's \(hubTime); correct the device's clock and sign again")
            }
            guard HubSessionProof.verify(signature, account: account, device: device, timeMilliseconds: time, publicKey: key) else {
                throw HubRefusal(403, "bad_signature", "the signature is not the device's roster key over the session statement (HUB-API sessions)")
            }
            let token = Self.secret(bytes: 32)
            let expires = hubTime + Int64(configuration.sessionLifetimeSeconds) * 1000
            try sql.execute("DELETE FROM sessions WHERE account = $1 AND device = $2 AND expires_ms <= $3", [.text(account.hex), .text(device.hex), .integer(hubTime)])
            try sql.execute(
                "INSERT INTO sessions (token_hash, account, device, expires_ms) VALUES ($1, $2, $3, $4)",
                [.text(Self.digest(token)), .text(account.hex), .text(device.hex), .integer(expires)])
            try sql.execute("UPDATE devices SET last_seen_ms = $3 WHERE account = $1 AND device = $2", [.text(account.hex), .text(device.hex), .integer(hubTime)])
            return HubJSON.response(["token": token, "expiresAt": expires])
        }
    }

    /// The account's roster log as stored.
    func rosterLog(_ account: AccountID, _ sql: any HubSQL) throws -> [RosterChange] {
        try sql.query("SELECT change FROM roster_changes WHERE account = $1 ORDER BY idx", [.text(account.hex)]).map { row in
            guard let bytes = row[column: 0].bytes, let change = try? RosterChange(decoding: bytes) else {
                throw HubStorageError(.unavailable, "account \(account.hex)'s stored roster log does not decode")
            }
            return change
        }
    }

    /// `GET /v1/accounts/{a}/roster` (members), and `GET /v1/accounts/{a}/contact-roster`
    /// (`contact` set; no token, an addition to HUB-API): a contact's device reads the
    /// signed log it verifies before it seals frames for this account's devices, without
    /// telling the hub which account it belongs to (SECURITY.md "The hub").
    func readRoster(_ account: AccountID, _ request: HubRequest, contact: Bool = false) throws -> HubResponse {
        try transaction(account) { sql in
            if contact { try requireAccount(account, sql) } else { _ = try authenticate(request, account, sql) }
            let changes = try rosterLog(account, sql).map { Data($0.encoded).base64EncodedString() }
            return HubJSON.response(["changes": changes])
        }
    }

    /// `POST /v1/accounts/{a}/roster`: one signed change, verified against the
    /// stored log with the library's rules. `index` (optional, an addition to
    /// HUB-API) is the position the client signed for.
    func appendRoster(_ account: AccountID, _ request: HubRequest) throws -> HubResponse {
        let body = try HubJSON.object(request.body)
        let changeBytes = try body.bytes("change")
        let claimedIndex = body.fields["index"] == nil ? nil : try body.integer("index")
        let change: RosterChange
        do {
            change = try RosterChange(decoding: changeBytes)
        } catch {
            throw HubRefusal.badRequest("the field \"change\" is not a roster change: \(error)")
        }
        var revokedDevice: DeviceID?
        let response = try transaction(account) { sql in
            _ = try authenticate(request, account, sql)
            try sql.lockAccount(account.hex)
            let log = try rosterLog(account, sql)
            var roster: Roster
            do {
                roster = try Roster(account: account, changes: log)
            } catch {
                throw HubStorageError(.unavailable, "account \(account.hex)'s stored roster log does not verify: \(error)")
            }
            if let claimedIndex, claimedIndex != Int64(roster.version) {
                if claimedIndex >= 0 && claimedIndex < Int64(roster.version) {
                    throw HubRefusal(409, "conflict", "position \(claimedIndex) of the roster is taken; read the roster and sign for position \(roster.version)")
                }
                throw HubRefusal(422, "invalid_change", "position \(claimedIndex) is past the roster's end; the next change is at \(roster.version)")
            }
            do {
                try roster.append(change)
            } catch {
                // A change signed for a position already taken (a replay, or a race lost) is a conflict, not a forgery.
                if let key = roster.signingKey(of: change.actor) ?? (log.first?.device == change.actor ? log.first?.signingKey : nil),
                    (0..<log.count).contains(where: { change.isSigned(forIndex: $0, of: account, by: key) })
                {
                    throw HubRefusal(409, "conflict", "that change was signed for a position already taken; read the roster and sign for position \(log.count)")
                }
                throw HubRefusal(422, "invalid_change", "the change does not extend the roster: \(error)")
            }
            let index = log.count
            try sql.execute("INSERT INTO roster_changes (account, idx, change) VALUES ($1, $2, $3)", [.text(account.hex), .integer(Int64(index)), .blob(change.encoded)])
            try sql.execute("UPDATE accounts SET roster_version = $2 WHERE id = $1", [.text(account.hex), .integer(Int64(index + 1))])
            switch change.action {
            case .join:
                // The device keeps the name it asked to join under, when it asked. Its records
                // cursor starts at the history id of its join: it never held an older record,
                // so it holds back the collection of no older tombstone (HubService+Compaction).
                try sql.execute(
                    """
                    INSERT INTO devices (account, device, signing_key, state, name, records_cursor)
                    VALUES ($1, $2, $3, 'member', (SELECT name FROM join_requests WHERE account = $1 AND device = $2),
                        (SELECT history FROM accounts WHERE id = $1))
                    """,
                    [.text(account.hex), .text(change.device.hex), .blob(change.signingKey)])
                try sql.execute("DELETE FROM join_requests WHERE account = $1 AND device = $2", [.text(account.hex), .text(change.device.hex)])
            case .revoke:
                // Its sessions die with this commit: authentication reads the device's
                // state, so its tokens are answered 403 (not 401, HUB-API) until they
                // expire. Its pending frames are deleted; nothing more is accepted for it.
                try sql.execute("UPDATE devices SET state = 'revoked', mailbox_bytes = 0 WHERE account = $1 AND device = $2", [.text(account.hex), .text(change.device.hex)])
                try sql.execute("DELETE FROM mailbox WHERE account = $1 AND device = $2", [.text(account.hex), .text(change.device.hex)])
                revokedDevice = change.device
            }
            return HubJSON.response(["version": index + 1])
        }
        // A revoked device's parked poll looks again and ends with 403.
        if let revokedDevice { announce(Self.mailboxKey(account.hex, revokedDevice.hex)) }
        return response
    }

    /// `POST /v1/accounts/{a}/join-requests` (no token).
    func requestJoin(_ account: AccountID, _ request: HubRequest) throws -> HubResponse {
        let body = try HubJSON.object(request.body)
        let device = try Self.device(try body.string("device"), field: "device")
        let publicKeys = try body.bytes("publicKeys")
        let name = try body.string("name")
        guard publicKeys.count <= 1_024 else { throw HubRefusal.badRequest("the field \"publicKeys\" is \(publicKeys.count) bytes; at most 1,024") }
        // No member could approve a device by no keys: refused here, not at the approval.
        guard !publicKeys.isEmpty else { throw HubRefusal.badRequest("the field \"publicKeys\" is empty; send the device's public keys (base64)") }
        try Self.checkName(name)
        return try transaction(account) { sql in
            try requireAccount(account, sql)
            // Requests nobody approved in time make room for new ones.
            try sql.execute("DELETE FROM join_requests WHERE account = $1 AND created_ms <= $2", [.text(account.hex), .integer(joinRequestsBornBefore(now()))])
            let state = try sql.query("SELECT state FROM devices WHERE account = $1 AND device = $2", [.text(account.hex), .text(device.hex)]).first?[column: 0].string
            if state == "revoked" { throw HubRefusal(403, "revoked", "device \(device.hex) was revoked from this account; join with a new identity") }
            if state == "member" { throw HubRefusal(409, "conflict", "device \(device.hex) is already a member") }
            let pending = try sql.query("SELECT count(*) FROM join_requests WHERE account = $1 AND device <> $2", [.text(account.hex), .text(device.hex)]).first?[column: 0].int64 ?? 0
            guard pending < Int64(configuration.maximumJoinRequests) else {
                throw HubRefusal(429, "too_many_requests", "account \(account.hex) has \(pending) join requests waiting; a member must approve or the requests must age out first",
                    headers: ["Retry-After": "60"])
            }
            try sql.execute(
                """
                INSERT INTO join_requests (account, device, public_keys, name, created_ms) VALUES ($1, $2, $3, $4, $5)
                ON CONFLICT (account, device) DO UPDATE SET public_keys = excluded.public_keys, name = excluded.name, created_ms = excluded.created_ms
                """,
                [.text(account.hex), .text(device.hex), .blob(publicKeys), .text(name), .integer(now())])
            return HubJSON.response(["device": device.hex], status: 202)
        }
    }

    /// A device name from a body: at most 200 bytes.
    static func checkName(_ name: String?) throws(HubRefusal) {
        if let name, name.utf8.count > 200 { throw .badRequest("the field \"name\" is over 200 bytes") }
    }

    func listJoinRequests(_ account: AccountID, _ request: HubRequest) throws -> HubResponse {
        try transaction(account) { sql in
            _ = try authenticate(request, account, sql)
            let requests: [[String: Any]] = try sql.query(
                "SELECT device, public_keys, name, created_ms FROM join_requests WHERE account = $1 AND created_ms > $2 ORDER BY created_ms, device",
                [.text(account.hex), .integer(joinRequestsBornBefore(now()))]
            ).map { row in
                ["device": row[column: 0].string ?? "", "publicKeys": Data(row[column: 1].bytes ?? []).base64EncodedString(),
                 "name": row[column: 2].string ?? "", "createdAt": row[column: 3].int64 ?? 0]
            }
            return HubJSON.response(["requests": requests])
        }
    }

    /// `PUT /v1/accounts/{a}/keys/{device}`: `{"epoch": N, "sealed": B64}`, an
    /// account key a member wrapped for a member.
    func publishKey(_ account: AccountID, for deviceText: String, _ request: HubRequest) throws -> HubResponse {
        let device = try Self.device(deviceText)
        let body = try HubJSON.object(request.body)
        let epoch = try body.integer("epoch")
        let sealed = try body.bytes("sealed")
        guard (1...Int64(UInt32.max)).contains(epoch) else { throw HubRefusal.badRequest("the field \"epoch\" must be from 1 to 4,294,967,295") }
        guard !sealed.isEmpty, sealed.count <= 4_096 else { throw HubRefusal.badRequest("the field \"sealed\" must hold 1 to 4,096 bytes") }
        return try transaction(account) { sql in
            _ = try authenticate(request, account, sql)
            let state = try sql.query("SELECT state FROM devices WHERE account = $1 AND device = $2", [.text(account.hex), .text(device.hex)]).first?[column: 0].string
            guard let state else { throw HubRefusal.notFound("device \(device.hex) is not on this account's roster") }
            guard state == "member" else { throw HubRefusal(410, "revoked", "device \(device.hex) was revoked; it gets no account key") }
            try sql.execute(
                "INSERT INTO wrapped_keys (account, device, epoch, sealed) VALUES ($1, $2, $3, $4) ON CONFLICT (account, device, epoch) DO UPDATE SET sealed = excluded.sealed",
                [.text(account.hex), .text(device.hex), .integer(epoch), .blob(sealed)])
            return HubJSON.response(["device": device.hex, "epoch": epoch])
        }
    }

    /// `GET /v1/accounts/{a}/keys`: the keys wrapped for the calling device, oldest epoch first.
    func readKeys(_ account: AccountID, _ request: HubRequest) throws -> HubResponse {
        try transaction(account) { sql in
            let caller = try authenticate(request, account, sql)
            let keys: [[String: Any]] = try sql.query(
                "SELECT epoch, sealed FROM wrapped_keys WHERE account = $1 AND device = $2 ORDER BY epoch", [.text(account.hex), .text(caller.device)]
            ).map { row in ["epoch": row[column: 0].int64 ?? 0, "sealed": Data(row[column: 1].bytes ?? []).base64EncodedString()] }
            return HubJSON.response(["keys": keys])
        }
    }
}
