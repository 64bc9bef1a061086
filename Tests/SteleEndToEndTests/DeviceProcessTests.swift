import Foundation
import Stele
import Testing
import TestSupport

/// Devices as users run them: `stele` processes on their own store files,
/// syncing through `stele-hub` processes on loopback, killed with SIGKILL,
/// restored from file copies, revoked while they run.
@Suite(.serialized) struct DeviceProcessTests {
    @Test(arguments: Topology.allCases) func aWriteAndADeleteGoEachWay(_ topology: Topology) throws {
        let world = try DeviceWorld(topology)
        try world.pair()
        let phone = try world.background("sync", world.path("phone"), "--watch")
        defer { phone.signal(SIGTERM) }
        // The laptop writes and syncs once; the phone, watching, takes it in.
        try world.must("put", world.path("laptop"), "notes", "milk", "2L")
        let first = try world.must("sync", world.path("laptop"), "--timeout", "20s")
        #expect(first.output.contains("in sync with 1 device"))
        #expect(try eventually { try world.get("phone", "milk") == "2L" })
        // The phone deletes while its watch runs (another process writes its store).
        try world.must("delete", world.path("phone"), "notes", "milk")
        #expect(try eventually {
            try world.must("sync", world.path("laptop"), "--timeout", "20s")
            return try world.get("laptop", "milk") == nil
        })
        // The phone writes, the laptop deletes it, the phone hears.
        try world.must("put", world.path("phone"), "notes", "eggs", "12")
        #expect(try eventually {
            try world.must("sync", world.path("laptop"), "--timeout", "20s")
            return try world.get("laptop", "eggs") == "12"
        })
        try world.must("delete", world.path("laptop"), "notes", "eggs")
        try world.must("sync", world.path("laptop"), "--timeout", "20s")
        #expect(try eventually { try world.get("phone", "eggs") == nil })
        #expect(try world.get("phone", "milk") == nil && world.get("laptop", "milk") == nil)
        #expect(phone.isRunning, "\(phone.errorText)")
    }

    @Test(arguments: Topology.allCases) func aDeviceKilledMidSyncCatchesUpWhenItRestarts(_ topology: Topology) throws {
        let world = try DeviceWorld(topology)
        try world.pair()
        let phone = try world.background("sync", world.path("phone"), "--watch")
        defer { phone.signal(SIGTERM) }
        // Many rows on the laptop, written as an app would, through its own handle.
        do {
            let laptop = try Replica.open(at: world.path("laptop"), options: Replica.Options(stampFloor: FileKeyStore(path: world.path("laptop") + ".keys")))
            try laptop.write { for index in 0..<3_000 { try laptop.causal("notes").put("row-\(index)", Array("value \(index)".utf8)) } }
        }
        let killed = try world.background("sync", world.path("laptop"), "--watch")
        usleep(400_000)
        #expect(killed.signal(SIGKILL) == SIGKILL)
        let again = try world.stele("sync", world.path("laptop"), "--timeout", "60s")
        #expect(again.status == 0, "\(again)")
        let rows = try world.must("ls", world.path("phone"), "notes", "--json")
        let values = (try JSONSerialization.jsonObject(with: Data(rows.output.utf8))) as? [String: String] ?? [:]
        #expect(values.count == 3_000)
        #expect(values["row-2999"] == "value 2999")
    }

    @Test(arguments: Topology.allCases) func theHubKilledAndRestartedWhileDevicesWriteOffline(_ topology: Topology) throws {
        let world = try DeviceWorld(topology)
        try world.pair()
        let phone = try world.background("sync", world.path("phone"), "--watch")
        let laptop = try world.background("sync", world.path("laptop"), "--watch")
        defer {
            phone.signal(SIGTERM)
            laptop.signal(SIGTERM)
        }
        try world.must("put", world.path("phone"), "notes", "before", "1")
        #expect(try eventually { try world.get("laptop", "before") == "1" })
        for hub in world.ports.indices { world.killHub(hub) }
        try world.must("put", world.path("phone"), "notes", "from-phone", "offline")
        try world.must("put", world.path("laptop"), "notes", "from-laptop", "offline")
        try world.must("delete", world.path("laptop"), "notes", "before")
        usleep(500_000)
        #expect(phone.isRunning && laptop.isRunning, "the devices keep running without their hub")
        for hub in world.ports.indices { try world.startHub(hub) }
        #expect(try eventually { try world.get("laptop", "from-phone") == "offline" })
        #expect(try eventually { try world.get("phone", "from-laptop") == "offline" })
        #expect(try eventually { try world.get("phone", "before") == nil })
    }

    @Test(arguments: Topology.allCases) func aTombstoneIsCollectedAndARestoredCopyDoesNotBringTheRowBack(_ topology: Topology) throws {
        let world = try DeviceWorld(topology)
        try world.pair()
        let phone = try world.background("sync", world.path("phone"), "--watch")
        defer { phone.signal(SIGTERM) }
        var laptop = try world.background("sync", world.path("laptop"), "--watch")
        defer { laptop.signal(SIGTERM) }
        try world.must("put", world.path("phone"), "notes", "secret", "x")
        #expect(try eventually { try world.get("laptop", "secret") == "x" })
        // A copy of the laptop's store, taken before the delete (as an OS backup would: the device stopped).
        #expect(laptop.signal(SIGTERM) == 0)
        let backup = world.files.file("laptop-backup.stele")
        for suffix in ["", "-wal"] where FileManager.default.fileExists(atPath: world.path("laptop") + suffix) {
            try FileManager.default.copyItem(atPath: world.path("laptop") + suffix, toPath: backup + suffix)
        }
        laptop = try world.background("sync", world.path("laptop"), "--watch")
        try world.must("delete", world.path("phone"), "notes", "secret")
        // The barrier collects it on both, with the anchor on the hub.
        #expect(try eventually {
            let (p, l) = (try world.status("phone"), try world.status("laptop"))
            return (p["generation"] as? Int ?? 0) >= 1 && (l["generation"] as? Int ?? 0) >= 1 && p["tombstones"] as? Int == 0 && l["tombstones"] as? Int == 0
        })
        #expect((try world.status("phone"))["anchorGeneration"] as? Int ?? 0 >= 1)
        // The laptop is restored from the copy: the row is back on its disk, at generation 0.
        #expect(laptop.signal(SIGTERM) == 0)
        for suffix in ["", "-wal", "-shm"] { try? FileManager.default.removeItem(atPath: world.path("laptop") + suffix) }
        for suffix in ["", "-wal"] where FileManager.default.fileExists(atPath: backup + suffix) {
            try FileManager.default.copyItem(atPath: backup + suffix, toPath: world.path("laptop") + suffix)
        }
        #expect(try world.get("laptop", "secret") == "x", "the copy holds the row")
        #expect((try world.status("laptop"))["state"] as? String == "behind", "status sees the anchor ahead of the store")
        laptop = try world.background("sync", world.path("laptop"), "--watch")
        // Recovery from the anchor: the row stays deleted everywhere.
        #expect(try eventually { (try world.status("laptop"))["generation"] as? Int ?? 0 >= 1 }, "laptop running: \(laptop.isRunning)\n\(laptop.outputText)\n\(laptop.errorText)\n--- phone\n\(phone.outputText)")
        #expect(try eventually { try world.get("laptop", "secret") == nil })
        usleep(1_000_000)
        #expect(try world.get("phone", "secret") == nil)
        #expect(try world.get("laptop", "secret") == nil)
    }

    @Test(arguments: Topology.allCases) func aDeviceRevokedWhileItsWatchRunsStopsSayingSo(_ topology: Topology) throws {
        let world = try DeviceWorld(topology)
        try world.pair()
        let laptop = try world.background("sync", world.path("laptop"), "--watch")
        defer { laptop.signal(SIGTERM) }
        #expect(laptop.waitFor("connected"))
        let laptopID = try world.deviceID("laptop")
        let revoked = try world.must("revoke", world.path("phone"), laptopID)
        #expect(revoked.output.contains("epoch 2"))
        let run = laptop.finish(timeoutSeconds: 20)
        #expect(run.status == 1, "\(run)")
        #expect(run.error.contains("revoked"), "\(run)")
        // The phone goes on; the laptop's later writes go nowhere.
        try world.must("put", world.path("laptop"), "notes", "after", "1")
        let again = try world.stele("sync", world.path("laptop"), "--timeout", "5s")
        #expect(again.status == 1)
        #expect(again.error.contains("revoked"), "\(again)")
        #expect(try world.get("phone", "after") == nil)
    }

    @Test func aSecondSyncOnOneStoreIsRefused() throws {
        let world = try DeviceWorld()
        try world.pair()
        let phone = try world.background("sync", world.path("phone"), "--watch")
        defer { phone.signal(SIGTERM) }
        #expect(phone.waitFor("connected"))
        let second = try world.stele("sync", world.path("phone"), "--timeout", "5s")
        #expect(second.status == 1)
        #expect(second.error.contains("another process is syncing this store"), "\(second)")
    }

    @Test func aDeviceNotApprovedYetWaitsAndSaysWhy() throws {
        let world = try DeviceWorld()
        let founded = try world.must("init", world.path("phone"), "--hub", world.hub())
        let account = try #require(DeviceWorld.field("account", in: founded.output))
        try world.must("join", world.path("tablet"), "--hub", world.hub(), "--account", account)
        let waiting = try world.stele("sync", world.path("tablet"), "--timeout", "2s")
        #expect(waiting.status == 1)
        #expect(waiting.error.contains("approve"), "\(waiting)")
        // A fingerprint that does not match approves nothing.
        let tablet = try world.deviceID("tablet")
        let wrong = try world.stele("approve", world.path("phone"), tablet, "--fingerprint", "0000-0000-0000")
        #expect(wrong.status == 1)
        #expect(wrong.error.contains("NOT approved"))
        try world.must("approve", world.path("phone"), String(tablet.prefix(12)))
        let phone = try world.background("sync", world.path("phone"), "--watch")
        defer { phone.signal(SIGTERM) }
        let approved = try world.stele("sync", world.path("tablet"), "--timeout", "20s")
        #expect(approved.status == 0, "\(approved)")
    }
}
