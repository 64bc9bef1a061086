import Foundation
import Synchronization
import Testing
import TestSupport
@testable import Stele

/// The runtime's lock beside a store (``StoreLock``): held once, refused to a
/// second holder, and a refusal touches no file but its own.
@Suite struct StoreLockTests {
    @Test func aSecondHolderIsRefusedUntilTheFirstLetsGo() throws {
        let folder = try TemporaryDirectory("store-lock")
        let path = folder.file("store-runtime.lock")
        var first: StoreLock? = try StoreLock(path: path)
        #expect(throws: FleetRuntimeError.self) { try StoreLock(path: path) }
        do {
            _ = try StoreLock(path: path)
        } catch let error as FleetRuntimeError {
            #expect(error.code == .storeInUse)
            #expect(error.message.contains("another process is syncing this store"))
        }
        _ = first
        first = nil
        _ = try StoreLock(path: path)
    }

    @Test func anUnwritableFolderIsAStorageErrorNamingTheFile() throws {
        let folder = try TemporaryDirectory("store-lock")
        let path = folder.file("missing-folder/store-runtime.lock")
        do {
            _ = try StoreLock(path: path)
            Issue.record("a lock file in a missing folder was opened")
        } catch let error as FleetRuntimeError {
            #expect(error.code == .storage)
            #expect(error.message.contains(path))
        }
    }

    /// A refused lock once closed its descriptor twice (the second time from
    /// `deinit`, which runs when an initializer throws after setting every
    /// property). Between the two closes another thread could open a file under
    /// the same number, and lose it: `stele sync` refused beside a running sync
    /// crashed in libdispatch, whose epoll file had been closed under it. Here a
    /// second thread keeps opening files and checks each stays open while this
    /// one is refused many times over; the double close loses some of them
    /// within a few thousand refusals.
    @Test func aRefusalClosesNoFileButItsOwn() throws {
        let folder = try TemporaryDirectory("store-lock")
        let path = folder.file("store-runtime.lock")
        let held = try StoreLock(path: path)
        let stop = Atomic<Bool>(false)
        let lost = Atomic<Int>(0)
        let finished = DispatchSemaphore(value: 0)
        let watcher = Thread {
            while !stop.load(ordering: .relaxed) {
                let descriptor = open("/dev/null", O_RDONLY | O_CLOEXEC)
                guard descriptor >= 0 else { continue }
                var gone = false
                for _ in 0..<20 where fcntl(descriptor, F_GETFD) < 0 {
                    gone = true
                    break
                }
                // A lost number may already be someone else's file: leave it.
                if gone { lost.add(1, ordering: .relaxed) } else { close(descriptor) }
            }
            finished.signal()
        }
        watcher.start()
        var refusals = 0
        let deadline = Date().addingTimeInterval(3)
        while refusals < 100_000, Date() < deadline, lost.load(ordering: .relaxed) == 0 {
            if (try? StoreLock(path: path)) != nil { Issue.record("a second holder got the lock") }
            refusals += 1
        }
        stop.store(true, ordering: .relaxed)
        finished.wait()
        #expect(lost.load(ordering: .relaxed) == 0, "files closed under another thread after \(refusals) refusals")
        _ = held
    }
}
