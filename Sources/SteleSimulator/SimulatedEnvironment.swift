import Stele

/// One device's view of the simulated world (DESIGN §9), as its ``FleetDriver``
/// sees it: frames go onto the seeded network, timers and anchor reads and
/// writes onto the virtual clock's queue, and the directory is the
/// simulation's. The driver is the one apps run; only this is the simulator's.
final class SimulatedEnvironment: FleetTransport, FleetScheduler, AnchorSubstrate {
    unowned let simulation: Simulation
    let device: DeviceID

    init(simulation: Simulation, device: DeviceID) {
        self.simulation = simulation
        self.device = device
    }

    var environment: FleetEnvironment {
        FleetEnvironment(transport: self, scheduler: self, anchors: self, directory: simulation.directory)
    }

    func send(_ bytes: [UInt8], from sender: DeviceID, to recipient: DeviceID) {
        simulation.send(bytes, from: sender, to: recipient)
    }

    func mayCarry(from sender: DeviceID, to recipient: DeviceID) -> Bool {
        simulation.mayCarry(from: sender, to: recipient)
    }

    /// The virtual clock: every device's monotonic clock is the simulation's (a skew moves only wall clocks).
    var monotonicMilliseconds: Int64 { simulation.now }

    func schedule(afterMilliseconds milliseconds: Int64, _ action: @escaping () -> Void) -> any FleetScheduledTimer {
        simulation.schedule(SimulatedTimer(action), for: device, afterMilliseconds: milliseconds)
    }

    /// The simulation runs on one thread.
    func assertOnOwner() {}

    func writeAnchor(_ sealed: [UInt8], of account: AccountID, completion: @escaping (Result<Void, AnchorError>) -> Void) {
        simulation.queueAnchorWrite(sealed, by: device, completion: completion)
    }

    func readAnchor(of account: AccountID, completion: @escaping (Result<[UInt8]?, AnchorError>) -> Void) {
        simulation.queueAnchorRead(by: device, completion: completion)
    }
}

/// A timer on the simulation's queue: fires once unless cancelled.
final class SimulatedTimer: FleetScheduledTimer {
    private(set) var isCancelled = false
    private let action: () -> Void

    init(_ action: @escaping () -> Void) { self.action = action }

    func cancel() { isCancelled = true }

    /// Runs the action, unless cancelled; a timer fires at most once.
    func fire() {
        guard !isCancelled else { return }
        isCancelled = true
        action()
    }
}
