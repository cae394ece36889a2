#!/usr/bin/env python3
"""A fleet's load on `keeptrack serve`: N simulated devices posting our JSON batches, on loopback only.

    tools/fleet-load.py --devices 1000 --rate 1 --minutes 1 --url http://127.0.0.1:5055 --token s3cret
    tools/fleet-load.py --devices 1000 --rate 0 --records 200000 --serve postgres://kt@127.0.0.1:5432/fleet

Each device has its own id (`fleet-RUN-NNNNN`, RUN fresh each time unless `--seed` is given), its
sequence numbers going on from the run's start time in microseconds (so that runs never send a key an
earlier run stored, even with ids reused by `--seed` or `--token-file`), and a
plausible path: a start within 20 km of Munich, a heading that wanders, 3-30 m/s, a fix every 1/HZ
s of simulated time (at most an hour before now). A device sends a batch (`--batch`, 100) as soon as
it has one: `--rate HZ` paces each device in real time (N*HZ records/s offered in all); `--rate 0`
sends as fast as the server answers. It stops after `--minutes` (at most 60) or `--records`, whichever
comes first; a batch in flight then is still retried to its end (at most 60 s more).

Requests go over `--connections` keep-alive connections (default 16) spread over `--processes`
worker processes (default 2); `--url` may be given several times (several instances: the devices are
shared out among them). A failed request (refused, reset, 5xx) is sent again after a backoff from 50
ms to 2 s, as the uploader does; a batch is acknowledged once an answer counts all its records
(accepted + duplicates).

It reports stored/s (records the server said were new), p50/p99 request latency, errors by kind,
the server's CPU and peak RSS (`--server-pid`, several allowed, or the one `--serve` started;
`--database-pid` adds a PostgreSQL postmaster and its backends), its own CPU (the load shares the
machine with what it measures: with `--rate 0 --records N` the bodies are built before the clock
starts, and requests go over plain sockets; about 10 % of a core at 40,000 records/s, where building
each body while sending and http.client took half a core), and at the end checks, through GET
/v1/devices, that the server holds exactly what was acknowledged for each device: nothing lost,
nothing twice. Exit status 0 when it does.

Credentials: `--token` (the admin token) for every device. Per-device tokens: `--token-file FILE`,
lines `DEVICE_INDEX TOKEN` (0-based, as `keeptrack serve devices add ID` prints one per device; ids
are then `fleet-NNNNN` so that they match across runs) — the device's own token signs its batches,
the admin token is still needed for the final check.

Only loopback addresses are accepted (127.0.0.0/8, localhost, ::1); anything else is refused.
"""
import argparse, http.client, ipaddress, json, math, multiprocessing as mp, os, random, socket, subprocess, sys
import threading
import time, urllib.parse

import keeptrack_tools

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
MAX_MINUTES = 60
MAX_DEVICES = 100_000


def loopback(url):
    u = urllib.parse.urlsplit(url)
    if u.scheme != "http" or not u.hostname:
        return False
    if u.hostname == "localhost":
        return True
    try:
        return ipaddress.ip_address(u.hostname).is_loopback
    except ValueError:
        return False


class Device:
    """One simulated vehicle: its id, next sequence number, simulated clock and position."""

    def __init__(self, ident, rng, start, hz, seq):
        self.id = ident
        self.seq = seq
        self.first = seq
        self.t = start
        self.step = 1.0 / hz if hz > 0 else 1.0
        self.lat = 48.137 + rng.uniform(-0.18, 0.18)
        self.lon = 11.575 + rng.uniform(-0.27, 0.27)
        self.heading = rng.uniform(0, 360)
        self.speed = rng.uniform(3, 30)
        self.rng = rng

    def batch(self, n):
        out = []
        for _ in range(n):
            self.seq += 1
            self.t += self.step
            self.heading = (self.heading + self.rng.gauss(0, 4)) % 360
            self.speed = min(30.0, max(0.0, self.speed + self.rng.gauss(0, 0.5)))
            d = self.speed * self.step
            self.lat += d * math.cos(math.radians(self.heading)) / 111_320
            self.lon += d * math.sin(math.radians(self.heading)) / (111_320 * math.cos(math.radians(self.lat)))
            ms = int(self.t * 1000)
            stamp = time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(ms // 1000)) + ".%03dZ" % (ms % 1000)
            out.append('{"seq":%d,"kind":"location","time":"%s","lat":%.7f,"lon":%.7f,"alt":520.0,"hAcc":5.0,'
                       '"speed":%.2f,"course":%.1f}' % (self.seq, stamp, self.lat, self.lon, self.speed, self.heading))
        return ('{"device":"%s","records":[%s]}' % (self.id, ",".join(out))).encode()


class Connection:
    """One keep-alive HTTP/1.1 connection, as lean as a request can be sent and answered from Python.

    http.client spent about a millisecond of CPU a request here (its header parsing goes through the
    email package), which at 500 requests/s took half a core of the two from the server it measures.
    This sends the request as one write and reads the answer by its Content-Length (or chunks)."""

    def __init__(self, url):
        u = urllib.parse.urlsplit(url)
        self.host = u.netloc.rpartition("@")[2]  # the Host header: name or [v6 address], and port
        self.address = (u.hostname, u.port or 80)
        self.sock = None
        self.pending = b""

    def close(self):
        if self.sock:
            self.sock.close()
        self.sock = None
        self.pending = b""

    def request(self, method, path, body, token):
        """Sends one request and returns (status, body); raises OSError or http.client.HTTPException."""
        try:
            return self._request(method, path, body, token)
        except ValueError as e:  # a length or chunk size that is not a number
            raise http.client.HTTPException(f"malformed answer: {e}") from None

    def _request(self, method, path, body, token):
        if self.sock is None:
            self.sock = socket.create_connection(self.address, timeout=60)
            self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        head = (f"{method} {path} HTTP/1.1\r\nHost: {self.host}\r\nAuthorization: Bearer {token}\r\n"
                f"Content-Type: application/json\r\nContent-Length: {len(body)}\r\n\r\n").encode()
        self.sock.sendall(head + body)
        while b"\r\n\r\n" not in self.pending:
            self._fill()
        head, _, self.pending = self.pending.partition(b"\r\n\r\n")
        lines = head.split(b"\r\n")
        parts = lines[0].split(b" ", 2)
        if len(parts) < 2 or not parts[0].startswith(b"HTTP/1.") or not parts[1].isdigit():
            raise http.client.BadStatusLine(lines[0][:80].decode("latin-1"))
        headers = {}
        for line in lines[1:]:
            name, _, value = line.partition(b":")
            headers[name.strip().lower()] = value.strip()
        if headers.get(b"transfer-encoding", b"").lower() == b"chunked":
            reply = self._chunked()
        else:
            length = int(headers.get(b"content-length", b"0"))
            while len(self.pending) < length:
                self._fill()
            reply, self.pending = self.pending[:length], self.pending[length:]
        if headers.get(b"connection", b"").lower() == b"close":
            self.close()
        return int(parts[1]), reply

    def _fill(self):
        data = self.sock.recv(65536)
        if not data:
            raise http.client.RemoteDisconnected("the server closed the connection")
        self.pending += data

    def _chunked(self):
        reply = b""
        while True:
            while b"\r\n" not in self.pending:
                self._fill()
            size_line, _, self.pending = self.pending.partition(b"\r\n")
            size = int(size_line.split(b";")[0], 16)
            while len(self.pending) < size + 2:
                self._fill()
            reply += self.pending[:size]
            self.pending = self.pending[size + 2:]
            if size == 0:
                return reply


def connection(url):
    return Connection(url)


def post(conn, path, body, token):
    return conn.request("POST", path, body, token)


PREBUILT_RECORDS = 2_000_000  # at most this many records' bodies are built before the clock starts


def worker(index, args, devices, tokens, ready, go, started, totals, results):
    """One process: its devices shared out among its threads, each with one keep-alive connection.

    With `--rate 0 --records N`, each thread builds the bodies it is likely to send before the clock
    starts (its share and a quarter more, up to PREBUILT_RECORDS in all), then waits at `ready` for
    the others and at `go` for the clock. Building a body costs about 7 us a record in Python, as
    much as the server spends storing it: built while sending, it took a third of a core from the
    server on a 2-core machine. Past the prebuilt ones, bodies are built as they are sent."""
    threads = max(1, args.connections // args.processes)
    stats = {"latencies": [], "accepted": 0, "duplicates": 0, "errors": {}, "acked": {}, "unacked": 0, "batches": 0}
    lock = threading.Lock()
    prebuilt = [[] for _ in range(threads)]
    if args.rate == 0 and args.records:
        share = math.ceil(min(args.records, PREBUILT_RECORDS) / args.batch / (threads * args.processes))
        for thread in range(threads):
            mine = devices[thread::threads]
            if mine:
                prebuilt[thread] = [(mine[i % len(mine)], mine[i % len(mine)].batch(args.batch))
                                    for i in range(share + share // 4 + 1)]
    ready.wait()
    go.wait()
    cpu_start = time.process_time()
    deadline = started.value + args.minutes * 60

    def run(thread, mine):
        url = args.url[(index * threads + thread) % len(args.url)]
        path = urllib.parse.urlsplit(url).path or "/v1/locations"
        if path == "/":
            path = "/v1/locations"
        conn = connection(url)
        start = time.monotonic()
        sent = 0
        while mine and time.monotonic() < deadline:
            with totals.get_lock():
                if args.records and totals.value >= args.records:
                    break
                totals.value += args.batch
            if sent < len(prebuilt[thread]):
                d, body = prebuilt[thread][sent]
            else:
                d, body = mine[sent % len(mine)], None
            sent += 1
            if args.rate > 0:
                # Due once the device has a batch's worth of fixes, in real time.
                due = start + (d.seq - d.first + args.batch) / args.rate
                wait = due - time.monotonic()
                if wait > 0:
                    if time.monotonic() + wait >= deadline:
                        break
                    time.sleep(wait)
            body = body or d.batch(args.batch)
            token = tokens.get(d.id, args.token)
            backoff = 0.05
            retry_until = deadline + 60
            while True:
                t0 = time.monotonic()
                try:
                    status, reply = post(conn, path, body, token)
                except (OSError, http.client.HTTPException) as e:
                    status, reply = None, type(e).__name__
                    conn.close()
                    conn = connection(url)
                latency = time.monotonic() - t0
                ok = False
                if status == 200:
                    try:
                        r = json.loads(reply)
                        ok = r.get("accepted", 0) + r.get("duplicates", 0) == args.batch
                    except ValueError:
                        pass
                with lock:
                    if ok:
                        stats["latencies"].append(latency)
                        stats["accepted"] += r["accepted"]
                        stats["duplicates"] += r.get("duplicates", 0)
                        stats["acked"][d.id] = stats["acked"].get(d.id, 0) + args.batch
                        stats["batches"] += 1
                    else:
                        kind = f"HTTP {status}" if status else str(reply)
                        stats["errors"][kind] = stats["errors"].get(kind, 0) + 1
                if ok:
                    break
                if status is not None and 400 <= status < 500 and status not in (408, 429):
                    with lock:
                        stats["unacked"] += args.batch
                    break  # refused for good: counted, not sent again
                if time.monotonic() > retry_until:
                    with lock:
                        stats["unacked"] += args.batch
                    break
                time.sleep(backoff)
                backoff = min(2.0, backoff * 2)
        conn.close()

    pool = [threading.Thread(target=run, args=(t, devices[t::threads])) for t in range(threads)]
    for t in pool:
        t.start()
    for t in pool:
        t.join()
    stats["cpu_seconds"] = time.process_time() - cpu_start
    results.put(stats)


def rss_bytes(pid):
    try:
        for line in open(f"/proc/{pid}/status"):
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
    except OSError:
        pass
    return 0


def children(pid):
    out = subprocess.run(["pgrep", "-P", str(pid)], stdout=subprocess.PIPE, text=True).stdout.split()
    return [int(p) for p in out]


def keeptrack_binary():
    for build in (".build-release/release", ".build/release", ".build/debug"):
        path = os.path.join(ROOT, build, "keeptrack")
        if os.path.exists(path):
            return path
    sys.exit("fleet-load: no keeptrack binary: swift build -c release --scratch-path .build-release")


def start_server(database, token):
    p = subprocess.Popen([keeptrack_binary(), "serve", "--port", "0", "--db", database, "--token", token,
                          "--log-level", "error"], stdout=subprocess.PIPE, text=True)
    line = p.stdout.readline()
    if not line:
        sys.exit(f"fleet-load: keeptrack serve --db {database} did not start")
    return p, json.loads(line)["url"]


def server_devices(url, token):
    u = urllib.parse.urlsplit(url)
    conn = http.client.HTTPConnection(u.hostname, u.port, timeout=120)
    conn.request("GET", "/v1/devices", headers={"Authorization": f"Bearer {token}"})
    r = conn.getresponse()
    body = r.read()
    if r.status != 200:
        sys.exit(f"fleet-load: GET /v1/devices answered {r.status}: {body[:200]!r}")
    return {d["id"]: d["points"] for d in json.loads(body)["devices"]}


def percentile(values, p):
    if not values:
        return float("nan")
    values = sorted(values)
    return values[min(len(values) - 1, int(p * len(values)))]


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--devices", type=int, default=100)
    ap.add_argument("--rate", type=float, default=1.0, help="fixes per second per device; 0: as fast as answered")
    ap.add_argument("--minutes", type=float, default=1.0, help=f"at most {MAX_MINUTES}")
    ap.add_argument("--records", type=int, default=0, help="stop after sending this many records (0: no limit)")
    ap.add_argument("--url", action="append", default=[], help="the server (several: shared out); loopback only")
    ap.add_argument("--serve", metavar="DB", help="start keeptrack serve --db DB on a free port and load it")
    ap.add_argument("--token", default="", help="the admin token")
    ap.add_argument("--token-file", help="per-device tokens: lines 'DEVICE_INDEX TOKEN'")
    ap.add_argument("--batch", type=int, default=100)
    ap.add_argument("--connections", type=int, default=16)
    ap.add_argument("--processes", type=int, default=2)
    ap.add_argument("--server-pid", type=int, action="append", default=[])
    ap.add_argument("--database-pid", type=int, help="a PostgreSQL postmaster: its CPU and its backends' too")
    ap.add_argument("--seed", type=int, default=None)
    ap.add_argument("--row", metavar="LABEL", help="print a docs/performance.md table row with this label")
    ap.add_argument("--json", action="store_true", help="print the summary as one JSON line on stdout")
    args = ap.parse_args()
    if not 1 <= args.devices <= MAX_DEVICES:
        sys.exit(f"fleet-load: --devices must be 1-{MAX_DEVICES}")
    if not 0 < args.minutes <= MAX_MINUTES:
        sys.exit(f"fleet-load: --minutes must be more than 0 and at most {MAX_MINUTES}")
    if not 1 <= args.batch <= 10_000 or args.rate < 0 or args.connections < 1 or args.processes < 1:
        sys.exit("fleet-load: --batch 1-10000, --rate >= 0, --connections and --processes >= 1")
    server = None
    if args.serve:
        args.token = args.token or "%016x" % random.getrandbits(64)
        server, url = start_server(args.serve, args.token)
        args.url.append(url)
        args.server_pid.append(server.pid)
    if not args.url:
        sys.exit("fleet-load: give --url URL (or --serve DB)")
    for url in args.url:
        if not loopback(url):
            sys.exit(f"fleet-load: refusing {url}: only http:// on loopback (127.0.0.0/8, localhost, ::1)")
    args.processes = min(args.processes, args.connections)
    rng = random.Random(args.seed)
    tokens = {}
    if args.token_file:
        for line in open(args.token_file):
            if line.strip():
                i, token = line.split()
                tokens[f"fleet-{int(i):05d}"] = token
        prefix = "fleet"
    else:
        prefix = "fleet-%06x" % rng.getrandbits(24)
    start = time.time() - 3600  # simulated fixes from an hour ago on
    # Sequences go on from the run's start in microseconds, as an uploader's go on from its last: a run
    # that reuses ids (--seed, --token-file) never sends a key (device:seq) an earlier run stored.
    seq = int(time.time() * 1e6)
    devices = [Device(f"{prefix}-{i:05d}", random.Random(rng.random()), start, args.rate, seq)
               for i in range(args.devices)]
    before = server_devices(args.url[0], args.token)
    pids = list(args.server_pid)
    totals = mp.Value("q", 0)
    results = mp.Queue()
    ready = mp.Barrier(args.processes + 1)
    go = mp.Event()
    started = mp.Value("d", 0.0)
    procs = [mp.Process(target=worker, args=(i, args, devices[i::args.processes], tokens, ready, go, started, totals,
                                             results))
             for i in range(args.processes)]
    for p in procs:
        p.start()
    # The clock starts once every worker has built its bodies (the barrier's last party is this one).
    try:
        ready.wait(timeout=600)
    except threading.BrokenBarrierError:
        sys.exit("fleet-load: a worker process did not get ready (see its error above)")
    cpu0 = {p: keeptrack_tools.cpu_seconds(p) for p in pids}
    db_cpu0 = sum(keeptrack_tools.cpu_seconds(p) for p in ([args.database_pid] + children(args.database_pid))) if args.database_pid else 0
    t0 = started.value = time.monotonic()
    go.set()
    peak_rss = 0
    collected = []
    while len(collected) < len(procs):
        try:
            collected.append(results.get(timeout=1))
        except Exception:
            pass
        peak_rss = max(peak_rss, sum(rss_bytes(p) for p in pids))
    elapsed = time.monotonic() - t0
    for p in procs:
        p.join()
    cpu = sum(keeptrack_tools.cpu_seconds(p) - cpu0[p] for p in pids)
    db_cpu = (sum(keeptrack_tools.cpu_seconds(p) for p in ([args.database_pid] + children(args.database_pid))) - db_cpu0
              if args.database_pid else None)
    latencies = [l for s in collected for l in s["latencies"]]
    accepted = sum(s["accepted"] for s in collected)
    duplicates = sum(s["duplicates"] for s in collected)
    unacked = sum(s["unacked"] for s in collected)
    errors = {}
    acked = {}
    for s in collected:
        for k, v in s["errors"].items():
            errors[k] = errors.get(k, 0) + v
        for k, v in s["acked"].items():
            acked[k] = acked.get(k, 0) + v
    after = server_devices(args.url[0], args.token)
    wrong = {d.id: (after.get(d.id, 0) - before.get(d.id, 0), acked.get(d.id, 0)) for d in devices
             if after.get(d.id, 0) - before.get(d.id, 0) != acked.get(d.id, 0)}
    stored = sum(after.get(d.id, 0) - before.get(d.id, 0) for d in devices)
    summary = {
        "devices": args.devices, "batch": args.batch, "instances": len(args.url), "seconds": round(elapsed, 2),
        "acknowledged": sum(acked.values()), "accepted": accepted, "duplicates": duplicates, "unacknowledged": unacked,
        "stored": stored, "stored_per_s": round(accepted / elapsed), "p50_ms": round(percentile(latencies, 0.5) * 1000, 1),
        "p99_ms": round(percentile(latencies, 0.99) * 1000, 1), "errors": errors,
        "server_cpu_percent": round(100 * cpu / elapsed) if pids else None,
        "server_peak_rss_mib": round(peak_rss / 2**20) if pids else None,
        "database_cpu_percent": round(100 * db_cpu / elapsed) if db_cpu is not None else None,
        "load_cpu_percent": round(100 * sum(s["cpu_seconds"] for s in collected) / elapsed),
        "exact": not wrong,
    }
    print(f"fleet-load: {args.devices} devices, {len(args.url)} instance(s), {elapsed:.1f} s: "
          f"{summary['acknowledged']} records acknowledged ({accepted} new, {duplicates} duplicates), "
          f"{summary['stored_per_s']} stored/s, p50 {summary['p50_ms']} ms, p99 {summary['p99_ms']} ms, "
          f"errors {errors or 'none'}; server CPU {summary['server_cpu_percent']} %, "
          f"peak RSS {summary['server_peak_rss_mib']} MiB"
          + (f", PostgreSQL CPU {summary['database_cpu_percent']} %" if db_cpu is not None else "")
          + f"; this load's own CPU {summary['load_cpu_percent']} %", file=sys.stderr)
    if wrong:
        sample = list(wrong.items())[:5]
        print(f"fleet-load: CHECK FAILED: {len(wrong)} devices hold other than what was acknowledged "
              f"(stored, acknowledged): {sample}", file=sys.stderr)
    else:
        print(f"fleet-load: check: the server holds exactly the {stored} records acknowledged, each once",
              file=sys.stderr)
    if args.json:
        print(json.dumps(summary), flush=True)
    if args.row:
        print(f"| {args.row} | {summary['stored_per_s']:,} | {summary['p50_ms']} | {summary['p99_ms']} | "
              f"{sum(errors.values())} | {summary['server_cpu_percent']} % | {summary['server_peak_rss_mib']} MiB | "
              f"{'yes' if not wrong else 'NO'} |", flush=True)
    if server:
        server.kill()
        server.wait()
    sys.exit(0 if not wrong else 1)


if __name__ == "__main__":
    main()
