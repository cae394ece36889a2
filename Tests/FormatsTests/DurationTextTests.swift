import Formats
import Testing

@Suite("Durations as people write them")
struct DurationTextTests {
    @Test(arguments: [
        ("90", 90.0), ("90s", 90), ("5m", 300), ("2h", 7200), ("30d", 2_592_000), ("1.5h", 5400), ("0", 0),
        (" 10s ", 10), ("0.25", 0.25), (".5m", 30),
    ])
    func readsSecondsAndUnits(text: String, seconds: Double) throws {
        #expect(try DurationText.seconds(text) == seconds)
    }

    @Test func aBareNumberCountsTheGivenUnit() throws {
        #expect(try DurationText.seconds("30", bareUnit: .days) == 2_592_000)
        #expect(try DurationText.seconds("12h", bareUnit: .days) == 43_200)
    }

    @Test(arguments: ["", "5x", "s", "-5", "inf", "nan", "1e3", "5 m", "1.2.3", "5mm", "0x10", "5ms", "９0"])
    func refusesAnythingElseSayingWhatIsAccepted(text: String) {
        #expect(throws: FormatsError.self) { try DurationText.seconds(text) }
        do {
            _ = try DurationText.seconds(text)
        } catch {
            #expect(
                error.description == "'\(text)' is not a duration: write a number of seconds (90) or a number "
                    + "with s, m, h or d (90s, 5m, 2h, 30d)")
        }
    }

    @Test(arguments: [(30.0, "30s"), (300, "5m"), (7200, "2h"), (2_592_000, "30d"), (90, "90s"), (1.5, "1.5s")])
    func writesDurationsBackShort(seconds: Double, text: String) throws {
        #expect(DurationText.format(seconds) == text)
        #expect(try DurationText.seconds(text) == seconds)
    }
}
