import Foundation

/// Runs `sql` on the SQLite file at `path` with Debian's `sqlite3` shell: how a test makes a database
/// as an older version of the code left it, without the code under test. Throws when the shell is
/// missing or fails (with what it said). Blocking: call it off the cooperative pool (a test with the
/// `.offThePool` trait, or inside ``offThePool(_:)``).
public func runSQLite(_ path: String, _ sql: String) throws {
    try MissingTool.check("/usr/bin/sqlite3", packages: "sqlite3")
    let r = try runCommand(URL(fileURLWithPath: "/usr/bin/sqlite3"), [path, sql])
    guard r.status == 0 else { throw SQLiteShellError(status: r.status, said: r.errors) }
}

/// `sqlite3` exited with `status`, saying `said` on its standard error.
public struct SQLiteShellError: Error, CustomStringConvertible {
    public var status: Int32
    public var said: String
    public var description: String { "sqlite3 exited with \(status): \(said)" }
}
