import Foundation

/// One entity of the app's store as the ledger sees it: its identity (kind and
/// id) and its encoded payload. The ledger fingerprints the payload and never
/// looks inside it.
public struct LedgerEntity: Sendable, Equatable {
    public var kind: String
    public var id: String
    public var payload: [UInt8]

    public init(kind: String, id: String, payload: [UInt8]) {
        self.kind = kind
        self.id = id
        self.payload = payload
    }

    /// An entity whose payload is `value` encoded as JSON with sorted keys, so the
    /// same value always gives the same bytes and the same fingerprint (an encoder
    /// that wrote a dictionary's keys in another order each time would make every
    /// pass see a change).
    /// - Throws: ``LedgerError`` `encoding` when the value does not encode.
    public init(kind: String, id: String, encoding value: some Encodable) throws {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys]
        do {
            payload = [UInt8](try encoder.encode(value))
        } catch {
            throw LedgerError(.encoding, "\(kind) \(id) does not encode: \(error)")
        }
        self.kind = kind
        self.id = id
    }
}

/// A change the hub brought, for the app's store.
public enum LedgerChange: Sendable, Equatable {
    /// Write the entity with this payload (insert or replace).
    case upsert(kind: String, id: String, payload: [UInt8])
    /// Remove the entity, if the store holds it.
    case delete(kind: String, id: String)

    public var kind: String {
        switch self {
        case .upsert(let kind, _, _), .delete(let kind, _): kind
        }
    }

    public var id: String {
        switch self {
        case .upsert(_, let id, _), .delete(_, let id): id
        }
    }
}

/// The app's store, as a ``Ledger`` reaches it (002 "Ledgers and the Transition
/// to Absence"): the app keeps its own database in its own shape, and hands the
/// ledger its entities and takes remote changes through these four calls. The
/// ledger keeps its bookkeeping in a file of its own and never writes the app's
/// tables itself.
///
/// The app deletes an entity by removing it from its store (a hard delete); the
/// next pass sees the stamp without the entity and makes the tombstone. There is
/// no other way to make one (002: "Never manually forge a tombstone").
public protocol LedgerSource: AnyObject {
    /// The store's identity: an id the app keeps inside the store itself (a UUID
    /// written when the store was created), so a store wiped or replaced
    /// wholesale reports another one (002 "State Wipes").
    func storeIdentity() throws -> String

    /// Calls `visit` once for every entity the store holds now, in any order.
    func forEachEntity(_ visit: (LedgerEntity) throws -> Void) throws

    /// The current encoded payload of one entity, `nil` when the store lacks it.
    func payload(kind: String, id: String) throws -> [UInt8]?

    /// Applies remote changes to the store, all of them or none (one transaction).
    func apply(_ changes: [LedgerChange]) throws
}
