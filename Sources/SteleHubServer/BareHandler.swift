import SteleHub

/// The bench's HTTP floor: answers every request `200` with an empty body and
/// never parks, so timing it measures libmicrohttpd and ``HubServer`` alone.
public final class BareHandler: HubHandler {
    /// Never woken: a bare handler parks nothing.
    public let wakeups = HubWakeups()

    /// A bare handler.
    public init() {}

    /// `200`, empty body, whatever was asked.
    public func handle(_ request: HubRequest) -> HubOutcome {
        .respond(HubResponse(status: 200))
    }

    /// Every request is logged as `bare`.
    public func template(of request: HubRequest) -> String {
        "bare"
    }
}
