import Testing
import TestSupport
@testable import Stele

@Suite struct SiblingChannelTests {
    /// Four devices: 0, 1 and 2 on the account's roster, 3 outside it.
    struct Fixture {
        let account: AccountID
        let identities: [DeviceIdentity]
        var channels: [SiblingChannel]

        init() throws {
            var generator = SeededGenerator(seed: 6)
            account = AccountID.generate(using: &generator)
            identities = try (1...4).map { try DeviceIdentity(privateKey: [UInt8](repeating: UInt8($0), count: 32)) }
            let roster = Set(identities.prefix(3).map(\.deviceID))
            let account = account
            channels = identities.map { SiblingChannel(identity: $0, account: account, members: roster) }
        }

        var ids: [DeviceID] { identities.map(\.deviceID) }
    }

    static let frame = Array("a frame: kind, sender and content stay inside".utf8)

    @Test func aSealedFrameOpensAsItsSenderAndFrame() throws {
        var fixture = try Fixture()
        let sealed = try fixture.channels[1].seal(Self.frame, to: fixture.ids[0])
        #expect(sealed.count == Self.frame.count + SiblingChannel.overhead)
        #expect(SiblingChannel.overhead == 81)
        let opened = try fixture.channels[0].open(sealed)
        #expect(opened.sender == fixture.ids[1])
        #expect(opened.frame == Self.frame)
        // A fresh salt per frame: the same frame never seals to the same bytes twice.
        #expect(try fixture.channels[1].seal(Self.frame, to: fixture.ids[0]) != sealed)
        // An empty frame seals and opens too.
        #expect(try fixture.channels[0].open(try fixture.channels[2].seal([], to: fixture.ids[0])).frame == [])
    }

    @Test func theCarrierSeesTheRecipientButNeitherTheSenderNorTheContent() throws {
        var fixture = try Fixture()
        let salt = [UInt8](repeating: 9, count: SiblingChannel.saltCount)
        let fromOne = try fixture.channels[1].seal(Self.frame, to: fixture.ids[0], salt: salt)
        let fromTwo = try fixture.channels[2].seal(Self.frame, to: fixture.ids[0], salt: salt)
        // Same recipient, same salt, same frame, different senders: only the
        // recipient's bytes match; the sender appears nowhere in the clear.
        #expect(Array(fromOne[1..<33]) == fixture.ids[0].bytes)
        #expect(Array(fromOne[1..<33]) == Array(fromTwo[1..<33]))
        #expect(Array(fromOne[33...]) != Array(fromTwo[33...]))
        for sealed in [fromOne, fromTwo] {
            for sender in fixture.ids[1...2] { #expect(!contains(sealed, sender.bytes)) }
            #expect(!contains(sealed, Array(Self.frame.prefix(8))))
        }
    }

    @Test func aBitFlippedAnywhereIsRefusedWithTheErrorForWhereItLanded() throws {
        var fixture = try Fixture()
        let sealed = try fixture.channels[1].seal(Self.frame, to: fixture.ids[0])
        for bit in 0..<(sealed.count * 8) {
            var damaged = sealed
            damaged[bit / 8] ^= UInt8(1 << (bit % 8))
            let byte = bit / 8
            do {
                _ = try fixture.channels[0].open(damaged)
                Issue.record("a frame with bit \(bit) flipped opened")
            } catch {
                switch byte {
                case 0: #expect(error == .unsupportedVersion(sealed[0] ^ UInt8(1 << (bit % 8))))
                case 1..<33: #expect(error == .wrongRecipient(try DeviceID(bytes: damaged[1..<33])))
                case 33..<65: #expect(error == .unknownSender)
                default: #expect(error == .tampered(sender: fixture.ids[1]))
                }
            }
        }
        // Nothing was learnt from the damage: the intact frame still opens.
        #expect(try fixture.channels[0].open(sealed).frame == Self.frame)
    }

    @Test func aCutFrameIsRefused() throws {
        var fixture = try Fixture()
        let sealed = try fixture.channels[1].seal(Self.frame, to: fixture.ids[0])
        for length in 0..<sealed.count {
            do {
                _ = try fixture.channels[0].open(Array(sealed.prefix(length)))
                Issue.record("a frame cut to \(length) bytes opened")
            } catch {
                #expect(error == (length < SiblingChannel.overhead ? .truncated(count: length, minimum: 81) : .tampered(sender: fixture.ids[1])))
            }
        }
        #expect(throws: SealError.tampered(sender: fixture.ids[1])) { try fixture.channels[0].open(sealed + [0]) }
    }

    @Test func aFrameSealedForAnotherDeviceIsRefused() throws {
        var fixture = try Fixture()
        let forTwo = try fixture.channels[1].seal(Self.frame, to: fixture.ids[2])
        #expect(throws: SealError.wrongRecipient(fixture.ids[2])) { try fixture.channels[0].open(forTwo) }
        // Its own frame reflected back to the sender is not for it either.
        #expect(throws: SealError.wrongRecipient(fixture.ids[2])) { try fixture.channels[1].open(forTwo) }
        // Rewriting the recipient does not help: the header is authenticated.
        var redirected = forTwo
        redirected.replaceSubrange(1..<33, with: fixture.ids[0].bytes)
        #expect(throws: SealError.unknownSender) { try fixture.channels[0].open(redirected) }
    }

    @Test func aFrameFromAnotherAccountIsRefused() throws {
        var fixture = try Fixture()
        var generator = SeededGenerator(seed: 99)
        let otherAccount = AccountID.generate(using: &generator)
        // The same device keys under another account id: the pair keys differ.
        var foreign = SiblingChannel(identity: fixture.identities[1], account: otherAccount, members: Set(fixture.ids))
        #expect(throws: SealError.unknownSender) { try fixture.channels[0].open(try foreign.seal(Self.frame, to: fixture.ids[0])) }
        // A device that was never on this account's roster.
        #expect(throws: SealError.unknownSender) { try fixture.channels[0].open(try fixture.channels[3].seal(Self.frame, to: fixture.ids[0])) }
    }

    @Test func aRevokedDeviceIsRefusedByNameFromTheMomentItIsRevoked() throws {
        var fixture = try Fixture()
        let inFlight = try fixture.channels[2].seal(Self.frame, to: fixture.ids[0])
        #expect(try fixture.channels[0].open(inFlight).sender == fixture.ids[2])
        fixture.channels[0].update(members: Set(fixture.ids.prefix(2)), revoked: [fixture.ids[2]])
        #expect(throws: SealError.revokedSender(fixture.ids[2])) { try fixture.channels[0].open(inFlight) }
        #expect(throws: SealError.revokedSender(fixture.ids[2])) { try fixture.channels[0].open(try fixture.channels[2].seal(Self.frame, to: fixture.ids[0])) }
        // The members left are unaffected.
        #expect(try fixture.channels[0].open(try fixture.channels[1].seal(Self.frame, to: fixture.ids[0])).sender == fixture.ids[1])
    }

    @Test func anUnknownVersionIsNamed() throws {
        var fixture = try Fixture()
        var sealed = try fixture.channels[1].seal(Self.frame, to: fixture.ids[0])
        sealed[0] = 2
        #expect(throws: SealError.unsupportedVersion(2)) { try fixture.channels[0].open(sealed) }
        #expect("\(SealError.unsupportedVersion(2))".contains("update Stele"))
    }

    // MARK: - The primitives, against their published vectors

    @Test func x25519MatchesRFC7748() throws {
        let alice = Hex.decode("77076d0a7318a57d3c16c17251b26645df4c2f87ebc0992ab177fba51db92c2a")!
        let bob = try #require(DeviceID(hex: "de9edb7d7b7dc1b4d35b61c2ece435373f8343c85b78674dadfc7e146f882b4f"))
        let secret = try KeyAgreement.sharedSecret(privateKey: alice, peer: bob)
        #expect(Hex.encode(secret) == "4a5d9d5ba4ce2de1728e3bf480350f25e07e21c947d19e3376f09b3c1e161742")
        // A low-order public key (all zeros) yields no secret: an error, not a zero key.
        #expect(throws: CryptoError.self) { _ = try KeyAgreement.sharedSecret(privateKey: alice, peer: try DeviceID(bytes: [UInt8](repeating: 0, count: 32))) }
    }

    /// An identity keeps the secret it agreed with a peer (every channel built from it, or
    /// from a copy, derives its pair keys from the one agreement); a refusal is not kept:
    /// the low-order key is refused again, not answered from memory.
    @Test func anIdentityAgreesOncePerPeerAndKeepsNoRefusal() throws {
        let alice = try DeviceIdentity(privateKey: Hex.decode("77076d0a7318a57d3c16c17251b26645df4c2f87ebc0992ab177fba51db92c2a")!)
        let bob = try #require(DeviceID(hex: "de9edb7d7b7dc1b4d35b61c2ece435373f8343c85b78674dadfc7e146f882b4f"))
        let expected = "4a5d9d5ba4ce2de1728e3bf480350f25e07e21c947d19e3376f09b3c1e161742"
        #expect(Hex.encode(try alice.sharedSecret(with: bob)) == expected)
        let copy = alice
        #expect(Hex.encode(try copy.sharedSecret(with: bob)) == expected)
        let lowOrder = try DeviceID(bytes: [UInt8](repeating: 0, count: 32))
        #expect(throws: CryptoError.self) { _ = try alice.sharedSecret(with: lowOrder) }
        #expect(throws: CryptoError.self) { _ = try alice.sharedSecret(with: lowOrder) }
        // What an identity remembers is no part of what it is.
        #expect(alice == (try DeviceIdentity(privateKey: alice.privateKey)))
        // Channels built from fresh copies of one identity still talk to each other.
        var generator = SeededGenerator(seed: 9)
        let account = AccountID.generate(using: &generator)
        let other = try DeviceIdentity(privateKey: [UInt8](repeating: 7, count: 32))
        let roster: Set = [alice.deviceID, other.deviceID]
        for _ in 0..<2 {
            var sending = SiblingChannel(identity: alice, account: account, members: roster)
            var receiving = SiblingChannel(identity: other, account: account, members: roster)
            let opened = try receiving.open(try sending.seal(Self.frame, to: other.deviceID))
            #expect(opened.sender == alice.deviceID && opened.frame == Self.frame)
        }
    }

    /// Keys derived for one use of a peer's secret are derived once, and shared by
    /// the identity's copies; another salt or info is another use, and a derivation
    /// that fails is not remembered.
    @Test func anIdentityDerivesEachUseOfASecretOnce() throws {
        let alice = try DeviceIdentity(privateKey: [UInt8](repeating: 3, count: 32))
        let bob = try DeviceIdentity(privateKey: [UInt8](repeating: 5, count: 32)).deviceID
        var derivations = 0
        let derive = { (secret: [UInt8]) throws -> [UInt8] in
            derivations += 1
            return try KeyAgreement.hkdf(key: secret, salt: [1], info: [2], count: 32)
        }
        let first = try alice.derived(with: bob, salt: [1], info: [2], derive)
        let copy = alice
        #expect(try copy.derived(with: bob, salt: [1], info: [2], derive) == first)
        #expect(derivations == 1)
        _ = try alice.derived(with: bob, salt: [9], info: [2], derive)
        _ = try alice.derived(with: bob, salt: [1], info: [9], derive)
        #expect(derivations == 3)
        struct Refused: Error {}
        #expect(throws: Refused.self) { _ = try alice.derived(with: bob, salt: [7], info: [7]) { _ in throw Refused() } }
        #expect(try alice.derived(with: bob, salt: [7], info: [7], derive) == first)
        #expect(derivations == 4)
    }

    @Test func hkdfMatchesRFC5869() throws {
        let okm = try KeyAgreement.hkdf(
            key: [UInt8](repeating: 0x0b, count: 22), salt: Hex.decode("000102030405060708090a0b0c")!, info: Hex.decode("f0f1f2f3f4f5f6f7f8f9")!, count: 42)
        #expect(Hex.encode(okm) == "3cb25f25faacd57a90434f64d0362f2a2d2d0a90cf1a5a4c5db02d56ecc4c5bf34007208d5b887185865")
    }

    @Test func hmacMatchesRFC4231() throws {
        let mac = try KeyAgreement.hmac(key: Array("Jefe".utf8), Array("what do ya want for nothing?".utf8))
        #expect(Hex.encode(mac) == "5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843")
    }

    @Test func ed25519MatchesRFC8032() throws {
        let seed = Hex.decode("9d61b19deffd5a60ba844af492ec2cc44449c5697b326919703bac031cae7f60")!
        let publicKey = try KeyAgreement.signingPublicKey(seed: seed)
        #expect(Hex.encode(publicKey) == "d75a980182b10ab7d54bfed3c964073a0ee172f3daa62325af021a68f707511a")
        let signature = try KeyAgreement.sign([], seed: seed)
        #expect(
            Hex.encode(signature)
                == "e5564300c360ac729086e2cc806e828a84877f1eb8e5d974d873e065224901555fb8821590a33bacc61e39701cf9b46bd25bf5f0595bbe24655141438e7a100b")
        #expect(KeyAgreement.verify(signature, of: [], publicKey: publicKey))
        var forged = signature
        forged[10] ^= 1
        #expect(!KeyAgreement.verify(forged, of: [], publicKey: publicKey))
        #expect(!KeyAgreement.verify(signature, of: [0], publicKey: publicKey))
    }

    private func contains(_ haystack: [UInt8], _ needle: [UInt8]) -> Bool {
        guard needle.count <= haystack.count else { return false }
        return (0...(haystack.count - needle.count)).contains { Array(haystack[$0..<($0 + needle.count)]) == needle }
    }

    // MARK: - The contact channel (a conversation with another account)

    /// Ana's account holds devices 0 and 1, Ben's devices 2 and 3 (4 is revoked
    /// from Ben's roster); both sides compute the same pair keys.
    @Test func aContactFrameOpensOnTheContactsSideAndNowhereElse() throws {
        var generator = SeededGenerator(seed: 7)
        let ana = AccountID.generate(using: &generator)
        let ben = AccountID.generate(using: &generator)
        let eve = AccountID.generate(using: &generator)
        let devices = try (1...5).map { try DeviceIdentity(privateKey: [UInt8](repeating: UInt8($0 + 40), count: 32)) }
        let anas = Set(devices[0...1].map(\.deviceID))
        let bens = Set(devices[2...3].map(\.deviceID))
        var anaToBen = SiblingChannel.contact(identity: devices[0], account: ana, contact: ben, members: bens)
        var benFromAna = SiblingChannel.contact(identity: devices[2], account: ben, contact: ana, members: anas, revoked: [])
        #expect(anaToBen.contact == ben)

        let sealed = try anaToBen.seal(Self.frame, to: devices[2].deviceID)
        let opened = try benFromAna.open(sealed)
        #expect(opened.sender == devices[0].deviceID)
        #expect(opened.frame == Self.frame)
        // And back.
        #expect(try anaToBen.open(try benFromAna.seal([1, 2, 3], to: devices[0].deviceID)).frame == [1, 2, 3])

        // Ben's sibling channel does not open a contact frame, nor his contact channel a sibling frame.
        var benSiblings = SiblingChannel(identity: devices[2], account: ben, members: bens.union(anas))
        #expect(throws: SealError.unknownSender) { try benSiblings.open(sealed) }
        var anaSiblings = SiblingChannel(identity: devices[0], account: ana, members: anas.union(bens))
        #expect(throws: SealError.unknownSender) { try benFromAna.open(try anaSiblings.seal(Self.frame, to: devices[2].deviceID)) }
        // A conversation of Ana's with another account is another key.
        var anaToEve = SiblingChannel.contact(identity: devices[0], account: ana, contact: eve, members: bens)
        #expect(throws: SealError.unknownSender) { try benFromAna.open(try anaToEve.seal(Self.frame, to: devices[2].deviceID)) }
        // A device revoked from Ana's roster is refused by name.
        var revokedSender = SiblingChannel.contact(identity: devices[4], account: ana, contact: ben, members: bens)
        var benAfterRevocation = SiblingChannel.contact(identity: devices[2], account: ben, contact: ana, members: anas, revoked: [devices[4].deviceID])
        #expect(throws: SealError.revokedSender(devices[4].deviceID)) { try benAfterRevocation.open(try revokedSender.seal(Self.frame, to: devices[2].deviceID)) }
        // A flipped bit in the body names the sender and refuses the frame.
        var damaged = sealed
        damaged[damaged.count - 1] ^= 1
        #expect(throws: SealError.tampered(sender: devices[0].deviceID)) { try benFromAna.open(damaged) }
    }

}
