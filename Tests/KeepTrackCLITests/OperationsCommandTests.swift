import Foundation
import KeepTrackTesting
import Testing

/// Runs a program in the package root and returns its standard output (standard error discarded).
func run(_ executable: String, _ arguments: [String], environment: [String: String]? = nil) throws -> (Int32, String) {
    let process = Process()
    process.executableURL = URL(fileURLWithPath: executable)
    process.arguments = arguments
    process.currentDirectoryURL = packageRoot
    if let environment { process.environment = environment }
    let out = Pipe()
    process.standardOutput = out
    process.standardError = FileHandle.nullDevice
    try process.run()
    let data = out.fileHandleForReading.readDataToEndOfFile()
    process.waitUntilExit()
    return (process.terminationStatus, String(decoding: data, as: UTF8.self))
}

@Suite("keeptrack --version")
struct VersionTests {
    @Test func printsTheVersionFileAndTheCommitItWasBuiltFrom() throws {
        let r = try keeptrack(["--version"])
        #expect(r.status == 0)
        let version = try String(contentsOf: packageRoot.appendingPathComponent("VERSION"), encoding: .utf8)
            .trimmingCharacters(in: .whitespacesAndNewlines)
        let (status, head) = try run("/usr/bin/git", ["-c", "safe.directory=*", "rev-parse", "--short=12", "HEAD"])
        #expect(status == 0)
        let commit = head.trimmingCharacters(in: .whitespacesAndNewlines)
        #expect(r.stdout.hasPrefix("\(version) (commit \(commit)"), "\(r.stdout)")
        #expect(commit.count == 12)
    }

    @Test func saysUnknownOutsideAGitCheckoutUnlessTold() throws {
        let dir = FileManager.default.temporaryDirectory.appendingPathComponent("keeptrack-buildinfo-\(UUID())")
        try FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: dir) }
        try "9.8.7\n".write(to: dir.appendingPathComponent("VERSION"), atomically: true, encoding: .utf8)
        let script = packageRoot.appendingPathComponent("tools/build-info").path
        let generated = dir.appendingPathComponent("out/BuildInfo+Generated.swift")
        var env = ProcessInfo.processInfo.environment
        env["KEEPTRACK_COMMIT"] = nil
        env["GIT_CEILING_DIRECTORIES"] = dir.deletingLastPathComponent().path
        #expect(try run("/bin/sh", [script, dir.path, dir.appendingPathComponent("out").path], environment: env).0 == 0)
        var text = try String(contentsOf: generated, encoding: .utf8)
        #expect(text.contains("generatedVersion = \"9.8.7\""))
        #expect(text.contains("generatedCommit = \"unknown\""))
        env["KEEPTRACK_COMMIT"] = "abc123"
        #expect(try run("/bin/sh", [script, dir.path, dir.appendingPathComponent("out").path], environment: env).0 == 0)
        text = try String(contentsOf: generated, encoding: .utf8)
        #expect(text.contains("generatedCommit = \"abc123\""))
    }
}
