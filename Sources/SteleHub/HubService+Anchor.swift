import Foundation
import Stele
import SteleSQL

/// Anchor objects (HUB-API "Anchor"; 001 §7–8): one per account, its cleartext
/// header checked, its generation never lowered, an equal one overwriting unless
/// the writer asks for one round per generation (`Stele-Anchor-Rule`, added).
extension HubService {
    func readAnchor(_ account: AccountID, _ request: HubRequest) throws -> HubResponse {
        try transaction(account) { sql in
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
        let exclusive: Bool
        switch request.headers[AnchorRule.header.lowercased()] {
        case nil: exclusive = false
        case AnchorRule.oneRoundPerGeneration: exclusive = true
        case let other?:
            throw HubRefusal.badRequest("\(AnchorRule.header): '\(other)' is not a rule this hub knows; send \(AnchorRule.oneRoundPerGeneration) or leave the header out")
        }
        return try transaction(account) { sql in
            _ = try authenticate(request, account, sql)
            try sql.lockAccount(account.hex)
            if let row = try sql.query("SELECT generation, body FROM anchors WHERE account = $1", [.text(account.hex)]).first, let stored = row[column: 0].int64 {
                if generation < stored {
                    throw HubRefusal(409, "stale_generation", "the hub holds generation \(stored); an anchor of generation \(generation) would lower it (001 §8)")
                }
                // One round per generation: a slow write of an abandoned round must not land
                // over the anchor a later round committed at its generation (seed 370010).
                // What the hub holds was checked when it was taken; bytes that no longer parse are no round's.
                if exclusive, generation == stored, let body = row[column: 1].bytes, let held = try? AnchorFile.header(body), !header.mayReplace(held) {
                    throw HubRefusal(
                        409, "generation_taken",
                        "the hub holds round \(held.round)'s anchor of generation \(stored); round \(header.round) may not replace it (one round per generation): read the anchor and catch up with it")
                }
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

    /// `GET /v1/accounts/{a}/status` (members): the history's epoch and id; per
    /// device its relay cursor and mailbox, its records cursor, when it last pulled
    /// and how far behind it is; the tombstone horizon, the device holding it back
    /// and the tombstones waiting on it; and a warning for each stuck condition, so a
    /// poll of this endpoint sees it as soon as it holds.
    func status(_ account: AccountID, _ request: HubRequest) throws -> HubResponse {
        try transaction(account) { sql in
            _ = try authenticate(request, account, sql)
            let epoch = try epoch(sql)
            let history = try historyID(account, sql)
            let time = now()
            var warnings: [String] = []
            let devices: [[String: Any]] = try sql.query(
                """
                SELECT d.device, d.state, d.relay_cursor, d.last_seen_ms,
                    (SELECT CAST(count(*) AS BIGINT) FROM mailbox m WHERE m.account = d.account AND m.device = d.device),
                    (SELECT min(m.created_ms) FROM mailbox m WHERE m.account = d.account AND m.device = d.device),
                    d.mailbox_bytes, d.name, d.records_cursor, d.records_pulled_ms, d.clock_offset_ms, d.push_refused_ms, d.push_refusal
                FROM devices d WHERE d.account = $1 ORDER BY d.device
                """, [.text(account.hex)]
            ).map { row in
                let device = row[column: 0].string ?? ""
                let member = row[column: 1].string == "member"
                let cursor = row[column: 8].int64 ?? 0
                let pulledAt = row[column: 9].int64
                let lag = max(0, history - cursor)
                let bytes = row[column: 6].int64 ?? 0
                if member, lag > 0, time - (pulledAt ?? 0) > Int64(configuration.stalledCursorSeconds) * 1000 {
                    warnings.append(
                        "stalled cursor: device \(device.prefix(16)) \(pulledAt.map { "last pulled the change feed at \(Self.iso($0))" } ?? "never pulled the change feed") and is \(lag) changes behind")
                }
                let clockOffset = row[column: 10].int64
                let bound = Int64(configuration.clockWarningSeconds) * 1000
                if member, let clockOffset, clockOffset < -bound {
                    warnings.append(
                        "clock behind: device \(device.prefix(16))'s clock runs \(-clockOffset / 1000) s behind the hub's; Stele clients stamp their writes by the hub's time they last saw, other clients lose last-writer-wins conflicts they should win: correct the device's clock")
                }
                if member, let clockOffset, clockOffset > bound {
                    warnings.append(
                        "clock ahead: device \(device.prefix(16))'s clock runs \(clockOffset / 1000) s ahead of the hub's; writes dated beyond the hub's bound are refused (clock_skew) and Stele clients date them again by the hub's time: correct the device's clock")
                }
                let refusedSince = row[column: 11].int64
                if member, let refusedSince {
                    warnings.append(
                        "cannot make progress: every push of device \(device.prefix(16)) since \(Self.iso(refusedSince)) was refused (\(row[column: 12].string ?? "refused")); nothing it sends lands until that is fixed")
                }
                if member, bytes * 10 >= Int64(configuration.maximumMailboxBytes) * 9 {
                    warnings.append("full mailbox: device \(device.prefix(16)) has \(bytes) of \(configuration.maximumMailboxBytes) bytes waiting; relay frames to it are refused (429) until it reads them")
                }
                return [
                    "device": device, "state": row[column: 1].string ?? "",
                    "cursor": row[column: 2].int64 ?? 0, "lastSeen": row[column: 3].int64.map { $0 as Any } ?? NSNullValue.value,
                    "pendingFrames": row[column: 4].int64 ?? 0, "oldestPendingFrame": row[column: 5].int64.map { $0 as Any } ?? NSNullValue.value,
                    "pendingBytes": bytes, "name": row[column: 7].string.map { $0 as Any } ?? NSNullValue.value,
                    "recordsCursor": cursor, "recordsPulledAt": pulledAt.map { $0 as Any } ?? NSNullValue.value, "recordsLag": member ? lag : 0,
                    "clockOffset": clockOffset.map { $0 as Any } ?? NSNullValue.value,
                    "pushesRefusedSince": refusedSince.map { $0 as Any } ?? NSNullValue.value,
                ]
            }
            let horizon = try self.horizon(account, sql)
            let collected = try sql.query("SELECT collected FROM accounts WHERE id = $1", [.text(account.hex)]).first?[column: 0].int64 ?? 0
            let tombstones = try sql.query("SELECT CAST(count(*) AS BIGINT) FROM records WHERE account = $1 AND payload IS NULL", [.text(account.hex)]).first?[column: 0].int64 ?? 0
            var heldBy: Any = NSNullValue.value
            var waiting: Int64 = 0
            if let holder = try horizonHolder(account, sql) {
                // The tombstones the holder has not pulled: nothing collects them until it does.
                waiting = try sql.query(
                    "SELECT CAST(count(*) AS BIGINT) FROM records WHERE account = $1 AND payload IS NULL AND seq > $2", [.text(account.hex), .integer(holder.cursor)]
                ).first?[column: 0].int64 ?? 0
                heldBy = [
                    "device": holder.device, "name": holder.name.map { $0 as Any } ?? NSNullValue.value, "cursor": holder.cursor,
                    "since": holder.pulledAt.map { $0 as Any } ?? NSNullValue.value, "tombstonesWaiting": waiting,
                ] as [String: Any]
                if waiting > 0, holder.cursor < history {
                    warnings.append(
                        "compaction blocked: \(waiting) tombstones wait for device \(holder.device.prefix(16))\(holder.name.map { " (\($0))" } ?? ""), which \(holder.pulledAt.map { "last pulled at \(Self.iso($0))" } ?? "never pulled") at cursor \(holder.cursor); revoke it if it is gone for good")
                }
            }
            let oldestFrame = devices.compactMap { $0["oldestPendingFrame"] as? Int64 }.min()
            let anchor = try sql.query("SELECT generation FROM anchors WHERE account = $1", [.text(account.hex)]).first?[column: 0].int64
            return HubJSON.response([
                "account": account.hex, "historyId": history, "epoch": epoch, "devices": devices, "hubTime": time,
                "horizon": horizon, "horizonHeldBy": heldBy, "tombstones": tombstones, "tombstonesCollected": collected,
                "oldestPendingFrame": oldestFrame.map { $0 as Any } ?? NSNullValue.value,
                "anchorGeneration": anchor.map { $0 as Any } ?? NSNullValue.value, "warnings": warnings,
            ])
        }
    }

    /// A time in milliseconds since 1970 as ISO 8601, for messages.
    static func iso(_ milliseconds: Int64) -> String {
        Date(timeIntervalSince1970: Double(milliseconds) / 1000).formatted(.iso8601)
    }
}
