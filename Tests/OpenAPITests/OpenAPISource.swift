import Foundation
import Yams

/// docs/openapi.yaml, read with Yams and written as JSON: Sources/TrackServer/Resources/openapi.json, which
/// the server compiles in (`PackageResources.openapi_json`).
enum OpenAPISource {
    struct Failure: Error, CustomStringConvertible {
        var description: String
    }

    /// The repository's root, from this file's path.
    static let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
        .deletingLastPathComponent().path
    static let yamlPath = root + "/docs/openapi.yaml"
    static let jsonPath = root + "/Sources/TrackServer/Resources/openapi.json"

    /// YAML 1.2's core schema, where only `true` and `false` are booleans (the default resolver also
    /// reads `yes`, `no`, `on`, `off` as booleans, and times as timestamps).
    static let resolver: Resolver = {
        do {
            return try Resolver.default.removing(.timestamp).removing(.value)
                .replacing(.bool, with: "^(?:true|false)$")
        } catch {
            preconditionFailure("\(error)")
        }
    }()

    static func isMerge(_ node: Node) -> Bool { node.tag.rawValue == Tag.Name.merge.rawValue }

    /// The document as JSON, two-space indented, members in the YAML's order, aliases and merge
    /// keys (`<<: *anchor`) expanded.
    static func json(yaml: String) throws -> String {
        guard let node = try Yams.compose(yaml: yaml, resolver) else { throw Failure(description: "an empty document") }
        var out = ""
        try write(node, indent: "", path: "$", to: &out)
        return out + "\n"
    }

    /// The mapping's pairs with merge keys replaced by the pairs they merge (an explicit key wins).
    static func pairs(_ mapping: Node.Mapping) -> [(key: Node, value: Node)] {
        let explicit = Set(mapping.filter { !isMerge($0.key) }.compactMap { $0.key.string })
        var out: [(key: Node, value: Node)] = []
        var seen = Set<String>()
        for pair in mapping {
            var merged: [(key: Node, value: Node)] = []
            if isMerge(pair.key) {
                let sources = pair.value.mapping.map { [$0] } ?? (pair.value.sequence?.compactMap(\.mapping) ?? [])
                for source in sources { merged += pairs(source).filter { !explicit.contains($0.key.string ?? "") } }
            } else {
                merged = [pair]
            }
            for p in merged where seen.insert(p.key.string ?? "").inserted { out.append(p) }
        }
        return out
    }

    static func write(_ node: Node, indent: String, path: String, to out: inout String) throws {
        switch node {
        case .mapping(let mapping):
            let members = pairs(mapping)
            guard !members.isEmpty else { return out += "{}" }
            out += "{\n"
            for (i, member) in members.enumerated() {
                guard let key = member.key.string else { throw Failure(description: "\(path): a key that is not text") }
                out += indent + "  " + quoted(key) + ": "
                try write(member.value, indent: indent + "  ", path: path + "." + key, to: &out)
                out += i == members.count - 1 ? "\n" : ",\n"
            }
            out += indent + "}"
        case .sequence(let sequence):
            guard !sequence.isEmpty else { return out += "[]" }
            out += "[\n"
            for (i, item) in sequence.enumerated() {
                out += indent + "  "
                try write(item, indent: indent + "  ", path: path + "[\(i)]", to: &out)
                out += i == sequence.count - 1 ? "\n" : ",\n"
            }
            out += indent + "]"
        case .scalar(let scalar):
            switch node.tag.rawValue {
            case Tag.Name.null.rawValue: out += "null"
            case Tag.Name.bool.rawValue: out += scalar.string
            case Tag.Name.int.rawValue, Tag.Name.float.rawValue:
                guard isJSONNumber(scalar.string) else {
                    throw Failure(description: "\(path): '\(scalar.string)' is not a JSON number (quote it)")
                }
                out += scalar.string
            default: out += quoted(scalar.string)
            }
        case .alias:
            throw Failure(description: "\(path): an alias Yams did not resolve")
        }
    }

    static func isJSONNumber(_ text: String) -> Bool {
        text.wholeMatch(of: /-?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][-+]?[0-9]+)?/) != nil
    }

    static func quoted(_ text: String) -> String {
        var out = "\""
        for scalar in text.unicodeScalars {
            switch scalar {
            case "\"": out += "\\\""
            case "\\": out += "\\\\"
            case "\n": out += "\\n"
            case "\t": out += "\\t"
            case "\r": out += "\\r"
            case _ where scalar.value < 0x20: out += String(format: "\\u%04x", scalar.value)
            default: out.unicodeScalars.append(scalar)
            }
        }
        return out + "\""
    }
}
