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

/// Runs the binary to its end (blocking: the calling test carries the `.offThePool` trait, or calls
/// it inside `offThePool { }`).
func keeptrack(_ arguments: [String], stdin: Data? = nil, environment: [String: String]? = nil) throws -> CLIResult {
    let r = try runCommand(
        productsDirectory.appendingPathComponent("keeptrack"), arguments, stdin: stdin ?? Data(),
        environment: environment)
    return CLIResult(status: r.status, stdout: r.output, stderr: r.errors)
}

@Suite("keeptrack decode", .offThePool)
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

    /// Another track file is named as what it is, with the command that reads it, not decoded as
    /// NMEA into a warning a line.
    @Test func aTrackFileIsSentToReplay() throws {
        let r = try keeptrack(["decode", "fixtures/tracks/walk-2min.gpx"])
        #expect(r.status == 64)
        #expect(
            r.stderr.hasPrefix(
                "Error: fixtures/tracks/walk-2min.gpx is a GPX file, not an NMEA log: decode reads NMEA; "
                    + "keeptrack replay fixtures/tracks/walk-2min.gpx reads it"), "\(r.stderr)")
        #expect(r.stdout.isEmpty)
    }

    @Test func strictStopsAtTheFirstBadSentenceWithStatusOne() throws {
        let r = try keeptrack(["decode", "--strict", "fixtures/corrupted.nmea"])
        #expect(r.status == 1)
        #expect(
            r.stderr.contains(
                "error: stopped at the first bad sentence (--strict): fixtures/corrupted.nmea:161: byte 9619"))
        // Fixes before the bad sentence were printed, the epoch it came after included (its
        // lines 153-160 are complete: the bad sentence is the next epoch's first).
        let lines = r.stdout.split(separator: "\n")
        #expect(lines.count == 20)
        #expect(
            lines.last?.hasPrefix(#"{"time":"2024-05-14T09:30:19.00Z""#) == true
                && lines.last?.contains("[153,160]") == true, "\(lines.last ?? "")")
    }

    @Test func aTruncatedGzipLogPrintsEveryFixReadBeforeTheEndThenTheErrorWithFileAndByte() throws {
        let gz = try gzipped(Data(contentsOf: packageRoot.appendingPathComponent("fixtures/walk-15min.nmea")))
        let cut = gz.count / 2
        let path = try temporaryFile(gz.prefix(cut), name: "walk.nmea.gz")
        let r = try keeptrack(["decode", path])
        // What a decoder fed the decompressible part as a whole prints: nothing may be missing.
        let expected = try keeptrack(["decode", "-"], stdin: inflatedPrefix(gz.prefix(cut)))
        #expect(expected.stdout.split(separator: "\n").count > 400)
        #expect(r.stdout == expected.stdout)
        #expect(r.status == 1)
        #expect(r.stderr.contains("error: \(path): byte \(cut): gzip data ends early"))
    }

    @Test func aGzipLogWithAJunkTailPrintsEveryFixThenSaysWhereTheJunkStarts() throws {
        let plain = try Data(contentsOf: packageRoot.appendingPathComponent("fixtures/walk-15min.nmea"))
        let gz = try gzipped(plain)
        let path = try temporaryFile(gz + Data("junk after the log\n".utf8), name: "walk.nmea.gz")
        let r = try keeptrack(["decode", path])
        let expected = try keeptrack(["decode", "fixtures/walk-15min.nmea"])
        #expect(r.stdout.split(separator: "\n").count == 895)
        #expect(r.stdout == expected.stdout)
        #expect(r.status == 1)
        #expect(
            r.stderr.contains(
                "error: \(path): byte \(gz.count): bytes after the end of the gzip data are not gzip"))
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

/// `bytes` compressed by gzip(1).
fileprivate func gzipped(_ bytes: Data) throws -> Data {
    try filtered(bytes, through: "/bin/gzip", ["-c", "-n"])
}

/// What zlib can inflate from a (possibly truncated) gzip stream: everything before the cut.
fileprivate func inflatedPrefix(_ gz: Data) throws -> Data {
    try filtered(
        gz, through: "/usr/bin/python3",
        [
            "-c",
            "import sys, zlib; sys.stdout.buffer.write(zlib.decompressobj(31).decompress(sys.stdin.buffer.read()))",
        ])
}

/// Runs `executable` with `input` on its standard input; returns its standard output.
fileprivate func filtered(_ input: Data, through executable: String, _ arguments: [String]) throws -> Data {
    let path = try temporaryFile(input, name: "input")
    let process = Process()
    process.executableURL = URL(fileURLWithPath: executable)
    process.arguments = arguments
    process.standardInput = try FileHandle(forReadingFrom: URL(fileURLWithPath: path))
    let out = Pipe()
    process.standardOutput = out
    try process.run()
    let data = out.fileHandleForReading.readDataToEndOfFile()
    process.waitUntilExit()
    return data
}

/// Writes `bytes` to a new file in a private temporary directory; returns its path.
fileprivate func temporaryFile(_ bytes: Data, name: String) throws -> String {
    let dir = try TemporaryDirectory("keeptrack-cli").url
    try FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true)
    let url = dir.appendingPathComponent(name)
    try bytes.write(to: url)
    return url.path
}
