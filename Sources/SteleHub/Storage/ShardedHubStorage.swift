import Foundation
import SteleSQL

/// Accounts spread over several databases (`stele-hub serve --postgres URL
/// --postgres URL ...`): the supported way past one PostgreSQL primary (issue 20).
/// An account lives whole in one shard, picked from its id, so every request
/// about it is a transaction on one database and keeps that database's
/// guarantees (row locks, commit-ordered history, LISTEN/NOTIFY). What is not
/// an account's (invite codes, hub-wide notifications) lives in the first shard.
///
/// The routing is the account id modulo the number of shards, so the list is
/// fixed once accounts exist: each shard notes its place (`i of n`) at first use
/// and a hub started with another list refuses to start
/// (``HubStorageError/Code/shardLayout``). Moving an account between shards, and
/// so adding a shard, is out of scope.
public final class ShardedHubStorage: HubStorage {
    public let shards: [any HubStorage]
    public var backend: HubBackend { shards[0].backend }

    /// - Throws: ``HubStorageError`` `shardLayout` when a shard was written under another list.
    public init(shards: [any HubStorage]) throws {
        precondition(!shards.isEmpty, "a sharded storage needs a shard")
        self.shards = shards
        for (index, shard) in shards.enumerated() {
            let place = "\(index + 1) of \(shards.count)"
            let noted = try shard.transaction { sql -> String? in
                try sql.execute("INSERT INTO hub_meta (name, value) VALUES ('shard', $1) ON CONFLICT (name) DO NOTHING", [.text(place)])
                guard case .text(let noted)? = try sql.query("SELECT value FROM hub_meta WHERE name = 'shard'", []).first?.first else { return nil }
                return noted
            }
            guard noted == place else {
                throw HubStorageError(
                    .shardLayout,
                    "database \(index + 1) of the \(shards.count) given is shard \(noted ?? "?") of an earlier list: accounts are routed by the list's order and length, "
                        + "so give the --postgres URLs as they were first given (moving accounts between shards is not supported)")
            }
        }
    }

    /// The shard of an account: its id's first 16 hex digits modulo the number of shards.
    public func shard(for account: String) -> any HubStorage {
        shards[Self.index(of: account, among: shards.count)]
    }

    public static func index(of account: String, among count: Int) -> Int {
        guard count > 1 else { return 0 }
        let value = UInt64(account.prefix(16), radix: 16) ?? account.utf8.reduce(UInt64(0)) { $0 &* 31 &+ UInt64($1) }
        return Int(value % UInt64(count))
    }

    /// A hub-wide transaction: on the first shard.
    public func transaction<T>(_ body: (any HubSQL) throws -> T) throws -> T {
        try shards[0].transaction(body)
    }

    /// Every hub process listens to the first shard, so one announcement there reaches them all.
    public func announce(_ key: String) {
        shards[0].announce(key)
    }

    public func listen(_ listener: @escaping @Sendable (String) -> Void) {
        shards[0].listen(listener)
    }

    public func close() {
        for shard in shards { shard.close() }
    }

    public func reclaimSpace() {
        for shard in shards { shard.reclaimSpace() }
    }
}
