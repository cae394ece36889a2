// nmea-bench: measures the NMEA decoder on a file, for tools/bench.py.
//
//   nmea-bench decode FILE     decode to fixes (no output formatting)
//   nmea-bench checksum FILE   frame lines and verify checksums only: the practical ceiling
//   nmea-bench jsonl FILE      decode and format every fix as `keeptrack decode`'s JSON Lines, written
//                              to /dev/null in 1 MiB chunks: the decoder plus the output writer
//
// Prints one JSON object. When run with tools/bench.py's malloc-counting preload library, it also
// reports the allocations made while decoding everything after the first 8 MiB (steady state).

import BenchSupport
import Formats
import Geo
import NMEA

#if canImport(Glibc)
import Glibc
#endif

func cpuSeconds() -> Double {
    var usage = rusage()
    getrusage(RUSAGE_SELF.rawValue, &usage)
    return Double(usage.ru_utime.tv_sec) + Double(usage.ru_utime.tv_usec) / 1e6 + Double(usage.ru_stime.tv_sec)
        + Double(usage.ru_stime.tv_usec) / 1e6
}

func fail(_ message: String) -> Never {
    var line = "nmea-bench: " + message + "\n"
    line.withUTF8 { _ = write(2, $0.baseAddress, $0.count) }
    exit(2)
}

let args = CommandLine.arguments
guard args.count == 3, ["decode", "checksum", "jsonl"].contains(args[1]) else {
    fail("usage: nmea-bench decode|checksum|jsonl FILE")
}
let path = args[2]
let bufferSize = 1 << 20
let buffer = UnsafeMutableRawBufferPointer.allocate(byteCount: bufferSize + 4096, alignment: 64)
let reader: NMEAFileReader
do { reader = try NMEAFileReader(path: path) } catch { fail("\(error)") }

let warmupBytes: Int64 = 8 << 20
var total: Int64 = 0
var steadyStartMallocs: UInt64?
var steadyStartSentences = 0
let startWall = now()
let startCPU = cpuSeconds()
var result: [String: String] = ["mode": "\"\(args[1])\""]

if args[1] == "decode" || args[1] == "jsonl" {
    var decoder = NMEADecoder()
    var fixes = 0
    var withPosition = 0
    var latitudeSum = 0.0  // consumed so the optimizer cannot drop the work
    let json = args[1] == "jsonl"
    let sink = open("/dev/null", O_WRONLY)
    var writer = FixWriter(format: .jsonl)
    var out: [UInt8] = []
    out.reserveCapacity(bufferSize + 4096)
    var outputBytes = 0
    do {
        while true {
            let n = try reader.read(into: UnsafeMutableRawBufferPointer(rebasing: buffer[0..<bufferSize]))
            if n == 0 { break }
            if steadyStartMallocs == nil && total >= warmupBytes, let mallocCount {
                steadyStartMallocs = mallocCount()
                steadyStartSentences = decoder.statistics.sentences
            }
            try decoder.decode(UnsafeRawBufferPointer(rebasing: buffer[0..<n])) { fix in
                fixes += 1
                if fix.hasPosition {
                    withPosition += 1
                    latitudeSum += fix.coordinate!.latitude
                    if json { writer.write(fix, into: &out) }
                }
            }
            if out.count >= bufferSize {
                outputBytes += out.withUnsafeBytes { write(sink, $0.baseAddress, $0.count) }
                out.removeAll(keepingCapacity: true)
            }
            total += Int64(n)
        }
        try decoder.finish { fix in
            fixes += 1
            if fix.hasPosition { withPosition += 1 }
        }
    } catch { fail("\(error)") }
    outputBytes += out.withUnsafeBytes { write(sink, $0.baseAddress, $0.count) }
    let endMallocs = mallocCount?()
    let s = decoder.statistics
    if json { result["outputBytes"] = "\(outputBytes)" }
    result["sentences"] = "\(s.sentences)"
    result["fixes"] = "\(fixes)"
    result["positionFixes"] = "\(withPosition)"
    result["rejected"] = "\(s.rejected)"
    result["latitudeSum"] = "\(latitudeSum)"
    if let start = steadyStartMallocs, let end = endMallocs {
        result["steadyMallocs"] = "\(end - start)"
        result["steadySentences"] = "\(s.sentences - steadyStartSentences)"
    }
} else {
    // Frame every '$'/'!' line and verify its XOR checksum; nothing else.
    var good = 0
    var bad = 0
    var carried = 0
    do {
        while true {
            let n = try reader.read(into: UnsafeMutableRawBufferPointer(rebasing: buffer[carried..<(carried + bufferSize - 4096)]))
            let avail = carried + n
            let base = buffer.baseAddress!.assumingMemoryBound(to: UInt8.self)
            var i = 0
            var lastComplete = 0
            while i < avail {
                guard let found = memchr(base + i, 0x24, avail - i) else { break }
                let start = base.distance(to: found.assumingMemoryBound(to: UInt8.self))
                var j = start + 1
                var x: UInt8 = 0
                while j < avail {
                    let b = base[j]
                    if b == 0x2A || b == 0x0A || b == 0x0D { break }
                    x ^= b
                    j += 1
                }
                if j + 2 >= avail && n > 0 { break }  // line continues in the next chunk
                if j + 2 < avail && base[j] == 0x2A {
                    let h = hexDigit(base[j + 1]) << 4 | hexDigit(base[j + 2])
                    if h == x { good += 1 } else { bad += 1 }
                    j += 3
                } else {
                    bad += 1
                }
                i = j
                lastComplete = j
            }
            if n == 0 { break }
            // Keep the unfinished line for the next chunk.
            let keep = avail - max(lastComplete, i >= avail ? avail : lastComplete)
            if keep > 0 { memmove(base, base + (avail - keep), keep) }
            carried = min(keep, 4096)
            total += Int64(n)
        }
    } catch { fail("\(error)") }
    result["sentences"] = "\(good)"
    result["badChecksums"] = "\(bad)"
}

@inline(__always) func hexDigit(_ b: UInt8) -> UInt8 {
    b <= 0x39 ? b &- 0x30 : (b | 0x20) &- 0x57
}

let wall = now() - startWall
let cpu = cpuSeconds() - startCPU
result["bytes"] = "\(total)"
result["seconds"] = "\(wall)"
result["cpuSeconds"] = "\(cpu)"
result["mbPerSecond"] = "\(Double(total) / 1e6 / wall)"
let json = "{" + result.sorted { $0.key < $1.key }.map { "\"\($0.key)\":\($0.value)" }.joined(separator: ",") + "}\n"
json.withCString { _ = write(1, $0, strlen($0)) }
