import CGPS
import Geo
import Testing

@testable import GPSInput

#if canImport(Glibc)
    import Glibc
#endif

/// gpsd's reports, built in a `gps_data_t` as libgps leaves them after a read.
final class Reports {
    let data = UnsafeMutablePointer<gps_data_t>.allocate(capacity: 1)

    init() { memset(data, 0, MemoryLayout<gps_data_t>.size) }
    deinit { data.deallocate() }

    /// A TPV at `second` (3D; `altitude` set when given, as gpsd adds it once it decoded a GGA).
    func tpv(second: Int, latitude: Double, altitude: Double = .nan) -> UnsafePointer<gps_data_t> {
        memset(data, 0, MemoryLayout<gps_data_t>.size)
        data.pointee.set = UInt64(TIME_SET) | UInt64(MODE_SET) | UInt64(LATLON_SET)
        data.pointee.fix.time = timespec(tv_sec: 1_715_679_000 + second, tv_nsec: 0)
        data.pointee.fix.mode = Int32(MODE_3D)
        data.pointee.fix.latitude = latitude
        data.pointee.fix.longitude = 11.5
        data.pointee.fix.altMSL = altitude
        for field in [\gps_fix_t.geoid_sep, \.speed, \.track, \.magnetic_var, \.epv] {
            data.pointee.fix[keyPath: field] = .nan
        }
        data.pointee.fix.eph = 10
        return UnsafePointer(data)
    }

    /// A SKY with this HDOP and 7 satellites used.
    func sky(hdop: Double) -> UnsafePointer<gps_data_t> {
        memset(data, 0, MemoryLayout<gps_data_t>.size)
        data.pointee.dop.hdop = hdop
        data.pointee.satellites_used = 7
        return UnsafePointer(data)
    }
}

@Suite("gpsd epochs")
struct TPVMergerTests {
    /// Feeds `report` and returns what it delivered.
    static func feed(_ merger: inout TPVMerger, tpv: UnsafePointer<gps_data_t>) -> [Fix] {
        var out: [Fix] = []
        merger.tpv(tpv) { out.append($0) }
        return out
    }

    static func feed(_ merger: inout TPVMerger, sky: UnsafePointer<gps_data_t>) -> [Fix] {
        var out: [Fix] = []
        merger.sky(sky) { out.append($0) }
        return out
    }

    @Test func endsAnEpochOnItsLastReportOnceTwoEpochsHadTheSameReports() {
        let r = Reports()
        var merger = TPVMerger()
        // Epochs 0 and 1 teach the cycle (a TPV, then a SKY); each is delivered by the next TPV.
        #expect(Self.feed(&merger, tpv: r.tpv(second: 0, latitude: 48.0)).isEmpty)
        #expect(Self.feed(&merger, sky: r.sky(hdop: 1.0)).isEmpty)
        let first = Self.feed(&merger, tpv: r.tpv(second: 1, latitude: 48.1))
        #expect(first.map(\.coordinate?.latitude) == [48.0])
        #expect(first.first?.hdop == 1.0)
        #expect(Self.feed(&merger, sky: r.sky(hdop: 1.1)).isEmpty)
        #expect(!merger.knowsCycle)
        #expect(Self.feed(&merger, tpv: r.tpv(second: 2, latitude: 48.2)).map(\.coordinate?.latitude) == [48.1])
        #expect(merger.knowsCycle)
        // From epoch 2 on, the SKY completes the epoch: delivered at once, nothing left pending,
        // no quiet time (flush) needed.
        let second = Self.feed(&merger, sky: r.sky(hdop: 1.2))
        #expect(second.map(\.coordinate?.latitude) == [48.2])
        #expect(second.first?.hdop == 1.2)
        #expect(second.first?.satellitesUsed == 7)
        #expect(!merger.hasPending)
        for s in 3..<10 {
            #expect(Self.feed(&merger, tpv: r.tpv(second: s, latitude: 48.0 + Double(s) / 10)).isEmpty)
            #expect(Self.feed(&merger, sky: r.sky(hdop: 1.0)).count == 1)
        }
        #expect(merger.endedOnData == 8)
    }

    @Test func anEpochWithMoreReportsThanTheCycleIsNotCutShort() {
        let r = Reports()
        var merger = TPVMerger()
        for s in 0..<3 {
            _ = Self.feed(&merger, tpv: r.tpv(second: s, latitude: 48.0))
            _ = Self.feed(&merger, sky: r.sky(hdop: 1.0))
        }
        #expect(merger.knowsCycle)
        // Epoch 3 has two TPVs (the second adds the altitude) before its SKY: not the learned
        // cycle, so it waits for the next epoch's TPV and keeps both TPVs' fields.
        #expect(Self.feed(&merger, tpv: r.tpv(second: 3, latitude: 48.3)).isEmpty)
        #expect(Self.feed(&merger, tpv: r.tpv(second: 3, latitude: 48.3, altitude: 530)).isEmpty)
        #expect(Self.feed(&merger, sky: r.sky(hdop: 1.0)).isEmpty)
        let fixes = Self.feed(&merger, tpv: r.tpv(second: 4, latitude: 48.4))
        #expect(fixes.map(\.coordinate?.latitude) == [48.3])
        #expect(fixes.first?.altitudeMSL == 530)
        #expect(!merger.knowsCycle)
    }

    @Test func aSkyBeforeAnyTPVIsNotACycle() {
        let r = Reports()
        var merger = TPVMerger()
        // Joined mid-epoch: a SKY with nothing pending belongs to no epoch and is dropped.
        #expect(Self.feed(&merger, sky: r.sky(hdop: 2.0)).isEmpty)
        #expect(Self.feed(&merger, tpv: r.tpv(second: 0, latitude: 48.0)).isEmpty)
        var flushed: [Fix] = []
        merger.flush { flushed.append($0) }
        #expect(flushed.first?.hdop == nil)
        #expect(!merger.knowsCycle)
    }
}

@Suite("gpsd report lines")
struct ReportLinesTests {
    @Test(arguments: [1, 2, 7, 64, 4096])
    func splitsTheStreamIntoLinesAtAnyChunkSize(_ chunk: Int) throws {
        var fds: [Int32] = [-1, -1]
        #expect(socketpair(AF_UNIX, Int32(SOCK_STREAM.rawValue), 0, &fds) == 0)
        defer { fds.forEach { close($0) } }
        let reports = [#"{"class":"TPV","time":"2024-05-14T09:30:01.000Z"}"#, #"{"class":"SKY","hdop":1.2}"#, "", "{}"]
        let bytes = Array(reports.map { $0 + "\n" }.joined().utf8)
        let lines = ReportLines()
        var seen: [String] = []
        for offset in stride(from: 0, to: bytes.count, by: chunk) {
            let part = bytes[offset..<min(offset + chunk, bytes.count)]
            #expect(part.withUnsafeBytes { write(fds[1], $0.baseAddress, $0.count) } == part.count)
            #expect(lines.fill(from: fds[0]) == .read)
            while let line = lines.next() { seen.append(String(cString: line)) }
        }
        #expect(seen == reports)
        close(fds[1])
        fds[1] = -1
        #expect(lines.fill(from: fds[0]) == .closed)
    }
}
