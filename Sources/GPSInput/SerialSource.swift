import Geo
import SystemIO
import NMEA

#if canImport(Glibc)
    import Glibc
#endif

/// Fixes from an NMEA receiver on a serial device (`/dev/ttyACM0`, `/dev/ttyUSB0`, a pty).
///
/// Runs on a dedicated thread: opens the device raw (8N1, no echo, no flow control) at the given
/// baud rate, or with ``Baud/auto`` tries the usual rates until checksummed sentences arrive, and
/// decodes with ``NMEADecoder``. An epoch is delivered as soon as the receiver goes quiet for
/// ``Options/idleFlush`` after it, so a fix leaves within a few milliseconds of its last sentence.
///
/// Failures are events, never the end of the stream: a missing device or an unplugged one (EIO,
/// ENXIO, end of file) is reported and the device is reopened every ``Options/retryInterval`` until
/// it reappears; permission denied says how to join the `dialout` group.
public final class SerialSource: FixSource {
    /// A line speed.
    public enum Baud: Hashable, Sendable, CustomStringConvertible {
        case fixed(Int)
        /// Try ``SerialSource/autoRates`` in order until checksummed NMEA arrives.
        case auto

        public static let supported = [4800, 9600, 19200, 38400, 57600, 115_200]

        /// Parses `4800`...`115200` or `auto`.
        public init?(_ text: String) {
            if text == "auto" {
                self = .auto
            } else if let n = Int(text), Baud.supported.contains(n) {
                self = .fixed(n)
            } else {
                return nil
            }
        }

        public var description: String {
            switch self {
            case .fixed(let n): "\(n)"
            case .auto: "auto"
            }
        }
    }

    /// The order `auto` tries: the common rates of USB receivers first.
    public static let autoRates = [9600, 4800, 38400, 115_200, 57600, 19200]

    public struct Options: Sendable {
        public var path: String
        /// The default is ``Baud/auto``.
        public var baud: Baud = .auto
        /// How long `auto` listens at each rate. The default is 1.5 s.
        public var probeSeconds: Double = 1.5
        /// Pause between attempts to reopen a missing device. The default is 1 s.
        public var retryInterval: Double = 1.0
        /// Quiet time that ends an epoch. The default is 0.05 s.
        public var idleFlush: Double = 0.05
        /// Decoder settings.
        public var decoder = NMEADecoder.Options()

        public init(path: String, baud: Baud = .auto) {
            self.path = path
            self.baud = baud
        }
    }

    public let options: Options

    public init(options: Options) {
        self.options = options
    }

    public var name: String { options.path }

    public func makeAsyncIterator() -> SourceIterator {
        let options = self.options
        return WorkerLink.start(name: name, threadName: "keeptrack.serial") { link in
            SerialWorker(options: options, link: link).run()
        }
    }
}

/// The blocking serial loop, on its own thread.
struct SerialWorker {
    let options: SerialSource.Options
    let link: WorkerLink

    func run() {
        var lastProblem: GPSInputError?
        var everOpened = false
        var knownRate: Int?
        let buffer = UnsafeMutableRawBufferPointer.allocate(byteCount: 4096, alignment: 16)
        defer { buffer.deallocate() }

        func report(_ kind: SourceEvent.Kind, _ problem: GPSInputError) {
            // Say each problem once until something changes.
            if lastProblem != problem {
                link.yield(kind, problem)
                lastProblem = problem
            }
        }

        while !link.isStopped {
            let fd = options.path.withCString { open($0, O_RDWR | O_NOCTTY | O_NONBLOCK | O_CLOEXEC) }
            if fd < 0 {
                let problem = SerialWorker.openProblem(path: options.path, errno: errno, everOpened: everOpened)
                report(problem.kind, problem.error)
                link.pause(options.retryInterval)
                continue
            }
            defer { close(fd) }
            if !configure(fd, baud: knownRate ?? firstRate) {
                let e = errno
                report(.error, GPSInputError(.notSerialDevice, path: options.path, errno: e))
                // A path that is no terminal (a file, /dev/null) will not become one: the source
                // ends, as a log that cannot be opened does. One that was a receiver is waited for.
                if e == ENOTTY && !everOpened { break }
                link.pause(options.retryInterval)
                continue
            }
            var rate = knownRate ?? firstRate
            if case .auto = options.baud, knownRate == nil {
                guard let found = detectRate(fd, buffer: buffer) else {
                    if link.isStopped { break }
                    report(.error, GPSInputError(.noSentences, path: options.path))
                    link.pause(options.retryInterval)
                    continue
                }
                rate = found
                knownRate = found
            }
            everOpened = true
            lastProblem = nil
            link.yield(.connected, "reading \(options.path) at \(rate) baud")
            let loss = readLoop(fd, buffer: buffer, rate: rate)
            guard let loss, !link.isStopped else { break }
            report(.disconnected, GPSInputError(.deviceLost, path: options.path, loss: loss))
            if case .auto = options.baud { knownRate = nil }
            link.pause(options.retryInterval)
        }
    }

    /// A failure to open the device: the event's kind and the error.
    struct OpenProblem {
        var kind: SourceEvent.Kind
        var error: GPSInputError
        /// The event's message.
        var text: String { error.description }
    }

    /// What to tell the user when opening the device failed.
    static func openProblem(path: String, errno e: Int32, everOpened: Bool) -> OpenProblem {
        switch e {
        case EACCES, EPERM:
            OpenProblem(kind: .error, error: GPSInputError(.permissionDenied, path: path, errno: e))
        case ENOENT, ENXIO, ENODEV:
            OpenProblem(
                kind: everOpened ? .disconnected : .error, error: GPSInputError(.deviceMissing, path: path, errno: e))
        default:
            OpenProblem(kind: .error, error: GPSInputError(.cannotOpen, path: path, errno: e))
        }
    }

    var firstRate: Int {
        if case .fixed(let n) = options.baud { return n }
        return SerialSource.autoRates[0]
    }

    /// Raw 8N1 at `baud`. Returns `false` when the descriptor is not a terminal.
    func configure(_ fd: Int32, baud: Int) -> Bool {
        var t = termios()
        if tcgetattr(fd, &t) != 0 { return false }
        cfmakeraw(&t)
        t.c_cflag |= tcflag_t(CLOCAL | CREAD)
        t.c_cflag &= ~tcflag_t(CRTSCTS)
        let speed = speedConstant(baud)
        cfsetispeed(&t, speed)
        cfsetospeed(&t, speed)
        return tcsetattr(fd, TCSANOW, &t) == 0
    }

    func speedConstant(_ baud: Int) -> speed_t {
        switch baud {
        case 4800: speed_t(B4800)
        case 9600: speed_t(B9600)
        case 19200: speed_t(B19200)
        case 38400: speed_t(B38400)
        case 57600: speed_t(B57600)
        default: speed_t(B115200)
        }
    }

    /// Tries each rate until three checksummed sentences arrive at it.
    func detectRate(_ fd: Int32, buffer: UnsafeMutableRawBufferPointer) -> Int? {
        for rate in SerialSource.autoRates {
            if link.isStopped { return nil }
            guard configure(fd, baud: rate) else { return nil }
            tcflush(fd, TCIFLUSH)
            var decoder = NMEADecoder()
            let deadline = monotonicSeconds() + options.probeSeconds
            while monotonicSeconds() < deadline && !link.isStopped {
                let ready = waitForInput(fd, milliseconds: 100)
                if ready <= 0 { continue }
                let n = read(fd, buffer.baseAddress, buffer.count)
                if n <= 0 {
                    if n < 0 && (errno == EAGAIN || errno == EINTR) { continue }
                    return nil
                }
                try? decoder.decode(UnsafeRawBufferPointer(rebasing: buffer[0..<n])) { _ in }
                // Three checksummed sentences: noise at a wrong rate never gets that far.
                if decoder.statistics.sentences >= 3 { return rate }
            }
        }
        return nil
    }

    /// Polls `fd` for input and the link's wake descriptor (a stop) for up to `milliseconds`
    /// (-1: no limit). Returns `poll`'s result for `fd` alone: 1 when `fd` has something
    /// (`revents` says what), 0 on time-out or a wake, -1 on failure.
    func waitForInput(_ fd: Int32, milliseconds: Int32, revents: UnsafeMutablePointer<Int16>? = nil) -> Int32 {
        var fds = [
            pollfd(fd: fd, events: Int16(POLLIN), revents: 0),
            pollfd(fd: link.wakeFD, events: Int16(POLLIN), revents: 0),
        ]
        let ready = poll(&fds, 2, milliseconds)
        if ready < 0 { return -1 }
        if fds[1].revents != 0 { link.runJobs(woken: true) }
        revents?.pointee = fds[0].revents
        return fds[0].revents != 0 ? 1 : 0
    }

    /// Reads and decodes until the device goes away or the consumer stops; returns how the device
    /// was lost, `nil` when stopped.
    func readLoop(_ fd: Int32, buffer: UnsafeMutableRawBufferPointer, rate: Int) -> GPSInputError.Loss? {
        var decoder = NMEADecoder(options: options.decoder)
        // A fixed rate that is not the receiver's reads noise: said once, when this much came
        // without one sentence (a few seconds of a receiver's output), rather than nothing forever.
        var heard = false
        let enough: Int64 = 4096
        var sinceData = true
        var lastData = monotonicSeconds()
        while !link.isStopped {
            // Wake when data arrives, when the epoch in progress is due, or at a stop (the link's
            // wake descriptor): no busy polling on a battery, no wait outlasting a stop.
            let timeoutMs = sinceData ? max(1, Int((lastData + options.idleFlush - monotonicSeconds()) * 1000) + 1) : -1
            var revents: Int16 = 0
            let ready = waitForInput(fd, milliseconds: Int32(timeoutMs), revents: &revents)
            if ready < 0 {
                if errno == EINTR { continue }
                return .pollFailed(errno: errno)
            }
            if link.isStopped { break }
            if ready == 0 {
                if sinceData && monotonicSeconds() - lastData >= options.idleFlush {
                    decoder.flush { link.yield($0) }
                    sinceData = false
                }
                continue
            }
            if revents & Int16(POLLHUP | POLLERR | POLLNVAL) != 0 && revents & Int16(POLLIN) == 0 {
                decoder.flush { link.yield($0) }
                return .hungUp
            }
            let n = read(fd, buffer.baseAddress, buffer.count)
            if n > 0 {
                try? decoder.decode(UnsafeRawBufferPointer(rebasing: buffer[0..<n])) { link.yield($0) }
                sinceData = true
                lastData = monotonicSeconds()
                if !heard, case .fixed = options.baud {
                    let statistics = decoder.statistics
                    if statistics.sentences > 0 {
                        heard = true
                    } else if statistics.bytes >= enough {
                        heard = true
                        let reason =
                            "at \(rate) baud in \(statistics.bytes) bytes: the wrong baud rate? (auto detection finds it)"
                        link.yield(.error, GPSInputError(.noSentences, path: options.path, reason: reason))
                    }
                }
            } else if n == 0 {
                decoder.flush { link.yield($0) }
                return .endOfFile
            } else {
                let e = errno
                if e == EAGAIN || e == EINTR { continue }
                decoder.flush { link.yield($0) }
                return e == EIO || e == ENXIO ? .vanished(errno: e) : .readFailed(errno: e)
            }
        }
        decoder.flush { link.yield($0) }
        return nil
    }
}
