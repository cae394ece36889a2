import Geo
import NMEA

/// What a file replay reads its bytes with: NMEA's decoder (``NMEALogSource``) or a track file's
/// reader (``TrackFileSource``). Everything else, the reading in chunks, the pacing, the log clock,
/// the loops, the progress and the events, is ``FileReplay``'s, the same for every format.
protocol ReplayFormat {
    associatedtype Statistics: Hashable & Sendable
    /// Whether the log clock only moves forward (a track file's times may go back: a waypoint
    /// before its track); else it follows every fix.
    static var clockOnlyForward: Bool { get }
    /// What the end-of-pass event calls the input (`end of log after pass 1`).
    static var inputNoun: String { get }
    /// The counters of the current pass.
    var statistics: Statistics { get }
    /// A new pass over the file begins: forget what the previous pass left.
    mutating func startPass()
    /// Reads the next bytes, delivering each fix they complete.
    mutating func feed(_ bytes: UnsafeRawBufferPointer, _ emit: (Fix) -> Void) throws(GPSInputError)
    /// The end of the file: delivers what is pending.
    mutating func finish(_ emit: (Fix) -> Void) throws(GPSInputError)
    /// Reading the file failed: delivers what is complete, and returns the error to report.
    mutating func readFailed(_ error: NMEAError, _ emit: (Fix) -> Void) -> GPSInputError
    /// The file could not be opened: the error to report.
    func openFailed(_ error: NMEAError) -> GPSInputError
    /// A fix as read, made ready for delivery (an assumed accuracy).
    func prepared(_ fix: Fix) -> Fix
}

/// The iterator of a file replay, whatever its format: reads a chunk when what was read ahead has
/// gone out, and delivers the fixes through ``PacedReplay`` (pacing, loops, the log clock).
///
/// Reading happens on the consumer's task: the next chunk is read when the fixes of the previous
/// one have been consumed, so a fast replay never drops anything.
struct FileReplay<Format: ReplayFormat> {
    let state: ReplayState<Format.Statistics>
    let path: String
    /// The source's name, for its events.
    let sourceName: String
    let speed: Double?
    let loop: Bool
    var format: Format
    var file: NMEAFileReader?
    /// What was read ahead, pacing and looping.
    var replay: PacedReplay
    var finished = false
    var started = false
    let buffer: ReadBuffer

    init(
        state: ReplayState<Format.Statistics>, path: String, sourceName: String, speed: Double?, loop: Bool,
        format: Format
    ) {
        self.state = state
        self.path = path
        self.sourceName = sourceName
        self.speed = speed
        self.loop = loop
        self.format = format
        self.buffer = ReadBuffer(size: 256 * 1024)
        self.replay = state.makeReplay(speed: speed, clockOnlyForward: Format.clockOnlyForward)
    }

    /// The next fix or event: read ahead, or after reading the next chunk; `nil` at the end.
    mutating func next() async -> SourceElement? {
        while true {
            if let element = replay.takeQueued() {
                guard case .fix(let fix) = element else { return element }
                let (paced, position) = await replay.deliver(format.prepared(fix))
                state.delivered(reaching: position)
                return .fix(paced)
            }
            if finished || Task.isCancelled { return nil }
            await fill()
        }
    }

    /// Reads the next chunk into the replay's queue (opening the file for a pass first).
    mutating func fill() async {
        // A chunk decodes without suspending: let the rest of the program (and the other tasks of
        // the cooperative pool) run between chunks, as they would between fixes.
        await Task.yield()
        if !started {
            started = true
            replay.startPass(after: state.current.passes)
            open()
            if finished { return }
        }
        guard let file else {
            finished = true
            return
        }
        // A pipe or terminal (`-`) may stay silent: look again every 50 ms of the replay's clock
        // rather than block the task in a read, so that cancelling the consumer stops it at once.
        while !file.isReadable() {
            if Task.isCancelled {
                finished = true
                return
            }
            try? await state.clock.sleep(for: .milliseconds(50))
        }
        var collected: [SourceElement] = []
        swap(&collected, &replay.queue)
        defer { swap(&collected, &replay.queue) }
        var fixes = 0
        func emit(_ fix: Fix) {
            collected.append(.fix(fix))
            fixes += 1
        }
        do throws(GPSInputError) {
            let n: Int
            do {
                n = try buffer.read(from: file)
            } catch {
                // Nothing read before a read error is lost: what is complete goes out first.
                throw format.readFailed(error, emit)
            }
            if n > 0 {
                try format.feed(UnsafeRawBufferPointer(rebasing: buffer.storage[0..<n]), emit)
            } else {
                try format.finish(emit)
            }
            // At the end of the file, every byte was read (a gzip trailer included).
            replay.chunk = (start: replay.chunk.end, end: file.position, fixes: fixes, delivered: 0)
            state.read(upTo: replay.chunk.end, fixes: fixes, statistics: format.statistics)
            if n == 0 { endOfPass(&collected) }
        } catch {
            collected.append(.event(SourceEvent(.error, source: sourceName, error: error)))
            let statistics = format.statistics
            state.progress.withLock { $0.statistics = statistics }
            finished = true
        }
    }

    /// Opens the file for a pass; on the first pass, the event that says so goes out first.
    mutating func open() {
        do {
            let f = try NMEAFileReader(path: path)
            file = f
            format.startPass()
            if let event = state.opened(f, source: sourceName, speed: speed, replay: &replay) {
                replay.queue.append(event)
            }
        } catch {
            replay.queue.append(.event(SourceEvent(.error, source: sourceName, error: format.openFailed(error))))
            finished = true
        }
    }

    /// The end of the file: says so, then ends, or starts the next pass (``loop``; not standard
    /// input, which can't be read twice).
    mutating func endOfPass(_ collected: inout [SourceElement]) {
        let passes = state.passEnded()
        collected.append(
            .event(
                SourceEvent(.endOfInput, source: sourceName, message: "end of \(Format.inputNoun) after pass \(passes)")
            ))
        file = nil
        if loop && path != "-" {
            started = false
        } else {
            finished = true
        }
    }
}

/// The chunk buffer of a replay (a class so the iterator stays cheap to copy).
final class ReadBuffer {
    let storage: UnsafeMutableRawBufferPointer

    init(size: Int) {
        storage = UnsafeMutableRawBufferPointer.allocate(byteCount: size, alignment: 64)
    }

    deinit { storage.deallocate() }

    func read(from reader: NMEAFileReader) throws(NMEAError) -> Int {
        try reader.read(into: storage)
    }
}
