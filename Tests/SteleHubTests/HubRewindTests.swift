import Foundation
import Stele
import SteleHub
import SteleHubPostgres
import Testing
import TestSupport

/// Telling a rewound history at start (HubService+Rewind): the note beside the
/// database names the run the hub last started and the history it last saw; a
/// database of another run, or behind that history, gets a new epoch, and one
/// that matches does not.
@Suite(.serialized) struct HubRewindTests {
    static func epoch(_ account: HubRecordsTests.Account) -> String? {
        account.hub.call("GET", "\(account.base)/status", token: account.token).json["epoch"] as? String
    }

    @Test(arguments: Backend.allCases) func aDatabaseOfAnotherRunOrBehindTheNoteGetsANewEpoch(_ backend: Backend) throws {
        let account = try HubRecordsTests.Account(backend)
        let service = account.hub.service
        let first = try service.detectRewind(announced: nil)
        #expect(first.rewound == nil, "nothing noted: nothing to compare")
        let epoch = Self.epoch(account)
        #expect(account.statuses([HubRecordsTests.put("a", "1", at: 10)]) == ["applied"])
        // The note of the run that just started, with the history it reached: the same database.
        var note = first.announced
        note.total = try service.historyTotal()
        let same = try service.detectRewind(announced: note)
        #expect(same.rewound == nil)
        #expect(Self.epoch(account) == epoch)
        #expect(same.announced.run != note.run, "every start is a new run")

        // The note of a later run than the database knows: this database was put back from before it.
        let other = try service.detectRewind(announced: HubService.Announced(run: "a-later-run", total: 1))
        guard case .anotherRun(let found, let noted)? = other.rewound?.signal else {
            Issue.record("expected another run, got \(String(describing: other.rewound))")
            return
        }
        #expect(found == same.announced.run)
        #expect(noted == "a-later-run")
        #expect(Self.epoch(account) == other.rewound?.epoch)
        #expect(Self.epoch(account) != epoch)

        // The right run, but a history behind what was announced: changes were lost.
        let behind = try service.detectRewind(announced: HubService.Announced(run: other.announced.run, total: 5))
        #expect(behind.rewound?.signal == .historyBehindAnnounced(found: 1, announced: 5))
        #expect(Self.epoch(account) == behind.rewound?.epoch)
        // A client of the first epoch is told, with how much of its history the hub holds.
        let refused = account.hub.call("GET", "\(account.base)/records/changes?since=1&epoch=\(epoch ?? "")", token: account.token)
        #expect(refused.status == 409)
        #expect((refused.json["commonHistoryId"] as? NSNumber)?.int64Value == 1)
    }

    @Test func aPostgreSQLClusterSaysWhichCopyItIs() throws {
        let storage = try PostgresHubStorage(url: try PostgresTestCluster.url())
        defer { storage.close() }
        let identity = try #require(storage.physicalIdentity())
        #expect(identity.hasPrefix("postgresql-cluster "))
        #expect(identity.contains(" timeline "))
        #expect(storage.physicalIdentity() == identity, "the same cluster says the same")
    }

    @Test func notesReadBackAsWritten() {
        let note = HubService.Announced(run: "0123abcd", total: 42)
        #expect(HubService.Announced(text: note.text) == note)
        #expect(HubService.Announced(text: "") == nil)
        #expect(HubService.Announced(text: "run notanumber") == nil)
        #expect(HubService.Announced(text: "one two three") == nil)
    }
}
