import ConfigFile
import Foundation
import KeepTrackTesting
import Testing
import TrackServer

@testable import keeptrack

/// `serve --max-accuracy`: the outlier threshold onto the server's settings (default 200 m), from the
/// command line or serve's configuration file; a threshold that is no distance is refused naming
/// the flag.
@Suite("keeptrack serve --max-accuracy")
struct ServeMaxAccuracyCommandTests {
    @Test func takesTheThresholdFromTheOptionOrTheFile() throws {
        #expect(try Serve.parse([]).serverConfiguration().maxAccuracy == 200)
        #expect(try Serve.parse(["--max-accuracy", "500"]).serverConfiguration().maxAccuracy == 500)
        let dir = try TemporaryDirectory("keeptrack-serve-max-accuracy").path
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let file = dir + "/serve.yaml"
        try "max-accuracy: 350\n".write(toFile: file, atomically: true, encoding: .utf8)
        let fromFile = try ServeConfig.insertingFile(into: ["serve", "--config", file])
        #expect(try Serve.parse(Array(fromFile.dropFirst())).serverConfiguration().maxAccuracy == 350)
        // The command line wins.
        let both = try ServeConfig.insertingFile(into: ["serve", "--config", file, "--max-accuracy", "80"])
        #expect(try Serve.parse(Array(both.dropFirst())).serverConfiguration().maxAccuracy == 80)
    }

    @Test(arguments: [["--max-accuracy", "0"], ["--max-accuracy=-5"], ["--max-accuracy", "inf"]])
    func refusesAThresholdThatIsNoDistance(arguments: [String]) {
        #expect { _ = try Serve.parse(arguments) } throws: {
            Serve.message(for: $0) == "--max-accuracy must be a number of metres above 0."
        }
    }
}
