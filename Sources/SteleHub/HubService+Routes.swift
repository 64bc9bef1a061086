import Stele
import SteleSQL

/// The routes of HUB-API.md: a path pattern, its methods, and who may call it.
extension HubService {
    /// A parsed path: `/v1/accounts/{a}/relay/{device}` → segments after `v1`.
    struct Route {
        /// The template for logs, e.g. `/v1/accounts/{a}/relay/{device}`.
        let template: String
        /// The methods the path takes.
        let methods: Set<String>
        /// The account segment, as written (validated later).
        let account: String?
        /// The segment after the resource (`{device}`, `{kind}`), as written.
        let argument: String?
        /// The segment after that (a record's `{id}`), as written.
        var second: String? = nil
    }

    public func template(of request: HubRequest) -> String {
        (try? Self.match(request.path))?.template ?? "unmatched"
    }

    /// The route a path names.
    /// - Throws: `404 not_found` for a path HUB-API does not have.
    static func match(_ path: String) throws(HubRefusal) -> Route {
        let segments = path.split(separator: "/", omittingEmptySubsequences: false).dropFirst().map(String.init)
        func unknown() -> HubRefusal {
            let hint = path.hasPrefix("/v1/") ? "docs/hub-api.md lists the hub's paths" : "the hub's paths start /v1/ (docs/hub-api.md)"
            return .notFound("no such path: \(path.prefix(200)); \(hint)")
        }
        guard segments.first == "v1" else { throw unknown() }
        let rest = Array(segments.dropFirst())
        switch rest.count {
        case 1 where rest[0] == "health":
            return Route(template: "/v1/health", methods: ["GET"], account: nil, argument: nil)
        case 1 where rest[0] == "accounts":
            return Route(template: "/v1/accounts", methods: ["POST"], account: nil, argument: nil)
        default: break
        }
        guard rest.count >= 3, rest[0] == "accounts" else { throw unknown() }
        let account = rest[1]
        let resource = rest[2]
        let argument = rest.count > 3 ? rest[3] : nil
        func route(_ template: String, _ methods: Set<String>) -> Route {
            Route(template: "/v1/accounts/{a}/\(template)", methods: methods, account: account, argument: argument)
        }
        switch (resource, rest.count) {
        case ("sessions", 3): return route("sessions", ["POST"])
        case ("roster", 3): return route("roster", ["GET", "POST"])
        case ("join-requests", 3): return route("join-requests", ["GET", "POST"])
        case ("keys", 3): return route("keys", ["GET"])
        case ("keys", 4): return route("keys/{device}", ["PUT"])
        case ("relay", 3): return route("relay", ["GET"])
        case ("relay", 4): return route("relay/{device}", ["POST"])
        case ("contact-relay", 4): return route("contact-relay/{device}", ["POST"])
        case ("contact-roster", 3): return route("contact-roster", ["GET"])
        case ("anchor", 3): return route("anchor", ["GET", "PUT"])
        case ("status", 3): return route("status", ["GET"])
        case ("records", 4) where rest[3] == "push": return route("records/push", ["POST"])
        case ("records", 4) where rest[3] == "changes": return route("records/changes", ["GET"])
        case ("records", 4) where rest[3] == "replay": return route("records/replay", ["GET"])
        case ("records", 5): return Route(template: "/v1/accounts/{a}/records/{kind}/{id}", methods: ["GET", "PUT", "DELETE"], account: account, argument: rest[3], second: rest[4])
        case ("kinds", 4): return route("kinds/{kind}", ["PUT"])
        default: throw unknown()
        }
    }

    /// The GETs with an effect besides the answer, which take no HEAD.
    static let getsThatWrite: Set<String> = ["/v1/accounts/{a}/relay", "/v1/accounts/{a}/records/changes"]

    func route(_ request: HubRequest) throws -> HubOutcome {
        var request = request
        let route = try Self.match(request.path)
        // HEAD is answered as GET is (RFC 9110 §9.3.2): the server sends the status and
        // headers, never the body (libmicrohttpd drops it for HEAD). Not where a GET
        // changes something (RFC 9110 §9.2.1: HEAD is safe): a relay poll deletes the
        // frames it acknowledges and waits, a changes page notes the device's cursor.
        let allowed = route.methods.contains("GET") && !Self.getsThatWrite.contains(route.template) ? route.methods.union(["HEAD"]) : route.methods
        guard allowed.contains(request.method) else {
            throw HubRefusal(405, "method_not_allowed", "\(route.template) takes \(allowed.sorted().joined(separator: ", ")), not \(request.method.prefix(20))",
                headers: ["Allow": allowed.sorted().joined(separator: ", ")])
        }
        if request.method == "HEAD" { request.method = "GET" }
        if route.template == "/v1/health" { return .respond(try health()) }
        if route.template == "/v1/accounts" { return .respond(try createAccount(request)) }
        let account = try Self.account(route.account ?? "")
        switch (route.template, request.method) {
        case ("/v1/accounts/{a}/sessions", _): return .respond(try openSession(account, request))
        case ("/v1/accounts/{a}/join-requests", "POST"): return .respond(try requestJoin(account, request))
        case ("/v1/accounts/{a}/contact-relay/{device}", _): return .respond(try deliver(account, to: route.argument ?? "", request, from: nil))
        case ("/v1/accounts/{a}/contact-roster", _): return .respond(try readRoster(account, request, contact: true))
        default: break
        }
        switch (route.template, request.method) {
        case ("/v1/accounts/{a}/roster", "GET"): return .respond(try readRoster(account, request))
        case ("/v1/accounts/{a}/roster", "POST"): return .respond(try appendRoster(account, request))
        case ("/v1/accounts/{a}/join-requests", "GET"): return .respond(try listJoinRequests(account, request))
        case ("/v1/accounts/{a}/keys", _): return .respond(try readKeys(account, request))
        case ("/v1/accounts/{a}/keys/{device}", _): return .respond(try publishKey(account, for: route.argument ?? "", request))
        case ("/v1/accounts/{a}/relay", _): return try receive(account, request)
        case ("/v1/accounts/{a}/relay/{device}", _): return .respond(try deliver(account, to: route.argument ?? "", request, from: request))
        case ("/v1/accounts/{a}/anchor", "GET"): return .respond(try readAnchor(account, request))
        case ("/v1/accounts/{a}/anchor", "PUT"): return .respond(try writeAnchor(account, request))
        case ("/v1/accounts/{a}/status", _): return .respond(try status(account, request))
        case ("/v1/accounts/{a}/records/push", _): return .respond(try push(account, request))
        case ("/v1/accounts/{a}/records/changes", _): return try changes(account, request)
        case ("/v1/accounts/{a}/records/replay", _): return .respond(try replay(account, request))
        case ("/v1/accounts/{a}/records/{kind}/{id}", _): return .respond(try singleRecord(account, kind: route.argument ?? "", id: route.second ?? "", request))
        case ("/v1/accounts/{a}/kinds/{kind}", _): return .respond(try putKind(account, kind: route.argument ?? "", request))
        default:
            preconditionFailure("route \(route.template) \(request.method) matched but has no handler")
        }
    }

    /// An account id from a path: 32 lowercase hex digits.
    static func account(_ segment: String) throws(HubRefusal) -> AccountID {
        guard segment.count == 32, segment == segment.lowercased(), let account = AccountID(hex: segment) else {
            throw .notFound("no account \(segment.prefix(64)): an account id is 32 lowercase hex digits")
        }
        return account
    }

    /// A device id from a path or a body: 64 lowercase hex digits.
    static func device(_ text: String, field: String? = nil) throws(HubRefusal) -> DeviceID {
        guard text.count == 64, text == text.lowercased(), let device = DeviceID(hex: text) else {
            if let field { throw .badRequest("the field \"\(field)\" must be a device id: 64 lowercase hex digits") }
            throw .notFound("no device \(text.prefix(80)): a device id is 64 lowercase hex digits")
        }
        return device
    }

    /// The calling device, from its bearer token.
    struct Caller {
        let account: String
        let device: String
        /// Every push of the device was refused since some time (status: cannot make progress).
        var pushesRefused = false
    }

    /// Checks the account exists and the bearer token is a live session of a
    /// member of it (HUB-API "Authentication").
    /// - Throws: `401 unauthorized` (no or unknown token), `404 not_found`
    ///   (no such account), `403 forbidden` (another account's token, a revoked device's).
    func authenticate(_ request: HubRequest, _ account: AccountID, _ sql: any HubSQL) throws -> Caller {
        try requireAccount(account, sql)
        guard let header = request.headers["authorization"], header.hasPrefix("Bearer "), header.count > 7 else {
            throw HubRefusal.unauthorized("this path needs Authorization: Bearer TOKEN; open a session with POST /v1/accounts/{a}/sessions")
        }
        let token = String(header.dropFirst(7))
        // The session and its device's state in one look: a revocation's commit is seen by the next request.
        let rows = try sql.query(
            """
            SELECT sessions.account, sessions.device, sessions.expires_ms, devices.state, devices.clock_offset_ms, devices.push_refused_ms FROM sessions
            LEFT JOIN devices ON devices.account = sessions.account AND devices.device = sessions.device
            WHERE sessions.token_hash = $1
            """, [.text(Self.digest(token))])
        guard let row = rows.first, let owner = row[column: 0].string, let device = row[column: 1].string, let expires = row[column: 2].int64 else {
            throw HubRefusal.unauthorized("the token is not one this hub issued, or it was replaced; open a new session")
        }
        guard expires > now() else { throw HubRefusal.unauthorized("the session expired; open a new one") }
        guard owner == account.hex else { throw HubRefusal.forbidden("the token belongs to another account") }
        guard row[column: 3].string == "member" else { throw HubRefusal.forbidden("the device \(device.prefix(8)) was revoked from this account; its sessions ended") }
        // How far the device's clock is from the hub's (its `Stele-Client-Time`), for the status;
        // written only when it moved by more than a second.
        if let text = request.headers["stele-client-time"], let clientTime = Int64(text) {
            let time = now()
            let offset = clientTime &- time
            if row[column: 4].int64.map({ abs($0 &- offset) > 1_000 }) ?? true {
                try sql.execute(
                    "UPDATE devices SET clock_offset_ms = $3, clock_seen_ms = $4 WHERE account = $1 AND device = $2", [.text(owner), .text(device), .integer(offset), .integer(time)])
            }
        }
        return Caller(account: owner, device: device, pushesRefused: row[column: 5].int64 != nil)
    }

    /// - Throws: `404 not_found` unless the account exists.
    func requireAccount(_ account: AccountID, _ sql: any HubSQL) throws {
        guard try !sql.query("SELECT 1 FROM accounts WHERE id = $1", [.text(account.hex)]).isEmpty else {
            throw HubRefusal.notFound("no account \(account.hex) on this hub")
        }
    }

    func health() throws -> HubResponse {
        for shard in storage.shards { _ = try shard.transaction { sql in try sql.query("SELECT 1", []) } }
        return HubJSON.response(["status": "ok", "storage": storage.backend.rawValue])
    }
}
