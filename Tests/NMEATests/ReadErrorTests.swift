import Foundation
import Geo
import KeepTrackTesting
import NMEA
import Testing

/// A read error ends decoding without losing what was read before it.
@Suite("read errors", .offThePool)
struct ReadErrorTests {
    @Test func aTruncatedGzipFileDeliversEveryEpochReadBeforeTheEnd() throws {
        let gz = try gzip(fixtureBytes("walk-15min.nmea"))
        let path = try temporaryFile(Array(gz[0..<(gz.count / 2)]), name: "truncated.nmea.gz")
        let (fixes, error) = decodeFile(path)
        // The reference: the decoder fed exactly the bytes the reader could decompress.
        let expected = try NMEADecoder.decode(try bytesBeforeTheError(path)).fixes
        #expect(expected.count > 400)
        #expect(fixes == expected)
        #expect(error?.code == .io)
        #expect(error?.file == path)
        #expect(error?.byteOffset == Int64(gz.count / 2))
        #expect(error?.message.contains("truncated") == true)
    }

    @Test func junkAfterTheGzipDataDeliversTheWholeLogThenSaysWhereTheJunkStarts() throws {
        let plain = try fixtureBytes("walk-15min.nmea")
        let gz = try gzip(plain)
        let path = try temporaryFile(gz + Array("this is not gzip\n".utf8), name: "junk-tail.nmea.gz")
        let (fixes, error) = decodeFile(path)
        let expected = try NMEADecoder.decode(plain).fixes
        #expect(expected.count == 895)
        #expect(fixes == expected)
        #expect(error?.code == .io)
        #expect(error?.file == path)
        #expect(error?.byteOffset == Int64(gz.count))
        #expect(error?.message.contains("after the end of the gzip data") == true)
    }

    @Test func corruptGzipDataDeliversTheEpochsBeforeIt() throws {
        var gz = try gzip(fixtureBytes("walk-15min.nmea"))
        for i in (gz.count / 2)..<(gz.count / 2 + 64) { gz[i] = 0xFF }
        let path = try temporaryFile(gz, name: "corrupt.nmea.gz")
        let (fixes, error) = decodeFile(path)
        let expected = try NMEADecoder.decode(try bytesBeforeTheError(path)).fixes
        #expect(fixes == expected)
        #expect(error?.code == .io)
        #expect(error?.message.contains("corrupt gzip data") == true)
    }
}

/// Decodes `path` with `decodeFile`, collecting the fixes emitted before any error.
func decodeFile(_ path: String) -> ([Fix], NMEAError?) {
    var decoder = NMEADecoder()
    var fixes: [Fix] = []
    do throws(NMEAError) {
        try decoder.decodeFile(path) { fixes.append($0) }
        return (fixes, nil)
    } catch {
        return (fixes, error)
    }
}

/// The (decompressed) bytes `NMEAFileReader` gives before it throws.
func bytesBeforeTheError(_ path: String) throws -> [UInt8] {
    let reader = try NMEAFileReader(path: path)
    var out: [UInt8] = []
    var chunk = [UInt8](repeating: 0, count: 65536)
    while true {
        let n: Int
        do {
            n = try chunk.withUnsafeMutableBytes { try reader.read(into: $0) }
        } catch {
            return out
        }
        if n == 0 { return out }
        out += chunk[0..<n]
    }
}

/// `bytes` compressed by gzip(1).
func gzip(_ bytes: [UInt8]) throws -> [UInt8] {
    let input = try temporaryFile(bytes, name: "plain")
    let process = Process()
    process.executableURL = URL(fileURLWithPath: "/bin/gzip")
    process.arguments = ["-c", "-n", input]
    let out = Pipe()
    process.standardOutput = out
    try process.run()
    let data = out.fileHandleForReading.readDataToEndOfFile()
    process.waitUntilExit()
    #expect(process.terminationStatus == 0)
    return Array(data)
}

/// Writes `bytes` to a new file in a private temporary directory; returns its path.
func temporaryFile(_ bytes: [UInt8], name: String) throws -> String {
    let dir = try TemporaryDirectory("keeptrack-nmea").url
    try FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true)
    let url = dir.appendingPathComponent(name)
    try Data(bytes).write(to: url)
    return url.path
}
