#!/usr/bin/env python3
"""The endpoint under hostile load (issue 11, items 4-6): what heavy queries and idle connections cost
a release `keeptrack serve`, on loopback, with bounded loops.

    tools/bench-serve.py [--rows 1000000] [--devices 100] [--clustered 60000] [--idle 1100] [--keeptrack BIN]

1. A database as the first version of the endpoint left it (the points table only), built with
   SQLite directly: --rows points over --devices devices, plus --clustered points of one device
   parked at one place within four minutes (the case that made /map quadratic).
2. The query `GET /v1/devices` used to run (GROUP BY over every point), timed on that database.
3. `keeptrack serve` opens it (the migration fills the devices table: timed) and answers, timed:
   `GET /v1/devices`, a trail of an unknown device (404), `GET /map/svg?device=parked&limit=100000`,
   and `GET /healthz` while two such /map requests run.
4. --idle idle connections against a server limited to 1,024 descriptors (RLIMIT_NOFILE, as in the
   issue): how many are served, how many answered 503, and whether `GET /healthz` gets an answer.
5. --bodies concurrent 8 MiB request bodies: the answers, serve's peak and remaining RSS.

Each figure is checked (status, content) before it is printed.
"""
import argparse, http.client, json, os, resource, select, socket, sqlite3, subprocess, sys, tempfile, threading, time

import keeptrack_tools

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TOKEN = "bench"


def old_database(path, rows, devices, clustered):
    db = sqlite3.connect(path)
    db.executescript("""
        PRAGMA journal_mode = WAL;
        CREATE TABLE grdb_migrations (identifier TEXT NOT NULL PRIMARY KEY);
        INSERT INTO grdb_migrations VALUES ('v1-points');
        CREATE TABLE points (key TEXT PRIMARY KEY, device TEXT NOT NULL, seq INTEGER, kind TEXT NOT NULL,
            region TEXT, time REAL NOT NULL, lat REAL NOT NULL, lon REAL NOT NULL, alt REAL, hAcc REAL, vAcc REAL,
            speed REAL, course REAL, format TEXT NOT NULL, received REAL NOT NULL) WITHOUT ROWID;
        CREATE INDEX points_trail ON points (device, time);
    """)
    t0 = 1715679000.0
    db.execute(f"""
        WITH RECURSIVE n(i) AS (SELECT 0 UNION ALL SELECT i + 1 FROM n WHERE i + 1 < {rows})
        INSERT INTO points (key, device, seq, kind, time, lat, lon, format, received)
        SELECT 'id:dev-' || (i % {devices}) || ':' || (i / {devices} + 1), 'dev-' || (i % {devices}), i / {devices} + 1,
               'location', {t0} + i / {devices}, 48.1 + (i / {devices}) * 1e-5, 11.5 + (i % {devices}) * 1e-3,
               'json', {t0} + i / {devices} FROM n
    """)
    db.execute(f"""
        WITH RECURSIVE n(i) AS (SELECT 0 UNION ALL SELECT i + 1 FROM n WHERE i + 1 < {clustered})
        INSERT INTO points (key, device, seq, kind, time, lat, lon, format, received)
        SELECT 'id:parked:' || (i + 1), 'parked', i + 1, 'location', {t0} + i * 0.004,
               48.1 + ((i * 7919) % 200 - 100) * 1e-6, 11.5 + ((i * 104729) % 200 - 100) * 1e-6, 'json', {t0} FROM n
    """)
    db.commit()
    db.close()


def proc_kb(pid, field):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith(field + ":"):
                return int(line.split()[1])


def timed(f):
    start = time.monotonic()
    value = f()
    return value, time.monotonic() - start


def get(port, path, timeout=600):
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=timeout)
    c.request("GET", path, headers={"Authorization": f"Bearer {TOKEN}"})
    r = c.getresponse()
    body = r.read()
    c.close()
    return r.status, body


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rows", type=int, default=1_000_000)
    ap.add_argument("--devices", type=int, default=100)
    ap.add_argument("--clustered", type=int, default=60_000)
    ap.add_argument("--idle", type=int, default=1100)
    ap.add_argument("--bodies", type=int, default=30)
    ap.add_argument("--keeptrack", help="the binary (default: a release build in .build-release)")
    args = ap.parse_args()
    keeptrack = args.keeptrack or keeptrack_tools.build()
    work = tempfile.mkdtemp(prefix="keeptrack-bench-serve-")
    path = os.path.join(work, "endpoint.sqlite")
    _, fill = timed(lambda: old_database(path, args.rows, args.devices, args.clustered))
    print(f"database: {args.rows:,} points over {args.devices} devices + {args.clustered:,} clustered, built in {fill:.1f} s")

    db = sqlite3.connect(path)
    old, old_s = timed(lambda: db.execute(
        "SELECT device, COUNT(*), MIN(time), MAX(time), MAX(received) FROM points GROUP BY device ORDER BY device").fetchall())
    db.close()
    assert len(old) == args.devices + 1
    print(f"before: the devices query (GROUP BY over all points): {old_s * 1000:.0f} ms")

    def limit_fds():
        resource.setrlimit(resource.RLIMIT_NOFILE, (1024, 1024))

    start = time.monotonic()
    server = subprocess.Popen([keeptrack, "serve", "--port", "0", "--db", path, "--token", TOKEN],
                              stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True, preexec_fn=limit_fds)
    try:
        line = json.loads(server.stdout.readline())
        port = int(line["url"].rsplit(":", 1)[1])
        print(f"after: serve opened the old database and migrated it (devices table filled, index built) "
              f"in {time.monotonic() - start:.1f} s")
        (status, body), s = timed(lambda: get(port, "/v1/devices"))
        assert status == 200 and body.count(b'"id":') == args.devices + 1, status
        print(f"after: GET /v1/devices ({args.devices + 1} devices): {s * 1000:.1f} ms")
        (status, _), s = timed(lambda: get(port, "/v1/devices/nobody/trail"))
        assert status == 404
        print(f"after: GET /v1/devices/nobody/trail (404): {s * 1000:.1f} ms")
        (status, body), s = timed(lambda: get(port, "/v1/devices/dev-1/trail?format=json&limit=5000"))
        assert status == 200 and b'"next":"' in body
        print(f"after: GET /v1/devices/dev-1/trail?format=json (first page of 5,000): {s * 1000:.1f} ms")
        (status, body), s = timed(lambda: get(port, "/map/svg?device=parked&limit=100000"))
        assert status == 200 and f"5000 of {args.clustered} points drawn".encode() in body, status
        print(f"after: GET /map/svg?device=parked&limit=100000 ({args.clustered:,} clustered points, 5,000 drawn): {s:.2f} s")

        results = []
        maps = [threading.Thread(target=lambda: results.append(get(port, "/map/svg?device=parked&limit=100000")))
                for _ in range(2)]
        for t in maps:
            t.start()
        (status, _), s = timed(lambda: get(port, "/healthz"))
        assert status == 200
        for t in maps:
            t.join()
        assert [r[0] for r in results] == [200, 200]
        print(f"after: GET /healthz during two concurrent /map of {args.clustered:,} points: {s * 1000:.1f} ms")

        # Idle connections: each connects and sends nothing.
        held, refused, failed = [], 0, 0
        for _ in range(args.idle):
            s = socket.socket()
            s.settimeout(1)
            try:
                s.connect(("127.0.0.1", port))
                held.append(s)
            except OSError:
                failed += 1
                s.close()
        # A new connection while the idle ones hold the cap: a prompt answer, not a hang.
        (status, _), healthz_s = timed(lambda: get(port, "/healthz", timeout=60))
        # Those over the cap got a 503 at once (one pass over all sockets).
        answered_503 = 0
        poller = select.poll()
        for s in held:
            poller.register(s, select.POLLIN)
        by_fd = {s.fileno(): s for s in held}
        for fd, _ in poller.poll(1000):
            s = by_fd[fd]
            try:
                if s.recv(64).startswith(b"HTTP/1.1 503"):
                    answered_503 += 1
            except OSError:
                pass
        print(f"after: {args.idle} idle connections (server limited to 1,024 descriptors): {len(held)} connected, "
              f"{answered_503} answered 503 at the connection cap, {failed} failed to connect within 1 s; "
              f"GET /healthz on a new connection meanwhile: {status} in {healthz_s * 1000:.0f} ms")
        for s in held:
            s.close()
        (status, _), s = timed(lambda: get(port, "/healthz", timeout=60))
        assert status in (200, 503)
        print(f"after: idle connections closed by the client: GET /healthz {status} in {s * 1000:.0f} ms")
        # Large bodies at once, against a fresh serve (empty database): what the process holds.
        fresh = subprocess.Popen([keeptrack, "serve", "--port", "0", "--db", os.path.join(work, "fresh.sqlite"),
                                  "--token", TOKEN], stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
        fresh_port = int(json.loads(fresh.stdout.readline())["url"].rsplit(":", 1)[1])
        idle_rss = proc_kb(fresh.pid, "VmRSS") / 1024
        batch = b'{"device":"big","records":[{"seq":1,"kind":"location","time":"2024-05-14T09:30:00Z","lat":48.1,"lon":11.5}]}'
        big = batch + b" " * ((8 << 20) - 1 - len(batch))
        statuses = []

        def post():
            c = http.client.HTTPConnection("127.0.0.1", fresh_port, timeout=120)
            try:
                c.request("POST", "/v1/locations", body=big, headers={"Authorization": f"Bearer {TOKEN}",
                                                                       "Content-Type": "application/json"})
                r = c.getresponse()
                r.read()
                statuses.append(str(r.status))
            except OSError as e:
                statuses.append(type(e).__name__)
            finally:
                c.close()

        posts = [threading.Thread(target=post) for _ in range(args.bodies)]
        for t in posts:
            t.start()
        for t in posts:
            t.join()
        status_counts = {k: statuses.count(k) for k in sorted(set(statuses))}
        assert len(statuses) == args.bodies and "200" in status_counts
        print(f"after: {args.bodies} concurrent 8 MiB bodies: answers {status_counts}; serve RSS {idle_rss:.0f} MB "
              f"before, peak {proc_kb(fresh.pid, 'VmHWM') / 1024:.0f} MB, after {proc_kb(fresh.pid, 'VmRSS') / 1024:.0f} MB")
        fresh.terminate()
        fresh.wait(10)
        status, body = get(port, "/metrics")
        refused = [l for l in body.decode().splitlines() if l.startswith("keeptrack_serve_connections_refused_total")]
        print(f"after: {refused[0]}")
    finally:
        server.terminate()
        server.wait(10)
        subprocess.run(["rm", "-rf", work])


if __name__ == "__main__":
    main()
