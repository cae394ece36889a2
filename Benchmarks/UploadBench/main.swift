// upload-bench: the outbox's append rate and the uploader's throughput to a running endpoint,
// durable on both sides. Run by tools/bench-upload.py, which starts the endpoint and the peers.
//
//   upload-bench --count 1000000 --url http://127.0.0.1:PORT/v1/locations --token T --dir DIR [--format osmand]
//   upload-bench --count 100000 --url mqtt://127.0.0.1:PORT --spacing 1 --dir DIR   (OwnTracks JSON, QoS 1)
//
// Prints one JSON object: appends per second (batched, 1,000 a transaction), uploads per second,
// peak RSS, and a check that the endpoint holds exactly --count records.
import Formats
import Foundation
import Upload

func argument(_ name: String) -> String? {
    guard let i = CommandLine.arguments.firstIndex(of: name), i + 1 < CommandLine.arguments.count else { return nil }
    return CommandLine.arguments[i + 1]
}

func peakRSSMegabytes() -> Double {
    guard let status = try? String(contentsOfFile: "/proc/self/status", encoding: .utf8) else { return -1 }
    for line in status.split(separator: "\n") where line.hasPrefix("VmHWM:") {
        return Double(line.split(separator: " ", omittingEmptySubsequences: true)[1])! / 1024
    }
    return -1
}

if CommandLine.arguments.contains("--codec") {
    // The JSON batch's encode and decode, alone: what each request costs the two sides' CPU.
    let records = (0..<1000).map { i in
        TrailRecord(device: "bench", sequence: Int64(i + 1), time: 1_715_679_000 + Double(i) * 0.1, latitude: 48.1,
                    longitude: 11.5, altitude: 520, horizontalAccuracy: 4.5, verticalAccuracy: 7.5, speed: 1.25, course: 90)
    }
    var body: [UInt8] = []
    let e0 = ContinuousClock.now
    for _ in 0..<100 { body = JSONBatch.encode(device: "bench", records: records) }
    let e1 = ContinuousClock.now
    for _ in 0..<100 { _ = try JSONBatch.decode(body, now: 2e9) }
    let e2 = ContinuousClock.now
    print("encode \((e1 - e0) / 100) per 1000 records, decode \((e2 - e1) / 100) per 1000 records, \(body.count) bytes")
    exit(0)
}
if CommandLine.arguments.contains("--commit-cost") {
    // What committing costs the tracker: an hour of tracking at --rate fixes a second appended to a
    // fresh outbox, --group records a transaction (1: each record committed as it is decided, the
    // default; 10 at 1 Hz and 100 at 10 Hz: --commit-within 10s), the uploader's acknowledgements
    // every 30 s of it deleting what was sent, as a tracker with a reachable endpoint does.
    // Prints one JSON object: CPU seconds and bytes written (write(2) calls: the WAL and its
    // checkpoints into the database) for the hour, and per record.
    guard let dir = argument("--dir") else {
        FileHandle.standardError.write("usage: upload-bench --commit-cost --dir DIR [--rate HZ] [--group N]\n".data(using: .utf8)!)
        exit(64)
    }
    let rate = Double(argument("--rate") ?? "1")!
    let group = Int(argument("--group") ?? "1")!
    let seconds = Double(argument("--seconds") ?? "3600")!
    var c = Outbox.Configuration()
    c.device = "bench"
    let outbox = try Outbox(path: dir + "/outbox.sqlite", configuration: c)
    let total = Int(seconds * rate)
    var waiting: [TrailRecord] = []
    waiting.reserveCapacity(group)
    var sent: [Int64] = []
    let (cpu0, io0) = (cpuSeconds(), ioCounters())
    var lastAck = 0.0
    for i in 0..<total {
        let t = Double(i) / rate
        waiting.append(TrailRecord(device: "bench", sequence: 0, time: 1_715_679_000 + t,
                                   latitude: 48.1 + Double(i) * 1e-6, longitude: 11.5 + Double(i) * 1e-6,
                                   altitude: 520, horizontalAccuracy: 4.5, verticalAccuracy: 7.5, speed: 1.25,
                                   course: 90))
        if waiting.count >= group {
            sent += try outbox.append(waiting).stored.map(\.sequence)
            waiting.removeAll(keepingCapacity: true)
        }
        if t - lastAck >= 30 {
            try outbox.acknowledge(sent)
            sent.removeAll(keepingCapacity: true)
            lastAck = t
        }
    }
    if !waiting.isEmpty { sent += try outbox.append(waiting).stored.map(\.sequence) }
    try outbox.acknowledge(sent)
    let (cpu1, io1) = (cpuSeconds(), ioCounters())
    let cpu = cpu1 - cpu0, written = io1.written - io0.written, writes = io1.calls - io0.calls
    print("""
        {"rate":\(rate),"group":\(group),"records":\(total),"seconds":\(seconds),"cpuSeconds":\(cpu),\
        "bytesWritten":\(written),"writeCalls":\(writes),"cpuMicrosecondsPerRecord":\(cpu * 1e6 / Double(total)),\
        "bytesPerRecord":\(Double(written) / Double(total)),"pending":\(try outbox.stats().pending)}
        """)
    exit(0)
}

/// This process's CPU time (user and system), in seconds.
func cpuSeconds() -> Double {
    var usage = rusage()
    getrusage(RUSAGE_SELF.rawValue, &usage)
    return Double(usage.ru_utime.tv_sec + usage.ru_stime.tv_sec)
        + Double(usage.ru_utime.tv_usec + usage.ru_stime.tv_usec) / 1e6
}

/// Bytes this process passed to write(2) and its kind, and how many calls (`wchar`, `syscw` of
/// /proc/self/io): what the outbox asks of the disk, before the page cache.
func ioCounters() -> (written: Int, calls: Int) {
    guard let text = try? String(contentsOfFile: "/proc/self/io", encoding: .utf8) else { return (-1, -1) }
    var written = -1, calls = -1
    for line in text.split(separator: "\n") {
        let parts = line.split(separator: " ")
        if parts.first == "wchar:" { written = Int(parts[1]) ?? -1 }
        if parts.first == "syscw:" { calls = Int(parts[1]) ?? -1 }
    }
    return (written, calls)
}

let count = Int(argument("--count") ?? "1000000")!
let batch = Int(argument("--batch") ?? "1000")!
// Seconds between records (OwnTracks' tst is whole seconds: an endpoint keys its records by it).
let spacing = Double(argument("--spacing") ?? "0.1")!
guard let url = argument("--url"), let dir = argument("--dir") else {
    FileHandle.standardError.write("usage: upload-bench --url URL --dir DIR [--count N] [--batch N] [--token T]\n".data(using: .utf8)!)
    exit(64)
}
var c = Outbox.Configuration()
c.device = "bench"
c.maxCount = count + 1
let outbox = try Outbox(path: dir + "/outbox.sqlite", configuration: c)

// 1. Appends, 1,000 a transaction.
let t0 = 1_715_679_000.0
var records: [TrailRecord] = []
records.reserveCapacity(1000)
let appendStart = ContinuousClock.now
var appended = 0
while appended < count {
    records.removeAll(keepingCapacity: true)
    for i in appended..<min(count, appended + 1000) {
        records.append(TrailRecord(device: "bench", sequence: 0, time: t0 + Double(i) * spacing,
                                   latitude: 48.1 + Double(i % 10_000) * 1e-6, longitude: 11.5 + Double(i / 10_000) * 1e-6,
                                   altitude: 520, horizontalAccuracy: 4.5, verticalAccuracy: 7.5, speed: 1.25, course: 90))
    }
    try outbox.append(records)
    appended += records.count
}
let appendSeconds = Double((ContinuousClock.now - appendStart).components.attoseconds) / 1e18
    + Double((ContinuousClock.now - appendStart).components.seconds)
let rssAfterAppend = peakRSSMegabytes()

// 2. Upload everything, durable on both sides (the endpoint commits before it answers).
var u = Uploader.Configuration(url: url)
u.format = UploadFormats.named(argument("--format") ?? "json")!
u.token = argument("--token")
u.maxBatchCount = batch
u.maxBatchBytes = 64 << 20
u.maxWait = 0
u.gzip = .never
let uploader = try Uploader(outbox: outbox, configuration: u)
let uploadStart = ContinuousClock.now
await uploader.run(drain: true)
let elapsed = ContinuousClock.now - uploadStart
let uploadSeconds = Double(elapsed.components.seconds) + Double(elapsed.components.attoseconds) / 1e18
let stats = uploader.stats
let pending = try outbox.stats().pending
await uploader.shutdown()

print("""
    {"count":\(count),"batch":\(batch),"appendSeconds":\(appendSeconds),"appendsPerSecond":\(Double(count) / appendSeconds),\
    "uploadSeconds":\(uploadSeconds),"uploadsPerSecond":\(Double(stats.uploaded) / uploadSeconds),\
    "uploaded":\(stats.uploaded),"requests":\(stats.requests),"retries":\(stats.retries),"pending":\(pending),\
    "peakRSSAfterAppendMB":\(rssAfterAppend),"peakRSSMB":\(peakRSSMegabytes())}
    """)
