import Foundation

/// Runs `sql` on the SQLite file at `path` with Debian's `sqlite3` shell: how a test makes a database
/// as an older version of the code left it, without the code under test. Throws when the shell is
/// missing or fails (with what it said).
public func runSQLite(_ path: String, _ sql: String) throws {
    try MissingTool.check("/usr/bin/sqlite3", packages: "sqlite3")
    let process = Process()
    process.executableURL = URL(fileURLWithPath: "/usr/bin/sqlite3")
    process.arguments = [path, sql]
    process.standardOutput = FileHandle.nullDevice
    let errors = Pipe()
    process.standardError = errors
    try process.run()
    let said = errors.fileHandleForReading.readDataToEndOfFile()
    process.waitUntilExit()
    guard process.terminationStatus == 0 else {
        throw SQLiteShellError(status: process.terminationStatus, said: String(decoding: said, as: UTF8.self))
    }
}

/// `sqlite3` exited with `status`, saying `said` on its standard error.
public struct SQLiteShellError: Error, CustomStringConvertible {
    public var status: Int32
    public var said: String
    public var description: String { "sqlite3 exited with \(status): \(said)" }
}
