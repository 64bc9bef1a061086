import Testing
import TestSupport
@testable import Stele

@Suite struct CodableValueTests {
    struct Note: Codable, Equatable {
        var title: String
        var done: Bool
    }

    @Test func valuesRoundTripThroughCodable() throws {
        let replica = try Fixtures.memoryReplica()
        let note = Note(title: "milk", done: false)
        try replica.causal("notes").put("n1", encoding: note)
        try replica.lww("flags").put("n1", encoding: note)
        try replica.local("cache").put("n1", encoding: note)
        try replica.appendOnly("sealed").put("n1", encoding: note)
        #expect(try replica.causal("notes").get("n1", as: Note.self) == note)
        #expect(try replica.lww("flags").get("n1", as: Note.self) == note)
        #expect(try replica.local("cache").get("n1", as: Note.self) == note)
        #expect(try replica.appendOnly("sealed").get("n1", as: Note.self) == note)
        #expect(try replica.causal("notes").get("absent", as: Note.self) == nil)
    }

    @Test func equalValuesEncodeToEqualBytes() throws {
        let replica = try Fixtures.memoryReplica()
        try replica.causal("notes").put("a", encoding: ["z": 1, "a": 2, "m": 3])
        try replica.causal("notes").put("b", encoding: ["m": 3, "z": 1, "a": 2])
        #expect(try replica.causal("notes").get("a") == replica.causal("notes").get("b"))
    }

    @Test func aValueOfAnotherTypeIsATypedError() throws {
        let replica = try Fixtures.memoryReplica()
        try replica.causal("notes").put("n1", "not json".bytes)
        #expect { _ = try replica.causal("notes").get("n1", as: Note.self) } throws: { error in
            guard let error = error as? ReplicaError else { return false }
            return error.code == .notDecodable && error.message.contains("Note")
        }
    }
}
