@testable import Formats
import Testing

/// `JSONScanner.number()` reads the usual number without strtod (one exact division or
/// multiplication when the digits and the power of ten are exact doubles) and everything else with
/// it: either way to the bits `Double(String)` gives.
@Suite("Wire formats: JSON numbers")
struct JSONNumberTests {
    func read(_ text: String) throws -> Double {
        var scanner = JSONScanner(Array(text.utf8))
        let v = try scanner.number()
        #expect(scanner.i == text.utf8.count, "\(text): stopped at byte \(scanner.i)")
        return v
    }

    @Test(arguments: [
        "0", "-0", "0.0", "-0.0", "1", "-1", "48.1372010", "-122.4194155", "11.5754740", "520.0", "0.1", "0.2", "0.3",
        "123456789012345678", "9007199254740992", "9007199254740993", "9007199254740999", "900719925474099.9",
        "1e22", "1e23", "1.5e-22", "1e-23", "4.9e-324", "2.2250738585072014e-308", "1.7976931348623157e308", "1e308",
        "0.000001", "123.456e-5", "7E+2", "1E-0", "3.14159265358979323846", "0.30000000000000004", "89.99999999",
        "179.99999999999997", "-45.123456789012345", "1e400", "-1e400", "1e-400", "0.1e10000",
    ])
    func readsEveryNumberToTheBitsStrtodGives(text: String) throws {
        let expected = try #require(Double(text))
        #expect(try read(text).bitPattern == expected.bitPattern, "\(text)")
    }

    /// Random decimals of every length and scale around the fast path's edges (15-17 digits, powers
    /// of ten up to 10^±25), seeded so that a failure replays.
    @Test func readsRandomDecimalsToTheBitsStrtodGives() throws {
        var state: UInt64 = 20_261_125
        func next() -> UInt64 {
            state = state &* 6_364_136_223_846_793_005 &+ 1_442_695_040_888_963_407
            return state >> 17
        }
        for _ in 0..<200_000 {
            let digits = 1 + Int(next() % 19)
            var text = next() % 2 == 0 ? "-" : ""
            var body = String(1 + next() % 9)
            for _ in 1..<digits { body += String(next() % 10) }
            let point = Int(next() % UInt64(digits + 1))
            if point > 0 && point < digits {
                body.insert(".", at: body.index(body.startIndex, offsetBy: point))
            }
            text += body
            if next() % 3 == 0 { text += "e\(Int(next() % 51) - 25)" }
            let expected = try #require(Double(text))
            let got = try read(text)
            guard got.bitPattern == expected.bitPattern else {
                Issue.record("\(text): \(got) != \(expected)")
                return
            }
        }
    }

    @Test(arguments: ["-", "01", "1.", ".5", "1e", "1e+", "+1", "--1"])
    func refusesWhatIsNotAJSONNumber(text: String) {
        var scanner = JSONScanner(Array(text.utf8))
        let v = try? scanner.number()
        #expect(v == nil || scanner.i < text.utf8.count, "\(text)")
    }
}
