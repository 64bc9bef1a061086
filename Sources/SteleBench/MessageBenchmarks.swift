import Stele

/// `messages.fold` (issue: the messages namespace): 100,000 messages of five ops
/// each (a post, two edits, a reaction, and a removal or, for one message in
/// five, a delete) applied to a `messages` namespace on disk as sync applies
/// them: one op per record, in transactions of 1,000. The figure is ops folded
/// per second when they arrive in a random order (most ops then arrive before
/// their post and wait as orphans); the baseline is the same ops in the order
/// they were made, into a fresh store. `messages.fold.in_order` reports the
/// baseline on its own. Both stores must end with equal digests, or the run fails.
enum MessageBenchmarks {
    static func run(scale: BenchmarkSuite.Scale, directory: String) throws -> [BenchmarkFigure] {
        let messages = 100_000 / scale.divisor
        let writer = try DeviceIdentity.generate().deviceID
        let account = AccountID.generate()
        var random = SplitMix64(seed: 7)
        var ops: [MessageOp] = []
        ops.reserveCapacity(messages * 5)
        var time: Int64 = 1 << 40
        func op(_ message: String, _ action: MessageOp.Action) -> MessageOp {
            time += 1
            return MessageOp(id: MessageOpID.generate(using: &random), message: message, time: time, writer: writer, account: account, action: action)
        }
        for index in 0..<messages {
            let id = "m\(index)"
            ops.append(op(id, .post(author: "ana", body: LocalWriteBenchmarks.value(index))))
            ops.append(op(id, .edit(body: LocalWriteBenchmarks.value(index + 1))))
            ops.append(op(id, .react(reactor: "ben", emoji: "👍")))
            ops.append(op(id, .edit(body: LocalWriteBenchmarks.value(index + 2))))
            ops.append(op(id, index % 5 == 0 ? .delete(.everyone) : .unreact(reactor: "ben")))
        }
        let shuffled = ops.shuffled(using: &random)

        func fold(_ ops: [MessageOp], into name: String) throws -> (seconds: Double, digest: Hash32) {
            let replica = try Replica.create(at: "\(directory)/\(name).stele", account: account, device: try DeviceIdentity.generate().deviceID)
            let chat = try replica.messages("chat")
            let seconds = try Stopwatch.time {
                for start in stride(from: 0, to: ops.count, by: LocalWriteBenchmarks.batch) {
                    try replica.write {
                        for op in ops[start..<min(start + LocalWriteBenchmarks.batch, ops.count)] {
                            try chat.apply(MessageRecord(message: op.message, ops: [op]))
                        }
                    }
                }
            }
            guard try chat.orphanCount() == 0, try chat.count() == messages - (messages + 4) / 5 else {
                throw BenchmarkError("messages.fold: the store did not fold every message")
            }
            return (seconds, try replica.digest(of: "chat"))
        }
        let inOrder = try fold(ops, into: "messages-in-order")
        let arrived = try fold(shuffled, into: "messages-random")
        guard inOrder.digest == arrived.digest else { throw BenchmarkError("messages.fold: the two arrival orders folded to different digests") }
        let count = Double(ops.count)
        return [
            BenchmarkFigure(name: "messages.fold", value: count / arrived.seconds, unit: "ops/s", baseline: count / inOrder.seconds),
            BenchmarkFigure(name: "messages.fold.in_order", value: count / inOrder.seconds, unit: "ops/s"),
        ]
    }
}
