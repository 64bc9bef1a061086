/// A debounce: `quiet`, or `armed` while its timer runs. The node keeps two:
/// one before it advertises after a change (``ContentSync``), one before a round
/// is opened (by the leader) or asked for (by a sibling holding tombstones).
struct Debounce {
    private(set) var isArmed = false

    /// Something wants the timer: `true` when it is to be armed (quiet → armed).
    mutating func onWanted() -> Bool {
        guard !isArmed else { return false }
        isArmed = true
        return true
    }

    /// The timer fired (armed → quiet).
    mutating func onFired() {
        isArmed = false
    }

    /// What the timer waited for happens at once (a sibling's request opens a
    /// round): `true` when the armed timer is to be cancelled (armed → quiet).
    mutating func onOvertaken() -> Bool {
        defer { isArmed = false }
        return isArmed
    }
}
