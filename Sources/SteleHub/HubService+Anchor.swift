import Stele
import SteleSQL

/// Anchor objects (HUB-API "Anchor"; 001 §7–8): one per account, its cleartext
/// header checked, its generation never lowered, an equal one overwriting.
extension HubService {
    func readAnchor(_ account: AccountID, _ request: HubRequest) throws -> HubResponse {
        try transaction { sql in
            _ = try authenticate(request, account, sql)
            guard let row = try sql.query("SELECT generation, body FROM anchors WHERE account = $1", [.text(account.hex)]).first,
                let generation = row[column: 0].int64, let body = row[column: 1].bytes
            else {
                throw HubRefusal.notFound("account \(account.hex) has no anchor yet")
            }
            return HubResponse(status: 200, headers: ["Content-Type": "application/octet-stream", "Stele-Generation": String(UInt64(bitPattern: generation))], body: body)
        }
    }

    /// Replaces the anchor in one row write, so a reader on either backend sees
    /// the old anchor or the new one, never a mix.
    func writeAnchor(_ account: AccountID, _ request: HubRequest) throws -> HubResponse {
        let header: AnchorHeader
        do {
            header = try AnchorFile.header(request.body)
        } catch {
            throw HubRefusal.badRequest("the body is not an anchor file: \(error)")
        }
        guard header.account == account else {
            throw HubRefusal.badRequest("the anchor belongs to account \(header.account.hex), not \(account.hex)")
        }
        // Stored as the same 64 bits; generations past Int64.max do not occur (one per round).
        let generation = Int64(bitPattern: header.generation)
        guard generation >= 0 else { throw HubRefusal.badRequest("the anchor's generation \(header.generation) is out of range") }
        return try transaction { sql in
            _ = try authenticate(request, account, sql)
            try sql.lockAccount(account.hex)
            if let stored = try sql.query("SELECT generation FROM anchors WHERE account = $1", [.text(account.hex)]).first?[column: 0].int64, generation < stored {
                throw HubRefusal(409, "stale_generation", "the hub holds generation \(stored); an anchor of generation \(generation) would lower it (001 §8)")
            }
            try sql.execute(
                """
                INSERT INTO anchors (account, generation, body, updated_ms) VALUES ($1, $2, $3, $4)
                ON CONFLICT (account) DO UPDATE SET generation = excluded.generation, body = excluded.body, updated_ms = excluded.updated_ms
                """,
                [.text(account.hex), .integer(generation), .blob(request.body), .integer(now())])
            return HubJSON.response(["generation": generation])
        }
    }

    /// `GET /v1/accounts/{a}/status` (members): the relay side of it now; the
    /// record history's fields hold their starting values until the record API lands.
    func status(_ account: AccountID, _ request: HubRequest) throws -> HubResponse {
        try transaction { sql in
            _ = try authenticate(request, account, sql)
            let epoch = try epoch(sql)
            let devices: [[String: Any]] = try sql.query(
                """
                SELECT d.device, d.state, d.relay_cursor, d.last_seen_ms,
                    (SELECT CAST(count(*) AS BIGINT) FROM mailbox m WHERE m.account = d.account AND m.device = d.device),
                    (SELECT min(m.created_ms) FROM mailbox m WHERE m.account = d.account AND m.device = d.device),
                    d.mailbox_bytes, d.name
                FROM devices d WHERE d.account = $1 ORDER BY d.device
                """, [.text(account.hex)]
            ).map { row in
                [
                    "device": row[column: 0].string ?? "", "state": row[column: 1].string ?? "",
                    "cursor": row[column: 2].int64 ?? 0, "lastSeen": row[column: 3].int64.map { $0 as Any } ?? NSNullValue.value,
                    "pendingFrames": row[column: 4].int64 ?? 0, "oldestPendingFrame": row[column: 5].int64.map { $0 as Any } ?? NSNullValue.value,
                    "pendingBytes": row[column: 6].int64 ?? 0, "name": row[column: 7].string.map { $0 as Any } ?? NSNullValue.value,
                ]
            }
            let anchor = try sql.query("SELECT generation FROM anchors WHERE account = $1", [.text(account.hex)]).first?[column: 0].int64
            return HubJSON.response([
                "account": account.hex, "historyId": try historyID(account, sql), "epoch": epoch, "devices": devices,
                "horizon": 0, "horizonHeldBy": NSNullValue.value, "anchorGeneration": anchor.map { $0 as Any } ?? NSNullValue.value,
            ])
        }
    }
}
