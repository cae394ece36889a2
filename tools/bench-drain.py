#!/usr/bin/env python3
"""Uploads while a paced replay runs, and a backlog drained by `keeptrack outbox send` (issue 36, item 4).

    tools/bench-drain.py [--binary PATH] [--speed 50] [--backlog-runs 10] [--only paced|drain]

1. Paced: `keeptrack replay --speed S --upload URL fixtures/walk-15min.nmea` (batches of 500, the
   default --batch-wait of 30 s) to a counting endpoint on 127.0.0.1 (Python's http.server, our JSON
   batch), which notes when each request arrives. Prints each request's time since the replay started
   and its records, and how many records arrived before the replay's input ended. A batch that fills
   while it waits goes at once: at --speed 50 the walk's 895 fixes take 18 s, and a batch of 500 fills
   in 10 s.
2. Drain: a backlog left by --backlog-runs replays of the walk to a target that answers 500, sent by
   `keeptrack outbox send` to a fresh `keeptrack serve` (its own process and database, which commits
   each batch before it answers), beside Python's http.client posting the same number of records as
   JSON batches of 500 over one keep-alive connection to another fresh `keeptrack serve`, in the same
   run. Checks the endpoint holds every record once.

--binary defaults to a release build (.build-release); give .build/debug/keeptrack to measure the
debug build (the paced figures are the pacing's, not the CPU's).
"""
import argparse, http.client, http.server, json, os, sqlite3, subprocess, sys, tempfile, threading, time

import keeptrack_tools

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
WALK = os.path.join(ROOT, "fixtures", "walk-15min.nmea")


class Counting(http.server.ThreadingHTTPServer):
    """Our JSON batch's endpoint that notes (monotonic time, records) for each request it stores."""

    def __init__(self):
        self.arrivals = []
        self.lock = threading.Lock()

        outer = self

        class Handler(http.server.BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args):
                pass

            def do_POST(self):
                body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
                n = len(json.loads(body)["records"])
                with outer.lock:
                    outer.arrivals.append((time.monotonic(), n))
                answer = json.dumps({"accepted": n, "duplicates": 0}).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(answer)))
                self.end_headers()
                self.wfile.write(answer)

        super().__init__(("127.0.0.1", 0), Handler)


def paced(binary, speed):
    server = Counting()
    threading.Thread(target=server.serve_forever, daemon=True).start()
    work = tempfile.mkdtemp(prefix="keeptrack-bench-drain-")
    url = f"http://127.0.0.1:{server.server_address[1]}/v1/locations"
    start = time.monotonic()
    p = subprocess.Popen([binary, "replay", "--speed", str(speed), "--upload", url, "--data-dir", work, WALK],
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    # The input has ended when the last location is printed; the rest is the upload of what is left.
    last_event = start
    for line in p.stdout:
        if line.startswith('{"event":"location"'):
            last_event = time.monotonic()
    err = p.stderr.read()
    p.wait()
    end = time.monotonic()
    server.shutdown()
    subprocess.run(["rm", "-rf", work])
    if p.returncode != 0:
        sys.exit(f"bench-drain: the replay failed: {err}")
    arrivals = [(t - start, n) for t, n in server.arrivals]
    total = sum(n for _, n in arrivals)
    during = sum(n for t, n in arrivals if t <= last_event - start)
    print(f"paced replay (--speed {speed:g}, batches of 500, --batch-wait 30s): input {last_event - start:.1f} s, "
          f"exit {end - start:.1f} s; {len(arrivals)} requests, {total} records")
    for t, n in arrivals:
        print(f"  {t:6.1f} s  {n:4d} records{'' if t <= last_event - start else '  (after the input ended)'}")
    print(f"  uploaded while the input lasted: {during} of {total} records")
    return during, total


def stored(database):
    db = sqlite3.connect(database)
    return db.execute("SELECT COUNT(*), COUNT(DISTINCT seq) FROM points").fetchone()


def drain(binary, runs):
    work = tempfile.mkdtemp(prefix="keeptrack-bench-drain-")
    # The backlog: replays to an endpoint that answers every request 500 (each gives up at once:
    # --max-backoff 0.01), leaving their records in the outbox.
    failing = subprocess.Popen([binary, "serve", "--port", "0", "--db", os.path.join(work, "failing.sqlite"),
                                "--token", "bench", "--faults", "--fail-rate", "1", "--fail-status", "500",
                                "--log-level", "error"], stdout=subprocess.PIPE, text=True)
    down = json.loads(failing.stdout.readline())["url"].rstrip("/") + "/v1/locations"
    try:
        for _ in range(runs):
            subprocess.run([binary, "replay", "--upload", down, "--target-name", "fleet", "--token", "bench",
                            "--device-id", "bench", "--max-backoff", "0.01", "--data-dir", work, WALK], check=True,
                           stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    finally:
        keeptrack_tools.stop(failing)
    status = subprocess.run([binary, "outbox", "status", "--data-dir", work], check=True, capture_output=True,
                            text=True).stdout
    backlog = int(status.split(" pending")[0].split()[-1])
    server, url = keeptrack_tools.serve(binary, os.path.join(work, "endpoint.sqlite"), "bench")
    url = url.rstrip("/")
    try:
        start = time.monotonic()
        r = subprocess.run([binary, "outbox", "send", "--upload", url + "/v1/locations", "--target-name", "fleet",
                            "--token", "bench", "--data-dir", work], capture_output=True, text=True)
        seconds = time.monotonic() - start
    finally:
        keeptrack_tools.stop(server)
    held = stored(os.path.join(work, "endpoint.sqlite"))
    if r.returncode != 0 or held != (backlog, backlog):
        sys.exit(f"bench-drain: outbox send exited {r.returncode}, the endpoint holds {held} of {backlog}: "
                 f"{r.stdout} {r.stderr}")
    peer = peer_json(binary, backlog, work)
    subprocess.run(["rm", "-rf", work])
    print(f"outbox send: a backlog of {backlog:,} records (the walk, {runs} runs) to keeptrack serve on loopback")
    print(f"  keeptrack outbox send (the process, start to exit)  {seconds:6.2f} s  {backlog / seconds:8,.0f} records/s")
    print(f"  python http.client, JSON batches of 500             {peer:6.2f} s  {backlog / peer:8,.0f} records/s")
    print(f"  {r.stdout.strip()}")


def peer_json(binary, count, work):
    """Python's http.client posting `count` records as JSON batches of 500 to a fresh `keeptrack serve`."""
    database = os.path.join(work, "peer.sqlite")
    server, url = keeptrack_tools.serve(binary, database, "bench")
    host, port = url.split("//")[1].split(":")
    headers = {"Content-Type": "application/json", "Authorization": "Bearer bench"}
    try:
        conn = http.client.HTTPConnection(host, int(port.rstrip("/")))
        start = time.monotonic()
        for b in range(0, count, 500):
            records = [{"id": f"peer:{i + 1}", "seq": i + 1, "kind": "location",
                        "time": time.strftime("%Y-%m-%dT%H:%M:%S.000Z", time.gmtime(1_715_679_000 + i)),
                        "lat": 48.1 + i * 1e-6, "lon": 11.5, "alt": 520.0, "hAcc": 4.5, "vAcc": 7.5, "speed": 1.25,
                        "course": 90.0} for i in range(b, min(count, b + 500))]
            conn.request("POST", "/v1/locations", json.dumps({"device": "peer", "records": records}), headers)
            resp = conn.getresponse()
            resp.read()
            if resp.status != 200:
                sys.exit(f"bench-drain: the peer got {resp.status}")
        seconds = time.monotonic() - start
    finally:
        keeptrack_tools.stop(server)
    if stored(database) != (count, count):
        sys.exit(f"bench-drain: the peer's endpoint holds {stored(database)} of {count}")
    return seconds


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--binary", help="keeptrack to run (default: a release build)")
    ap.add_argument("--speed", type=float, default=50)
    ap.add_argument("--backlog-runs", type=int, default=10)
    ap.add_argument("--only", choices=["paced", "drain"])
    args = ap.parse_args()
    binary = args.binary or keeptrack_tools.build("keeptrack")
    if args.only != "drain":
        paced(binary, args.speed)
    if args.only != "paced":
        drain(binary, args.backlog_runs)


if __name__ == "__main__":
    main()
