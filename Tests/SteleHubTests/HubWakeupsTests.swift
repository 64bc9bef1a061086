import Synchronization
import Testing
@testable import SteleHub

struct HubWakeupsTests {
    @Test func aWakeReachesEverySubscriberOfItsKeyOnceAndNoOther() {
        let wakeups = HubWakeups()
        let counts = Mutex([String: Int]())
        _ = wakeups.subscribe("a") { counts.withLock { $0["a1", default: 0] += 1 } }
        _ = wakeups.subscribe("a") { counts.withLock { $0["a2", default: 0] += 1 } }
        _ = wakeups.subscribe("b") { counts.withLock { $0["b", default: 0] += 1 } }
        wakeups.wake("a")
        wakeups.wake("a")
        #expect(counts.withLock { $0 } == ["a1": 1, "a2": 1])
        #expect(wakeups.waiting == 1)
    }

    @Test func aCancelledSubscriptionIsNotWoken() {
        let wakeups = HubWakeups()
        let woken = Mutex(false)
        let ticket = wakeups.subscribe("a") { woken.withLock { $0 = true } }
        wakeups.cancel(ticket)
        wakeups.wake("a")
        #expect(woken.withLock { $0 } == false)
        #expect(wakeups.waiting == 0)
    }

    @Test func wakeAllReachesEveryKey() {
        let wakeups = HubWakeups()
        let count = Mutex(0)
        _ = wakeups.subscribe("a") { count.withLock { $0 += 1 } }
        _ = wakeups.subscribe("b") { count.withLock { $0 += 1 } }
        wakeups.wakeAll()
        #expect(count.withLock { $0 } == 2)
    }
}
