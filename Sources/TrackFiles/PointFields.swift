import Geo

/// The fields of one point as a reader collects them, turned into a ``Geo/Fix`` at its end.
struct PointFields {
    var latitude: Double?
    var longitude: Double?
    var time: GNSSTime?
    var altitude: Double?
    var speed: Double?
    var course: Double?
    var horizontalAccuracy: Double?
    var verticalAccuracy: Double?
    var hdop: Double?
    var vdop: Double?
    var pdop: Double?
    var satellites: Int?
    var line = 0

    /// Why a point is not a fix.
    enum Problem {
        case untimed
        case noPosition
        case latitude
        case longitude
    }

    /// The fix, or why there is none: a point without a time or a position is left out
    /// (``Problem/untimed``, ``Problem/noPosition``); one out of range is an error.
    func fix(lastLine: Int) -> Result<Fix, ProblemBox> {
        guard let latitude, let longitude else { return .failure(ProblemBox(.noPosition)) }
        guard latitude.isFinite, abs(latitude) <= 90 else { return .failure(ProblemBox(.latitude)) }
        guard longitude.isFinite, abs(longitude) <= 180 else { return .failure(ProblemBox(.longitude)) }
        guard let time else { return .failure(ProblemBox(.untimed)) }
        let finite: (Double?) -> Double? = { v in v.flatMap { $0.isFinite ? $0 : nil } }
        var accuracy = finite(horizontalAccuracy).flatMap { $0 >= 0 ? $0 : nil }
        var vertical = finite(verticalAccuracy).flatMap { $0 >= 0 ? $0 : nil }
        var source: Fix.AccuracySource? = accuracy == nil && vertical == nil ? nil : .receiver
        // Without a stated accuracy, dilution of precision gives one as NMEA's does: DOP × UERE.
        if accuracy == nil && vertical == nil, let h = finite(hdop), h >= 0 {
            accuracy = h * Fix.uere
            vertical = finite(vdop).flatMap { $0 >= 0 ? $0 * Fix.uere : nil }
            source = .dopEstimate
        }
        // A negative course is unknown (iOS, Overland and OwnTracks write −1), as a negative speed
        // is; a course of 360° or more is taken round.
        var c = finite(course).flatMap { $0 >= 0 ? $0 : nil }
        if let v = c, v >= 360 { c = v.truncatingRemainder(dividingBy: 360) }
        return .success(
            Fix(
                time: time, coordinate: Coordinate(latitude: latitude, longitude: longitude),
                altitudeMSL: finite(altitude), speed: finite(speed).flatMap { $0 >= 0 ? $0 : nil }, course: c,
                mode: finite(altitude) == nil ? .twoD : .threeD, quality: .gps, satellitesUsed: satellites,
                hdop: finite(hdop), vdop: finite(vdop), pdop: finite(pdop), horizontalAccuracy: accuracy,
                verticalAccuracy: vertical, accuracySource: source,
                lines: line > 0 ? line...max(line, lastLine) : nil))
    }

    /// Emits the fix, counted in `statistics`, or counts a point left out (no time or position);
    /// a position out of range throws the error `failure` makes of its sentence.
    func deliver(
        lastLine: Int, to statistics: inout TrackFileStatistics, _ emit: (Fix) -> Void,
        failure: (String) -> TrackFileError
    ) throws(TrackFileError) {
        switch fix(lastLine: lastLine) {
        case .success(let fix):
            statistics.fixes += 1
            emit(fix)
        case .failure(let box):
            switch box.problem {
            case .untimed, .noPosition: statistics.untimed += 1
            case .latitude: throw failure("a latitude outside -90...90")
            case .longitude: throw failure("a longitude outside -180...180")
            }
        }
    }

    struct ProblemBox: Error {
        var problem: Problem
        init(_ problem: Problem) { self.problem = problem }
    }
}

/// Numbers as text: `48.1372`, `-3`, `1e-3`, `+12.5`.
enum NumberText {
    /// The number, or `nil` when the text is not one (blanks around it are allowed).
    static func double(_ b: UnsafeRawBufferPointer) -> Double? {
        var n = b.count
        var i = 0
        while i < n, b[i] == 0x20 || b[i] == 0x09 { i += 1 }
        while n > i, b[n - 1] == 0x20 || b[n - 1] == 0x09 || b[n - 1] == 0x0D { n -= 1 }
        guard i < n else { return nil }
        let start = i
        var negative = false
        if b[i] == 0x2D || b[i] == 0x2B {
            negative = b[i] == 0x2D
            i += 1
        }
        var mantissa: UInt64 = 0
        var exact = true
        var scale = 0
        var sawDigit = false
        while i < n, b[i] >= 48, b[i] <= 57 {
            if mantissa <= (1 << 53) / 10 { mantissa = mantissa * 10 + UInt64(b[i] - 48) } else { exact = false }
            sawDigit = true
            i += 1
        }
        if i < n, b[i] == 0x2E {
            i += 1
            while i < n, b[i] >= 48, b[i] <= 57 {
                if mantissa <= (1 << 53) / 10 {
                    mantissa = mantissa * 10 + UInt64(b[i] - 48)
                    scale -= 1
                } else if b[i] != 48 {
                    exact = false
                }
                sawDigit = true
                i += 1
            }
        }
        guard sawDigit else { return nil }
        if i < n {
            guard b[i] == UInt8(ascii: "e") || b[i] == UInt8(ascii: "E") else { return nil }
            exact = false
            i += 1
            if i < n, b[i] == 0x2B || b[i] == 0x2D { i += 1 }
            let es = i
            while i < n, b[i] >= 48, b[i] <= 57 { i += 1 }
            guard i > es, i == n else { return nil }
        }
        if exact, scale >= -22 {
            let m = Double(mantissa)
            let v = scale < 0 ? m / powersOfTen[-scale] : m
            return negative ? -v : v
        }
        return Double(String(decoding: UnsafeRawBufferPointer(rebasing: b[start..<n]), as: UTF8.self))
    }

    static func integer(_ b: UnsafeRawBufferPointer) -> Int? {
        guard let d = double(b), d.rounded() == d, abs(d) < 1e15 else { return nil }
        return Int(d)
    }

    /// 10^0 ... 10^22, each exact as a double.
    static let powersOfTen: [Double] = (0...22).map { e in
        var p = 1.0
        for _ in 0..<e { p *= 10 }
        return p
    }
}

extension Array where Element == UInt8 {
    /// `withUnsafeBytes` for a body that throws ``TrackFileError`` (the standard one rethrows untyped).
    @inline(__always)
    func withBytes<R>(_ body: (UnsafeRawBufferPointer) throws(TrackFileError) -> R) throws(TrackFileError) -> R {
        let result: Result<R, TrackFileError> = withUnsafeBytes { b in
            Result { () throws(TrackFileError) in try body(b) }
        }
        return try result.get()
    }
}
