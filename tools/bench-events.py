#!/usr/bin/env python3
"""Event-to-webhook latency: how long after a location is posted the event it decides reaches a webhook.

    tools/bench-events.py [--rate 1000] [--devices 100] [--seconds 60] [--geofences 10000]
                          [--store postgres|sqlite] [--rounds 1] [--keeptrack PATH] [--baseline PATH]

One `keeptrack serve --allow-private-hooks` (the release build), on a throwaway PostgreSQL cluster
(tools/pgcluster.py) or a SQLite file, with --geofences circles of 200 m on a grid over the fleet's
area and one webhook hook (every kind) to a receiver in this process. --devices vehicles (tools/
fleet-load.py's paths, 3 to 30 m/s) each post one batch a second of rate/devices locations stamped
with the wall clock, --rate locations a second in all, for --seconds. The receiver notes when each
event arrives; an event's deciding location (its `decidedAt`, else its `time`) names the batch that
carried it, and the latency is from that batch's POST to the event's arrival (the batching of the
locations themselves is not counted). Prints the count, p50, p99 and the most, and the ingest
achieved beside the rate asked; exit 1 when no event arrived.

With --rounds N it runs N times, each on a fresh database, and prints each round and the medians;
with --baseline PATH another build runs the same rounds, interleaved (baseline, build; then build,
baseline; ...), so that both meet the same load on a shared machine.
"""
import argparse, http.client, http.server, json, math, os, random, subprocess, sys, tempfile, threading, time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "tools"))
import pgcluster  # noqa: E402
from keeptrack_tools import listening_port  # noqa: E402

SECRET = "a secret of more than 16 bytes"


def iso(t):
    ms = int(round(t * 1000))
    return time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(ms // 1000)) + ".%03dZ" % (ms % 1000)


class Vehicle:
    def __init__(self, ident, rng):
        self.id, self.rng, self.seq = ident, rng, 0
        self.lat = 48.137 + rng.uniform(-0.15, 0.15)
        self.lon = 11.575 + rng.uniform(-0.22, 0.22)
        self.heading = rng.uniform(0, 360)
        self.speed = rng.uniform(3, 30)

    def batch(self, n, now):
        out = []
        for k in range(n):
            self.seq += 1
            step = 1.0 / n
            self.heading = (self.heading + self.rng.gauss(0, 2)) % 360
            d = self.speed * step
            self.lat += d * math.cos(math.radians(self.heading)) / 111_320
            self.lon += d * math.sin(math.radians(self.heading)) / (111_320 * math.cos(math.radians(self.lat)))
            t = now - 1 + (k + 1) * step
            out.append((t, '{"seq":%d,"kind":"location","time":"%s","lat":%.7f,"lon":%.7f,"hAcc":5.0,"speed":%.2f}'
                        % (self.seq, iso(t), self.lat, self.lon, self.speed)))
        return out


def geofences(count):
    side = max(1, int(count ** 0.5))
    features = []
    for k in range(count):
        i, j = divmod(k, side)
        lat = 48.137 - 0.18 + 0.36 * (i + 0.5) / side
        lon = 11.575 - 0.27 + 0.54 * (j + 0.5) / side
        features.append('{"type":"Feature","id":"g%d","geometry":{"type":"Point","coordinates":[%.6f,%.6f]},'
                        '"properties":{"radius":200}}' % (k, lon, lat))
    return '{"type":"FeatureCollection","features":[%s]}' % ",".join(features)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rate", type=int, default=1000)
    ap.add_argument("--devices", type=int, default=100)
    ap.add_argument("--seconds", type=int, default=60)
    ap.add_argument("--geofences", type=int, default=10_000)
    ap.add_argument("--store", choices=["postgres", "sqlite"], default="postgres")
    ap.add_argument("--keeptrack", default=os.path.join(ROOT, ".build-release", "release", "keeptrack"))
    ap.add_argument("--rounds", type=int, default=1)
    ap.add_argument("--baseline", help="another build, run in the same rounds (interleaved)")
    args = ap.parse_args()
    builds = [("build", args.keeptrack)] + ([("baseline", args.baseline)] if args.baseline else [])
    results = {name: [] for name, _ in builds}
    for r in range(args.rounds):
        order = builds if r % 2 == 0 else builds[::-1]
        for name, binary in order:
            result = run(args, binary)
            if result is None:
                print(f"bench-events: round {r + 1}, {name}: no event arrived")
                sys.exit(1)
            results[name].append(result)
            print(f"bench-events: round {r + 1}, {name}: {result['line']}", flush=True)

    def median(values):
        values = sorted(values)
        n = len(values)
        return values[n // 2] if n % 2 else (values[n // 2 - 1] + values[n // 2]) / 2

    for name, _ in builds:
        rounds = results[name]
        label = "" if not args.baseline else f" ({name})"
        print(f"bench-events: {args.store}, {args.geofences:,} geofences, {args.devices} devices, asked "
              f"{args.rate:,} locations/s{label}, median of {len(rounds)} round(s): stored "
              f"{median([x['stored'] for x in rounds]):,.0f}/s, {median([x['count'] for x in rounds]):.0f} events, "
              f"latency p50 {median([x['p50'] for x in rounds]):.0f} ms, p99 {median([x['p99'] for x in rounds]):.0f} ms "
              f"(each round: {', '.join('%.0f' % x['p99'] for x in rounds)}), most {max(x['most'] for x in rounds):.0f} ms")


def run(args, keeptrack):
    """One round: a fresh database and server, the load, the receiver's arrivals; None when no event arrived."""
    per = max(1, args.rate // args.devices)
    arrivals = []  # (arrival, device, deciding time)
    lock = threading.Lock()

    class Receiver(http.server.BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def do_POST(self):
            body = self.rfile.read(int(self.headers.get("Content-Length", "0")))
            at = time.time()
            e = json.loads(body)
            decided = e.get("decidedAt") or e.get("time")
            with lock:
                arrivals.append((at, e["device"], decided, e["kind"]))
            self.send_response(200)
            self.send_header("Content-Length", "0")
            self.end_headers()

        def log_message(self, *a):
            pass

    receiver = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Receiver)
    receiver.daemon_threads = True
    threading.Thread(target=receiver.serve_forever, daemon=True).start()
    cluster = pgcluster.Cluster() if args.store == "postgres" else None
    scratch = tempfile.mkdtemp(prefix="keeptrack-bench-events-")
    server = None
    try:
        db = cluster.create_database("events") if cluster else os.path.join(scratch, "endpoint.sqlite")
        server = subprocess.Popen([keeptrack, "serve", "--port", "0", "--db", db, "--token", "t",
                                   "--allow-private-hooks", "--log-level", "error"], stdout=subprocess.PIPE, text=True)
        port = listening_port(server.stdout.readline())
        if port is None:
            sys.exit("bench-events: keeptrack serve did not start")

        def call(method, path, body):
            c = http.client.HTTPConnection("127.0.0.1", port, timeout=300)
            c.request(method, path, body=body, headers={"Authorization": "Bearer t", "Content-Type": "application/json"})
            r = c.getresponse()
            r.read()
            c.close()
            return r.status

        assert call("PUT", "/v1/geofences", geofences(args.geofences)) == 200
        hook = json.dumps({"type": "webhook", "url": f"http://127.0.0.1:{receiver.server_address[1]}/hook",
                           "secret": SECRET})
        assert call("PUT", "/v1/hooks/bench", hook) in (200, 201)
        vehicles = [Vehicle(f"v{i:04d}", random.Random(i)) for i in range(args.devices)]
        posted = {}  # (device, ISO time of a location) -> when its batch was posted
        sent = [0]
        start = time.time() + 1

        def sender(group):
            conn = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
            for s in range(args.seconds):
                tick = start + s
                delay = tick - time.time()
                if delay > 0:
                    time.sleep(delay)
                for v in group:
                    now = time.time()
                    records = v.batch(per, now)
                    body = '{"device":"%s","records":[%s]}' % (v.id, ",".join(r for _, r in records))
                    with lock:
                        for t, _ in records:
                            posted[(v.id, iso(t))] = now
                    conn.request("POST", "/v1/locations", body=body,
                                 headers={"Authorization": "Bearer t", "Content-Type": "application/json"})
                    r = conn.getresponse()
                    r.read()
                    if r.status == 200:
                        with lock:
                            sent[0] += per
            conn.close()

        groups = [vehicles[i::8] for i in range(8)]
        threads = [threading.Thread(target=sender, args=(g,)) for g in groups]
        t0 = time.time()
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        elapsed = time.time() - t0
        time.sleep(10)  # the last events' deliveries
        latencies = []
        with lock:
            for at, device, decided, kind in arrivals:
                p = posted.get((device, decided))
                if p is not None:
                    latencies.append((at - p) * 1000)
        latencies.sort()
        if not latencies:
            return None

        def pct(q):
            return latencies[min(len(latencies) - 1, int(q * len(latencies)))]

        line = (f"{args.store}, {args.geofences:,} geofences, {args.devices} devices, asked "
                f"{args.rate:,} locations/s, stored {sent[0] / elapsed:,.0f}/s for {elapsed:.0f} s; "
                f"{len(latencies)} events at the webhook ({len(arrivals)} in all): latency p50 {pct(0.5):.0f} ms, "
                f"p99 {pct(0.99):.0f} ms, most {latencies[-1]:.0f} ms")
        return {"line": line, "stored": sent[0] / elapsed, "count": len(latencies), "p50": pct(0.5),
                "p99": pct(0.99), "most": latencies[-1]}
    finally:
        if server:
            server.terminate()
            server.wait()
        receiver.shutdown()
        if cluster:
            cluster.remove()
        subprocess.run(["rm", "-rf", scratch])


if __name__ == "__main__":
    main()
