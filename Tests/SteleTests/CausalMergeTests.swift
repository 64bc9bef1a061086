import Testing
import TestSupport
@testable import Stele

/// The pure `causal` rule, and proof that the order-independence checker can fail.
@Suite struct CausalMergeTests {
    static let devices = Fixtures.devices(3)
    static var a: DeviceID { devices[0] }
    static var b: DeviceID { devices[1] }
    static var c: DeviceID { devices[2] }

    typealias Merge = @Sendable (CausalRecord?, CausalRecord) -> CausalRecord?

    static let realMerge: Merge = { local, remote in CausalMerge.merge(local: local, remote: remote).store ?? local }

    /// A deliberately broken double: the seed's single-value rule (000 §5
    /// resolveMerge): keep one winner and the merged vector, drop the loser.
    static let singleWinnerMerge: Merge = { local, remote in
        guard let local else { return remote }
        switch remote.vector.compare(local.vector) {
        case .dominates: return remote
        case .dominated, .equal: return local
        case .concurrent:
            let merged = local.vector.merged(with: remote.vector)
            let winner: [CausalVersion]
            switch (local.winner, remote.winner) {
            case let (l?, r?): winner = [l.stamp > r.stamp ? l : r]
            case let (l?, nil): winner = [l]
            case let (nil, r?): winner = [r]
            case (nil, nil): winner = []
            }
            return CausalRecord(key: local.key, vector: merged, versions: winner)
        }
    }

    /// Applies `records` in every order; the results, one per distinct outcome.
    static func outcomes(_ records: [CausalRecord], _ merge: Merge) -> Set<String> {
        Set(records.permutations().map { order in
            var state: CausalRecord?
            for record in order { state = merge(state, record) }
            return String(describing: state)
        })
    }

    /// A record's writes (dot, stamp, value), their contexts aside.
    static func writes(_ record: CausalRecord) -> [String] {
        record.versions.map { "\($0.dot) \($0.timestamp) \($0.value)" }
    }

    static func version(_ device: DeviceID, _ counter: UInt64, _ milliseconds: Int64, _ value: String) -> CausalVersion {
        CausalVersion(dot: Dot(device: device, counter: counter), timestamp: HybridTimestamp(milliseconds: milliseconds, logical: 0), value: value.bytes)
    }

    /// A writes x; B concurrently writes y (later); C saw y and deleted it.
    static let x = CausalRecord(key: "k", vector: VersionVector([a: 1]), versions: [version(a, 1, 10, "x")])
    static let y = CausalRecord(key: "k", vector: VersionVector([b: 1]), versions: [version(b, 1, 20, "y")])
    static let deleteOfY = CausalRecord.tombstone(key: "k", vector: VersionVector([b: 1, c: 1]))

    @Test func theCheckerCatchesTheSingleWinnerRule() {
        // With one winner kept, the delete of y resurrects y in one order and keeps x in another.
        #expect(Self.outcomes([Self.x, Self.y, Self.deleteOfY], Self.singleWinnerMerge).count > 1)
    }

    @Test func theRealRuleGivesOneOutcomeAndNeverResurrectsWhatADeleteSaw() {
        #expect(Self.outcomes([Self.x, Self.y, Self.deleteOfY], Self.realMerge).count == 1)
        var state: CausalRecord?
        for record in [Self.x, Self.y, Self.deleteOfY] { state = Self.realMerge(state, record) }
        // Only x, which the delete had not seen, survives (add-wins); y stays deleted.
        #expect(state?.value == "x".bytes)
        #expect(state?.versions.count == 1)
        #expect(state?.vector == VersionVector([Self.a: 1, Self.b: 1, Self.c: 1]))
    }

    @Test func concurrentEditsBothSurviveAndTheLaterIsShown() {
        let merged = CausalMerge.merge(local: Self.x, remote: Self.y)
        #expect(merged.store?.versions.count == 2)
        #expect(merged.store?.value == "y".bytes)
        #expect(merged.outcome == MergeOutcome(.updated, conflict: Conflict(resolution: .concurrentEditLost, lostValue: "x".bytes, losingDevice: Self.a)))
        // A later write that saw both replaces both.
        let resolved = CausalRecord(key: "k", vector: VersionVector([Self.a: 2, Self.b: 1]), versions: [Self.version(Self.a, 2, 30, "z")])
        let after = CausalMerge.merge(local: merged.store, remote: resolved)
        #expect(after.store == resolved)
        #expect(after.outcome == MergeOutcome(.updated))
    }

    @Test func anEditThatSawTheDeleteRevivesWithoutAConflict() {
        let tombstone = CausalRecord.tombstone(key: "k", vector: VersionVector([Self.a: 1, Self.b: 1]))
        let revived = CausalRecord(key: "k", vector: VersionVector([Self.a: 2, Self.b: 1]), versions: [Self.version(Self.a, 2, 30, "again")])
        #expect(CausalMerge.merge(local: tombstone, remote: revived).outcome == MergeOutcome(.inserted))
    }

    @Test func mergingIsIdempotent() {
        for record in [Self.x, Self.y, Self.deleteOfY] {
            #expect(CausalMerge.merge(local: record, remote: record).outcome == MergeOutcome(.unchanged))
        }
    }

    // MARK: - A counter reissued after a restore

    /// A wrote "first" under (a, 5) and shared it; restored from an older backup
    /// with its clock set back, it wrote "second" under the same dot. Different
    /// vectors on the other device (it also saw b's write) must not matter.
    static let first = CausalRecord(key: "k", vector: VersionVector([a: 5, b: 1]), versions: [version(a, 5, 40, "first")])
    static let second = CausalRecord(key: "k", vector: VersionVector([a: 5]), versions: [version(a, 5, 41, "second")])
    static let sameStampLarger = CausalRecord(key: "k", vector: VersionVector([a: 5]), versions: [version(a, 5, 40, "zzz")])

    /// The rule before it knew of reissued dots: each side keeps its own version.
    static let keepsItsOwnDot: Merge = { local, remote in
        guard let local else { return remote }
        let merged = local.vector.merged(with: remote.vector)
        return CausalRecord(key: local.key, vector: merged, versions: local.versions)
    }

    @Test func twoWritesUnderOneDotConvergeOnTheShownOneInEitherOrder() {
        #expect(Self.outcomes([Self.first, Self.second], Self.keepsItsOwnDot).count == 2, "the broken double must diverge")
        for pair in [[Self.first, Self.second], [Self.first, Self.sameStampLarger], [Self.first, Self.second, Self.sameStampLarger]] {
            #expect(Self.outcomes(pair, Self.realMerge).count == 1)
        }
        // The later stamp is shown and kept; the merged vector is recorded.
        for (local, remote) in [(Self.first, Self.second), (Self.second, Self.first)] {
            let decision = CausalMerge.merge(local: local, remote: remote)
            let stored = decision.store ?? local
            #expect(Self.writes(stored) == Self.writes(Self.second))
            #expect(stored.vector == VersionVector([Self.a: 5, Self.b: 1]))
            // The kept write never saw b:1, whatever the merged vector says.
            #expect(stored.versions.first?.context == VersionVector([Self.a: 5]))
        }
        // Equal stamps: the larger value.
        #expect((CausalMerge.merge(local: Self.first, remote: Self.sameStampLarger).store?.value) == "zzz".bytes)
    }

    @Test func theBeatenWriteUnderAReissuedDotIsReported() {
        let lostLocal = CausalMerge.merge(local: Self.first, remote: Self.second)
        #expect(lostLocal.outcome == MergeOutcome(.updated, conflict: Conflict(resolution: .concurrentEditLost, lostValue: "first".bytes, losingDevice: Self.a)))
        // The local version wins: nothing of it changes but the vector, and the remote loser is reported.
        let lostRemote = CausalMerge.merge(local: Self.second, remote: Self.first)
        #expect(lostRemote.store.map(Self.writes) == Self.writes(Self.second))
        #expect(lostRemote.outcome.conflict == Conflict(resolution: .concurrentEditLost, lostValue: "first".bytes, losingDevice: Self.a))
        // Even when nothing at all changes here, the beaten write is reported.
        let sameVector = CausalRecord(key: "k", vector: VersionVector([Self.a: 5]), versions: [Self.version(Self.a, 5, 40, "first")])
        let unchanged = CausalMerge.merge(local: Self.second, remote: sameVector)
        #expect(unchanged.store == nil)
        #expect(unchanged.outcome == MergeOutcome(.unchanged, conflict: Conflict(resolution: .concurrentEditLost, lostValue: "first".bytes, losingDevice: Self.a)))
    }
}
