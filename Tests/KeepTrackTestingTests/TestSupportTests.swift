import Foundation
import KeepTrackTesting
import Testing

#if canImport(Glibc)
    import Glibc
#endif

/// The test support every suite relies on: directories that go away, ports nobody else takes, and
/// a missing program named by its Debian package.
@Suite("Test support: temporary directories, ports, missing tools", .offThePool)
struct TestSupportTests {
    @Test func aTemporaryDirectoryIsRemovedWhenItsScopeEnds() throws {
        let path = try withTemporaryDirectory { dir in
            try "x".write(toFile: dir + "/file", atomically: true, encoding: .utf8)
            #expect(FileManager.default.fileExists(atPath: dir + "/file"))
            return dir
        }
        #expect(!FileManager.default.fileExists(atPath: path))
    }

    @Test func aTemporaryDirectoryIsRemovedWhenItsScopeThrows() throws {
        struct Failed: Error {}
        var seen = ""
        #expect(throws: Failed.self) {
            try withTemporaryDirectory("keeptrack-throws") { dir in
                seen = dir
                throw Failed()
            }
        }
        #expect(seen.hasPrefix("/tmp/keeptrack-throws-"))
        #expect(!FileManager.default.fileExists(atPath: seen))
    }

    @Test func aFixturesDirectoryLastsUntilRemoved() async throws {
        let directory = try TemporaryDirectory("keeptrack-fixture")
        let other = try TemporaryDirectory("keeptrack-fixture")
        #expect(directory.path != other.path)
        try await withTemporaryDirectory { dir in
            await Task.yield()
            #expect(dir != directory.path)
        }
        #expect(FileManager.default.fileExists(atPath: directory.path))
        directory.remove()
        other.remove()
        #expect(!FileManager.default.fileExists(atPath: directory.path))
    }

    @Test func aReservedPortRefusesConnectionsAndCannotBeBoundUntilReleased() throws {
        let port = try ReservedPort()
        #expect(port.number > 0)
        #expect(connect(to: port.number) == ECONNREFUSED)
        #expect(bindFails(port.number) == EADDRINUSE)
        port.release()
        #expect(bindFails(port.number) == 0)
    }

    @Test func candidatePortsAreFreeAndDistinct() {
        let ports = (0..<20).map { _ in LoopbackPorts.candidate() }
        #expect(Set(ports).count == ports.count)
        #expect(ports.allSatisfy { $0 >= 20_000 && $0 < 32_768 })
    }

    @Test func aTakenPortIsRetriedOnAnotherAndAFixedOneIsNot() throws {
        var tried: [Int] = []
        let got = try LoopbackPorts.retrying(port: nil) { candidate in
            tried.append(candidate)
            if tried.count < 3 { throw LoopbackPorts.AddressInUse(port: candidate, said: "Address already in use") }
            return candidate
        }
        #expect(tried.count == 3 && Set(tried).count == 3 && got == tried.last)
        #expect(throws: LoopbackPorts.AddressInUse.self) {
            try LoopbackPorts.retrying(port: 1234) { throw LoopbackPorts.AddressInUse(port: $0, said: "in use") }
        }
        #expect {
            try LoopbackPorts.retrying(port: nil, attempts: 2) {
                throw LoopbackPorts.AddressInUse(port: $0, said: "in use")
            }
        } throws: { ($0 as? PortError)?.code == .inUse && "\($0)".contains("every port tried") }
    }

    @Test func mosquittoOnATakenPortSaysSo() throws {
        let taken = try ReservedPort()
        #expect(throws: LoopbackPorts.AddressInUse.self) { _ = try Broker(port: taken.number) }
    }

    @Test func postgresOnATakenPortSaysSo() async throws {
        let taken = try ReservedPort()
        await #expect(throws: LoopbackPorts.AddressInUse.self) {
            _ = try await offThePool { try Postgres(port: taken.number) }
        }
    }

    @Test func missingProgramsNameTheirDebianPackage() throws {
        #expect {
            _ = try Broker(executable: "/nonexistent/mosquitto")
        } throws: { error in
            let said = "\(error)"
            return said.contains("/nonexistent/mosquitto is not installed")
                && said.contains("install the Debian package mosquitto") && said.contains("tools/setup")
        }
        #expect {
            _ = try Postgres(bin: "/nonexistent/bin")
        } throws: { "\($0)".contains("the Debian package postgresql-15 postgresql-15-postgis-3") }
        #expect {
            _ = try GPSFake.start("walk-15min.nmea", gpsfake: "/nonexistent/gpsfake")
        } throws: { "\($0)".contains("the Debian package gpsd gpsd-clients") }
        #expect {
            _ = try GPSFake.start("walk-15min.nmea", gpsd: "/nonexistent/gpsd")
        } throws: { "\($0)".contains("/nonexistent/gpsd is not installed: install the Debian package gpsd ") }
    }
}

/// `errno` of a connection to 127.0.0.1:`port`, 0 when it connected.
private func connect(to port: Int) -> Int32 {
    let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
    defer { close(fd) }
    var address = loopback(port)
    let status = withUnsafePointer(to: &address) {
        $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
            Glibc.connect(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size))
        }
    }
    return status == 0 ? 0 : errno
}

/// `errno` of a bind to 127.0.0.1:`port`, 0 when it bound (and was closed again).
private func bindFails(_ port: Int) -> Int32 {
    let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
    defer { close(fd) }
    var address = loopback(port)
    let status = withUnsafePointer(to: &address) {
        $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
            bind(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size))
        }
    }
    return status == 0 ? 0 : errno
}

private func loopback(_ port: Int) -> sockaddr_in {
    var address = sockaddr_in()
    address.sin_family = sa_family_t(AF_INET)
    address.sin_port = UInt16(port).bigEndian
    address.sin_addr.s_addr = inet_addr("127.0.0.1")
    return address
}
