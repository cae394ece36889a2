import ConfigFile
import Foundation
import KeepTrackTesting
import Testing

@testable import keeptrack

/// Issue 29, item 1: a list of upload targets in `track`'s configuration file.
@Suite("The configuration file's targets", .offThePool)
struct UploadTargetsConfigTests {
    static let file = """
        gpsd: localhost:2947
        targets:
          - url: https://traccar.example:5055/
            format: osmand
            device-id: van-1
          - url: mqtt://anna@broker.example/owntracks/anna/phone
            name: recorder
            format: owntracks
            header:
              - "X-Limit-U: anna"
              - "X-Limit-D: phone"
        """

    func parsed(_ yaml: String, commandLine: [String] = []) throws -> Track {
        let dir = try TemporaryDirectory("keeptrack-targets-config")
        let path = dir.path + "/config.yaml"
        try yaml.write(toFile: path, atomically: true, encoding: .utf8)
        let arguments = try TrackConfig.reader.insertingFile(
            into: ["track", "--config", path] + commandLine, at: 1, option: "--config", defaultPath: "",
            replacedByCommandLine: TrackConfig.perTarget, exists: { _ in true })
        return try Track.parse(Array(arguments.dropFirst()))
    }

    /// Each target's settings pair by order, what one leaves out is none for it, and its headers are
    /// its own.
    @Test func eachTargetKeepsItsOwnSettings() throws {
        let track = try parsed(Self.file)
        let upload = track.upload
        #expect(upload.upload == ["https://traccar.example:5055/", "mqtt://anna@broker.example/owntracks/anna/phone"])
        let first = upload.values(target: 0)
        let second = upload.values(target: 1)
        #expect(first.format == "osmand" && second.format == "owntracks")
        #expect(first.deviceID == "van-1" && second.deviceID == nil)
        #expect(first.headers.isEmpty && second.headers == ["X-Limit-U: anna", "X-Limit-D: phone"])
        #expect(
            UploadOptions.value(upload.targetName, 0) == nil && UploadOptions.value(upload.targetName, 1) == "recorder")
    }

    /// `--upload` on the command line replaces the file's targets (it is not one more).
    @Test func theCommandLinesUploadReplacesTheFilesTargets() throws {
        let track = try parsed(Self.file, commandLine: ["--upload", "http://other.example/v1/locations"])
        #expect(track.upload.upload == ["http://other.example/v1/locations"])
        #expect(track.upload.format == "json")
        let single = try parsed(
            "gpsd: localhost:2947\nupload: http://a.example/\nformat: osmand\n",
            commandLine: ["--upload", "http://b.example/", "--format", "json"])
        #expect(single.upload.upload == ["http://b.example/"] && single.upload.formats == ["json"])
    }

    /// `keeptrack config check` accepts the list and names an unknown key in it with its line.
    @Test func configCheckReadsTheList() throws {
        let dir = try TemporaryDirectory("keeptrack-targets-check")
        let good = dir.path + "/good.yaml", bad = dir.path + "/bad.yaml"
        try Self.file.write(toFile: good, atomically: true, encoding: .utf8)
        try "targets:\n  - url: http://a.example/\n    passwd: x\n".write(
            toFile: bad, atomically: true, encoding: .utf8)
        let ok = try keeptrack(["config", "check", good])
        #expect(ok.status == 0, "\(ok.stderr)")
        #expect(ok.stdout.contains("targets"))
        let refused = try keeptrack(["config", "check", bad])
        #expect(refused.status == 1)
        #expect(refused.stderr.contains(":3: targets: unknown key 'passwd'"), "\(refused.stderr)")
        // An entry without its url stood for nothing and was dropped: the tracker ran without an upload.
        let noURL = dir.path + "/no-url.yaml"
        try "serial: /dev/ttyACM0\ntargets:\n  - url: http://a.example/\n  - format: json\n".write(
            toFile: noURL, atomically: true, encoding: .utf8)
        let missing = try keeptrack(["config", "check", noURL])
        #expect(missing.status == 1)
        #expect(missing.stderr.contains(":4: targets: an entry without 'url' (each needs one)"), "\(missing.stderr)")
    }
}
