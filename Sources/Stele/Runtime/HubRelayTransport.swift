import Dispatch

/// ``FleetTransport`` over the hub's relay (HUB-API "Relay"): each frame is a
/// `POST` to its recipient's mailbox: `relay/{device}` with this device's session
/// for a sibling, `contact-relay/{device}` on the contact's account without one
/// (the hub does not learn the sender's account). Frames for one recipient go in
/// order, one request at a time; recipients do not wait for each other.
///
/// Delivery is not promised (the protocol advertises again and resends), so a
/// frame is given up rather than kept forever: after ``maximumAttempts`` failed
/// tries, once it is older than ``maximumAgeSeconds``, or when the outbox is over
/// ``maximumQueuedBytes`` (the oldest go first). `429` and `503` wait the
/// `Retry-After` the hub gave; other failures back off with jitter.
/// Lives on the runtime's queue: every method runs there.
final class HubRelayTransport: FleetTransport {
    /// What the transport tells its runtime (on the queue).
    enum Trouble {
        /// A request was answered or failed: the runtime's connection status.
        case answered
        case failed(FleetRuntimeError)
        /// The hub does not know the recipient, or it was revoked: read the directory again.
        case recipientGone(DeviceID)
        /// A `403` on this device's own session: revoked, perhaps.
        case forbidden
    }

    static let maximumAttempts = 6
    static let maximumAgeSeconds = 120.0
    static let maximumQueuedBytes = 64 << 20

    private struct Pending {
        let bytes: [UInt8]
        let queuedAt: UInt64
        var attempts = 0
    }

    private let client: HubClient
    private let queue: DispatchQueue
    /// The largest relay frame this transport posts: a larger sealed frame goes in pieces (``RelayEnvelope``).
    var pieceBytes = 512 << 10
    /// The contact account a device belongs to, when it is not a sibling.
    var contactAccount: (DeviceID) -> AccountID? = { _ in nil }
    var onTrouble: (Trouble) -> Void = { _ in }
    private var outbox: [DeviceID: [Pending]] = [:]
    private var sending: Set<DeviceID> = []
    private var queuedBytes = 0
    private var backoff = Backoff(initialSeconds: 0.5, maximumSeconds: 30)
    private var random = SystemRandomNumberGenerator()
    private var stopped = false
    /// Frames given up, and frames the hub took.
    private(set) var framesDropped = 0
    private(set) var framesSent = 0

    init(client: HubClient, queue: DispatchQueue) {
        self.client = client
        self.queue = queue
    }

    /// Frames waiting or on their way.
    var framesWaiting: Int { outbox.values.reduce(0) { $0 + $1.count } }

    func send(_ bytes: [UInt8], from sender: DeviceID, to recipient: DeviceID) {
        dispatchPrecondition(condition: .onQueue(queue))
        guard !stopped else { return }
        let now = DispatchTime.now().uptimeNanoseconds
        for envelope in RelayEnvelope.wrap(bytes, pieceBytes: pieceBytes, using: &random) {
            outbox[recipient, default: []].append(Pending(bytes: envelope, queuedAt: now))
            queuedBytes += envelope.count
        }
        while queuedBytes > Self.maximumQueuedBytes, let oldest = oldestRecipient() { drop(first: oldest) }
        pump(recipient)
    }

    /// Nothing more is sent; what waits is dropped.
    func stop() {
        stopped = true
        outbox.removeAll()
        queuedBytes = 0
    }

    private func oldestRecipient() -> DeviceID? {
        outbox.filter { !$0.value.isEmpty && !sending.contains($0.key) }.min { $0.value[0].queuedAt < $1.value[0].queuedAt }?.key
            ?? outbox.first { !$0.value.isEmpty }?.key
    }

    /// Takes the recipient's first frame off the outbox.
    @discardableResult
    private func removeFirst(_ recipient: DeviceID) -> Pending? {
        guard let first = outbox[recipient]?.first else { return nil }
        outbox[recipient]?.removeFirst()
        if outbox[recipient]?.isEmpty == true { outbox[recipient] = nil }
        queuedBytes -= first.bytes.count
        return first
    }

    /// Gives the recipient's first frame up.
    private func drop(first recipient: DeviceID) {
        if removeFirst(recipient) != nil { framesDropped += 1 }
    }

    private func pump(_ recipient: DeviceID) {
        guard !stopped, !sending.contains(recipient), var next = outbox[recipient]?.first else { return }
        let age = Double(DispatchTime.now().uptimeNanoseconds - next.queuedAt) / 1e9
        if next.attempts >= Self.maximumAttempts || age > Self.maximumAgeSeconds {
            drop(first: recipient)
            return pump(recipient)
        }
        next.attempts += 1
        outbox[recipient]?[0] = next
        sending.insert(recipient)
        let path: String
        let authenticated: Bool
        if let contact = contactAccount(recipient) {
            path = "/v1/accounts/\(contact.hex)/contact-relay/\(recipient.hex)"
            authenticated = false
        } else {
            path = "\(client.accountPath)/relay/\(recipient.hex)"
            authenticated = true
        }
        let me = QueueConfined(self, on: queue)
        client.request("POST", path, body: next.bytes, authenticated: authenticated) { result in
            me.async { transport in transport.finished(recipient, result) }
        }
    }

    private func finished(_ recipient: DeviceID, _ result: Result<HubAnswer, HubClientError>) {
        sending.remove(recipient)
        guard !stopped else { return }
        switch result {
        case .success(let answer) where answer.status == 202 || answer.status == 200:
            removeFirst(recipient)
            framesSent += 1
            backoff.reset()
            onTrouble(.answered)
            pump(recipient)
        case .success(let answer) where answer.status == 404 || answer.status == 410:
            // The hub knows no such device (or it was revoked): the roster this device holds is behind.
            drop(first: recipient)
            onTrouble(.answered)
            onTrouble(.recipientGone(recipient))
            pump(recipient)
        case .success(let answer) where answer.status == 413:
            let size = removeFirst(recipient)?.bytes.count ?? 0
            framesDropped += 1
            onTrouble(.failed(FleetRuntimeError(.refused, "the hub refused a \(size)-byte frame as too large (413): \(answer.refusal?.message ?? ""); start the hub with a larger --max-frame-bytes")))
            pump(recipient)
        case .success(let answer) where answer.status == 403:
            drop(first: recipient)
            onTrouble(.forbidden)
        case .success(let answer):
            let delay = answer.retryAfterSeconds ?? backoff.next(using: &random)
            onTrouble(.failed(FleetRuntimeError(.refused, "the hub refused a frame (\(answer.status) \(answer.refusal?.code ?? "")); sending again in \(Int(delay.rounded(.up)))s")))
            retry(recipient, after: delay)
        case .failure(let error):
            let delay = backoff.next(using: &random)
            onTrouble(.failed(FleetRuntimeError(.unreachable, "\(error.message); sending again in \(Int(delay.rounded(.up)))s")))
            retry(recipient, after: delay)
        }
    }

    private func retry(_ recipient: DeviceID, after seconds: Double) {
        sending.insert(recipient)
        let me = QueueConfined(self, on: queue)
        queue.asyncAfter(deadline: .now() + seconds) {
            let transport = me.value
            transport.sending.remove(recipient)
            transport.pump(recipient)
        }
    }
}
