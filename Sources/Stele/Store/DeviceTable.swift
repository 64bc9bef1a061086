import SteleSQL

/// The replica's interned device ids: a small local index stands for each
/// 32-byte id in stored vectors and writer columns. The own device is index 1.
struct DeviceTable {
    static let ownIndex: Int64 = 1

    private var indexByID: [DeviceID: Int64] = [:]
    private var idByIndex: [Int64: DeviceID] = [:]
    private var bytesByIndex: [Int64: [UInt8]] = [:]

    var count: Int { indexByID.count }

    static func load(_ connection: Connection) throws -> DeviceTable {
        var table = DeviceTable()
        let rows = try connection.query("SELECT idx, id FROM devices") { ($0.int64(0), $0.blob(1)) }
        for (index, bytes) in rows {
            guard let id = try? DeviceID(bytes: bytes) else {
                throw ReplicaError(.corrupt, "the store's device table holds a malformed id; the file is damaged")
            }
            table.indexByID[id] = index
            table.idByIndex[index] = id
            table.bytesByIndex[index] = bytes
        }
        return table
    }

    func index(of id: DeviceID) -> Int64? { indexByID[id] }

    /// The device an index stands for.
    /// - Throws: ``ReplicaError`` `corrupt` for an index the table does not know.
    func id(at index: Int64) throws -> DeviceID {
        guard let id = idByIndex[index] else {
            throw ReplicaError(.corrupt, "a stored row names device index \(index), which the device table lacks; the file is damaged")
        }
        return id
    }

    /// The 32 bytes of the device an index stands for (cached: leaf encodings need them often).
    func bytes(at index: Int64) throws -> [UInt8] {
        guard let bytes = bytesByIndex[index] else {
            throw ReplicaError(.corrupt, "a stored row names device index \(index), which the device table lacks; the file is damaged")
        }
        return bytes
    }

    /// The index for `id`, interning it first if needed (inside the caller's transaction).
    mutating func intern(_ id: DeviceID, _ connection: Connection) throws -> Int64 {
        if let index = indexByID[id] { return index }
        try connection.execute("INSERT INTO devices (id) VALUES (?)", [.blob(id.bytes)])
        let index = connection.lastInsertRowID
        indexByID[id] = index
        idByIndex[index] = id
        bytesByIndex[index] = id.bytes
        return index
    }
}
