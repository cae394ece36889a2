import Geo

/// Sentence types the decoder understands, packed as three ASCII bytes.
enum SentenceType {
    static let gga: UInt32 = 0x474741  // "GGA"
    static let rmc: UInt32 = 0x524D43  // "RMC"
    static let gll: UInt32 = 0x474C4C  // "GLL"
    static let gsa: UInt32 = 0x475341  // "GSA"
    static let gsv: UInt32 = 0x475356  // "GSV"
    static let vtg: UInt32 = 0x565447  // "VTG"
    static let gns: UInt32 = 0x474E53  // "GNS"
    static let zda: UInt32 = 0x5A4441  // "ZDA"
    static let gst: UInt32 = 0x475354  // "GST"

    /// How many leading fields (address included) decoding a type reads; 0 for types not decoded.
    /// Splitting stops there, and at least that many must be present to tell "too few fields".
    @inline(__always)
    static func fieldsNeeded(_ type: UInt32) -> Int {
        switch type {
        case gga: 15
        case rmc: 14
        case gll: 8
        case gsa: 100  // its DOPs are the last fields: count them all
        case gsv: 5
        case vtg: 10
        case gns: 14
        case zda: 7
        case gst: 9
        default: 0
        }
    }
}

/// Talker index for per-constellation counts, and the constellation it names.
@inline(__always)
func talkerIndex(_ a: UInt8, _ b: UInt8) -> (Int, Fix.Systems) {
    switch (a, b) {
    case (0x47, 0x50): (0, .gps)  // GP
    case (0x47, 0x4C): (1, .glonass)  // GL
    case (0x47, 0x41): (2, .galileo)  // GA
    case (0x47, 0x42): (3, .beidou)  // GB
    case (0x42, 0x44): (4, .beidou)  // BD
    case (0x47, 0x51): (5, .qzss)  // GQ
    case (0x51, 0x5A): (6, .qzss)  // QZ
    case (0x47, 0x49): (7, .navic)  // GI
    case (0x47, 0x4E): (8, [])  // GN: combined
    default: (9, [])
    }
}

/// An upper-case letter or a digit.
@inline(__always)
func isAddressCharacter(_ c: UInt8) -> Bool { c &- 0x41 < 26 || c &- 0x30 < 10 }

/// The better of two GNSS-derived qualities (gps < dgps < pps), by raw value.
@inline(__always)
func better(_ a: Fix.Quality, _ b: Fix.Quality) -> Fix.Quality { a.rawValue >= b.rawValue ? a : b }

/// NMEA 4.1 GNSS system ID (GSA field 18, GSV signal groups) to constellation.
@inline(__always)
func systemFromID(_ id: Int?) -> Fix.Systems {
    switch id {
    case 1: .gps
    case 2: .glonass
    case 3: .galileo
    case 4: .beidou
    case 5: .qzss
    case 6: .navic
    default: []
    }
}

extension NMEADecoder {
    /// Decodes one checksummed sentence. `length` counts the bytes from `$` up to (not including)
    /// `*`; `fullLength` includes the checksum, for error messages.
    @inline(__always)
    mutating func decodeSentence(
        _ sentence: UnsafePointer<UInt8>, length: Int, fullLength: Int,
        bounds: UnsafeMutablePointer<Int16>, _ emit: (Fix) -> Void
    ) -> Bool {
        stats.sentences += 1
        if sentence[0] == 0x21 {  // '!': encapsulated (AIS) sentences are not ours
            stats.unknownSentences += 1
            return true
        }
        let body = sentence + 1
        let bodyLength = length - 1
        if bodyLength > 0 && body[0] == 0x50 {  // 'P'
            stats.proprietarySentences += 1
            return true
        }
        // The address decides how many fields are worth finding: GSV needs 4 of its ~20, an
        // unknown sentence none (it is only counted).
        guard bodyLength >= 5, isAddressCharacter(body[0]), isAddressCharacter(body[1]),
            bodyLength == 5 || body[5] == 0x2C
        else {
            // A longer address of address characters, checksummed: a vendor's own sentence that is
            // not `$P...` (Unicore's `$GYOACC`, `$SNRSTAT`), counted as unknown, not an error.
            var n = 0
            while n < bodyLength && body[n] != 0x2C && isAddressCharacter(body[n]) { n += 1 }
            if n > 5 && (n == bodyLength || body[n] == 0x2C) {
                stats.unknownSentences += 1
                return true
            }
            return rejectSentence(
                .invalidAddress, "expected a 5-letter address like GPGGA", sentence, fullLength,
                field: 0)
        }
        let type = UInt32(body[2]) << 16 | UInt32(body[3]) << 8 | UInt32(body[4])
        let wanted = SentenceType.fieldsNeeded(type)
        if wanted == 0 {
            if isAddressCharacter(body[2]) && isAddressCharacter(body[3]) && isAddressCharacter(body[4]) {
                stats.unknownSentences += 1
                return true
            }
            return rejectSentence(
                .invalidAddress, "expected a 5-letter address like GPGGA", sentence, fullLength,
                field: 0)
        }
        bounds[0] = -1
        var count = 1
        var p = 0
        let e = bodyLength
        // Find the commas eight bytes at a time, up to the last field the type needs.
        while p &+ 8 <= e && count < wanted {
            var commas = SWAR.bytesEqual(UnsafeRawPointer(body + p).loadUnaligned(as: UInt64.self), 0x2C)
            if commas != 0 {
                if count > 92 {
                    return rejectSentence(.tooManyFields, "more than 100 fields", sentence, fullLength, field: nil)
                }
                repeat {
                    bounds[count] = Int16(truncatingIfNeeded: p &+ commas.trailingZeroBitCount >> 3)
                    count &+= 1
                    commas &= commas &- 1
                } while commas != 0
            }
            p &+= 8
        }
        if count < wanted {
            while p < e {
                if body[p] == 0x2C {  // ','
                    if count == 100 {
                        return rejectSentence(
                            .tooManyFields, "more than 100 fields", sentence, fullLength,
                            field: nil)
                    }
                    bounds[count] = Int16(truncatingIfNeeded: p)
                    count &+= 1
                }
                p &+= 1
            }
            bounds[count] = Int16(truncatingIfNeeded: e)
        } else {
            // Enough fields started; the last one's end is the next comma (or the end).
            var q = Int(bounds[count &- 1]) &+ 1
            while q < e && body[q] != 0x2C { q &+= 1 }
            bounds[count] = Int16(truncatingIfNeeded: q)
        }
        let fields = Fields(base: body, bounds: bounds, count: count)
        if fields.length(0) != 5 {
            return rejectSentence(
                .invalidAddress, "expected a 5-letter address like GPGGA", sentence, fullLength,
                field: 0)
        }
        let (talker, talkerSystems) = talkerIndex(body[0], body[1])
        do throws(FieldError) {
            let known = try decodeFields(
                type: type, talker: talker, talkerSystems: talkerSystems, fields,
                line: sentenceLine, emit)
            if known { stats.decodedSentences += 1 }
            return true
        } catch {
            return rejectSentence(
                error.code, "\(error.message) in field \(error.field)", sentence, fullLength,
                field: error.field)
        }
    }

    /// Records a rejected sentence's error for the caller; returns `false` (rejected).
    mutating func rejectSentence(
        _ code: NMEAError.Code, _ message: @autoclosure () -> String,
        _ sentence: UnsafePointer<UInt8>, _ length: Int, field: Int?
    ) -> Bool {
        rejection = sentenceError(code, message(), sentence, length, field: field)
        return false
    }

    func sentenceError(
        _ code: NMEAError.Code, _ message: @autoclosure () -> String, _ sentence: UnsafePointer<UInt8>,
        _ length: Int, field: Int?
    ) -> NMEAError {
        guard wantsErrorDetail else {
            return NMEAError(code, "", line: sentenceLine, byteOffset: sentenceOffset, field: field)
        }
        let name = String(
            decoding: UnsafeBufferPointer(start: sentence + 1, count: min(5, max(0, length - 1))),
            as: UTF8.self)
        return NMEAError(
            code, "\(name): \(message())", file: options.sourceName, line: sentenceLine, byteOffset: sentenceOffset,
            text: NMEAError.escape(UnsafeBufferPointer(start: sentence, count: length)), field: field)
    }

    /// Decodes the fields of a known sentence type into the epoch. Returns `false` for an unknown type.
    @inline(__always)
    mutating func decodeFields(
        type: UInt32, talker: Int, talkerSystems: Fix.Systems, _ f: Fields, line: Int,
        _ emit: (Fix) -> Void
    ) throws(FieldError) -> Bool {
        switch type {
        case SentenceType.gga:
            guard f.count >= 10 else { throw FieldError(.tooFewFields, field: f.count, "GGA needs 14 fields") }
            let time = try f.time(1)
            let lat = try f.latitude(2)
            let lon = try f.longitude(4)
            let q = try f.uint(6)
            if let q, q > 8 { throw FieldError(.fieldOutOfRange, field: 6, "GGA quality must be 0-8") }
            let sats = try f.uint(7)
            let hdop = try f.decimal(8)
            let alt = try f.decimal(9)
            let sep = try f.decimal(11)
            guard assembler.begin(time: time, line: line, emit: emit) else {
                stats.lateSentences += 1
                return true
            }
            let quality = q.flatMap { Fix.Quality(rawValue: UInt8($0)) }
            let valid = (quality ?? .invalid) != .invalid
            if valid && (lat == nil || lon == nil) {
                throw FieldError(.malformedField, field: lat == nil ? 2 : 4, "GGA has a fix quality but no position")
            }
            assembler.position(rank: 4, latitude: lat, longitude: lon, valid: valid)
            if assembler.positionRank == 4 {
                assembler.quality = quality
                if valid {
                    assembler.altitude = alt
                    assembler.geoidSeparation = sep
                }
            }
            assembler.ggaSatellites = sats
            assembler.ggaHDOP = hdop
            assembler.systems.formUnion(talkerSystems)

        case SentenceType.rmc:
            guard f.count >= 10 else { throw FieldError(.tooFewFields, field: f.count, "RMC needs 12 fields") }
            let time = try f.time(1)
            let status = f.char(2)
            if status != 0x41 && status != 0x56 && status != 0 {
                throw FieldError(.malformedField, field: 2, "RMC status must be A or V")
            }
            let lat = try f.latitude(3)
            let lon = try f.longitude(5)
            let knots = try f.decimal(7)
            let course = try f.decimal(8)
            let day = try date(f, 9)
            var variation = try f.decimal(10)
            if f.char(11) == 0x57, let v = variation { variation = -v }  // W
            let mode = f.char(12)
            guard assembler.begin(time: time, line: line, emit: emit) else {
                stats.lateSentences += 1
                return true
            }
            // Status A and (NMEA 2.3) a mode indicator other than N (no fix) / E (estimated) are a fix.
            let valid = status == 0x41 && mode != 0x4E
            if valid && (lat == nil || lon == nil) {
                throw FieldError(
                    .malformedField, field: lat == nil ? 3 : 5, "RMC status is A but the position is empty")
            }
            assembler.position(rank: 2, latitude: lat, longitude: lon, valid: valid)
            if assembler.positionRank == 2 && valid && mode == 0x45 { assembler.quality = .estimated }
            if let knots, valid { assembler.speed = knots * 0.514_444_444_444_444_4 }
            if let course, valid { assembler.course = course }
            if let variation { assembler.magneticVariation = variation }
            if let day { assembler.epochDay = day }
            assembler.systems.formUnion(talkerSystems)

        case SentenceType.gll:
            guard f.count >= 5 else { throw FieldError(.tooFewFields, field: f.count, "GLL needs 7 fields") }
            let lat = try f.latitude(1)
            let lon = try f.longitude(3)
            let time = try f.time(5)
            let status = f.char(6)
            if status != 0x41 && status != 0x56 && status != 0 {
                throw FieldError(.malformedField, field: 6, "GLL status must be A or V")
            }
            let mode = f.char(7)
            guard assembler.begin(time: time, line: line, emit: emit) else {
                stats.lateSentences += 1
                return true
            }
            let valid = status != 0x56 && mode != 0x4E
            assembler.position(rank: 1, latitude: lat, longitude: lon, valid: valid)
            assembler.systems.formUnion(talkerSystems)

        case SentenceType.gns:
            guard f.count >= 7 else { throw FieldError(.tooFewFields, field: f.count, "GNS needs 13 fields") }
            let time = try f.time(1)
            let lat = try f.latitude(2)
            let lon = try f.longitude(4)
            // One mode character per constellation; any but N means that constellation has a fix.
            var valid = false
            var quality: Fix.Quality = .invalid
            let ms = f.start(6)
            for k in ms..<(ms + f.length(6)) {
                switch f.base[k] {
                case 0x41: valid = true; quality = better(quality, .gps)
                case 0x44: valid = true; quality = better(quality, .dgps)
                case 0x50: valid = true; quality = better(quality, .pps)
                case 0x52: valid = true; quality = .rtkFixed
                case 0x46: valid = true; if quality != .rtkFixed { quality = .rtkFloat }
                case 0x45: valid = true; if quality == .invalid { quality = .estimated }
                case 0x4D: valid = true; if quality == .invalid { quality = .manual }
                case 0x53: valid = true; if quality == .invalid { quality = .simulated }
                case 0x4E: break
                default: throw FieldError(.malformedField, field: 6, "GNS mode letters must be from NADPRFEMS")
                }
            }
            let sats = try f.uint(7)
            let hdop = try f.decimal(8)
            let alt = try f.decimal(9)
            let sep = try f.decimal(10)
            guard assembler.begin(time: time, line: line, emit: emit) else {
                stats.lateSentences += 1
                return true
            }
            assembler.position(rank: 3, latitude: lat, longitude: lon, valid: valid)
            if assembler.positionRank == 3 {
                assembler.quality = quality
                if valid {
                    assembler.altitude = alt
                    assembler.geoidSeparation = sep
                }
            }
            if let sats { assembler.ggaSatellites = max(assembler.ggaSatellites ?? 0, sats) }
            if assembler.ggaHDOP == nil { assembler.ggaHDOP = hdop }
            assembler.systems.formUnion(talkerSystems)

        case SentenceType.gsa:
            guard f.count >= 6 else { throw FieldError(.tooFewFields, field: f.count, "GSA needs 18 fields") }
            let fixType = try f.uint(2)
            if let fixType, fixType < 1 || fixType > 3 {
                throw FieldError(.fieldOutOfRange, field: 2, "GSA fix type must be 1, 2 or 3")
            }
            // Standard: PRNs in fields 3...14, DOPs in 15...17, NMEA 4.1 system ID in 18.
            // Some receivers list more or fewer PRNs: the DOPs are then the last three fields.
            let standard = f.count == 18 || f.count == 19
            let dopIndex = standard ? 15 : f.count - 3
            var used = 0
            if dopIndex > 3 {
                for k in 3..<dopIndex where !f.isEmpty(k) { used += 1 }
            }
            let pdop = try f.decimal(dopIndex)
            let hdop = try f.decimal(dopIndex + 1)
            let vdop = try f.decimal(dopIndex + 2)
            // Field 18 is NMEA 4.1's system ID, a digit; some receivers put a fourth DOP there
            // (`...,5.1,1.3,4.9,3.3`): not a system, and no reason to lose the sentence's DOPs.
            let system = f.count == 19 ? try? f.uint(18) : nil
            guard assembler.begin(time: nil, line: line, emit: emit) else { return true }
            assembler.gsaSeen = true
            if let fixType {
                // Several GSA per epoch (one per constellation): the best fix type wins.
                assembler.gsaFixType = max(assembler.gsaFixType, fixType)
            }
            assembler.gsaUsed += used
            if let pdop, pdop > 0 { assembler.pdop = pdop }
            if let hdop, hdop > 0 { assembler.hdop = hdop }
            if let vdop, vdop > 0 { assembler.vdop = vdop }
            assembler.systems.formUnion(talkerSystems)
            if used > 0 { assembler.systems.formUnion(systemFromID(system)) }

        case SentenceType.gsv:
            guard f.count >= 4 else { throw FieldError(.tooFewFields, field: f.count, "GSV needs at least 4 fields") }
            let total = try f.uint(3)
            guard assembler.begin(time: nil, line: line, emit: emit) else { return true }
            if let total {
                assembler.satellitesInView(talker: talker, count: total)
                if total > 0 { assembler.systems.formUnion(talkerSystems) }
            }

        case SentenceType.vtg:
            guard f.count >= 5 else { throw FieldError(.tooFewFields, field: f.count, "VTG needs 9 fields") }
            var course: Double?
            var knots: Double?
            var kmh: Double?
            if f.char(2) == 0x54 || f.count >= 9 {  // 'T': NMEA 2.x with unit letters
                course = try f.decimal(1)
                knots = try f.decimal(5)
                kmh = try f.decimal(7)
            } else {  // NMEA 1.5: course true, course magnetic, knots, km/h
                course = try f.decimal(1)
                knots = try f.decimal(3)
                kmh = try f.decimal(4)
            }
            let mode = f.char(9)
            guard assembler.begin(time: nil, line: line, emit: emit) else { return true }
            if mode != 0x4E {
                if let kmh {
                    assembler.speed = kmh / 3.6
                } else if let knots {
                    assembler.speed = knots * 0.514_444_444_444_444_4
                }
                if let course { assembler.course = course }
            }

        case SentenceType.zda:
            guard f.count >= 5 else { throw FieldError(.tooFewFields, field: f.count, "ZDA needs 7 fields") }
            let time = try f.time(1)
            let d = try f.uint(2)
            let m = try f.uint(3)
            let y = try f.uint(4)
            var day: Int32?
            if let d, let m, let y {
                guard (1...31).contains(d) else { throw FieldError(.fieldOutOfRange, field: 2, "day must be 1-31") }
                guard (1...12).contains(m) else { throw FieldError(.fieldOutOfRange, field: 3, "month must be 1-12") }
                guard y >= 1980 && y <= 2999 else {
                    throw FieldError(.fieldOutOfRange, field: 4, "year must be 1980-2999")
                }
                day = Int32(GNSSTime.daysFromCivil(year: y, month: m, day: d))
                assembler.zdaCentury = y / 100 * 100
            }
            guard assembler.begin(time: time, line: line, emit: emit) else {
                stats.lateSentences += 1
                return true
            }
            if let day { assembler.epochDay = day }

        case SentenceType.gst:
            guard f.count >= 8 else { throw FieldError(.tooFewFields, field: f.count, "GST needs 9 fields") }
            let time = try f.time(1)
            let sLat = try f.decimal(6)
            let sLon = try f.decimal(7)
            let sAlt = try f.decimal(8)
            guard assembler.begin(time: time, line: line, emit: emit) else {
                stats.lateSentences += 1
                return true
            }
            if let sLat, let sLon {
                assembler.gstLat = sLat
                assembler.gstLon = sLon
                assembler.gstAlt = sAlt
            }

        default:
            return false
        }
        return true
    }

    /// RMC's `ddmmyy` as days since 1970, or `nil` when empty.
    @inline(__always)
    mutating func date(_ f: Fields, _ i: Int) throws(FieldError) -> Int32? {
        if f.isEmpty(i) { return nil }
        guard f.length(i) == 6, let v = try f.uint(i) else {
            throw FieldError(.malformedField, field: i, "expected ddmmyy date")
        }
        if v == assembler.lastDateField, let day = assembler.lastDateDay { return day }
        let d = v / 10000, m = v / 100 % 100, yy = v % 100
        guard (1...31).contains(d) else { throw FieldError(.fieldOutOfRange, field: i, "day must be 1-31") }
        guard (1...12).contains(m) else { throw FieldError(.fieldOutOfRange, field: i, "month must be 1-12") }
        let year = if let c = assembler.zdaCentury { c + yy } else { yy >= 80 ? 1900 + yy : 2000 + yy }
        let day = Int32(GNSSTime.daysFromCivil(year: year, month: m, day: d))
        assembler.lastDateField = v
        assembler.lastDateDay = day
        return day
    }
}
