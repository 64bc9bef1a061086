import Foundation
import Stele
import SteleHub

/// libFuzzer entry point for the hub's request handler (issue 16: the hub never
/// crashes on input). Each input is one request into ``HubService/handle(_:)``
/// on a hub holding one account:
/// - byte 0 picks the method (the methods the API takes, HEAD among them, or a made-up one),
/// - byte 1 picks a path template, its ids filled with the real account and
///   device or with bytes of the input (a value ≥ 0x80: the path is the body's
///   first line, verbatim),
/// - byte 2 picks the token (none, the member's, garbage, an expired form),
/// - the rest is the body (and the query after a `?` in it, for GET paths).
/// Every answer must be a status from 200 to 599, and a refusal must carry
/// HUB-API's JSON error body with a code.
@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzHub(_ start: UnsafeRawPointer?, _ count: Int) -> CInt {
    let bytes = count > 0 && start != nil ? Array(UnsafeRawBufferPointer(start: start, count: count)) : []
    guard bytes.count >= 3 else { return 0 }
    let methods = ["GET", "POST", "PUT", "DELETE", "PATCH", "HEAD", "get", "", "BREW"]
    let method = methods[Int(bytes[0]) % methods.count]
    var body = Array(bytes.dropFirst(3))
    let account = FuzzHub.account.hex
    let device = FuzzHub.founder.deviceID.hex
    let word = String(decoding: body.prefix(12), as: UTF8.self)
    let templates = [
        "/v1/health", "/v1/accounts", "/v1/accounts/\(account)/sessions", "/v1/accounts/\(account)/roster",
        "/v1/accounts/\(account)/join-requests", "/v1/accounts/\(account)/keys", "/v1/accounts/\(account)/keys/\(device)",
        "/v1/accounts/\(account)/relay?after=\(word)&wait=0", "/v1/accounts/\(account)/relay/\(device)", "/v1/accounts/\(account)/contact-relay/\(device)",
        "/v1/accounts/\(account)/anchor", "/v1/accounts/\(account)/status", "/v1/accounts/\(account)/records/push",
        "/v1/accounts/\(word)/roster", "/v1/accounts/\(account)/relay/\(word)", "/v1/\(word)", "/v1/accounts/\(account)/keys/\(word)",
    ]
    let target: String
    if bytes[1] >= 0x80 {
        let line = body.firstIndex(of: 0x0A) ?? body.endIndex
        target = "/" + String(decoding: body[..<line], as: UTF8.self)
        body = Array(body[min(line + 1, body.endIndex)...])
    } else {
        target = templates[Int(bytes[1]) % templates.count]
    }
    var headers: [String: String] = [:]
    switch bytes[2] % 4 {
    case 1: headers["authorization"] = "Bearer \(FuzzHub.token)"
    case 2: headers["authorization"] = "Bearer \(word)"
    case 3: headers["authorization"] = word
    default: break
    }
    let outcome = FuzzHub.service.handle(HubRequest(method: method, target: target, headers: headers, body: body))
    let response: HubResponse
    switch outcome {
    case .respond(let answer): response = answer
    case .wait(let wait): response = wait.poll() ?? wait.expire()
    }
    guard (200...599).contains(response.status) else { fatalError("status \(response.status) for \(method) \(target)") }
    if response.status >= 400 {
        let object = (try? JSONSerialization.jsonObject(with: Data(response.body))) as? [String: Any]
        guard let error = object?["error"] as? [String: Any], error["code"] is String, error["message"] is String else {
            fatalError("a \(response.status) without HUB-API's error body for \(method) \(target)")
        }
    }
    return 0
}

/// One hub on a temporary SQLite file, one founded account, one live session.
/// libFuzzer calls the entry point from one thread.
enum FuzzHub {
    static let directory = NSTemporaryDirectory() + "stele-fuzz-hub-\(getpid())"
    static let account = fixed(try AccountID(bytes: [UInt8](repeating: 0x5A, count: 16)))
    static let founder = fixed(try DeviceIdentity(privateKey: [UInt8](repeating: 7, count: 32)))
    static let service: HubService = fixed {
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        var configuration = HubService.Configuration()
        configuration.open = true
        configuration.maximumMailboxBytes = 1 << 20
        let service = HubService(storage: try SQLiteHubStorage(path: "\(directory)/hub.sqlite"), configuration: configuration)
        let genesis = Data(try Roster.founding(account: account, by: founder).encoded).base64EncodedString()
        _ = service.handle(HubRequest(method: "POST", target: "/v1/accounts", body: Array(HubJSON.encode(["genesis": genesis]).utf8)))
        return service
    }
    static let token: String = fixed {
        let time = Int64(Date().timeIntervalSince1970 * 1000)
        let proof = HubJSON.encode([
            "device": founder.deviceID.hex, "time": time,
            "signature": Data(try HubSessionProof.sign(by: founder, account: account, timeMilliseconds: time)).base64EncodedString(),
        ])
        let answer = service.handle(HubRequest(method: "POST", target: "/v1/accounts/\(account.hex)/sessions", body: Array(proof.utf8))).response
        guard let body = answer?.body, let object = try JSONSerialization.jsonObject(with: Data(body)) as? [String: Any], let token = object["token"] as? String else {
            throw CocoaError(.coderInvalidValue)
        }
        return token
    }

    static func fixed<T>(_ make: @autoclosure () throws -> T) -> T {
        do { return try make() } catch { fatalError("the fuzz hub could not be set up: \(error)") }
    }

    static func fixed<T>(_ make: () throws -> T) -> T {
        do { return try make() } catch { fatalError("the fuzz hub could not be set up: \(error)") }
    }
}
