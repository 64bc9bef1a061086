import Foundation
import Testing

import SteleSimulator

/// The repository stands alone and its pages cannot drift from the code: the
/// scenario reference lists exactly the forms the grammar accepts, every link
/// stays inside the repository and reaches a file, and every Swift block of the
/// README is quoted from a file under `Examples/` that the build compiles.
@Suite struct DocumentationTests {
    static let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()

    static func text(_ relative: String) throws -> String {
        try String(contentsOf: root.appendingPathComponent(relative), encoding: .utf8)
    }

    // MARK: docs/scenarios.md against the grammar

    /// The level-3 headings of the form "### `…`": one per statement form.
    static func documentedForms(_ markdown: String) -> [String] {
        markdown.split(separator: "\n", omittingEmptySubsequences: false).compactMap { line in
            guard line.hasPrefix("### `"), line.hasSuffix("`"), line.count > 6 else { return nil }
            return String(line.dropFirst(5).dropLast())
        }
    }

    /// What is wrong between a reference page and the grammar's forms: forms
    /// missing, headings that are no form, headings given twice.
    static func referenceProblems(_ markdown: String, forms: [String]) -> [String] {
        let documented = documentedForms(markdown)
        var problems: [String] = []
        for form in forms where !documented.contains(form) { problems.append("not documented: \(form)") }
        for heading in documented where !forms.contains(heading) { problems.append("not a statement form: \(heading)") }
        for heading in Set(documented) where documented.filter({ $0 == heading }).count > 1 { problems.append("documented twice: \(heading)") }
        return problems.sorted()
    }

    static let forms = ScenarioGrammar.usage.split(separator: "\n").map(String.init)

    @Test func theScenarioReferenceDocumentsEveryFormTheGrammarAcceptsAndNoOther() throws {
        #expect(Self.forms.count > 100)
        #expect(Self.referenceProblems(try Self.text("docs/scenarios.md"), forms: Self.forms) == [])
    }

    @Test func theReferenceCheckSeesAFormMissingMisspeltOrRepeated() throws {
        let page = try Self.text("docs/scenarios.md")
        let form = "D put NS KEY VALUE"
        #expect(page.contains("### `\(form)`\n"))
        let missing = page.replacingOccurrences(of: "### `\(form)`\n", with: "")
        #expect(Self.referenceProblems(missing, forms: Self.forms) == ["not documented: \(form)"])
        let misspelt = page.replacingOccurrences(of: "### `\(form)`\n", with: "### `D putt NS KEY VALUE`\n")
        #expect(Self.referenceProblems(misspelt, forms: Self.forms) == ["not a statement form: D putt NS KEY VALUE", "not documented: \(form)"])
        #expect(Self.referenceProblems(page + "\n### `\(form)`\n", forms: Self.forms) == ["documented twice: \(form)"])
    }

    // MARK: Links

    /// The Markdown pages a user reads.
    static func pages() throws -> [String] {
        let fixed = ["README.md", "ARCHITECTURE.md", "SECURITY.md", "CHANGELOG.md"]
        let docs = try FileManager.default.contentsOfDirectory(atPath: root.appendingPathComponent("docs").path)
            .filter { $0.hasSuffix(".md") }.map { "docs/" + $0 }
        let examples = try FileManager.default.contentsOfDirectory(atPath: root.appendingPathComponent("Examples").path)
            .map { "Examples/\($0)/README.md" }
            .filter { FileManager.default.fileExists(atPath: root.appendingPathComponent($0).path) }
        return fixed + docs.sorted() + examples.sorted()
    }

    /// The targets of `[text](target)` links in `markdown`, fragments dropped, outside code.
    static func links(_ markdown: String) -> [String] {
        var targets: [String] = []
        var inFence = false
        for line in markdown.split(separator: "\n", omittingEmptySubsequences: false) {
            if line.hasPrefix("```") { inFence.toggle() }
            if inFence { continue }
            var rest = line[...]
            while let open = rest.range(of: "](") {
                let after = rest[open.upperBound...]
                guard let close = after.firstIndex(of: ")") else { break }
                targets.append(String(after[..<close]))
                rest = after[close...]
            }
        }
        return targets
    }

    /// What is wrong with the links of `page`: one leaving the repository, or reaching no file.
    static func linkProblems(page: String, markdown: String) -> [String] {
        let folder = root.appendingPathComponent(page).deletingLastPathComponent()
        return links(markdown).compactMap { target in
            if target.hasPrefix("http://") || target.hasPrefix("https://") || target.hasPrefix("mailto:") || target.hasPrefix("#") { return nil }
            let path = String(target.split(separator: "#", maxSplits: 1, omittingEmptySubsequences: false)[0])
            let resolved = folder.appendingPathComponent(path).standardizedFileURL.path
            guard resolved.hasPrefix(root.standardizedFileURL.path + "/") || resolved == root.standardizedFileURL.path else {
                return "\(page): \(target) leaves the repository"
            }
            return FileManager.default.fileExists(atPath: resolved) ? nil : "\(page): \(target) reaches no file"
        }
    }

    @Test func everyLinkStaysInTheRepositoryAndReachesAFile() throws {
        let pages = try Self.pages()
        #expect(pages.contains("docs/design.md") && pages.contains("docs/glossary.md") && pages.contains("docs/hub-api.md"))
        for page in pages {
            let markdown = try Self.text(page)
            #expect(Self.linkProblems(page: page, markdown: markdown) == [])
            #expect(!markdown.contains("../shared/"), "\(page) points outside the repository")
        }
    }

    @Test func theLinkCheckSeesALinkOutOfTheRepositoryAndALinkToNothing() {
        #expect(Self.linkProblems(page: "README.md", markdown: "[design](docs/design.md) [x](#top) [w](https://swift.org)") == [])
        #expect(Self.linkProblems(page: "README.md", markdown: "[d](../shared/DESIGN.md)") == ["README.md: ../shared/DESIGN.md leaves the repository"])
        #expect(Self.linkProblems(page: "docs/glossary.md", markdown: "[n](nowhere.md#a)") == ["docs/glossary.md: nowhere.md#a reaches no file"])
        #expect(Self.linkProblems(page: "README.md", markdown: "```\n[d](../shared/DESIGN.md)\n```") == [])
    }

    // MARK: README code, quoted from the examples

    /// The blocks fenced as Swift in `markdown`, each as its lines without the indentation they share.
    static func swiftBlocks(_ markdown: String) -> [[String]] {
        var blocks: [[String]] = []
        var current: [String]?
        for line in markdown.split(separator: "\n", omittingEmptySubsequences: false).map(String.init) {
            if current == nil, line.trimmingCharacters(in: .whitespaces) == "```swift" {
                current = []
            } else if current != nil, line.trimmingCharacters(in: .whitespaces) == "```" {
                blocks.append(dedented(current!))
                current = nil
            } else if current != nil {
                current!.append(line)
            }
        }
        return blocks
    }

    static func dedented(_ lines: [String]) -> [String] {
        let trimmed = lines.map { line in String(line.reversed().drop { $0 == " " }.reversed()) }
        let indent = trimmed.filter { !$0.isEmpty }.map { $0.prefix { $0 == " " }.count }.min() ?? 0
        return trimmed.map { $0.isEmpty ? $0 : String($0.dropFirst(indent)) }
    }

    /// Whether `block` appears as consecutive lines of `source` (both dedented
    /// line by line to where the block starts).
    static func quotes(_ source: [String], _ block: [String]) -> Bool {
        guard !block.isEmpty, block.count <= source.count else { return false }
        for start in 0...(source.count - block.count) {
            if dedented(Array(source[start..<(start + block.count)])) == block { return true }
        }
        return false
    }

    /// Every Swift file under `Examples/`, as lines.
    static func exampleSources() throws -> [String: [String]] {
        let examples = root.appendingPathComponent("Examples")
        guard let walker = FileManager.default.enumerator(atPath: examples.path) else { return [:] }
        var sources: [String: [String]] = [:]
        for case let path as String in walker where path.hasSuffix(".swift") && !path.contains(".build/") {
            let text = try String(contentsOf: examples.appendingPathComponent(path), encoding: .utf8)
            sources["Examples/" + path] = text.split(separator: "\n", omittingEmptySubsequences: false).map(String.init)
        }
        return sources
    }

    /// The README's Swift blocks no example quotes.
    static func unquotedBlocks(_ markdown: String, sources: [String: [String]]) -> [String] {
        swiftBlocks(markdown).filter { block in !sources.values.contains { quotes($0, block) } }.map { $0.joined(separator: "\n") }
    }

    @Test func everySwiftBlockOfTheReadmeIsQuotedFromAnExampleThatCompiles() throws {
        let readme = try Self.text("README.md")
        let sources = try Self.exampleSources()
        #expect(sources.count >= 5)
        #expect(Self.swiftBlocks(readme).count >= 5)
        #expect(Self.unquotedBlocks(readme, sources: sources) == [])
    }

    @Test func theQuoteCheckSeesABlockThatDriftedFromItsExample() throws {
        let sources = try Self.exampleSources()
        let readme = try Self.text("README.md")
        let block = try #require(Self.swiftBlocks(readme).first { $0.count > 2 })
        // One word changed in the README's copy: the block no longer compiles anywhere.
        let drifted = block.enumerated().map { $0.offset == 1 ? $0.element + " // drifted" : $0.element }
        let page = "```swift\n" + drifted.joined(separator: "\n") + "\n```\n"
        #expect(Self.unquotedBlocks(page, sources: sources).count == 1)
        #expect(Self.unquotedBlocks("```swift\n" + block.joined(separator: "\n") + "\n```\n", sources: sources) == [])
    }
}
