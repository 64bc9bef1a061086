import Foundation
import Testing
import TestSupport
@testable import Stele

@Suite struct HybridClockTests {
    @Test func followsTheWallClockWhenItMovesForward() {
        var clock = HybridClock()
        #expect(clock.next(wallClockMilliseconds: 1_000) == HybridTimestamp(milliseconds: 1_000, logical: 0))
        #expect(clock.next(wallClockMilliseconds: 2_000) == HybridTimestamp(milliseconds: 2_000, logical: 0))
    }

    @Test func neverGoesBackWhenTheWallClockDoes() {
        var clock = HybridClock()
        let first = clock.next(wallClockMilliseconds: 5_000)
        let second = clock.next(wallClockMilliseconds: 4_000)
        let third = clock.next(wallClockMilliseconds: 5_000)
        #expect(first < second)
        #expect(second < third)
        #expect(third == HybridTimestamp(milliseconds: 5_000, logical: 2))
    }

    @Test func exceedsEveryObservedTimestamp() {
        var clock = HybridClock()
        _ = clock.next(wallClockMilliseconds: 1_000)
        let remote = HybridTimestamp(milliseconds: 9_000, logical: 7)
        clock.observe(remote)
        #expect(clock.next(wallClockMilliseconds: 1_001) > remote)
    }

    @Test func theLogicalCounterCarriesIntoTheMilliseconds() {
        var clock = HybridClock(last: HybridTimestamp(milliseconds: 10, logical: .max))
        #expect(clock.next(wallClockMilliseconds: 0) == HybridTimestamp(milliseconds: 11, logical: 0))
    }

    @Test func timestampsOrderByTimeThenCounter() {
        #expect(HybridTimestamp(milliseconds: 1, logical: 9) < HybridTimestamp(milliseconds: 2, logical: 0))
        #expect(HybridTimestamp(milliseconds: 2, logical: 0) < HybridTimestamp(milliseconds: 2, logical: 1))
    }

    @Test func theSystemClockReadsTheWallClockInMilliseconds() {
        let before = Int64((Date().timeIntervalSince1970 * 1000).rounded(.down))
        let reading = SystemWallClock().nowMilliseconds()
        let after = Int64((Date().timeIntervalSince1970 * 1000).rounded(.up))
        #expect(before <= reading && reading <= after)
    }
}
