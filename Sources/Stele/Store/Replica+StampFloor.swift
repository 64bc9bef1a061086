extension Replica {
    /// How far past what it covers a raised floor reaches, for the own counter:
    /// one save per this many counters while writes outrun the wall clock
    /// (the counter is hybrid, so at rest it follows the wall clock in milliseconds).
    static let floorCounterReserve: UInt64 = 60_000
    /// The same for the hybrid clock, in milliseconds: about one save per second
    /// while the device writes, and at most this far ahead of the wall clock a
    /// replica starts after a restart (its first stamps may lead by that much).
    static let floorClockReserveMilliseconds: Int64 = 1_000

    /// Moves the counter and the clock up to the floor the store keeps, at open:
    /// whatever the file says, nothing at or below the floor is issued again.
    /// - Throws: ``KeyStoreError`` when the floor cannot be read,
    ///   ``ReplicaError`` `deviceMismatch` when it belongs to another device.
    func startAboveStampFloor() throws {
        guard let floorStore, let floor = try floorStore.loadStampFloor() else { return }
        guard floor.device == device else {
            throw ReplicaError(
                .deviceMismatch,
                "the key store's stamp floor belongs to device \(floor.device.hex), not this store's \(device.hex); give each device its own key store")
        }
        if floor.counter > ownCounter { ownCounter = floor.counter }
        hybridClock.observe(floor.clock)
        reservedFloor = floor
    }

    /// Raises the saved floor when the counter or the clock has passed it (inside
    /// the write transaction, before its counters are persisted): reads the floor
    /// again, so a handle in another process that raised it further is never
    /// undone, and saves the pointwise maximum a reserve ahead.
    /// - Throws: ``ReplicaError`` `stampFloorUnavailable` when the store cannot be
    ///   read or written: the transaction rolls back and nothing is issued.
    func reserveStampFloorIfNeeded() throws {
        guard let floorStore else { return }
        if let reservedFloor, reservedFloor.covers(counter: ownCounter, clock: hybridClock.last) { return }
        let wall = max(clock.nowMilliseconds(), 0)
        let clockMilliseconds = min(max(hybridClock.last.milliseconds, wall) + Self.floorClockReserveMilliseconds, HybridTimestamp.maximumMilliseconds)
        var next = StampFloor(
            device: device,
            counter: min(max(ownCounter, UInt64(wall)) + Self.floorCounterReserve, VersionVector.maximumCounter),
            clock: max(HybridTimestamp(milliseconds: clockMilliseconds, logical: 0), hybridClock.last))
        do {
            if let saved = try floorStore.loadStampFloor(), saved.device == device { next = next.raised(to: saved) }
            try floorStore.saveStampFloor(next)
        } catch {
            throw ReplicaError(
                .stampFloorUnavailable,
                "could not record the stamp floor in the key store; nothing was written. Make the key store writable and try again",
                cause: error)
        }
        reservedFloor = next
    }
}
