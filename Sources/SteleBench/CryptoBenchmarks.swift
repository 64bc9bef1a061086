import Stele

/// `crypto.*` (issue: the sealed sibling channel).
///
/// `crypto.seal_open.{1k,64k}`: frames per second sealed by one device and
/// opened by another through ``SiblingChannel``, on a roster of ten devices (the
/// receiver finds the sender among nine), against the same frames sealed and
/// opened with bare AES-256-GCM under one fixed key and nonce (what any
/// authenticated encryption of the frame costs). `crypto.overhead_bytes`: the
/// bytes sealing adds to every frame.
enum CryptoBenchmarks {
    static func run(scale: BenchmarkSuite.Scale, directory _: String) throws -> [BenchmarkFigure] {
        let account = AccountID.generate()
        let roster = try (0..<10).map { _ in try DeviceIdentity.generate() }
        let sender = roster[9]
        let receiver = roster[0]
        var sealing = SiblingChannel(identity: sender, account: account, members: Set(roster.map(\.deviceID)))
        var opening = SiblingChannel(identity: receiver, account: account, members: Set(roster.map(\.deviceID)))
        var figures: [BenchmarkFigure] = []
        for (name, size, count) in [("crypto.seal_open.1k", 1_024, 20_000), ("crypto.seal_open.64k", 65_536, 1_000)] {
            let frames = count / scale.divisor
            let frame = (0..<size).map { UInt8(truncatingIfNeeded: $0 &* 31) }
            // Warm the pair keys (one X25519 each way, once per pair for the channel's life).
            _ = try opening.open(try sealing.seal(frame, to: receiver.deviceID))
            var best = (sealed: Double.infinity, bare: Double.infinity)
            for _ in 0..<3 {
                best.sealed = min(best.sealed, try Stopwatch.time {
                    for _ in 0..<frames {
                        let opened = try opening.open(try sealing.seal(frame, to: receiver.deviceID))
                        guard opened.frame.count == size else { throw BenchmarkError("a sealed frame did not open to itself") }
                    }
                })
                let key = [UInt8](repeating: 7, count: 32)
                let nonce = [UInt8](repeating: 0, count: Sealing.nonceCount)
                best.bare = min(best.bare, try Stopwatch.time {
                    for _ in 0..<frames {
                        let sealed = Sealing.seal(frame, keyBytes: key, associated: [], nonce: nonce)
                        guard Sealing.open(sealed[...], keyBytes: key, associated: [], nonce: nonce)?.count == size else {
                            throw BenchmarkError("an AES-GCM frame did not open to itself")
                        }
                    }
                })
            }
            figures.append(BenchmarkFigure(name: name, value: Double(frames) / best.sealed, unit: "frames/s", baseline: Double(frames) / best.bare))
        }
        let sealedSize = try sealing.seal([UInt8](repeating: 0, count: 100), to: receiver.deviceID).count
        figures.append(BenchmarkFigure(name: "crypto.overhead_bytes", value: Double(sealedSize - 100), unit: "bytes", baseline: Double(Sealing.tagCount)))
        return figures
    }
}
