import Foundation
import Testing
import TestSupport

@testable import Stele

/// The page scanner (on ``JSONTokens``) reads what `JSONDecoder` reads, or gives up: thousands of
/// random pages (keys in any order, nulls, sets, escapes, non-ASCII text, odd
/// spacing) are judged against a reference read with `JSONSerialization`.
@Suite struct MirrorPageScannerTests {
    /// A page read independently of both decoders under test.
    static func reference(_ body: [UInt8], listKey: String) -> (records: [MirrorStore.PulledRecord], next: Any, epoch: String?, more: Bool)? {
        guard let object = try? JSONSerialization.jsonObject(with: Data(body)) as? [String: Any], let list = object[listKey] as? [[String: Any]],
            let more = object["more"] as? Bool, let next = object["next"]
        else { return nil }
        var records: [MirrorStore.PulledRecord] = []
        for item in list {
            guard let kind = item["kind"] as? String, let id = item["id"] as? String, let modifiedAt = (item["modifiedAt"] as? NSNumber)?.int64Value,
                let seq = (item["seq"] as? NSNumber)?.int64Value
            else { return nil }
            var payload: [UInt8]?
            if let text = item["payload"] as? String {
                guard let data = Data(base64Encoded: text) else { return nil }
                payload = [UInt8](data)
            }
            records.append(
                .init(kind: kind, id: id, payload: payload, modifiedAt: modifiedAt, group: item["group"] as? String, sets: item["sets"] as? [String: [String]] ?? [:], seq: seq))
        }
        return (records, next, object["epoch"] as? String, more)
    }

    /// A JSON string literal of `text`, escaped the way a writer might (always for quotes, backslashes and controls).
    static func literal(_ text: String, escapeSlash: Bool) -> String {
        var out = "\""
        for scalar in text.unicodeScalars {
            switch scalar {
            case "\"": out += "\\\""
            case "\\": out += "\\\\"
            case "/" where escapeSlash: out += "\\/"
            case "\n": out += "\\n"
            default:
                if scalar.value < 0x20 { out += String(format: "\\u%04x", scalar.value) } else { out.unicodeScalars.append(scalar) }
            }
        }
        return out + "\""
    }

    static func randomPage(_ random: inout SeededGenerator, replay: Bool) -> String {
        let words = ["mail", "m1", "thread/7", "INBOX", "é", "日本", "a\"b", "back\\slash", "tab\tline\n", "🙂", "", "x y"]
        func word() -> String { words[Int(random.next() % UInt64(words.count))] }
        func space() -> String { random.next() % 5 == 0 ? [" ", "\n", "\t ", "  "][Int(random.next() % 4)] : "" }
        var records: [String] = []
        for _ in 0..<Int(random.next() % 6) {
            var fields = [
                "\"kind\":\(space())\(literal(word(), escapeSlash: random.next() % 2 == 0))",
                "\"id\":\(literal(word(), escapeSlash: false))",
                "\"modifiedAt\":\(Int64(bitPattern: random.next()) % 2_000_000_000_000)",
                "\"seq\":\(random.next() % 100_000)",
            ]
            switch random.next() % 3 {
            case 0: fields.append("\"payload\":null")
            case 1: fields.append("\"payload\":\"\(Data((0..<Int(random.next() % 40)).map { _ in UInt8(truncatingIfNeeded: random.next()) }).base64EncodedString())\"")
            default: break
            }
            if random.next() % 2 == 0 { fields.append("\"group\":\(random.next() % 3 == 0 ? "null" : literal(word(), escapeSlash: false))") }
            if random.next() % 2 == 0 {
                let sets = (0..<Int(random.next() % 3)).map { index in "\(literal("set\(index)", escapeSlash: false)):[\((0..<Int(random.next() % 3)).map { _ in literal(word(), escapeSlash: false) }.joined(separator: ","))]" }
                fields.append("\"sets\":{\(sets.joined(separator: ","))}")
            }
            if random.next() % 25 == 0 { fields.append("\"extra\":1") }
            fields.shuffle(using: &random)
            records.append("{\(space())\(fields.joined(separator: ",\(space())"))}")
        }
        var keys = [
            "\"\(replay ? "records" : "changes")\":[\(records.joined(separator: ","))]",
            replay ? "\"next\":\(literal("token." + word(), escapeSlash: false))" : "\"next\":\(random.next() % 1_000)",
            "\"more\":\(random.next() % 2 == 0 ? "true" : "false")",
        ]
        if !replay { keys.append("\"epoch\":\(literal(word() + "e", escapeSlash: false))") }
        keys.shuffle(using: &random)
        return "\(space()){\(keys.joined(separator: ","))}\(space())"
    }

    @Test func everyRandomPageReadsAsTheReferenceReadsIt() throws {
        var random = SeededGenerator(seed: 18)
        var scanned = 0
        for round in 0..<3_000 {
            let replay = round % 3 == 0
            let body = Array(Self.randomPage(&random, replay: replay).utf8)
            let listKey = replay ? "records" : "changes"
            let expected = try #require(Self.reference(body, listKey: listKey), "\(String(decoding: body, as: UTF8.self))")
            if let page = MirrorPageScanner.page(body, listKey: listKey) {
                scanned += 1
                #expect(page.records == expected.records, "\(String(decoding: body, as: UTF8.self))")
                #expect(page.more == expected.more)
            }
            if replay {
                let read = try #require(MirrorSync.replayPage(body), "\(String(decoding: body, as: UTF8.self))")
                #expect(read.records == expected.records)
                #expect(read.next == expected.next as? String)
                #expect(read.more == expected.more)
            } else {
                let read = try #require(MirrorSync.changesPage(body), "\(String(decoding: body, as: UTF8.self))")
                #expect(read.records == expected.records)
                #expect(read.next == (expected.next as? NSNumber)?.int64Value)
                #expect(read.epoch == expected.epoch)
                #expect(read.more == expected.more)
            }
        }
        // The fast path is the common one, and the fallback is exercised too.
        #expect(scanned > 300 && scanned < 3_000, "\(scanned) of 3,000 pages scanned")
    }

    @Test func whatIsNotOfTheUsualShapeIsGivenUp() {
        let record = #"{"kind":"k","id":"i","payload":null,"modifiedAt":1,"group":null,"sets":{},"seq":2}"#
        let good = #"{"changes":[\#(record)],"next":2,"epoch":"e","more":false}"#
        #expect(MirrorPageScanner.page(Array(good.utf8), listKey: "changes")?.records.count == 1)
        // Escapes are read, as JSONDecoder reads them.
        let escaped = good.replacingOccurrences(of: #""id":"i""#, with: #""id":"\u0069\n\ud83d\ude42""#)
        #expect(MirrorPageScanner.page(Array(escaped.utf8), listKey: "changes")?.records.first?.id == "i\n🙂")
        #expect(MirrorPageScanner.page(Array(good.replacingOccurrences(of: #""id":"i""#, with: #""id":"\ud83d""#).utf8), listKey: "changes") == nil, "a lone surrogate")
        let given: [String] = [
            good.replacingOccurrences(of: #""id":"i""#, with: #""id":"\q""#),  // an escape JSON does not have
            good.replacingOccurrences(of: #""seq":2"#, with: #""seq":2.0"#),  // a fraction
            good.replacingOccurrences(of: #""seq":2"#, with: #""seq":02"#),  // a leading zero
            good.replacingOccurrences(of: #""seq":2"#, with: #""seq":9223372036854775808"#),  // beyond Int64
            good.replacingOccurrences(of: #""seq":2"#, with: #""seq":2,"seq":3"#),  // a repeated key
            good.replacingOccurrences(of: #""more":false"#, with: #""more":false,"other":1"#),  // another key
            good.replacingOccurrences(of: #""kind":"k","#, with: ""),  // a required field missing
            good + "x",  // trailing bytes
            String(good.dropLast()),  // cut short
            good.replacingOccurrences(of: #""payload":null"#, with: #""payload":"not base64!""#),
        ]
        for text in given {
            #expect(MirrorPageScanner.page(Array(text.utf8), listKey: "changes") == nil, "\(text)")
        }
        // Invalid UTF-8 in a string.
        var bytes = Array(good.utf8)
        bytes[bytes.firstIndex(of: UInt8(ascii: "i"))!] = 0xFF
        #expect(MirrorPageScanner.page(bytes, listKey: "changes") == nil)
        // What JSONDecoder reads the fallback reads: a key it ignores.
        #expect(MirrorSync.changesPage(Array(given[5].utf8))?.records.count == 1)
        #expect(MirrorSync.changesPage(Array(escaped.utf8))?.records.first?.id == "i\n🙂")
    }
}
