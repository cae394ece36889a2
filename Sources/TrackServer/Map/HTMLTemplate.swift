import Formats

/// A page of `Resources/` (`map.html`, `trails.html`) as a template: its text with `{{name}}`
/// placeholders, and its parts, the `<template id="NAME">...</template>` elements it holds, filled
/// the same way. The page is served without its parts and without its comments (`<!-- ... -->`), each
/// with the line end after it; a part's text starts after the line end that follows its opening tag.
///
/// A value is text, escaped for HTML (`&`, `<`, `>`, `"`, `'`), or markup the server made itself (a
/// part it filled, an SVG it drew), or JSON for a `<script>` element (`</` escaped). A placeholder
/// given no value is left empty.
struct HTMLTemplate: Sendable {
    /// What fills a placeholder.
    enum Value {
        /// Text, escaped for HTML.
        case text(String)
        /// Markup the server made (a filled part, an SVG), as it is.
        case markup([UInt8])
        /// JSON inside a `<script>` element: `</` becomes `<\/`, so that it cannot end the element.
        case scriptJSON([UInt8])
    }

    /// The page's bytes, its parts and comments taken out.
    let page: [UInt8]
    /// The parts, by id.
    let parts: [String: [UInt8]]

    /// Reads `bytes` (a file of `Resources/`, UTF-8).
    init(_ bytes: [UInt8]) {
        var page: [UInt8] = []
        var parts: [String: [UInt8]] = [:]
        let open = Array("<template id=\"".utf8), close = Array("</template>".utf8)
        let commentOpen = Array("<!--".utf8), commentClose = Array("-->".utf8)
        var i = 0
        /// `j`, or the index after it when a line end is there.
        func skipLineEnd(_ j: Int) -> Int { j < bytes.count && bytes[j] == UInt8(ascii: "\n") ? j + 1 : j }
        while i < bytes.count {
            if Self.has(commentOpen, in: bytes, at: i), let end = Self.find(commentClose, in: bytes, from: i) {
                i = skipLineEnd(end + commentClose.count)
            } else if Self.has(open, in: bytes, at: i),
                let quote = bytes[(i + open.count)...].firstIndex(of: UInt8(ascii: "\"")),
                let tagEnd = bytes[quote...].firstIndex(of: UInt8(ascii: ">")),
                let end = Self.find(close, in: bytes, from: tagEnd)
            {
                let id = String(decoding: bytes[(i + open.count)..<quote], as: UTF8.self)
                parts[id] = Array(bytes[skipLineEnd(tagEnd + 1)..<end])
                i = skipLineEnd(end + close.count)
            } else {
                page.append(bytes[i])
                i += 1
            }
        }
        self.page = page
        self.parts = parts
    }

    /// The page, its placeholders filled with `values`.
    func render(_ values: [String: Value] = [:]) -> [UInt8] { Self.fill(page, values) }

    /// The part `id`, its placeholders filled with `values`; a part the file lacks is a programmer's
    /// error (the files are compiled in).
    func part(_ id: String, _ values: [String: Value] = [:]) -> [UInt8] {
        guard let part = parts[id] else { preconditionFailure("the template has no part '\(id)'") }
        return Self.fill(part, values)
    }

    static func fill(_ text: [UInt8], _ values: [String: Value]) -> [UInt8] {
        var out: [UInt8] = []
        out.reserveCapacity(text.count)
        var i = 0
        let brace = UInt8(ascii: "{"), closing = UInt8(ascii: "}")
        while i < text.count {
            if text[i] == brace, i + 1 < text.count, text[i + 1] == brace,
                let end = find([closing, closing], in: text, from: i + 2)
            {
                let name = String(decoding: text[(i + 2)..<end], as: UTF8.self)
                switch values[name] {
                case .text(let s)?: ByteWriting.appendXMLEscaped(s, to: &out)
                case .markup(let bytes)?: out += bytes
                case .scriptJSON(let bytes)?:
                    for (k, b) in bytes.enumerated() {
                        if b == UInt8(ascii: "/"), k > 0, bytes[k - 1] == UInt8(ascii: "<") {
                            out.append(UInt8(ascii: "\\"))
                        }
                        out.append(b)
                    }
                case nil: break
                }
                i = end + 2
            } else {
                out.append(text[i])
                i += 1
            }
        }
        return out
    }

    static func has(_ needle: [UInt8], in bytes: [UInt8], at i: Int) -> Bool {
        i + needle.count <= bytes.count && bytes[i..<(i + needle.count)].elementsEqual(needle)
    }

    /// Where `needle` next starts in `bytes` at or after `from`.
    static func find(_ needle: [UInt8], in bytes: [UInt8], from: Int) -> Int? {
        var i = from
        while i + needle.count <= bytes.count {
            if has(needle, in: bytes, at: i) { return i }
            i += 1
        }
        return nil
    }
}
