import Foundation
import Testing
@testable import Stele

/// When a hub's refusal of a push names its limit (`maximumMutations`, from
/// `stele-hub serve --max-mutations-per-push`), the mirror and ledger clients
/// send smaller pushes and lose no attempt; every other refusal is an attempt
/// as before (the loopback end of this: `MirrorOverHTTPTests`).
@Suite struct MirrorPushLimitTests {
    static func answer(_ status: Int, _ body: [String: Any]) throws -> HubAnswer {
        HubAnswer(status: status, body: [UInt8](try JSONSerialization.data(withJSONObject: body)))
    }

    static var refusal: [String: Any] { ["error": ["code": "bad_request", "message": "too many"]] }

    @Test func aRefusalNamingALimitBelowWhatWasSentIsThatLimit() throws {
        var body = Self.refusal
        body["maximumMutations"] = 2
        #expect(MirrorSync.pushLimit(try Self.answer(400, body), sent: 5) == 2)
    }

    @Test func everyOtherRefusalIsNoLimit() throws {
        var body = Self.refusal
        body["maximumMutations"] = 5
        // The push was not too large: the refusal is about something else.
        #expect(MirrorSync.pushLimit(try Self.answer(400, body), sent: 5) == nil)
        // No limit named, a limit that is no limit, or another status.
        #expect(MirrorSync.pushLimit(try Self.answer(400, Self.refusal), sent: 5) == nil)
        body["maximumMutations"] = 0
        #expect(MirrorSync.pushLimit(try Self.answer(400, body), sent: 5) == nil)
        body["maximumMutations"] = "2"
        #expect(MirrorSync.pushLimit(try Self.answer(400, body), sent: 5) == nil)
        body["maximumMutations"] = 2
        #expect(MirrorSync.pushLimit(try Self.answer(413, body), sent: 5) == nil)
        #expect(MirrorSync.pushLimit(HubAnswer(status: 400, body: Array("not json".utf8)), sent: 5) == nil)
    }
}
