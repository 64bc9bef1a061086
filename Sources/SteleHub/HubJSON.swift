import Foundation

/// JSON in and out of the hub, through Foundation's serializer (never a
/// home-made parser). Bodies are objects; bytes are standard padded base64.
public enum HubJSON {
    /// `object` as compact JSON with sorted keys.
    public static func encode(_ object: [String: Any]) -> String {
        guard JSONSerialization.isValidJSONObject(object),
            let data = try? JSONSerialization.data(withJSONObject: object, options: [.sortedKeys, .withoutEscapingSlashes])
        else {
            preconditionFailure("the hub built a body JSON cannot hold")
        }
        return String(decoding: data, as: UTF8.self)
    }

    /// A 2xx answer carrying `object`.
    public static func response(_ object: [String: Any], status: Int = 200, headers: [String: String] = [:]) -> HubResponse {
        var headers = headers
        headers["Content-Type"] = "application/json"
        return HubResponse(status: status, headers: headers, body: Array(encode(object).utf8))
    }

    /// The bytes of `text` when it is standard padded base64 in its one canonical
    /// spelling (RFC 4648 §3.5: the pad bits are zero, padding makes the length a
    /// multiple of four, no other character); `nil` otherwise. Foundation's decoder
    /// also takes non-zero pad bits ("QR==" reads as "QQ=="): two spellings of the
    /// same bytes, which a hub storing and comparing what it was sent must not accept.
    /// Checked on the text as it is, not by encoding the bytes again (a push's payloads
    /// are up to its whole body).
    public static func base64(_ text: String) -> [UInt8]? {
        guard let data = Data(base64Encoded: text) else { return nil }
        let bytes = [UInt8](data)
        let utf8 = text.utf8
        // Four characters for every three bytes or part of three: nothing else in the text.
        guard utf8.count == (bytes.count + 2) / 3 * 4 else { return nil }
        // The last character with bits in it ("xY==" for one byte left over, "xyZ=" for two)
        // leaves its low four or two bits unused: they must be zero.
        let unusedBits: UInt8
        switch bytes.count % 3 {
        case 1: unusedBits = 0x0F
        case 2: unusedBits = 0x03
        default: return bytes
        }
        let last = utf8[utf8.index(utf8.endIndex, offsetBy: bytes.count % 3 == 1 ? -3 : -2)]
        guard let value = base64Value(last) else { return nil }
        return value & unusedBits == 0 ? bytes : nil
    }

    /// A character's six bits in the standard base64 alphabet.
    private static func base64Value(_ character: UInt8) -> UInt8? {
        switch character {
        case UInt8(ascii: "A")...UInt8(ascii: "Z"): character - UInt8(ascii: "A")
        case UInt8(ascii: "a")...UInt8(ascii: "z"): character - UInt8(ascii: "a") + 26
        case UInt8(ascii: "0")...UInt8(ascii: "9"): character - UInt8(ascii: "0") + 52
        case UInt8(ascii: "+"): 62
        case UInt8(ascii: "/"): 63
        default: nil
        }
    }

    /// Parses a request body as one JSON object.
    /// - Throws: ``HubRefusal`` `400 bad_request` saying what is wrong.
    public static func object(_ body: [UInt8]) throws(HubRefusal) -> JSONBody {
        guard !body.isEmpty else { throw .badRequest("the body is empty; send a JSON object") }
        try refuseTrailingComma(body)
        let parsed: Any
        do {
            parsed = try JSONSerialization.jsonObject(with: Data(body), options: [])
        } catch {
            throw .badRequest("the body is not valid JSON")
        }
        guard let object = parsed as? [String: Any] else { throw .badRequest("the body must be a JSON object") }
        return JSONBody(fields: object)
    }

    /// Refuses a body with a comma right before `]` or `}`. JSON has none there
    /// (RFC 8259 §4, §5: values are separated by commas, not ended by them), and
    /// HUB-API answers malformed JSON `400`, but Foundation's parser on Linux lets
    /// one through, so the hub looks for it first: outside strings, a comma whose
    /// next byte past whitespace closes an object or an array.
    /// - Throws: `400 bad_request` naming the comma's offset.
    static func refuseTrailingComma(_ body: [UInt8]) throws(HubRefusal) {
        if let offset = trailingComma(in: body) {
            throw .badRequest("the body is not valid JSON: the comma at byte \(offset) ends a list or an object (JSON allows none there)")
        }
    }

    /// The offset of the first comma outside strings that only whitespace
    /// separates from a `]` or `}`, or `nil`.
    public static func trailingComma(in body: [UInt8]) -> Int? {
        var inString = false
        var escaped = false
        var comma: Int?
        for (offset, byte) in body.enumerated() {
            if inString {
                if escaped {
                    escaped = false
                } else if byte == UInt8(ascii: "\\") {
                    escaped = true
                } else if byte == UInt8(ascii: "\"") {
                    inString = false
                }
                continue
            }
            switch byte {
            case UInt8(ascii: " "), UInt8(ascii: "\t"), UInt8(ascii: "\n"), UInt8(ascii: "\r"):
                continue
            case UInt8(ascii: "]"), UInt8(ascii: "}"):
                if let comma { return comma }
            case UInt8(ascii: "\""):
                inString = true
            default:
                break
            }
            comma = byte == UInt8(ascii: ",") ? offset : nil
        }
        return nil
    }
}

/// A request's JSON object, read field by field; each accessor names the field
/// it refuses.
public struct JSONBody {
    let fields: [String: Any]

    public func string(_ name: String) throws(HubRefusal) -> String {
        guard let value = fields[name] else { throw .badRequest("the field \"\(name)\" is missing") }
        guard let string = value as? String else { throw .badRequest("the field \"\(name)\" must be a string") }
        return string
    }

    public func optionalString(_ name: String) throws(HubRefusal) -> String? {
        guard let value = fields[name], !(value is NSNull) else { return nil }
        guard let string = value as? String else { throw .badRequest("the field \"\(name)\" must be a string") }
        return string
    }

    public func bytes(_ name: String) throws(HubRefusal) -> [UInt8] {
        let text = try string(name)
        guard let bytes = HubJSON.base64(text) else { throw .badRequest("the field \"\(name)\" must be standard padded base64") }
        return bytes
    }

    /// Whether the field is there and JSON `null`.
    public func isNull(_ name: String) -> Bool { fields[name] is NSNull }

    public func integer(_ name: String) throws(HubRefusal) -> Int64 {
        guard let value = fields[name] else { throw .badRequest("the field \"\(name)\" is missing") }
        // JSONSerialization gives NSNumber for both numbers and booleans; a boolean's
        // Objective-C type is "c" (char), which no JSON integer gets. Refuse booleans and fractions.
        guard let number = value as? NSNumber, String(cString: number.objCType) != "c" else {
            throw .badRequest("the field \"\(name)\" must be an integer")
        }
        let double = number.doubleValue
        guard double.rounded() == double else { throw .badRequest("the field \"\(name)\" must be an integer, not a fraction") }
        guard abs(double) <= 9_007_199_254_740_991 else {
            throw .badRequest("the field \"\(name)\" is out of range: integers are at most 2^53 − 1 in magnitude")
        }
        return number.int64Value
    }
}

/// A refusal: the status, the HUB-API error code and a message that says what
/// to do. Thrown anywhere in a request's handling; nothing is committed.
public struct HubRefusal: Error, Sendable, Equatable {
    public let status: Int
    public let code: String
    public let message: String
    public var headers: [String: String] = [:]
    /// Fields the error body carries beside `error`, as JSON text (an object).
    public var extra: String?

    public init(_ status: Int, _ code: String, _ message: String, headers: [String: String] = [:]) {
        self.status = status
        self.code = code
        self.message = message
        self.headers = headers
    }

    /// A refusal whose body carries `body`'s fields beside `error`.
    init(_ status: Int, _ code: String, _ message: String, headers: [String: String] = [:], body: [String: Any]) {
        self.init(status, code, message, headers: headers)
        extra = HubJSON.encode(body)
    }

    public static func badRequest(_ message: String) -> HubRefusal { HubRefusal(400, "bad_request", message) }
    public static func notFound(_ message: String) -> HubRefusal { HubRefusal(404, "not_found", message) }
    public static func unauthorized(_ message: String) -> HubRefusal { HubRefusal(401, "unauthorized", message) }
    public static func forbidden(_ message: String) -> HubRefusal { HubRefusal(403, "forbidden", message) }

    public var response: HubResponse {
        let fields = extra.flatMap { (try? JSONSerialization.jsonObject(with: Data($0.utf8))) as? [String: Any] } ?? [:]
        return .error(status, code, message, headers: headers, extra: fields)
    }
}

/// JSON's `null` in a body built from dictionaries.
enum NSNullValue {
    static var value: Any { NSNull() }
}
