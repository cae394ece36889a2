import SystemIO

/// A fix source's failure: what (``code``), where (the device or file ``path``, gpsd's ``host`` and
/// ``port``, the ``line`` and ``byteOffset`` of a log), and why (``errno``, ``loss``, ``underlying``:
/// the `NMEAError` or `TrackFileError` of a log or track file).
///
/// Sources deliver it in their ``Geo/SourceEvent``s (``Geo/SourceEvent/error``); the event's message
/// is its ``description``. It never holds a coordinate.
public struct GPSInputError: Error, Hashable, Sendable, CustomStringConvertible {
    /// The kind of failure.
    public struct Code: RawRepresentable, Hashable, Sendable, CustomStringConvertible {
        public let rawValue: String
        public init(rawValue: String) { self.rawValue = rawValue }
        public var description: String { rawValue }

        /// A device, log or track file could not be opened (``GPSInputError/errno`` or
        /// ``GPSInputError/underlying`` says why).
        public static let cannotOpen = Code(rawValue: "cannot-open")
        /// Opening a device was not permitted (`EACCES`, `EPERM`).
        public static let permissionDenied = Code(rawValue: "permission-denied")
        /// The device is not there (`ENOENT`, `ENXIO`, `ENODEV`): unplugged, not yet plugged in.
        public static let deviceMissing = Code(rawValue: "device-missing")
        /// The path is not a terminal (`tcsetattr` failed).
        public static let notSerialDevice = Code(rawValue: "not-serial-device")
        /// No NMEA sentences arrived at any of ``SerialSource/autoRates``.
        public static let noSentences = Code(rawValue: "no-sentences")
        /// An open device went away or could not be read (``GPSInputError/loss`` says how).
        public static let deviceLost = Code(rawValue: "device-lost")
        /// gpsd could not be reached (``GPSInputError/reason`` is gpsd's library's reason).
        public static let cannotConnect = Code(rawValue: "cannot-connect")
        /// gpsd refused the `WATCH` request.
        public static let watchRefused = Code(rawValue: "watch-refused")
        /// The connection to gpsd was lost while watching (``GPSInputError/loss`` says how).
        public static let connectionLost = Code(rawValue: "connection-lost")
        /// A log or track file could not be read or decoded (``GPSInputError/underlying``).
        public static let unreadable = Code(rawValue: "unreadable")
        /// The consumer fell behind and elements were dropped (``GPSInputError/dropped``).
        public static let consumerTooSlow = Code(rawValue: "consumer-too-slow")
    }

    /// How an open device or connection was lost.
    public enum Loss: Hashable, Sendable {
        /// The device hung up (`POLLHUP`, `POLLERR`).
        case hungUp
        /// Reading the device returned end of file.
        case endOfFile
        /// The device went away (`EIO`, `ENXIO`).
        case vanished(errno: Int32)
        /// Waiting for the device failed.
        case pollFailed(errno: Int32)
        /// Reading failed with this `errno`.
        case readFailed(errno: Int32)
        /// gpsd closed the connection.
        case closed
        /// gpsd sent a line longer than the reader keeps (``GPSInputError/limit`` bytes).
        case lineTooLong
    }

    public var code: Code
    /// The device, log or track file (`-` for standard input).
    public var path: String?
    /// gpsd's host and port.
    public var host: String?
    public var port: String?
    /// 1-based line of a log where the problem is, when known.
    public var line: Int?
    /// 0-based byte offset in the log or track file, when known.
    public var byteOffset: Int64?
    /// The system's error number.
    public var errno: Int32?
    /// How an open device or connection was lost.
    public var loss: Loss?
    /// gpsd's library's reason for ``Code/cannotConnect``; for ``Code/noSentences`` at a fixed rate, the
    /// rate and how much was read.
    public var reason: String?
    /// The longest wait between two attempts to reach gpsd (seconds).
    public var retrySeconds: Double?
    /// The line capacity for ``Loss/lineTooLong``; the elements dropped so far for
    /// ``Code/consumerTooSlow``.
    public var limit: Int?
    /// The cause: the `NMEAError` of a log, the `TrackFileError` of a track file.
    public var underlying: (any Error)?

    public init(
        _ code: Code, path: String? = nil, host: String? = nil, port: String? = nil, line: Int? = nil,
        byteOffset: Int64? = nil, errno: Int32? = nil, loss: Loss? = nil, reason: String? = nil,
        retrySeconds: Double? = nil, limit: Int? = nil, underlying: (any Error)? = nil
    ) {
        self.code = code
        self.path = path
        self.host = host
        self.port = port
        self.line = line
        self.byteOffset = byteOffset
        self.errno = errno
        self.loss = loss
        self.reason = reason
        self.retrySeconds = retrySeconds
        self.limit = limit
        self.underlying = underlying
    }

    /// Equal when they say the same thing about the same place (the cause is compared by its description).
    public static func == (a: Self, b: Self) -> Bool {
        a.code == b.code && a.path == b.path && a.host == b.host && a.port == b.port && a.line == b.line
            && a.byteOffset == b.byteOffset && a.errno == b.errno && a.loss == b.loss && a.reason == b.reason
            && a.retrySeconds == b.retrySeconds && a.limit == b.limit
            && a.underlying.map { "\($0)" } == b.underlying.map { "\($0)" }
    }

    public func hash(into hasher: inout Hasher) {
        hasher.combine(code)
        hasher.combine(path)
        hasher.combine(host)
        hasher.combine(errno)
    }

    public var description: String {
        let device = path ?? ""
        let address = "\(host ?? ""):\(port ?? "")"
        let cause = errno.map(errnoText) ?? ""
        switch code {
        case .permissionDenied:
            return "permission denied opening \(device): add your user to the dialout group "
                + "(sudo usermod -aG dialout $USER, then log in again)"
        case .deviceMissing:
            return "\(device) is not there (receiver unplugged?); waiting for it to appear"
        case .cannotOpen where underlying == nil:
            return "cannot open \(device): \(cause)"
        case .notSerialDevice:
            return "\(device) is not a serial device (\(cause))"
        case .noSentences:
            // A fixed rate says its own (``reason``); auto detection, every rate it tried.
            if let reason { return "no NMEA sentences from \(device) \(reason)" }
            let rates = SerialSource.autoRates.map(String.init).joined(separator: ", ")
            return "no NMEA sentences from \(device) at any of \(rates) baud"
        case .deviceLost:
            return "\(device): \(lossText); reopening when it reappears"
        case .cannotConnect:
            // libgps's "can't get host entry": the name does not resolve, whatever gpsd does.
            let question =
                reason?.contains("host entry") == true
                ? "is \(host ?? "the host") the right name?" : "is gpsd running?"
            return "cannot connect to gpsd at \(address) (\(reason ?? "")); "
                + "\(question) retrying every \(formatSeconds(retrySeconds ?? 0)) at most"
        case .watchRefused:
            return "gpsd refused the WATCH request"
        case .connectionLost:
            return "\(lossText); reconnecting"
        case .consumerTooSlow:
            return "the consumer is too slow: \(limit ?? 0) elements dropped so far"
        default:
            return underlying.map { "\($0)" } ?? "\(code): \(device)"
        }
    }

    /// The loss in words.
    var lossText: String {
        switch loss {
        case .hungUp: "the device hung up"
        case .endOfFile: "the device went away (end of file)"
        case .vanished(let e): "the device went away (\(errnoText(e)))"
        case .pollFailed(let e): "poll failed: \(errnoText(e))"
        case .readFailed(let e) where host != nil: "reading from gpsd failed (\(errnoText(e)))"
        case .readFailed(let e): "read failed: \(errnoText(e))"
        case .closed: "gpsd closed the connection"
        case .lineTooLong: "gpsd sent a line longer than \(limit ?? 0) bytes"
        case nil: "lost"
        }
    }
}
