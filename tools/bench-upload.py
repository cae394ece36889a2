#!/usr/bin/env python3
"""Upload throughput: 1,000,000 locations from the outbox to a local endpoint, durable on both sides,
beside plain-Python peers doing the same storage and the same HTTP work, in the same run.

    tools/bench-upload.py [--count 1000000] [--batch 1000] [--backlog 10000] [--formats-only]

1. keeptrack: `upload-bench` (release) appends --count records to a fresh outbox (1,000 a
   transaction, SQLite WAL, synchronous=NORMAL, as the tracker does), then uploads them all as
   JSON batches of --batch to `keeptrack serve` (release, its own process and database, which
   commits each batch before it answers). The bench checks the endpoint holds exactly --count.
2. Peers: Python's sqlite3 appending the same rows to the same schema with the same settings, and
   Python's http.client posting the same JSON batches over one keep-alive connection to a fresh
   `keeptrack serve` (the endpoint's own ceiling with a minimal client).
3. Memory: the uploader's peak RSS with a backlog of --count and of --count/10 (bounded means equal).
4. MQTT: a backlog of --mqtt-count records (one a second: OwnTracks' tst is whole seconds) drained by
   `upload-bench --url mqtt://...` to a private mosquitto at QoS 1 (each record leaves the outbox with
   its PUBACK), beside `mosquitto_pub -q 1 -l` publishing the same OwnTracks JSON lines to the same
   kind of broker, in the same run; `keeptrack serve --mqtt` subscribed to both brokers must end up
   holding exactly --mqtt-count.

5. Formats (issue 13): a backlog of --backlog records drained by `upload-bench --format F` to a
   fresh `keeptrack serve`, one row per wire format (FORMATS below: json, osmand, owntracks), beside
   Python's http.client sending the same requests one at a time over one keep-alive connection.

Targets (issue 6): uploads >= 50,000 locations/s, outbox appends >= 100,000/s. Issue 13: a 10,000-
record backlog drains over OsmAnd in under 10 s on loopback; MQTT QoS 1 drains >= 5,000 records/s.
"""
import argparse, http.client, json, os, pwd, signal, socket, sqlite3, subprocess, sys, tempfile, time

import keeptrack_tools

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
# A build folder of its own: benchmarks don't wait for (or disturb) the debug build.


def build(bin_dir=None):
    if bin_dir:
        return os.path.join(bin_dir, "keeptrack"), os.path.join(bin_dir, "upload-bench")
    return keeptrack_tools.build("keeptrack", "upload-bench")


def serve(keeptrack, work):
    p = subprocess.Popen([keeptrack, "serve", "--port", "0", "--db", os.path.join(work, "endpoint.sqlite"),
                          "--token", "bench", "--max-body", str(64 << 20)], stdout=subprocess.PIPE,
                         stderr=subprocess.DEVNULL, text=True)
    line = json.loads(p.stdout.readline())
    return p, line["url"]


def peak_rss_mb(pid):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024


def stored(work):
    db = sqlite3.connect(os.path.join(work, "endpoint.sqlite"))
    return db.execute("SELECT COUNT(*) FROM points").fetchone()[0]


def keeptrack_run(keeptrack, bench, count, batch, fmt="json", path="/v1/locations"):
    work = tempfile.mkdtemp(prefix="keeptrack-bench-upload-")
    server, url = serve(keeptrack, work)
    try:
        out = subprocess.run([bench, "--count", str(count), "--batch", str(batch), "--url", url + path,
                              "--token", "bench", "--dir", work, "--format", fmt], check=True, capture_output=True,
                             text=True).stdout
        result = json.loads(out)
        result["serverPeakRSSMB"] = peak_rss_mb(server.pid)
    finally:
        server.terminate()
        server.wait()
    result["stored"] = stored(work)
    subprocess.run(["rm", "-rf", work])
    if result["stored"] != count or result["pending"] != 0:
        sys.exit(f"bench-upload: the endpoint holds {result['stored']} of {count} ({result['pending']} pending)")
    return result


def record(i):
    t = 1_715_679_000.0 + i * 0.1
    return (f"bench:{i + 1}", i + 1, "location", None, t, 48.1 + (i % 10_000) * 1e-6, 11.5 + (i // 10_000) * 1e-6,
            520.0, 4.5, 7.5, 1.25, 90.0)


def peer_append(count):
    work = tempfile.mkdtemp(prefix="keeptrack-bench-peer-")
    db = sqlite3.connect(os.path.join(work, "outbox.sqlite"), isolation_level=None)
    # The outbox's own settings and schema (Outbox+Migrations.swift, v6): 1 KB pages, no AUTOINCREMENT,
    # a partial index on transitions.
    db.execute("PRAGMA page_size=1024")
    db.execute("PRAGMA journal_mode=WAL")
    db.execute("PRAGMA synchronous=NORMAL")
    db.execute("""CREATE TABLE outbox (seq INTEGER PRIMARY KEY, kind TEXT NOT NULL, region TEXT,
                  time REAL NOT NULL, lat REAL NOT NULL, lon REAL NOT NULL, alt REAL, hAcc REAL, vAcc REAL,
                  speed REAL, course REAL, priority INTEGER NOT NULL, appended REAL NOT NULL, decided REAL)""")
    db.execute("CREATE INDEX outbox_transitions ON outbox (seq) WHERE priority = 0")
    start = time.monotonic()
    for b in range(0, count, 1000):
        rows = [(r[2], r[3], r[4], r[5], r[6], r[7], r[8], r[9], r[10], r[11], 1, time.time())
                for r in map(record, range(b, min(count, b + 1000)))]
        db.execute("BEGIN")
        db.executemany("INSERT INTO outbox (kind, region, time, lat, lon, alt, hAcc, vAcc, speed, course, priority, "
                       "appended) VALUES (?,?,?,?,?,?,?,?,?,?,?,?)", rows)
        db.execute("COMMIT")
    seconds = time.monotonic() - start
    subprocess.run(["rm", "-rf", work])
    return count / seconds


def iso(t):
    s = time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(t))
    return f"{s}.{int(round((t % 1) * 1000)):03d}Z"


def peer_posts(keeptrack, count, requests):
    """Python's http.client sending `requests` ((path, body, headers) each, made as they go) one at a time
    over one keep-alive connection to a fresh `keeptrack serve`: the seconds they took. Exits the bench if
    the endpoint answers one with other than 200, or does not end up holding `count` records."""
    work = tempfile.mkdtemp(prefix="keeptrack-bench-peer-")
    server, url = serve(keeptrack, work)
    host, port = url.split("//")[1].split(":")
    try:
        conn = http.client.HTTPConnection(host, int(port))
        start = time.monotonic()
        for path, body, headers in requests:
            conn.request("POST", path, body, headers)
            resp = conn.getresponse()
            resp.read()
            if resp.status != 200:
                sys.exit(f"bench-upload: the peer got {resp.status} on {path}")
        seconds = time.monotonic() - start
    finally:
        server.terminate()
        server.wait()
    n = stored(work)
    subprocess.run(["rm", "-rf", work])
    if n != count:
        sys.exit(f"bench-upload: the peer's endpoint holds {n} of {count}")
    return seconds


def json_batches(count, batch):
    """Our JSON batches of `batch` records, as requests for `peer_posts`."""
    headers = {"Content-Type": "application/json", "Authorization": "Bearer bench"}
    for b in range(0, count, batch):
        recs = [{"id": r[0], "seq": r[1], "kind": "location", "time": iso(r[4]), "lat": r[5], "lon": r[6],
                 "alt": r[7], "hAcc": r[8], "vAcc": r[9], "speed": r[10], "course": r[11]}
                for r in map(record, range(b, min(count, b + batch)))]
        yield "/v1/locations", json.dumps({"device": "bench", "records": recs}), headers


def peer_upload(keeptrack, count, batch):
    """Records a second, posted as JSON batches."""
    return count / peer_posts(keeptrack, count, json_batches(count, batch))


def osmand_body(r):
    return (f"id=bench&timestamp={r[4]:.3f}".replace(".000", "") + f"&lat={r[5]:.9f}&lon={r[6]:.9f}&speed={r[10] / 0.514444:.3f}"
            f"&bearing={r[11]:.2f}&altitude={r[7]:.3f}&accuracy={r[8]:.2f}")


def owntracks_body(r):
    return json.dumps({"_type": "location", "tst": int(r[4]), "lat": round(r[5], 7), "lon": round(r[6], 7),
                       "acc": round(r[8]), "alt": round(r[7]), "vel": round(r[10] * 3.6), "cog": round(r[11]), "tid": "BE"})


def peer_single(keeptrack, count, path, content_type, body, extra_headers=()):
    """Python's http.client: one request per record, one at a time, over one keep-alive connection."""
    headers = {"Content-Type": content_type, "Authorization": "Bearer bench", **dict(extra_headers)}
    return peer_posts(keeptrack, count, ((path, body(record(i)), headers) for i in range(count)))


def peer_json(keeptrack, count, batch=500):
    return peer_posts(keeptrack, count, json_batches(count, batch))


# One row per wire format: (--format, the endpoint's path, the peer doing the same requests). A new
# transport adds a row here (the MQTT uploader: its broker and a Python peer publishing QoS 1).
FORMATS = [
    ("json", "/v1/locations", "JSON batches of 500", lambda kt, n: peer_json(kt, n)),
    ("osmand", "/", "one form POST a record",
     lambda kt, n: peer_single(kt, n, "/", "application/x-www-form-urlencoded", osmand_body)),
    ("owntracks", "/owntracks", "one JSON POST a record",
     lambda kt, n: peer_single(kt, n, "/owntracks", "application/json", owntracks_body,
                               [("X-Limit-U", "bench"), ("X-Limit-D", "bench")])),
]


def formats_table(keeptrack, bench, backlog):
    print(f"{backlog:,}-record backlog drained to keeptrack serve (loopback, each record committed before the answer):")
    print(f"  {'format':<10} {'requests':<24} {'keeptrack':>22} {'python http.client, one at a time':>36}")
    for fmt, path, shape, peer in FORMATS:
        r = keeptrack_run(keeptrack, bench, backlog, 500, fmt, path)
        peer_seconds = peer(keeptrack, backlog)
        print(f"  {fmt:<10} {shape:<24} {r['uploadSeconds']:>6.2f} s {r['uploadsPerSecond']:>9,.0f}/s "
              f"{peer_seconds:>18.2f} s {backlog / peer_seconds:>9,.0f}/s")

def broker(work):
    """A private mosquitto on a free loopback port (persistence off, nothing queued dropped): on a candidate
    port, another if that one was taken (mosquitto exits then)."""
    conf = os.path.join(work, "mosquitto.conf")

    def start(port):
        with open(conf, "w") as f:
            f.write(f"listener {port} 127.0.0.1\nallow_anonymous true\npersistence false\nmax_queued_messages 0\n"
                    f"user {pwd.getpwuid(os.getuid()).pw_name}\n")
        p = subprocess.Popen(["/usr/sbin/mosquitto", "-c", conf], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        for _ in range(500):  # readiness probe: the port accepts connections
            try:
                socket.create_connection(("127.0.0.1", port), timeout=1).close()
                return p, port
            except OSError:
                if p.poll() is not None:
                    return None
                time.sleep(0.01)
        sys.exit("bench-upload: mosquitto did not start")

    return keeptrack_tools.on_free_port(start)


def serve_mqtt(keeptrack, work, port):
    p = subprocess.Popen([keeptrack, "serve", "--port", "0", "--db", os.path.join(work, "endpoint.sqlite"),
                          "--mqtt", f"mqtt://127.0.0.1:{port}"], stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                         text=True)
    p.stdout.readline()
    if '"subscribed"' not in p.stdout.readline():
        sys.exit("bench-upload: serve --mqtt did not subscribe")
    return p


def wait_stored(work, count):
    """Bounded wait until serve --mqtt holds `count` (it stores after the broker's PUBACK)."""
    deadline = time.monotonic() + 300
    n = 0
    while time.monotonic() < deadline:
        n = stored(work)
        if n >= count:
            break
        time.sleep(0.2)
    return n


def mqtt_keeptrack(keeptrack, bench, count, batch):
    work = tempfile.mkdtemp(prefix="keeptrack-bench-mqtt-")
    b, port = broker(work)
    server = serve_mqtt(keeptrack, work, port)
    try:
        out = subprocess.run([bench, "--count", str(count), "--batch", str(batch), "--url", f"mqtt://127.0.0.1:{port}",
                              "--spacing", "1", "--dir", work], check=True, capture_output=True, text=True).stdout
        result = json.loads(out)
        result["stored"] = wait_stored(work, count)
    finally:
        for p in (server, b):
            keeptrack_tools.stop(p)
    subprocess.run(["rm", "-rf", work])
    if result["stored"] != count or result["pending"] != 0:
        sys.exit(f"bench-upload: serve --mqtt holds {result['stored']} of {count} ({result['pending']} pending)")
    return result


def ot_line(i):
    r = record(i)
    t = 1_715_679_000 + i
    return (f'{{"_type":"location","tst":{t},"lat":{r[5]:.7f},"lon":{r[6]:.7f},"acc":5,"alt":520,"vel":5,"cog":90,'
            f'"tid":"BE"}}\n')


def mqtt_peer(keeptrack, count):
    work = tempfile.mkdtemp(prefix="keeptrack-bench-mqtt-peer-")
    lines = os.path.join(work, "messages")
    with open(lines, "w") as f:
        f.writelines(ot_line(i) for i in range(count))
    b, port = broker(work)
    server = serve_mqtt(keeptrack, work, port)
    try:
        with open(lines) as f:
            start = time.monotonic()
            subprocess.run(["mosquitto_pub", "-h", "127.0.0.1", "-p", str(port), "-q", "1", "-M", "100",
                            "-t", "owntracks/keeptrack/bench", "-l"], stdin=f, check=True)
            seconds = time.monotonic() - start
        n = wait_stored(work, count)
    finally:
        for p in (server, b):
            keeptrack_tools.stop(p)
    subprocess.run(["rm", "-rf", work])
    if n != count:
        sys.exit(f"bench-upload: the peer's serve --mqtt holds {n} of {count}")
    return count / seconds


def main():
    # A parent that blocks or ignores SIGTERM (a test runner) passes that on to every child: mosquitto
    # would not stop on SIGTERM. Children get the defaults back.
    signal.pthread_sigmask(signal.SIG_SETMASK, [])
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--count", type=int, default=1_000_000)
    ap.add_argument("--batch", type=int, default=1000)
    ap.add_argument("--backlog", type=int, default=10_000)
    ap.add_argument("--formats-only", action="store_true", help="only the per-format table")
    ap.add_argument("--mqtt-count", type=int, default=10_000)
    ap.add_argument("--bin-dir", help="use the release keeptrack and upload-bench in this folder instead of building them")
    ap.add_argument("--only", choices=["json", "mqtt"], help="measure one transport only")
    args = ap.parse_args()
    keeptrack, bench = build(args.bin_dir)
    if args.formats_only:
        formats_table(keeptrack, bench, args.backlog)
        return
    if args.only != "json":
        mqtt = mqtt_keeptrack(keeptrack, bench, args.mqtt_count, args.batch)
        mqtt_peer_rate = mqtt_peer(keeptrack, args.mqtt_count)
    if args.only == "mqtt":
        print_mqtt(args, mqtt, mqtt_peer_rate)
        return
    big = keeptrack_run(keeptrack, bench, args.count, args.batch)
    small = keeptrack_run(keeptrack, bench, args.count // 10, args.batch)
    append_peer = peer_append(args.count)
    upload_peer = peer_upload(keeptrack, args.count, args.batch)
    print(f"{args.count:,} locations, JSON batches of {args.batch}, durable on both sides (SQLite WAL, synchronous=NORMAL):")
    print(f"  outbox appends     keeptrack {big['appendsPerSecond']:>9,.0f}/s   python sqlite3 {append_peer:>9,.0f}/s   (target 100,000/s)")
    print(f"  upload to endpoint keeptrack {big['uploadsPerSecond']:>9,.0f}/s   python http.client {upload_peer:>9,.0f}/s   (target 50,000/s)")
    print(f"    {big['uploaded']:,} acknowledged in {big['requests']:,} requests, {big['retries']} retries, "
          f"{big['uploadSeconds']:.1f} s; the endpoint holds exactly {big['stored']:,}")
    print(f"  memory: uploader peak RSS {big['peakRSSMB']:.1f} MB with a backlog of {args.count:,}, "
          f"{small['peakRSSMB']:.1f} MB with {args.count // 10:,}; endpoint {big['serverPeakRSSMB']:.1f} MB / "
          f"{small['serverPeakRSSMB']:.1f} MB")
    formats_table(keeptrack, bench, args.backlog)
    if args.only != "json":
        print_mqtt(args, mqtt, mqtt_peer_rate)


def print_mqtt(args, mqtt, peer):
    print(f"{args.mqtt_count:,} locations over MQTT (OwnTracks JSON, QoS 1, 100 in flight) to a private mosquitto, "
          f"serve --mqtt subscribed:")
    print(f"  upload over MQTT   keeptrack {mqtt['uploadsPerSecond']:>9,.0f}/s   mosquitto_pub -q 1 {peer:>9,.0f}/s   "
          f"(target 5,000/s)")
    print(f"    {mqtt['uploaded']:,} acknowledged (PUBACK) in {mqtt['uploadSeconds']:.1f} s, {mqtt['retries']} retries; "
          f"serve --mqtt holds exactly {mqtt['stored']:,}")


if __name__ == "__main__":
    main()
