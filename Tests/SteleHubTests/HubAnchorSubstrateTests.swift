import Dispatch
import Foundation
import Synchronization
@testable import Stele
import Testing
import TestSupport

/// The runtime's anchor substrate (and the library's ``HubAnchorStore``) over a real hub on loopback: each asks for one
/// round per generation (`Stele-Anchor-Rule`), and reads what the hub refuses
/// as superseded, which sends the node to read the anchor and catch up with it
/// (seed 370010), not as a failure to try again.
@Suite(.serialized) struct HubAnchorSubstrateTests {
    @Test(arguments: Backend.allCases) func aGenerationAnotherRoundHoldsIsSupersededAndKeepsItsAnchor(_ backend: Backend) throws {
        let rig = try RuntimeRig(backend)
        let phone = try rig.found("phone")
        let substrate = HubAnchorSubstrate(client: phone.client, queue: DispatchQueue(label: "anchor-substrate-test"))
        let key = AccountKey.generate()
        func sealed(_ generation: UInt64, round seed: UInt64) throws -> [UInt8] {
            var generator = SeededGenerator(seed: seed)
            let header = AnchorHeader(account: phone.account, generation: generation, round: RoundNonce.generate(using: &generator), digest: try Hash32(bytes: [UInt8](repeating: 3, count: 32)))
            return AnchorFile.encode(Anchor(header: header, snapshot: [UInt8(seed)]), key: key)
        }
        func write(_ bytes: [UInt8]) -> Result<Void, AnchorError>? {
            let outcome = Mutex<Result<Void, AnchorError>?>(nil)
            let done = DispatchSemaphore(value: 0)
            substrate.writeAnchor(bytes, of: phone.account) { result in
                outcome.withLock { $0 = result }
                done.signal()
            }
            done.wait()
            return outcome.withLock { $0 }
        }
        func read() -> [UInt8]? {
            let outcome = Mutex<[UInt8]?>(nil)
            let done = DispatchSemaphore(value: 0)
            substrate.readAnchor(of: phone.account) { result in
                outcome.withLock { $0 = try? result.get() }
                done.signal()
            }
            done.wait()
            return outcome.withLock { $0 }
        }
        func code(_ result: Result<Void, AnchorError>?) -> AnchorError.Code? {
            if case .failure(let error) = result { error.code } else { nil }
        }
        let committed = try sealed(5, round: 1)
        #expect(code(write(committed)) == nil)
        // Another round's anchor of generation 5, and a lower generation: superseded, and the hub keeps its anchor.
        #expect(code(write(try sealed(5, round: 2))) == .superseded)
        #expect(code(write(try sealed(4, round: 3))) == .superseded)
        #expect(read() == committed)
        // The same round again and a higher generation land.
        #expect(code(write(try sealed(5, round: 1))) == nil)
        let next = try sealed(6, round: 4)
        #expect(code(write(next)) == nil)
        #expect(read() == next)
        // The library's store over the hub keeps the same rule.
        let store = HubAnchorStore(client: phone.client)
        func anchor(_ generation: UInt64, round seed: UInt64) throws -> Anchor {
            var generator = SeededGenerator(seed: seed)
            let header = AnchorHeader(account: phone.account, generation: generation, round: RoundNonce.generate(using: &generator), digest: try Hash32(bytes: [UInt8](repeating: 3, count: 32)))
            return Anchor(header: header, snapshot: [UInt8(seed)])
        }
        #expect { try store.write(try anchor(6, round: 9), key: key) } throws: { ($0 as? AnchorError)?.code == .superseded }
        #expect { try store.write(try anchor(5, round: 9), key: key) } throws: { ($0 as? AnchorError)?.code == .superseded }
        #expect(read() == next)
        try store.write(try anchor(6, round: 4), key: key)
        try store.write(try anchor(7, round: 10), key: key)
        #expect(try store.header(of: phone.account)?.generation == 7)
        // With the hub gone the write is unavailable, not superseded: the node tries again later.
        rig.takeDown()
        #expect(code(write(try sealed(8, round: 5))) == .unavailable)
    }
}
