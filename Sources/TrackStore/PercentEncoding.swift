/// Percent-encoding of path segments and query values (RFC 3986).
public enum PercentEncoding {
    /// `text` with every byte but the unreserved ones (`A-Z a-z 0-9 - . _ ~`) as `%XX`.
    public static func encode(_ text: String) -> String {
        let hex = Array("0123456789ABCDEF".utf8)
        var out: [UInt8] = []
        for b in text.utf8 {
            switch b {
            case UInt8(ascii: "A")...UInt8(ascii: "Z"), UInt8(ascii: "a")...UInt8(ascii: "z"),
                UInt8(ascii: "0")...UInt8(ascii: "9"), UInt8(ascii: "-"), UInt8(ascii: "."), UInt8(ascii: "_"),
                UInt8(ascii: "~"):
                out.append(b)
            default:
                out += [UInt8(ascii: "%"), hex[Int(b >> 4)], hex[Int(b & 15)]]
            }
        }
        return String(decoding: out, as: UTF8.self)
    }

    /// `text` with its `%XX` escapes decoded (`+` stays a plus), or `nil` when an escape is
    /// malformed or the bytes are not UTF-8.
    public static func decode(_ text: some StringProtocol) -> String? {
        var out: [UInt8] = []
        var it = Array(text.utf8)[...]
        while let b = it.popFirst() {
            guard b == UInt8(ascii: "%") else {
                out.append(b)
                continue
            }
            guard let h = it.popFirst().flatMap(digit), let l = it.popFirst().flatMap(digit) else { return nil }
            out.append(h << 4 | l)
        }
        return String(validating: out, as: UTF8.self)
    }

    static func digit(_ b: UInt8) -> UInt8? {
        switch b {
        case UInt8(ascii: "0")...UInt8(ascii: "9"): b - UInt8(ascii: "0")
        case UInt8(ascii: "a")...UInt8(ascii: "f"): b - UInt8(ascii: "a") + 10
        case UInt8(ascii: "A")...UInt8(ascii: "F"): b - UInt8(ascii: "A") + 10
        default: nil
        }
    }
}
