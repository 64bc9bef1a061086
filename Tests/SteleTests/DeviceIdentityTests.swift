import Testing
import TestSupport
@testable import Stele

@Suite struct DeviceIdentityTests {
    @Test func generatedIdentitiesDifferAndRebuildFromTheirPrivateKey() throws {
        let first = try DeviceIdentity.generate()
        let second = try DeviceIdentity.generate()
        #expect(first.deviceID != second.deviceID)
        #expect(first.privateKey.count == 32)
        #expect(try DeviceIdentity(privateKey: first.privateKey).deviceID == first.deviceID)
    }

    @Test func theDeviceIDIsTheX25519PublicKey() throws {
        // RFC 7748 §6.1: Alice's private key and the public key it yields.
        let privateKey = Hex.decode("77076d0a7318a57d3c16c17251b26645df4c2f87ebc0992ab177fba51db92c2a")!
        let identity = try DeviceIdentity(privateKey: privateKey)
        #expect(identity.deviceID.hex == "8520f0098930a754748b7ddcb43ef75a0dbf3a0d26381af4eba4a98eaa9b4e6a")
    }

    @Test func aPrivateKeyOfTheWrongLengthIsRefused() {
        #expect(throws: CryptoError.self) { _ = try DeviceIdentity(privateKey: [1, 2, 3]) }
    }

    @Test func deviceIDsOrderByTheirBytes() throws {
        let low = try DeviceID(bytes: [0x00] + [UInt8](repeating: 0xFF, count: 31))
        let middle = try DeviceID(bytes: [0x01] + [UInt8](repeating: 0x00, count: 31))
        let high = try DeviceID(bytes: [UInt8](repeating: 0x01, count: 31) + [0x02])
        #expect(low < middle)
        #expect(middle < high)
        #expect([high, low, middle].sorted() == [low, middle, high])
        var generator = SeededGenerator(seed: 3)
        for _ in 0..<200 {
            let a = generator.bytes(32)
            let b = generator.bytes(32)
            #expect((try DeviceID(bytes: a) < DeviceID(bytes: b)) == a.lexicographicallyPrecedes(b))
        }
    }

    @Test func deviceIDsRoundTripThroughBytesAndHex() throws {
        let id = Fixtures.device(9)
        #expect(try DeviceID(bytes: id.bytes) == id)
        #expect(DeviceID(hex: id.hex) == id)
        #expect(DeviceID(hex: "zz") == nil)
        #expect(throws: CodecError.self) { _ = try DeviceID(bytes: [1, 2]) }
    }

    @Test func accountIDsRoundTripAndRejectBadInput() throws {
        let account = Fixtures.account()
        #expect(AccountID(hex: account.hex) == account)
        #expect(AccountID(hex: "1234") == nil)
        #expect(throws: CodecError.self) { _ = try AccountID(bytes: [UInt8](repeating: 0, count: 15)) }
        #expect(AccountID.generate() != AccountID.generate())
    }
}
