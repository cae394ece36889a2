import TrackStore

/// A PostgreSQL connection URL, as `keeptrack serve --db` takes it (libpq's URI form, the parts a
/// store needs):
///
/// - `postgres://USER[:PASSWORD]@HOST[:PORT]/DATABASE` (or `postgresql://`); the port defaults to 5432.
/// - `?sslmode=disable|prefer|require|verify-ca|verify-full` (libpq's meanings: `prefer`, the default,
///   tries TLS and falls back to plain; `require` encrypts without checking the certificate;
///   `verify-ca`/`verify-full` check it against the system's CAs or `sslrootcert=FILE`).
/// - A Unix socket: `?host=/DIR` (or a host that is a percent-encoded path, `%2Ftmp%2Fdir`): the socket
///   `DIR/.s.PGSQL.PORT`, as libpq names it.
/// - The password may also come from `PGPASSWORD` when the URL has none.
public struct PostgresURL: Sendable, Equatable, CustomStringConvertible {
    public enum SSLMode: String, Sendable, CaseIterable {
        case disable, prefer, require
        case verifyCA = "verify-ca"
        case verifyFull = "verify-full"
    }

    public var user: String
    public var password: String?
    /// A host name or address; `nil` with a Unix socket.
    public var host: String?
    public var port: Int
    /// The directory of the server's Unix socket.
    public var socketDirectory: String?
    public var database: String
    public var sslMode: SSLMode = .prefer
    /// `sslrootcert`: a PEM file of CAs for `verify-ca`/`verify-full`.
    public var rootCertificate: String?

    /// Whether `text` is a PostgreSQL URL (and not a file name).
    public static func isURL(_ text: String) -> Bool {
        text.hasPrefix("postgres://") || text.hasPrefix("postgresql://")
    }

    /// The Unix socket's path, with ``socketDirectory``.
    public var socketPath: String? { socketDirectory.map { "\($0)/.s.PGSQL.\(port)" } }

    /// The URL without its password (for logs and the listening line).
    public var description: String {
        var query: [String] = []
        if let socketDirectory { query.append("host=\(PercentEncoding.encode(socketDirectory))") }
        if sslMode != .prefer { query.append("sslmode=\(sslMode.rawValue)") }
        let authority = socketDirectory == nil ? "\(host ?? ""):\(port)" : (port == 5432 ? "" : ":\(port)")
        return "postgres://\(PercentEncoding.encode(user))@\(authority)/\(PercentEncoding.encode(database))"
            + (query.isEmpty ? "" : "?" + query.joined(separator: "&"))
    }

    /// Parses `text`; `environment` gives `PGPASSWORD` when the URL has no password.
    ///
    /// - Throws: ``TrackStoreError`` naming the part that is wrong.
    public init(parsing text: String, environment: [String: String] = [:]) throws(TrackStoreError) {
        func fail(_ why: String) -> TrackStoreError {
            TrackStoreError(
                .invalidURL,
                "the PostgreSQL URL: \(why) "
                    + "(expected postgres://USER@HOST:PORT/DATABASE[?sslmode=...] or postgres://USER@/DATABASE?host=/SOCKET/DIR)"
            )
        }
        func decode(_ s: Substring, _ what: String) throws(TrackStoreError) -> String {
            guard let d = PercentEncoding.decode(String(s)) else {
                throw fail("\(what) is not valid percent-encoded UTF-8")
            }
            return d
        }
        guard let scheme = text.range(of: "://"), Self.isURL(text) else { throw fail("not a postgres:// URL") }
        var rest = text[scheme.upperBound...]
        var queryText: Substring = ""
        if let q = rest.firstIndex(of: "?") {
            queryText = rest[rest.index(after: q)...]
            rest = rest[..<q]
        }
        guard let slash = rest.firstIndex(of: "/") else { throw fail("no database name") }
        database = try decode(rest[rest.index(after: slash)...], "the database name")
        guard !database.isEmpty else { throw fail("no database name") }
        var authority = rest[..<slash]
        guard let at = authority.lastIndex(of: "@") else { throw fail("no user name (USER@)") }
        let userInfo = authority[..<at]
        authority = authority[authority.index(after: at)...]
        if let colon = userInfo.firstIndex(of: ":") {
            user = try decode(userInfo[..<colon], "the user name")
            password = try decode(userInfo[userInfo.index(after: colon)...], "the password")
        } else {
            user = try decode(userInfo, "the user name")
        }
        guard !user.isEmpty else { throw fail("no user name (USER@)") }
        port = 5432
        var hostText: Substring = authority
        if authority.hasPrefix("[") {
            guard let close = authority.firstIndex(of: "]") else { throw fail("an IPv6 address without its ']'") }
            hostText = authority[authority.index(after: authority.startIndex)..<close]
            let after = authority[authority.index(after: close)...]
            if after.hasPrefix(":") {
                guard let p = Int(after.dropFirst()), (1...65535).contains(p) else {
                    throw fail("the port is not 1-65535")
                }
                port = p
            }
        } else if let colon = authority.lastIndex(of: ":") {
            hostText = authority[..<colon]
            guard let p = Int(authority[authority.index(after: colon)...]), (1...65535).contains(p) else {
                throw fail("the port is not 1-65535")
            }
            port = p
        }
        let decodedHost = try decode(hostText, "the host")
        if decodedHost.hasPrefix("/") {
            socketDirectory = decodedHost
        } else if !decodedHost.isEmpty {
            host = decodedHost
        }
        for item in queryText.split(separator: "&") where !item.isEmpty {
            let pair = item.split(separator: "=", maxSplits: 1, omittingEmptySubsequences: false)
            let key = String(pair[0])
            let value = try decode(pair.count > 1 ? pair[1] : "", key)
            switch key {
            case "sslmode":
                guard let mode = SSLMode(rawValue: value) else {
                    throw fail(
                        "sslmode '\(value)' is not one of " + SSLMode.allCases.map(\.rawValue).joined(separator: ", "))
                }
                sslMode = mode
            case "host":
                guard value.hasPrefix("/") else { throw fail("host= takes a socket directory (an absolute path)") }
                socketDirectory = value
                host = nil
            case "port":
                guard let p = Int(value), (1...65535).contains(p) else { throw fail("the port is not 1-65535") }
                port = p
            case "sslrootcert": rootCertificate = value
            case "user": user = value
            case "password": password = value
            case "dbname": database = value
            case "application_name", "connect_timeout": break
            default: throw fail("unknown parameter '\(key)'")
            }
        }
        guard host != nil || socketDirectory != nil else {
            throw fail("no host: name one (HOST:PORT) or a socket directory (?host=/DIR)")
        }
        if password == nil { password = environment["PGPASSWORD"] }
    }
}
