import Testing
import TestSupport
@testable import Stele

@Suite struct LocalNamespaceTests {
    @Test func storesReadsAndDeletesWithoutBookkeeping() throws {
        let replica = try Fixtures.memoryReplica()
        let cache = try replica.local("cache")
        try cache.put("a", [1])
        try cache.put("a", [2])
        try cache.put("b", [3])
        #expect(try cache.get("a") == [2])
        #expect(try cache.delete("a"))
        #expect(try !cache.delete("a"))
        #expect(try cache.entries().map(\.key) == ["b"])
        #expect(try cache.count() == 1)
        #expect(try replica.report().namespaces.first?.tombstones == 0)
    }

    @Test func onlyLocalIsNeverReplicated() {
        #expect(NamespaceKind.allCases.filter { !$0.isReplicated } == [.local])
    }
}
