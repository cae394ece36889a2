/// Durations as people write them: `90` (seconds), `90s`, `5m`, `2h`, `30d`, decimals allowed
/// (`1.5h`). The one parser of every duration option and configuration key.
public enum DurationText {
    /// A text that is not a duration (``FormatsError/Code/notADuration``), with what was given
    /// (``FormatsError/text``) and what is accepted.
    static func problem(_ text: String, bareUnit: Unit) -> FormatsError {
        let message =
            "'\(text)' is not a duration: write a number of \(bareUnit.name) "
            + "(\(bareUnit == .days ? "30" : "90")) or a number with s, m, h or d (90s, 5m, 2h, 30d)"
        return FormatsError(.notADuration, message, text: text)
    }

    /// The unit of a number written without one.
    public enum Unit: Sendable, Equatable {
        case seconds
        case days

        var name: String { self == .days ? "days" : "seconds" }
        var seconds: Double { self == .days ? 86_400 : 1 }
    }

    /// The seconds `text` stands for.
    ///
    /// - Parameters:
    ///   - text: digits with at most one decimal point, then optionally `s`, `m`, `h` or `d`;
    ///     spaces around it are ignored.
    ///   - bareUnit: what a number without a unit counts. The default is seconds.
    /// - Throws: ``FormatsError`` (``FormatsError/Code/notADuration``) for anything else (empty, negative, `5x`, `inf`, `1e3`, `5 m s`).
    public static func seconds(_ text: String, bareUnit: Unit = .seconds) throws(FormatsError) -> Double {
        var bytes = Array(text.utf8)[...]
        while let b = bytes.first, b == UInt8(ascii: " ") { bytes.removeFirst() }
        while let b = bytes.last, b == UInt8(ascii: " ") { bytes.removeLast() }
        var scale = bareUnit.seconds
        let units: [UInt8: Double] = [
            UInt8(ascii: "s"): 1, UInt8(ascii: "m"): 60, UInt8(ascii: "h"): 3600,
            UInt8(ascii: "d"): 86_400,
        ]
        if let last = bytes.last, let size = units[last] {
            scale = size
            bytes.removeLast()
        }
        var dots = 0
        var digits = 0
        for b in bytes {
            if b == UInt8(ascii: ".") {
                dots += 1
            } else if b >= UInt8(ascii: "0") && b <= UInt8(ascii: "9") {
                digits += 1
            } else {
                throw problem(text, bareUnit: bareUnit)
            }
        }
        guard digits > 0, dots <= 1, digits <= 15, let value = Double(String(decoding: bytes, as: UTF8.self)) else {
            throw problem(text, bareUnit: bareUnit)
        }
        return value * scale
    }

    /// ``seconds(_:bareUnit:)`` with bare numbers in seconds, for an option's `transform:`.
    public static func parse(_ text: String) throws -> Double { try seconds(text) }

    /// ``seconds(_:bareUnit:)`` with bare numbers in days (`--outbox-max-age 30`).
    public static func parseDays(_ text: String) throws -> Double { try seconds(text, bareUnit: .days) }

    /// `seconds` written the short way back: `30s`, `5m`, `2h`, `30d`, `1.5s`.
    public static func format(_ seconds: Double) -> String {
        for (unit, size) in [("d", 86_400.0), ("h", 3600.0), ("m", 60.0)]
        where seconds >= size && (seconds / size).rounded() == seconds / size {
            return "\(Int(seconds / size))\(unit)"
        }
        if seconds.rounded() == seconds && seconds.magnitude < 1e15 { return "\(Int(seconds))s" }
        return "\(seconds)s"
    }
}
