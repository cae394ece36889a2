import Crypto
import Formats
import Geo
import GRDB

#if canImport(Glibc)
import Glibc
#endif

/// Per-device credentials (`keeptrack serve devices add|list|revoke`): one token per device, stored
/// as its SHA-256 digest. A token is 32 random bytes (256 bits from the system's generator), so a
/// plain digest is as hard to invert as the token is to guess; no salt or stretching is needed, and
/// a request's token is found by its digest alone.
extension TrackStore {
    /// A device allowed to send with a token of its own.
    public struct Credential: Hashable, Sendable {
        public var device: String
        /// When the token was made (seconds since 1970).
        public var created: Double
    }

    /// Why a credential can't be added.
    public struct CredentialError: Error, CustomStringConvertible {
        public var description: String
    }

    static func registerCredentialMigrations(_ m: inout DatabaseMigrator) {
        m.registerMigration("v4-credentials") { db in
            try db.execute(sql: """
                CREATE TABLE credentials (
                    device TEXT PRIMARY KEY,
                    digest TEXT NOT NULL UNIQUE,
                    created REAL NOT NULL
                ) WITHOUT ROWID;
                """)
        }
    }

    /// The SHA-256 digest a token is stored as, in hex.
    static func digest(token: String) -> String {
        let hex = Array("0123456789abcdef".utf8)
        var out: [UInt8] = []
        for byte in SHA256.hash(data: Array(token.utf8)) {
            out += [hex[Int(byte >> 4)], hex[Int(byte & 15)]]
        }
        return String(decoding: out, as: UTF8.self)
    }

    /// A new random token: 32 bytes from the system's generator, base64url (43 characters).
    static func newToken() -> String {
        var generator = SystemRandomNumberGenerator()
        return Base64URL.encode((0..<32).map { _ in UInt8.random(in: 0...255, using: &generator) })
    }

    /// What is wrong with `device` as an id to give a token to, or `nil`.
    public static func credentialProblem(device: String) -> String? {
        if device.isEmpty { return "the device id is empty" }
        if device.utf8.count > 200 { return "the device id is longer than 200 bytes" }
        if device.unicodeScalars.contains(where: { $0.value < 0x20 || $0.value == 0x7F }) {
            return "the device id contains a control character"
        }
        return nil
    }

    /// Gives `device` a new token and returns it: the only time it is seen, the store keeps its
    /// digest.
    ///
    /// - Throws: ``CredentialError`` when the id is not usable or the device has a token already
    ///   (revoke it first).
    public func addCredential(device: String, now: Double) throws -> String {
        if let problem = Self.credentialProblem(device: device) { throw CredentialError(description: problem) }
        let token = Self.newToken()
        try pool.write { db in
            if try Bool.fetchOne(db, sql: "SELECT EXISTS(SELECT 1 FROM credentials WHERE device = ?)",
                                 arguments: [device]) == true {
                throw CredentialError(description: "device '\(device)' has a token already; revoke it first")
            }
            try db.execute(sql: "INSERT INTO credentials (device, digest, created) VALUES (?, ?, ?)",
                           arguments: [device, Self.digest(token: token), now])
        }
        return token
    }

    /// Every device with a token, by id.
    public func credentials() throws -> [Credential] {
        try pool.read { db in
            try Row.fetchAll(db, sql: "SELECT device, created FROM credentials ORDER BY device")
                .map { Credential(device: $0[0], created: $0[1]) }
        }
    }

    /// Removes the token of `device`; `false` when it had none. Its stored points stay.
    public func revokeCredential(device: String) throws -> Bool {
        try pool.write { db in
            try db.execute(sql: "DELETE FROM credentials WHERE device = ?", arguments: [device])
            return db.changesCount > 0
        }
    }

    /// The device whose token `token` is, or `nil`.
    public func credentialDevice(token: String) throws -> String? {
        let digest = Self.digest(token: token)
        return try pool.read { db in
            try String.fetchOne(db, sql: "SELECT device FROM credentials WHERE digest = ?", arguments: [digest])
        }
    }

    /// Whether `device` has a token (an OsmAnd sender is then known, as a device registered in Traccar).
    public func hasCredential(device: String) throws -> Bool {
        try pool.read { db in
            try Bool.fetchOne(db, sql: "SELECT EXISTS(SELECT 1 FROM credentials WHERE device = ?)",
                              arguments: [device]) ?? false
        }
    }

    /// Whether any device has a token (then requests must authenticate).
    public func hasCredentials() throws -> Bool {
        try pool.read { db in try Bool.fetchOne(db, sql: "SELECT EXISTS(SELECT 1 FROM credentials)") ?? false }
    }
}

extension TrackStore {
    /// `keeptrack serve devices ACTION [ID]` on the store at `database`: `add ID` makes a token and
    /// returns it (one line, the only time it is shown), `list` one line per device with a token
    /// (`ID<TAB>created ISO 8601`), `revoke ID` removes a device's token.
    ///
    /// - Throws: ``CredentialError`` naming what is wrong: the action, a missing id, a device that
    ///   has a token already or none to revoke, a database that is missing or can't be opened.
    public static func credentialCommand(_ action: String, device: String?, database: String,
                                         now: Double = WallClock.seconds()) throws -> String {
        guard ["add", "list", "revoke"].contains(action) else {
            throw CredentialError(description: "devices: '\(action)' is not add, list or revoke")
        }
        guard action == "list" || device != nil else {
            throw CredentialError(description: "devices \(action) needs a device id: keeptrack serve devices \(action) ID")
        }
        if action != "add" && access(database, F_OK) != 0 {
            throw CredentialError(description: "no endpoint database at \(database): name one with --db")
        }
        let store: TrackStore
        do {
            store = try TrackStore(path: database)
        } catch {
            throw CredentialError(description: "cannot open the database \(database): \(error)")
        }
        switch (action, device) {
        case ("add", let id?):
            return try store.addCredential(device: id, now: now) + "\n"
        case ("revoke", let id?):
            guard try store.revokeCredential(device: id) else {
                throw CredentialError(description: "device '\(id)' has no token in \(database)")
            }
            return "revoked \(id)\n"
        default:
            return try store.credentials().map { "\($0.device)\t\(ISOTime.string($0.created))\n" }.joined()
        }
    }
}
