#!/usr/bin/env python3
"""Ingest into PostgreSQL through `keeptrack serve`, beside the engine's own ceiling, in one run.

    tools/bench-pg.py [--records 200000] [--devices 1000] [--batch 100] [--connections 16] [--rounds 5]
                      [--geofences N] [--keeptrack PATH] [--baseline PATH]

Starts a throwaway PostgreSQL 15 + PostGIS cluster (tools/pgcluster.py: its own directory and
loopback port, fsync and synchronous_commit on, as a production server has them), then measures on
the same rows (--records from --devices simulated devices, tools/fleet-load.py's paths):

1. the ceiling: `\\copy` by psql of those rows, as CSV, into the store's own `positions` table (the
   schema keeptrack serve migrated: unique key, GiST on geography, (device, time)) — and the same
   with a `geometry` column instead, to show what geography costs;
2. `keeptrack serve --db postgres://...` (the release build) loaded by tools/fleet-load.py: JSON batches
   of --batch from every device at once, idempotent inserts, each batch acknowledged after commit;
3. two instances on one database, the devices shared out between them;
4. one instance again with the derived work off (the stops trigger disabled: no device marked, so
   no stops, trips, statistics or events are computed, and the geofences are never evaluated):
   what the ingest path alone reaches, beside what it reaches with everything on (a diagnostic
   row: the target is the whole instance's);
5. the SQLite store under the same load, for docs/performance.md's table.

1-4 run --rounds times, each round on fresh databases and in another order (1 2 3, then 3 2 1, then
2 3 1, ...), each phase after a CHECKPOINT: on a shared machine one run's figures move by 10-20 %
from minute to minute, and a fixed order would hand the later phases the earlier ones' checkpoint.
Each round's figures are compared within the round (one instance against that round's \\copy, two
instances against one), and the table gives the medians over the rounds, with each round's figures
on standard error. It also counts the transactions PostgreSQL committed (rows per commit: how far
the COPYs coalesced).

With --geofences N, each instance's database gets N geofences (circles of 200 m on a grid over the
fleet's area, `PUT /v1/geofences`) before the load: every stored location is then evaluated against
them (events kept with the records, docs/events.md).

With --baseline PATH, another build's one instance and two run in the same rounds, interleaved with
the build's (the phases rotated as above), and the table and the round-by-round figures have its rows
too: a change compared with the build before it on the same minutes of a shared machine.

Each load is also timed to the end of the work it leaves behind (``Settling``): a batch is
acknowledged once its points are stored, and its devices' stops, trips and events are kept by a
catch-up right after, so an instance that answers faster than it keeps up finishes after the load.
"kept/s" is the records over the time from the first batch marked to nothing owed; the two-instance
comparison is given on both rates (acknowledged, kept).

fleet-load checks each time that the database holds exactly what was acknowledged. Prints docs/performance.md
rows (records/s, the ratio to \\copy) and exits 1 if a check failed or the target (0.7 of \\copy,
the median over the rounds) was missed. Needs `swift build -c release --scratch-path .build-release`
first.
"""
import argparse, csv, importlib.machinery, json, os, random, subprocess, sys, tempfile, threading, time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "tools"))
import keeptrack_tools  # noqa: E402
import pgcluster  # noqa: E402

fleet = importlib.machinery.SourceFileLoader("fleetload", os.path.join(ROOT, "tools", "fleet-load.py")).load_module()
BINARY = os.path.join(ROOT, ".build-release", "release", "keeptrack")


# The derived work off (tools/bench-pg-profile.py's `nostops` too): no device is marked, so the
# catch-up finds nothing to run (stops, trips, statistics, events and geofences).
BARE = ("ALTER TABLE positions DISABLE TRIGGER positions_stops", "DELETE FROM stop_detectors")


def serve(database, token, binary=None):
    return keeptrack_tools.serve(binary or BINARY, database, token)


def migrate(database):
    """The store's schema, exactly: keeptrack serve migrates it when it opens the database."""
    p, _ = serve(database, "x")
    p.kill()
    p.wait()


def load(args, urls, pids, database_pid, label):
    cmd = [sys.executable, os.path.join(ROOT, "tools", "fleet-load.py"), "--devices", str(args.devices), "--rate", "0",
           "--records", str(args.records), "--minutes", "30", "--batch", str(args.batch), "--token", "t",
           "--connections", str(args.connections), "--processes", "2", "--json", "--seed", "7"]
    for u in urls:
        cmd += ["--url", u]
    for p in pids:
        cmd += ["--server-pid", str(p)]
    if database_pid:
        cmd += ["--database-pid", str(database_pid)]
    r = subprocess.run(cmd, stdout=subprocess.PIPE, text=True)
    summary = json.loads(r.stdout.strip().splitlines()[-1])
    summary["label"] = label
    return summary


def put_geofences(url, count):
    """`count` circles of 200 m on a grid over fleet-load's area (48.137 ± 0.18, 11.575 ± 0.27)."""
    import urllib.request
    side = max(1, int(count ** 0.5))
    features = []
    for k in range(count):
        i, j = divmod(k, side)
        lat = 48.137 - 0.18 + 0.36 * (i + 0.5) / side
        lon = 11.575 - 0.27 + 0.54 * (j + 0.5) / side
        features.append('{"type":"Feature","id":"g%d","geometry":{"type":"Point","coordinates":[%.6f,%.6f]},'
                        '"properties":{"radius":200}}' % (k, lon, lat))
    body = ('{"type":"FeatureCollection","features":[%s]}' % ",".join(features)).encode()
    base = url.rsplit("/v1/", 1)[0] if "/v1/" in url else url.rstrip("/")
    request = urllib.request.Request(base + "/v1/geofences", data=body, method="PUT",
                                     headers={"Authorization": "Bearer t", "Content-Type": "application/geo+json"})
    with urllib.request.urlopen(request, timeout=300) as answer:
        assert answer.status == 200, answer.status


def commits(cluster, database):
    """Transactions committed in `database` so far (pg_stat_database). Call it once no backend of a
    keeptrack is connected: a backend hands its counts in when it ends (or idle, after up to 10 s)."""
    while int(cluster.psql(f"SELECT count(*) FROM pg_stat_activity WHERE datname = '{database}'").strip() or 0):
        time.sleep(0.05)
    return int(cluster.psql(f"SELECT xact_commit FROM pg_stat_database WHERE datname = '{database}'").strip())


class Settling:
    """When the work a load leaves behind is done: the stops, trips and events a batch's devices owe
    (its marks in `stop_marks`, the detectors left dirty) are kept by a catch-up after the batch is
    acknowledged, so an instance can answer faster than it keeps up and finish after the load.
    Polled every 0.1 s on a psql session of its own, from the first batch marked to the first poll
    that finds nothing owed once the load has ended: records / that time is the rate at which
    everything was kept, acknowledged or derived."""

    OWED = ("SELECT (SELECT count(*) FROM stop_marks) + (SELECT count(*) FROM stop_detectors "
            "WHERE events_dirty OR dirty_from > -1e299);")

    def __init__(self, cluster, database):
        self.session = subprocess.Popen(
            ["psql", "-X", "-q", "-A", "-t", "-h", cluster.dir, "-p", str(cluster.port), "-U", cluster.user,
             "-d", database], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, cwd="/tmp")
        self.first = self.clear = None
        self.done = threading.Event()
        self.watcher = threading.Thread(target=self.watch)
        self.watcher.start()

    def owed(self):
        self.session.stdin.write(self.OWED + "\n")
        self.session.stdin.flush()
        return int(self.session.stdout.readline().strip() or 0)

    def watch(self):
        while not self.done.is_set():
            owed, now = self.owed(), time.monotonic()
            if owed:
                self.first = self.first or now
                self.clear = None
            elif self.first is not None and self.clear is None:
                self.clear = now
            self.done.wait(0.1)

    def finish(self, limit=600):
        """Once the load has ended: the seconds from the first batch marked to nothing owed."""
        self.done.set()
        self.watcher.join()
        deadline = time.monotonic() + limit
        while self.clear is None and self.first is not None and time.monotonic() < deadline:
            if not self.owed():
                self.clear = time.monotonic()
            else:
                time.sleep(0.1)
        self.session.stdin.close()
        self.session.wait()
        return self.clear - self.first if self.first is not None and self.clear is not None else None


def kept_ratio(two, one):
    """Two instances' kept rate over one's (``Settling``); 0 when either was not measured."""
    return two["kept_per_s"] / one["kept_per_s"] if two.get("kept_per_s") and one.get("kept_per_s") else 0.0


def median(values):
    values = sorted(values)
    n = len(values)
    return values[n // 2] if n % 2 else (values[n // 2 - 1] + values[n // 2]) / 2


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--records", type=int, default=200_000)
    ap.add_argument("--devices", type=int, default=1000)
    ap.add_argument("--batch", type=int, default=100)
    ap.add_argument("--connections", type=int, default=16)
    ap.add_argument("--rounds", type=int, default=5, help="rounds of \\copy, one instance and two (default 5)")
    ap.add_argument("--keeptrack", help="the binary (default: the release build's)")
    ap.add_argument("--geofences", type=int, default=0, help="geofences put before each load (default none)")
    ap.add_argument("--baseline", help="another build whose one and two instances run in the same rounds")
    args = ap.parse_args()
    global BINARY
    BINARY = args.keeptrack or BINARY
    if not os.path.exists(BINARY):
        sys.exit("bench-pg: build first: swift build -c release --scratch-path .build-release")
    if args.rounds < 1:
        sys.exit("bench-pg: --rounds must be 1 or more")
    cluster = pgcluster.Cluster()
    tmp = tempfile.mkdtemp(prefix="keeptrack-bench-pg-")
    os.chmod(tmp, 0o755)
    failed = False
    try:
        # The rows \copy loads: the same devices, paths and columns fleet-load sends.
        rng = random.Random(7)
        seq = int(time.time() * 1e6)  # as fleet-load numbers a run's records
        devices = [fleet.Device(f"copy-{i:05d}", random.Random(rng.random()), time.time() - 3600, 1, seq)
                   for i in range(args.devices)]
        rows_path = os.path.join(tmp, "rows.csv")
        per_device = args.records // args.devices
        with open(rows_path, "w", newline="") as f:
            w = csv.writer(f)
            received = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
            for d in devices:
                batch = json.loads(d.batch(per_device))
                for r in batch["records"]:
                    w.writerow([f"id:{d.id}:{r['seq']}", d.id, r["seq"], "location", None, r["time"],
                                f"SRID=4326;POINT({r['lon']} {r['lat']})", r["alt"], r["hAcc"], None, r["speed"],
                                r["course"], "json", received, "t", None])
        os.chmod(rows_path, 0o644)
        rows = per_device * args.devices
        columns = "key, device, seq, kind, region, time, position, alt, h_acc, v_acc, speed, course, format, received, valid, attributes"

        def copy(name, kind):
            url = cluster.create_database(name)
            migrate(url)
            if kind == "geometry":
                cluster.psql("ALTER TABLE positions ALTER position TYPE geometry(Point, 4326) USING position::geometry", name)
            cluster.psql("CHECKPOINT")
            t0 = time.monotonic()
            cluster.psql(f"\\copy positions ({columns}) FROM '{rows_path}' WITH (FORMAT csv)", name)
            rate = rows / (time.monotonic() - t0)
            print(f"bench-pg: \\copy {rows} rows into positions ({kind}): {rate:,.0f} rows/s", file=sys.stderr)
            return rate

        def instances(name, count, label, binary=None, switches=()):
            url = cluster.create_database(name)
            migrate(url)
            for statement in switches:
                cluster.psql(statement, name)
            before = commits(cluster, name)
            servers = [serve(url, "t", binary) for _ in range(count)]
            if args.geofences:
                put_geofences(servers[0][1], args.geofences)
            cluster.psql("CHECKPOINT")
            settling = Settling(cluster, name)
            summary = load(args, [u for _, u in servers], [p.pid for p, _ in servers], cluster.pids()[0], label)
            settled = settling.finish()
            summary["kept_per_s"] = round(summary["stored"] / settled) if settled else None
            summary["behind_s"] = round(max(0.0, settled - summary["seconds"]), 2) if settled else None
            for p, _ in servers:
                p.kill()
                p.wait()
            summary["commits"] = commits(cluster, name) - before
            print(f"bench-pg: {label}: {summary['stored_per_s']:,} records/s, keeptrack CPU "
                  f"{summary['server_cpu_percent']} %, PostgreSQL CPU {summary['database_cpu_percent']} %, "
                  f"fleet-load CPU {summary['load_cpu_percent']} %, "
                  f"{summary['commits']} commits ({rows / max(1, summary['commits']):.0f} rows a commit); " + (
                      f"stops and events kept at {summary['kept_per_s']:,} records/s "
                      f"({summary['behind_s']} s after the load)" if summary["kept_per_s"] else "nothing derived"),
                  file=sys.stderr)
            return summary

        geometry = copy("copy_geometry", "geometry")
        rounds = []
        phases = ["copy", "one", "two", "bare"] + (["base-one", "base-two"] if args.baseline else [])
        for r in range(args.rounds):
            order = phases[r % len(phases):] + phases[:r % len(phases)]
            if r % 2:
                order.reverse()
            print(f"bench-pg: round {r + 1} of {args.rounds}: {' '.join(order)}", file=sys.stderr)
            result = {}
            for phase in order:
                if phase == "copy":
                    result["copy"] = copy(f"copy_{r}", "geography")
                elif phase == "one":
                    result["one"] = instances(f"one_{r}", 1, "1 instance")
                elif phase == "bare":
                    result["bare"] = instances(f"bare_{r}", 1, "1 instance, nothing derived", switches=BARE)
                elif phase == "base-one":
                    result["base-one"] = instances(f"base_one_{r}", 1, "baseline, 1 instance", args.baseline)
                elif phase == "base-two":
                    result["base-two"] = instances(f"base_two_{r}", 2, "baseline, 2 instances", args.baseline)
                else:
                    result["two"] = instances(f"two_{r}", 2, "2 instances, one database")
            result["one_ratio"] = result["one"]["stored_per_s"] / result["copy"]
            result["two_ratio"] = result["two"]["stored_per_s"] / result["copy"]
            result["bare_ratio"] = result["bare"]["stored_per_s"] / result["copy"]
            result["two_vs_one"] = result["two"]["stored_per_s"] / result["one"]["stored_per_s"]
            result["two_vs_one_kept"] = kept_ratio(result["two"], result["one"])
            print(f"bench-pg: round {r + 1}: one instance {result['one_ratio']:.2f} of \\copy, two "
                  f"{result['two_ratio']:.2f}; two / one = {result['two_vs_one']:.3f} acknowledged, "
                  f"{result['two_vs_one_kept']:.3f} kept; nothing derived {result['bare_ratio']:.2f} of \\copy",
                  file=sys.stderr)
            failed |= not (result["one"]["exact"] and result["two"]["exact"] and result["bare"]["exact"])
            if args.baseline:
                result["base_one_ratio"] = result["base-one"]["stored_per_s"] / result["copy"]
                result["base_two_ratio"] = result["base-two"]["stored_per_s"] / result["copy"]
                result["base_two_vs_one"] = result["base-two"]["stored_per_s"] / result["base-one"]["stored_per_s"]
                result["base_two_vs_one_kept"] = kept_ratio(result["base-two"], result["base-one"])
                print(f"bench-pg: round {r + 1}, baseline: one instance {result['base_one_ratio']:.2f} of \\copy, two "
                      f"{result['base_two_ratio']:.2f}; two / one = {result['base_two_vs_one']:.3f}", file=sys.stderr)
                failed |= not (result["base-one"]["exact"] and result["base-two"]["exact"])
            rounds.append(result)

        # SQLite under the same load, once: for comparison, it does not share across processes.
        server, endpoint = serve(os.path.join(tmp, "endpoint.sqlite"), "t")
        lite = load(args, [endpoint], [server.pid], None, "SQLite (one file)")
        server.kill()
        server.wait()
        failed |= not lite["exact"]

        def row(label, summaries, ratio):
            pick = lambda key: median([s[key] for s in summaries])
            ratio_text = f"{ratio:.2f}" if ratio is not None else "–"
            db = f"{pick('database_cpu_percent'):.0f} %" if summaries[0]["database_cpu_percent"] is not None else "–"
            per_commit = f"{rows / pick('commits'):.0f}" if "commits" in summaries[0] else "–"
            kept = [s["kept_per_s"] for s in summaries if s.get("kept_per_s")]
            kept_text = f"{median(kept):,.0f}" if kept else "–"
            print(f"| {label} | {pick('stored_per_s'):,.0f} | {ratio_text} | {kept_text} | {pick('p50_ms'):.1f} | {pick('p99_ms'):.1f} | "
                  f"{sum(sum(s['errors'].values()) for s in summaries)} | {pick('server_cpu_percent'):.0f} % | {db} | "
                  f"{pick('load_cpu_percent'):.0f} % | {per_commit} | {max(s['server_peak_rss_mib'] for s in summaries)} MiB | "
                  f"{'yes' if all(s['exact'] for s in summaries) else 'NO'} |")

        ceiling = median([r["copy"] for r in rounds])
        one_ratio = median([r["one_ratio"] for r in rounds])
        two_vs_one = [r["two_vs_one"] for r in rounds]
        print(f"\n`\\copy` ceiling: {ceiling:,.0f} rows/s with geography, median of {args.rounds} rounds (geometry: "
              f"{geometry:,.0f}); {rows:,} rows from {args.devices:,} devices, batches of {args.batch}, "
              f"{args.connections} connections\n")
        print("| store | records/s | of `\\copy` | kept/s | p50 ms | p99 ms | errors | keeptrack CPU | PostgreSQL CPU | fleet-load CPU "
              "| rows a commit | peak RSS | exact |")
        print("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|")
        row("1 instance", [r["one"] for r in rounds], one_ratio)
        row("2 instances, one database", [r["two"] for r in rounds], median([r["two_ratio"] for r in rounds]))
        row("1 instance, nothing derived", [r["bare"] for r in rounds], median([r["bare_ratio"] for r in rounds]))
        if args.baseline:
            row("baseline, 1 instance", [r["base-one"] for r in rounds], median([r["base_one_ratio"] for r in rounds]))
            row("baseline, 2 instances", [r["base-two"] for r in rounds], median([r["base_two_ratio"] for r in rounds]))
        row("SQLite (one file)", [lite], lite["stored_per_s"] / ceiling)
        listed = lambda values: ", ".join(f"{x:.2f}" for x in values)
        kept_two_vs_one = [r["two_vs_one_kept"] for r in rounds]
        print(f"\nTwo instances / one, round by round: {listed(two_vs_one)} (median {median(two_vs_one):.2f}) "
              f"acknowledged; {listed(kept_two_vs_one)} (median {median(kept_two_vs_one):.2f}) kept; "
              f"one instance / \\copy: {listed(r['one_ratio'] for r in rounds)}; "
              f"nothing derived / \\copy: {listed(r['bare_ratio'] for r in rounds)}")
        if args.baseline:
            base = [r["base_two_vs_one"] for r in rounds]
            base_kept = [r["base_two_vs_one_kept"] for r in rounds]
            print(f"Baseline: two instances / one, round by round: {listed(base)} (median {median(base):.2f}) "
                  f"acknowledged; {listed(base_kept)} (median {median(base_kept):.2f}) kept; "
                  f"one instance / \\copy: {listed(r['base_one_ratio'] for r in rounds)}")
        if one_ratio < 0.7:
            print(f"\nbench-pg: one instance reached {one_ratio:.2f} of \\copy (median), under the 0.7 target",
                  file=sys.stderr)
            failed = True
    finally:
        cluster.remove()
        subprocess.run(["rm", "-rf", tmp])
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
