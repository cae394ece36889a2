import Geo

/// Merges the sentences of one GNSS epoch into one ``Fix``.
///
/// Rules (each covered by a test):
/// - An epoch is the run of sentences that carry the same UTC time of day. Sentences without a
///   time (GSA, GSV, VTG) belong to the epoch in progress; when none is in progress they open one
///   that adopts the time of the next timed sentence — unless that untimed epoch already holds a
///   position sentence with an empty time field (a receiver without a fix), which makes it a
///   no-fix epoch of its own, dropped because it cannot be dated. An epoch ends when a sentence with another
///   time arrives, or when the owner calls ``flush(_:)`` (live sources do after an idle gap).
/// - Position comes from the best sentence that has one: GGA, then GNS, then RMC, then GLL. The
///   same sentence's status decides validity: GGA quality 0, GNS mode `N`, RMC or GLL status `V`
///   mean no fix, whatever the others say. GSA fix type 1 also means no fix.
/// - Mode: the GSA fix type when present; otherwise 3D for a valid GGA/GNS with an altitude, else 2D.
/// - Date: RMC (`ddmmyy`) or ZDA in the epoch. Two-digit years take the century of the last ZDA
///   seen, else 19yy for yy ≥ 80 and 20yy below (1980 is the GPS epoch). An epoch without a date
///   sentence takes the date of the previous one, plus one day when its time of day is more than
///   12 hours earlier than the previous epoch's (midnight rollover). Before any date is seen,
///   fixes carry the reference date when one was given, else no date.
/// - Accuracy: GST sigmas when the epoch has GST (`hAcc = √(σlat² + σlon²)`, `vAcc = σalt`);
///   else `hAcc = HDOP × 5 m` and, for 3D fixes, `vAcc = VDOP × 5 m` (``Fix/uere``).
/// - Satellites used: the larger of GGA's count and the PRNs listed by the epoch's GSA sentences.
///   Satellites in view: per talker the largest GSV total, summed over talkers.
@usableFromInline
struct EpochAssembler {
    // Persistent across epochs.
    var referenceDay: Int32?
    var currentDay: Int32?
    var lastTimeOfDay: Int64?
    var zdaCentury: Int? {
        didSet { lastDateField = -1 }
    }
    /// The last RMC date field and its day number (dates repeat for a whole day).
    var lastDateField = -1
    var lastDateDay: Int32?
    /// Time of the last emitted epoch, to drop stragglers after a flush.
    var lastEmittedTime: Int64?
    var flushedSinceLastEmit = false
    /// Epochs emitted, and those with a position.
    var emitted = 0
    var emittedWithPosition = 0

    // The epoch in progress.
    var open = false
    var time: Int64?
    var fractionDigits: UInt8 = 0
    var epochDay: Int32?
    var firstLine = 0
    var lastLine = 0

    var positionRank: UInt8 = 0  // 0 none, 1 GLL, 2 RMC, 3 GNS, 4 GGA
    var positionValid = false
    var latitude = 0.0
    var longitude = 0.0
    var altitude: Double?
    var geoidSeparation: Double?
    var quality: Fix.Quality?
    var ggaSatellites: Int?
    var ggaHDOP: Double?

    var gsaSeen = false
    var gsaFixType = 0
    var gsaUsed = 0
    var pdop: Double?
    var hdop: Double?
    var vdop: Double?

    var speed: Double?
    var course: Double?
    var magneticVariation: Double?

    var gstLat: Double?
    var gstLon: Double?
    var gstAlt: Double?

    /// Largest GSV "satellites in view" per talker index.
    var inView: (Int16, Int16, Int16, Int16, Int16, Int16, Int16, Int16, Int16, Int16) = (
        -1, -1, -1, -1, -1, -1, -1, -1, -1, -1
    )
    var systems: Fix.Systems = []

    init(referenceDay: Int32?) {
        self.referenceDay = referenceDay
    }

    /// Begins a sentence: closes the epoch in progress when `time` differs from its time.
    ///
    /// Returns `false` when the sentence is a straggler of an epoch already emitted (dropped).
    @inline(__always)
    mutating func begin(time t: (nanoseconds: Int64, digits: UInt8)?, line: Int, emit: (Fix) -> Void) -> Bool {
        if let t {
            if open, let current = time {
                if current != t.nanoseconds {
                    close(emit)
                    start(line: line)
                    time = t.nanoseconds
                    fractionDigits = t.digits
                }
            } else {
                if flushedSinceLastEmit, lastEmittedTime == t.nanoseconds {
                    // A straggler of the epoch flushed: dropped, with the untimed sentences (GSA,
                    // GSV) that came before it, which belong to it too. Opening a new epoch here
                    // would deliver a second fix of the same time.
                    open = false
                    return false
                }
                if !open {
                    start(line: line)
                } else if positionRank > 0 {
                    // The open epoch has no time but position sentences (receivers without a fix
                    // send GGA/RMC with empty time fields): it is a no-fix epoch of its own that
                    // cannot be reported. Drop it rather than lend its no-fix state to this one.
                    start(line: line)
                }
                time = t.nanoseconds
                fractionDigits = t.digits
            }
        } else if !open {
            start(line: line)
        }
        lastLine = line
        return true
    }

    mutating func start(line: Int) {
        open = true
        time = nil
        fractionDigits = 0
        epochDay = nil
        firstLine = line
        lastLine = line
        positionRank = 0
        positionValid = false
        altitude = nil
        geoidSeparation = nil
        quality = nil
        ggaSatellites = nil
        ggaHDOP = nil
        gsaSeen = false
        gsaFixType = 0
        gsaUsed = 0
        pdop = nil
        hdop = nil
        vdop = nil
        speed = nil
        course = nil
        magneticVariation = nil
        gstLat = nil
        gstLon = nil
        gstAlt = nil
        inView = (-1, -1, -1, -1, -1, -1, -1, -1, -1, -1)
        systems = []
    }

    /// Sets the position if `rank` beats the position already held.
    @inline(__always)
    mutating func position(rank: UInt8, latitude: Double?, longitude: Double?, valid: Bool) {
        guard rank > positionRank else { return }
        positionRank = rank
        if valid, let latitude, let longitude {
            self.latitude = latitude
            self.longitude = longitude
            positionValid = true
        } else {
            positionValid = false
        }
    }

    @inline(__always)
    mutating func satellitesInView(talker: Int, count: Int) {
        withUnsafeMutableBytes(of: &inView) { raw in
            let p = raw.baseAddress!.assumingMemoryBound(to: Int16.self)
            if Int(p[talker]) < count { p[talker] = Int16(clamping: count) }
        }
    }

    /// Emits the epoch in progress, if any, and leaves none open.
    mutating func flush(_ emit: (Fix) -> Void) {
        if open {
            close(emit)
            flushedSinceLastEmit = true
        }
    }

    @inline(never)
    mutating func close(_ emit: (Fix) -> Void) {
        open = false
        guard let time else {
            // Untimed sentences only (GSA/GSV with no epoch): nothing to report.
            return
        }
        // Date.
        var day: Int32?
        if let epochDay {
            day = epochDay
        } else if let currentDay, let lastTimeOfDay {
            day = time < lastTimeOfDay - 43_200_000_000_000 ? currentDay + 1 : currentDay
        } else {
            day = currentDay ?? referenceDay
        }
        if day != nil {
            currentDay = day
            lastTimeOfDay = time
        }
        lastEmittedTime = time
        flushedSinceLastEmit = false

        var fix = Fix()
        fix.time = GNSSTime(day: day, nanosecondOfDay: time, fractionDigits: fractionDigits)
        fix.lines = firstLine...lastLine
        fix.systems = systems
        fix.quality = quality
        fix.altitudeMSL = altitude
        fix.geoidSeparation = geoidSeparation
        fix.speed = speed
        fix.course = course
        fix.magneticVariation = magneticVariation
        fix.pdop = pdop
        fix.vdop = vdop
        fix.hdop = hdop ?? ggaHDOP
        let used = max(ggaSatellites ?? 0, gsaUsed)
        fix.satellitesUsed = ggaSatellites != nil || gsaSeen ? used : nil
        var inViewTotal = 0
        var anyInView = false
        withUnsafeBytes(of: inView) { raw in
            for k in 0..<10 {
                let v = Int(raw.load(fromByteOffset: k * 2, as: Int16.self))
                if v >= 0 {
                    inViewTotal += v
                    anyInView = true
                }
            }
        }
        fix.satellitesInView = anyInView ? inViewTotal : nil

        let valid = positionRank > 0 && positionValid && !(gsaSeen && gsaFixType == 1)
        if valid {
            fix.coordinate = Coordinate(latitude: latitude, longitude: longitude)
            if gsaSeen && gsaFixType >= 2 {
                fix.mode = gsaFixType == 3 ? .threeD : .twoD
            } else {
                fix.mode = positionRank >= 3 && altitude != nil ? .threeD : .twoD
            }
            if let gstLat, let gstLon {
                fix.horizontalAccuracy = (gstLat * gstLat + gstLon * gstLon).squareRoot()
                fix.verticalAccuracy = fix.mode == .threeD ? gstAlt : nil
                fix.accuracySource = .receiver
            } else if let h = fix.hdop {
                fix.horizontalAccuracy = h * Fix.uere
                if fix.mode == .threeD, let v = vdop { fix.verticalAccuracy = v * Fix.uere }
                fix.accuracySource = .dopEstimate
            }
        } else {
            fix.mode = .none
            if quality == nil, positionRank > 0 { fix.quality = .invalid }
        }
        emitted += 1
        if valid { emittedWithPosition += 1 }
        emit(fix)
    }
}
