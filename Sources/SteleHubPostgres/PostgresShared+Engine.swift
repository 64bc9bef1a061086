import SteleHub
import SteleSQL

/// Engines that speak PostgreSQL's wire protocol without being PostgreSQL
/// (issue 20, "Distributed engines, honestly"). The hub relies on what they
/// lack, so it refuses them at start with what is missing, rather than
/// half-working:
/// - `LISTEN`/`NOTIFY`, which wakes every hub process's long polls when a
///   push or a frame lands in another (CockroachDB has none; YugabyteDB none before 2.25);
/// - `SELECT … FOR UPDATE` row locks held to commit, which hand out an account's
///   history positions in commit order (the change feed's no-gap promise);
///   CockroachDB and YugabyteDB run SERIALIZABLE by default and answer
///   contention with retries the hub would surface as 503s;
/// - `pg_advisory_xact_lock`, which serializes hub processes migrating one database.
/// The way past one PostgreSQL primary is sharding accounts over several
/// databases (`--postgres` more than once), each a plain PostgreSQL.
extension PostgresHubStorage {
    /// Why a server that answers `SELECT version()` with `version` cannot hold a hub; `nil` when it can.
    public static func engineProblem(version: String) -> String? { PostgresShared.engineProblem(version: version) }
}

extension PostgresShared {
    /// Why the server behind `connection` cannot hold a hub; `nil` when it can.
    static func engineProblem(_ connection: PostgresConnection) throws -> String? {
        let version: String
        do {
            guard case .text(let text)? = try connection.run("SELECT version()").rows.first?.first else { return "the server did not say its version (SELECT version())" }
            version = text
        } catch {
            return "the server did not answer SELECT version(): \(error)"
        }
        if let problem = engineProblem(version: version) { return problem }
        // What the hub itself runs, tried on the server: a notification channel and an advisory lock.
        do {
            _ = try connection.run("LISTEN stele_hub_probe")
            _ = try connection.run("UNLISTEN stele_hub_probe")
        } catch {
            return "\(engineName(version)) refused LISTEN (\(error)); the hub needs LISTEN/NOTIFY to wake long polls across hub processes"
        }
        do {
            _ = try connection.run("BEGIN")
            _ = try connection.run("SELECT pg_advisory_xact_lock(1)")
            _ = try connection.run("COMMIT")
        } catch {
            _ = try? connection.run("ROLLBACK")
            return "\(engineName(version)) has no pg_advisory_xact_lock (\(error)); the hub needs it to migrate one database from several processes"
        }
        return nil
    }

    /// The engines known by their version string to lack what the hub needs.
    static func engineProblem(version: String) -> String? {
        if version.contains("CockroachDB") {
            return "the server is CockroachDB (\(version.prefix(60))), not PostgreSQL: it has no LISTEN/NOTIFY to wake long polls across hub processes, "
                + "runs every transaction SERIALIZABLE and answers contention on an account's history with retries, where the hub relies on PostgreSQL's "
                + "row locks held to commit; run the hub on PostgreSQL, and shard accounts over several PostgreSQL databases (--postgres more than once) to go past one primary"
        }
        if version.range(of: "-YB-") != nil || version.contains("Yugabyte") {
            return "the server is YugabyteDB (\(version.prefix(60))), not PostgreSQL: its LISTEN/NOTIFY, row locks and sequence caching differ from what the hub relies on "
                + "(a gapless, commit-ordered history per account); run the hub on PostgreSQL, and shard accounts over several PostgreSQL databases (--postgres more than once) to go past one primary"
        }
        guard version.hasPrefix("PostgreSQL ") else {
            return "the server says it is \"\(version.prefix(60))\", not PostgreSQL; the hub runs on PostgreSQL (12 or newer) or SQLite"
        }
        return nil
    }

    private static func engineName(_ version: String) -> String {
        String(version.prefix { $0 != "," }.prefix(40))
    }
}
