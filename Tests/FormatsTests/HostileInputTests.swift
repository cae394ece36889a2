@testable import Formats
import Testing

/// The readers' defences against untrusted bytes: numbers out of every range, nesting without end,
/// ids that C APIs would cut short, calendar dates that don't exist, gzip with junk behind it.
@Suite("Wire formats: hostile input")
struct HostileInputTests {
    @Test(arguments: [2262.0 * 365.25 * 86_400, 1e10, 1e13, 1e300, -1e300, .infinity, -.infinity, .nan])
    func formatsAnyTimeWithoutTrapping(seconds: Double) {
        var out: [UInt8] = []
        ISOTime.append(seconds, to: &out)
        #expect(!out.isEmpty)
        let r = TrailRecord(device: "d", sequence: 1, time: seconds, latitude: 1, longitude: 1)
        #expect(r.problem(now: 1_800_000_000)?.message.contains("is impossible") == true)
    }

    @Test func formatsTheEdgesOfTheFourDigitYears() {
        #expect(ISOTime.string(ISOTime.representable.lowerBound) == "0001-01-01T00:00:00.000Z")
        #expect(ISOTime.string(253_402_300_799.999) == "9999-12-31T23:59:59.999Z")
        #expect(ISOTime.string(-0.001) == "1969-12-31T23:59:59.999Z")
        #expect(ISOTime.string(1e12) == "1000000000000.0")
    }

    @Test(arguments: [
        ("2024-02-29T00:00:00Z", true), ("2023-02-29T00:00:00Z", false), ("2024-02-30T00:00:00Z", false),
        ("2024-02-31T12:00:00Z", false), ("2000-02-29T00:00:00Z", true), ("1900-02-29T00:00:00Z", false),
        ("2024-04-31T00:00:00Z", false), ("2024-12-31T23:59:59Z", true), ("2024-06-00T00:00:00Z", false),
        ("9999-12-31T23:59:59.999Z", true), ("9999-12-31T23:59:60.5Z", false),
    ])
    func parsesOnlyDaysTheMonthHas(text: String, valid: Bool) {
        #expect((ISOTime.parse(text) != nil) == valid)
    }

    @Test func refusesNestingDeeperThanTheLimitAndAcceptsUpToIt() throws {
        func batch(depth: Int) -> [UInt8] {
            Array(
                (#"{"device":"d","extra":"# + String(repeating: "[", count: depth)
                    + String(repeating: "]", count: depth)
                    + #","records":[]}"#).utf8)
        }
        #expect(try JSONBatch.decode(batch(depth: JSONScanner.maxDepth), now: 2e9).records.isEmpty)
        #expect(throws: FormatsError.self) { try JSONBatch.decode(batch(depth: JSONScanner.maxDepth + 1), now: 2e9) }
        // The attack itself: 200,000 '[' (0.2 MB) overflowed the stack before.
        let deep = Array((#"{"device":"d","records":[{"x":"# + String(repeating: "[", count: 200_000)).utf8)
        do {
            _ = try JSONBatch.decode(deep, now: 2e9)
            Issue.record("accepted")
        } catch {
            #expect(error.message.contains("nested deeper than 64 levels"), "\(error)")
            #expect(error.message.contains("at byte 94"), "\(error)")
        }
    }

    @Test(arguments: [
        ("van\u{0}A", "U+0000 at character 4"), ("van\u{1F}", "U+001F"), ("a\u{7F}", "U+007F"), ("\u{85}x", "U+0085"),
        ("", "must have 1 to 128 bytes, has 0"), (String(repeating: "é", count: 65), "has 130"),
    ])
    func refusesIdsThatCouldMergeDevices(id: String, message: String) {
        #expect(TrailRecord.identifierProblem(id)?.contains(message) == true, "\(id.debugDescription)")
        let r = TrailRecord(device: id, sequence: 1, time: 1_715_679_000, latitude: 1, longitude: 1)
        #expect(r.problem(now: 2e9)?.message.hasPrefix("device id must") == true)
        let e = TrailRecord(
            device: "d", sequence: 1, kind: .enter, region: id, time: 1_715_679_000, latitude: 1, longitude: 1)
        #expect(e.problem(now: 2e9) != nil)
    }

    @Test func acceptsOrdinaryIdsInAnyScript() {
        for id in ["van-1", "Ärzte Bus 3", "телефон", "手机", "a/b?c#d \"e\"", String(repeating: "x", count: 128)] {
            #expect(TrailRecord.identifierProblem(id) == nil, "\(id)")
        }
    }

    @Test func refusesAnEscapedNULInTheBatchDevice() {
        let body =
            #"{"device":"van\u0000A","records":[{"seq":1,"kind":"location","time":"2024-05-14T09:30:00Z","lat":1,"lon":1}]}"#
        #expect(throws: FormatsError.self) { try JSONBatch.decode(Array(body.utf8), now: 2e9) }
    }

    @Test(
        arguments: [
            ([0x61, 0xFF], 1), ([0xC0, 0x80], 0), ([0xED, 0xA0, 0x80], 0), ([0xF4, 0x90, 0x80, 0x80], 0),
            ([0xE2, 0x82], 0), ([0x61, 0xE2, 0x82, 0xAC, 0x80], 4), ([0xF0, 0x9F, 0x98, 0x80], nil),
            ([0xC3, 0xA9], nil),
        ] as [([UInt8], Int?)])
    func findsTheFirstByteThatIsNotUTF8(bytes: [UInt8], offset: Int?) {
        #expect(invalidUTF8Offset(bytes[...]) == offset)
    }

    @Test func refusesInvalidUTF8InJSONStringsWithItsByte() throws {
        var body = Array(#"{"device":"van"#.utf8)
        body += [0xFF]
        body += Array(#"","records":[]}"#.utf8)
        do {
            _ = try JSONBatch.decode(body, now: 2e9)
            Issue.record("accepted")
        } catch {
            #expect(error.message == "malformed JSON at byte 14: invalid UTF-8 in a string")
        }
        // After an escape, on the slow path, too.
        var escaped = Array(#"{"device":"a\nb"#.utf8)
        escaped += [0xE2, 0x28, 0xA1]
        escaped += Array(#"","records":[]}"#.utf8)
        #expect(throws: FormatsError.self) { try JSONBatch.decode(escaped, now: 2e9) }
        // Valid multi-byte text after an escape is kept whole.
        let good = Array(#"{"device":"a\tb€😀","records":[]}"#.utf8)
        #expect(try JSONBatch.decode(good, now: 2e9).device == "a\tb€😀")
    }

    @Test func osmAndRefusesIdsThatAreNotUTF8OrHoldControlCharacters() throws {
        #expect(throws: FormatsError.self) {
            try OsmAnd.decode("id=van%00A&lat=1&lon=1&timestamp=1715679000", now: 2e9)
        }
        #expect(throws: FormatsError.self) {
            try OsmAnd.decode("id=van%FF&lat=1&lon=1&timestamp=1715679000", now: 2e9)
        }
        #expect(throws: FormatsError.self) {
            try OsmAnd.decode("id=van&lat=1&lon=1&timestamp=10000000000000", now: 2e9)
        }
        #expect(try OsmAnd.decode("id=caf%C3%A9&lat=1&lon=1&timestamp=1715679000", now: 2e9).device == "café")
    }

    @Test func refusesNumbersOutOfRange() {
        func record(_ fields: String) -> [UInt8] {
            Array(
                #"{"device":"d","records":[{"seq":1,"kind":"location","time":"2024-05-14T09:30:00Z","lat":1,"lon":1,\#(fields)}]}"#
                    .utf8)
        }
        for (fields, message) in [
            (#""vAcc":1e999"#, "vAcc"), (#""vAcc":-5"#, "vAcc"), (#""hAcc":-1"#, "hAcc"),
            (#""speed":1e999"#, "speed"), (#""alt":-1e999"#, "alt"), (#""course":361"#, "course"),
        ] {
            do {
                _ = try JSONBatch.decode(record(fields), now: 2e9)
                Issue.record("accepted \(fields)")
            } catch {
                #expect(error.message.contains(message), "\(error)")
            }
        }
    }

    @Test func refusesGzipWithJunkBehindItAndKeepsConcatenatedMembers() throws {
        let a = Gzip.compress(Array("hello ".utf8)), b = Gzip.compress(Array("world".utf8))
        #expect(try Gzip.decompress(a + b, limit: 100) == Array("hello world".utf8))
        do {
            _ = try Gzip.decompress(a + Array("junk".utf8), limit: 100)
            Issue.record("accepted")
        } catch {
            #expect(error.message.contains("4 bytes that are not gzip after the stream's end, at byte \(a.count)"))
        }
        #expect(throws: FormatsError.self) { try Gzip.decompress(Array(a.dropLast(3)), limit: 100) }
        let bomb = Gzip.compress([UInt8](repeating: 32, count: 1 << 20))
        do {
            _ = try Gzip.decompress(bomb, limit: 1000)
            Issue.record("accepted")
        } catch {
            #expect(error.code == .tooLarge)
        }
    }
}
