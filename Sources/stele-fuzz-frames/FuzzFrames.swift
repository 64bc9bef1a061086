import Stele

/// libFuzzer entry point for the frame decoder (DESIGN §5: a decoder never traps).
/// Every input must either decode or throw ``CodecError``; a decoded frame must
/// encode and decode again to the same frame.
@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzFrames(_ start: UnsafeRawPointer?, _ count: Int) -> CInt {
    let bytes = count > 0 && start != nil ? Array(UnsafeRawBufferPointer(start: start, count: count)) : []
    guard let frame = try? FrameCodec.decode(bytes) else { return 0 }
    let again = FrameCodec.encode(frame)
    guard let reread = try? FrameCodec.decode(again) else { fatalError("a decoded frame did not decode after re-encoding") }
    switch frame {
    case .advertisement, .greeting: if reread != frame { fatalError("an advertisement changed through a round trip") }
    default: break
    }
    return 0
}
