import Stele

/// libFuzzer entry point for the sealed-frame opener (issue 6: bad input never
/// traps, and nothing opens that a roster member did not seal).
///
/// The first byte picks the mode:
/// - even: the rest is handed to the opener as it came off the wire; it must
///   throw ``SealError`` (a forgery that opens is a failure);
/// - odd: the rest is a frame a member seals for real; the fuzzer then flips the
///   bit the next two bytes name (or none) and the opener must return exactly
///   the frame and its sender when nothing was flipped, and throw otherwise.
@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzSealed(_ start: UnsafeRawPointer?, _ count: Int) -> CInt {
    let bytes = count > 0 && start != nil ? Array(UnsafeRawBufferPointer(start: start, count: count)) : []
    guard let mode = bytes.first else { return 0 }
    if mode % 2 == 0 {
        if let opened = try? FuzzWorld.receiver.open(Array(bytes.dropFirst())) {
            fatalError("unsealed fuzz input opened as a frame from \(opened.sender)")
        }
        return 0
    }
    guard bytes.count >= 3 else { return 0 }
    let flip = Int(bytes[1]) << 8 | Int(bytes[2])
    let frame = Array(bytes.dropFirst(3))
    guard var sealed = try? FuzzWorld.sender.seal(frame, to: FuzzWorld.receiverID) else { fatalError("a member could not seal a frame") }
    // 0xFFFF means no flip; any other value flips that bit if it lies inside.
    let flipped = flip != 0xFFFF && flip / 8 < sealed.count
    if flipped { sealed[flip / 8] ^= UInt8(1 << (flip % 8)) }
    switch (try? FuzzWorld.receiver.open(sealed), flipped) {
    case (nil, false): fatalError("a frame a member sealed did not open")
    case (let opened?, false):
        if opened.frame != frame || opened.sender != FuzzWorld.senderID { fatalError("a sealed frame opened to something else") }
    case (.some, true): fatalError("a frame with bit \(flip) flipped opened")
    case (nil, true): break
    }
    return 0
}

/// A fixed account of three devices; the receiver's roster holds the sender and a third.
/// The channels are kept across runs so their pair keys are computed once
/// (libFuzzer calls the entry point from one thread: the `nonisolated(unsafe)`
/// state is never shared).
enum FuzzWorld {
    static let account = fixed(try AccountID(bytes: [UInt8](repeating: 0xA5, count: 16)))
    static let receiverIdentity = fixed(try DeviceIdentity(privateKey: [UInt8](repeating: 1, count: 32)))
    static let senderIdentity = fixed(try DeviceIdentity(privateKey: [UInt8](repeating: 2, count: 32)))
    static let thirdIdentity = fixed(try DeviceIdentity(privateKey: [UInt8](repeating: 3, count: 32)))
    static var receiverID: DeviceID { receiverIdentity.deviceID }
    static var senderID: DeviceID { senderIdentity.deviceID }
    static let roster: Set<DeviceID> = [receiverIdentity.deviceID, senderIdentity.deviceID, thirdIdentity.deviceID]
    nonisolated(unsafe) static var receiver = SiblingChannel(identity: receiverIdentity, account: account, members: roster)
    nonisolated(unsafe) static var sender = SiblingChannel(identity: senderIdentity, account: account, members: roster)

    private static func fixed<Value>(_ make: @autoclosure () throws -> Value) -> Value {
        guard let value = try? make() else { preconditionFailure("the fuzz harness could not build its fixed keys") }
        return value
    }
}
