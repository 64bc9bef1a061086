import SteleHub

/// The bench's baseline: answers every request `200` with nothing, so the
/// figure against it is the HTTP floor of this machine and libmicrohttpd.
public final class BareHandler: HubHandler {
    public let wakeups = HubWakeups()

    public init() {}

    public func handle(_ request: HubRequest) -> HubOutcome { .respond(HubResponse(status: 200)) }

    public func template(of request: HubRequest) -> String { "bare" }
}
