import Foundation
import KeepTrackTesting
import Testing

/// Runs the built `keeptrack` binary, as a user would.
struct CLIResult {
    var status: Int32
    var stdout: String
    var stderr: String
}

/// The directory holding the test bundle also holds the built products.
let productsDirectory: URL = {
    let exe = (try? FileManager.default.destinationOfSymbolicLink(atPath: "/proc/self/exe")) ?? CommandLine.arguments[0]
    return URL(fileURLWithPath: exe).deletingLastPathComponent()
}()

func keeptrack(_ arguments: [String], stdin: Data? = nil) throws -> CLIResult {
    let process = Process()
    process.executableURL = productsDirectory.appendingPathComponent("keeptrack")
    process.arguments = arguments
    process.currentDirectoryURL = packageRoot
    let out = Pipe(), err = Pipe(), input = Pipe()
    process.standardOutput = out
    process.standardError = err
    process.standardInput = input
    try process.run()
    if let stdin { input.fileHandleForWriting.write(stdin) }
    try input.fileHandleForWriting.close()
    // Read both pipes fully before waiting, so a large output cannot block the child.
    nonisolated(unsafe) var errData = Data()
    let errThread = Thread { errData = err.fileHandleForReading.readDataToEndOfFile() }
    errThread.start()
    let outData = out.fileHandleForReading.readDataToEndOfFile()
    process.waitUntilExit()
    while errThread.isExecuting || !errThread.isFinished { Thread.sleep(forTimeInterval: 0.001) }
    return CLIResult(status: process.terminationStatus, stdout: String(decoding: outData, as: UTF8.self),
                     stderr: String(decoding: errData, as: UTF8.self))
}

@Suite("keeptrack decode")
struct DecodeCommandTests {
    @Test func printsOneJSONObjectPerFixAndASummary() throws {
        let r = try keeptrack(["decode", "fixtures/walk-15min.nmea"])
        #expect(r.status == 0)
        let lines = r.stdout.split(separator: "\n")
        #expect(lines.count == 895)
        let first = try JSONSerialization.jsonObject(with: Data(lines[0].utf8)) as? [String: Any]
        for key in ["time", "lat", "lon", "alt", "speed", "course", "mode", "hAcc", "vAcc", "sats", "hdop"] {
            #expect(first?[key] != nil, "missing \(key)")
        }
        #expect((first?["time"] as? String)?.hasPrefix("2024-05-14T09:30:00.00Z") == true)
        #expect(r.stderr.contains("895 fixes"))
        #expect(r.stderr.contains("MB/s"))
    }

    @Test func omitsFixesWithoutPositionUnlessAll() throws {
        let some = try keeptrack(["decode", "fixtures/nodate.nmea"])
        let all = try keeptrack(["decode", "--all", "fixtures/nodate.nmea"])
        #expect(some.stdout.split(separator: "\n").count == 116)
        #expect(all.stdout.split(separator: "\n").count == 121)
        #expect(all.stdout.contains("\"mode\":\"none\""))
        #expect(!some.stdout.contains("\"mode\":\"none\""))
    }

    @Test func readsStandardInput() throws {
        let bytes = try Data(contentsOf: packageRoot.appendingPathComponent("fixtures/midnight.nmea"))
        let r = try keeptrack(["decode", "-", "--format", "csv"], stdin: bytes)
        #expect(r.status == 0)
        #expect(r.stdout.hasPrefix("time,lat,lon"))
        #expect(r.stdout.split(separator: "\n").count == 242)
        #expect(r.stderr.contains("<stdin>"))
    }

    @Test func reportsBadSentencesWithLineAndByteAndKeepsGoing() throws {
        let r = try keeptrack(["decode", "--max-warnings", "100", "fixtures/corrupted.nmea"])
        #expect(r.status == 0)
        #expect(r.stderr.contains("warning: fixtures/corrupted.nmea:161: byte 9619: bad-checksum"))
        #expect(r.stderr.contains("rejected by kind"))
        #expect(r.stdout.split(separator: "\n").count == 893)
    }

    @Test func strictStopsAtTheFirstBadSentenceWithStatusOne() throws {
        let r = try keeptrack(["decode", "--strict", "fixtures/corrupted.nmea"])
        #expect(r.status == 1)
        #expect(r.stderr.contains("error: stopped at the first bad sentence (--strict): fixtures/corrupted.nmea:161: byte 9619"))
        // Fixes before the bad sentence were printed.
        #expect(r.stdout.split(separator: "\n").count == 19)
    }

    @Test func explainsAMissingFile() throws {
        let r = try keeptrack(["decode", "no-such-file.nmea"])
        #expect(r.status == 1)
        #expect(r.stderr.contains("no-such-file.nmea"))
        #expect(r.stderr.contains("No such file or directory"))
    }

    @Test func rejectsABadDateOptionWithAUsageError() throws {
        let r = try keeptrack(["decode", "--date", "2024-13-01", "fixtures/nodate.nmea"])
        #expect(r.status == 64)
        #expect(r.stderr.contains("--date must be a date like 2024-03-09"))
    }

    @Test func writesGPXAndGeoJSON() throws {
        let gpx = try keeptrack(["decode", "--format", "gpx", "--quiet", "fixtures/walk-15min.nmea"])
        #expect(gpx.stdout.components(separatedBy: "<trkpt ").count - 1 == 895)
        #expect(gpx.stderr.isEmpty)
        let geo = try keeptrack(["decode", "-f", "geojson", "fixtures/walk-15min.nmea"])
        let object = try JSONSerialization.jsonObject(with: Data(geo.stdout.utf8)) as? [String: Any]
        #expect((object?["features"] as? [Any])?.count == 895)
    }

    @Test func helpTeachesTheCommand() throws {
        let r = try keeptrack(["decode", "--help"])
        #expect(r.status == 0)
        #expect(r.stdout.contains("Examples:"))
        #expect(r.stdout.contains("--strict"))
    }
}
