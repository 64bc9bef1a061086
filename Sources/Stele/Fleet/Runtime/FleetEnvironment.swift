/// What a ``FleetDriver`` needs from the world it runs in: a way to send frames,
/// timers on a monotonic clock, the anchor substrate and the account directory.
/// The simulator is one environment (virtual clock, seeded network), the
/// in-process ``MemoryFleet`` another, a hub runtime a third; the driver and the
/// node inside it are the same code in all of them (DESIGN §3).
///
/// Every completion and every fired timer must run on the driver's owner, the
/// one serial context that calls the driver (``FleetScheduler/assertOnOwner()``).
public struct FleetEnvironment {
    public var transport: any FleetTransport
    public var scheduler: any FleetScheduler
    public var anchors: any AnchorSubstrate
    public var directory: any DirectorySource

    public init(transport: any FleetTransport, scheduler: any FleetScheduler, anchors: any AnchorSubstrate, directory: any DirectorySource) {
        self.transport = transport
        self.scheduler = scheduler
        self.anchors = anchors
        self.directory = directory
    }
}

/// Carries sealed frames between devices. Delivery is not promised: the protocol
/// advertises again and retries, so a frame lost here costs time, not data.
/// Frames that arrive for a device go to its driver's ``FleetDriver/receive(_:from:)``.
public protocol FleetTransport: AnyObject {
    /// Sends `bytes` (sealed for `recipient`) from this device.
    func send(_ bytes: [UInt8], from sender: DeviceID, to recipient: DeviceID)

    /// Whether a frame sent now from `sender` to `recipient` could get anywhere.
    /// A transport that knows it would drop the frame says `false`, and the node
    /// does not seal it: the simulator's network, with the recipient offline or
    /// cut off by a partition, where two thirds of the frames of a five-device run
    /// went nowhere (issue 22). A transport that carries or queues every frame
    /// (a hub's relay) keeps the default, `true`.
    func mayCarry(from sender: DeviceID, to recipient: DeviceID) -> Bool
}

extension FleetTransport {
    public func mayCarry(from sender: DeviceID, to recipient: DeviceID) -> Bool { true }
}

/// Timers on a clock that never goes back: the driver measures durations on it,
/// never on the wall clock a user may set.
public protocol FleetScheduler: AnyObject {
    /// Milliseconds on the monotonic clock (its origin is the scheduler's own).
    var monotonicMilliseconds: Int64 { get }
    /// Calls `action` on the driver's owner after `milliseconds`, unless the
    /// returned timer is cancelled first.
    func schedule(afterMilliseconds milliseconds: Int64, _ action: @escaping () -> Void) -> any FleetScheduledTimer
    /// Traps (in debug builds) when called off the driver's owner.
    func assertOnOwner()
}

/// A timer a ``FleetScheduler`` armed.
public protocol FleetScheduledTimer: AnyObject {
    /// After this, the timer's action never runs.
    func cancel()
}

/// Where the sealed anchor lives (001 §7): a substrate a restore of the device
/// does not roll back. It holds bytes only: the driver seals the anchor with the
/// newest account key before writing and opens it after reading.
public protocol AnchorSubstrate: AnyObject {
    /// Replaces the account's sealed anchor as one step; `completion` says
    /// whether it landed (001 §8: nothing is collected until it has).
    func writeAnchor(_ sealed: [UInt8], of account: AccountID, completion: @escaping (Result<Void, AnchorError>) -> Void)
    /// The account's sealed anchor, `nil` when none has been written, or why it cannot be read.
    func readAnchor(of account: AccountID, completion: @escaping (Result<[UInt8]?, AnchorError>) -> Void)
}

/// Where the driver reads an account's roster and the account keys wrapped for
/// its device. Nothing read is trusted: the roster is a signed log the driver
/// verifies and pins, each key is sealed to the device (``Directory``).
public protocol DirectorySource: AnyObject {
    /// The account's roster, with the keys wrapped for `device` (none when `device` is `nil`).
    func read(_ account: AccountID, keysFor device: DeviceID?, completion: @escaping (Result<DirectoryReading, any Error>) -> Void)
}

/// One read of a ``DirectorySource``.
public struct DirectoryReading: Sendable {
    public let roster: Roster
    /// The account keys wrapped for the device asked about, oldest first.
    public let wrappedKeys: [WrappedAccountKey]

    public init(roster: Roster, wrappedKeys: [WrappedAccountKey]) {
        self.roster = roster
        self.wrappedKeys = wrappedKeys
    }
}

extension MemoryDirectory: DirectorySource {
    /// Answers at once, before returning.
    public func read(_ account: AccountID, keysFor device: DeviceID?, completion: @escaping (Result<DirectoryReading, any Error>) -> Void) {
        completion(
            Result {
                DirectoryReading(roster: try roster(of: account), wrappedKeys: try device.map { try wrappedKeys(for: $0, of: account) } ?? [])
            })
    }
}
