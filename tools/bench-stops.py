#!/usr/bin/env python3
"""Stops and trips over 30 days of 1 Hz points for one device through a release `keeptrack serve`
(issue 27's target: `GET /v1/devices/{id}/stops` and `/trips` under 1 s on both stores, in bounded
memory), beside the database alone reading the same points, in one run.

    tools/bench-stops.py [--days 30] [--runs 5] [--postgres] [--keeptrack BIN] [--baseline OTHER_BIN]
                         [--sqlite-dir DIR]
    tools/bench-stops.py --ingest [--postgres]

Stops and trips are kept at ingest (docs/visits.md, "The cost"); a store filled behind the server's back
has none yet, as a store upgraded from before them: the first query computes and stores them all, and
is timed on its own ("first query: computes all").

1. A store of --days × 86,400 positions of one device, made by `keeptrack serve --db` (its own schema,
   migrated), then filled with SQL directly (SQLite: a recursive CTE; PostgreSQL: generate_series), the
   indexes dropped before and built after, the device's summary computed. Each day: home until 08:00,
   a 30-minute drive to work (7.4 km), work until 17:30, the drive home, home until midnight and on;
   ±3 m of wander at every fix (integer hashes), hAcc 5 m. So 2 × days + 1 stops (the last still
   open) and 2 × days trips.
2. `keeptrack serve` on it; each query --runs times over one kept-alive connection, after one checked
   warm-up (status, the number of stops or trips): stops and trips over all the days, and over one day.
   The server's peak resident memory (VmHWM) is read after a one-page trail request and again after
   all the stops queries: bounded memory shows as the same figure, whatever the number of points.
3. The peer, in the same run: the database alone reading the same rows in the same order (SQLite:
   `SELECT count(*), sum(lat + lon + hAcc)` over the same index range, by Python's sqlite3 on the same
   file; PostgreSQL: `EXPLAIN (ANALYZE)`'s execution time of the server's own query).

With --ingest: the cost the detector adds to storing points. `keeptrack serve` on an empty store, one
day of the same trail (86,400 points) posted as our JSON batches of 100 over one kept-alive connection,
then 3,000 more one per request (OsmAnd senders post one position at a time); points stored per
second, beside the same binary on a fresh store where the device is marked "never computed" before
its first point (as a store upgraded from before stops were kept: ingest leaves the detector to the
first query), in the same run.

With --baseline, the same queries through another keeptrack build (e.g. main's before a change to the
detector, issue 36's smoothing) on a store of its own filled the same way, first, in the same run: its
rows are labelled "baseline", this build's "this build".

Prints docs/performance.md rows (median and slowest, milliseconds). Exits 1 if a check failed. Needs
`swift build -c release --scratch-path .build-release --product keeptrack` first.
"""
import argparse, http.client, json, os, sqlite3, statistics, subprocess, sys, tempfile, time, urllib.parse

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "tools"))
import keeptrack_tools  # noqa: E402
TOKEN = "bench"
T0 = 1_741_132_800  # 2025-03-05T00:00:00Z
DEVICE = "commuter"
HOME = (48.10, 11.50)
WORK = (48.15, 11.56)
# Seconds of the day: leave home, reach work, leave work, reach home.
LEG = ((28_800, 30_600), (63_000, 64_800))


def position_sql(i, sod):
    """lat and lon of point `i` (seconds since T0) at second of day `sod`, as SQL (both dialects)."""
    def along(a, b):
        out_start, out_end = LEG[0]
        back_start, back_end = LEG[1]
        return (f"CASE WHEN {sod} < {out_start} THEN {a} "
                f"WHEN {sod} < {out_end} THEN {a} + ({b} - {a}) * ({sod} - {out_start}) / {float(out_end - out_start)} "
                f"WHEN {sod} < {back_start} THEN {b} "
                f"WHEN {sod} < {back_end} THEN {b} + ({a} - {b}) * ({sod} - {back_start}) / {float(back_end - back_start)} "
                f"ELSE {a} END")
    lat = f"({along(HOME[0], WORK[0])}) + (({i} * 7919) % 61 - 30) * 0.000001"
    lon = f"({along(HOME[1], WORK[1])}) + (({i} * 104729) % 61 - 30) * 0.0000015"
    return lat, lon


def serve(binary, database):
    p, url = keeptrack_tools.serve(binary, database, TOKEN)
    return p, urllib.parse.urlparse(url)


def peak_kib(p):
    with open(f"/proc/{p.pid}/status") as f:
        for line in f:
            if line.startswith("VmHWM:"):
                return int(line.split()[1])
    return 0


def fill_sqlite(path, n):
    lat, lon = position_sql("i", "(i % 86400)")
    keeptrack_tools.fill_sqlite(
        path, n, "key, device, seq, kind, time, lat, lon, hAcc, format, received",
        f"'id:{DEVICE}:' || (i + 1), '{DEVICE}', i + 1, 'location', {T0} + i, {lat}, {lon}, 5, 'json', {T0} + i",
        ["points_page", "points_cell", "points_locations"])


def fill_postgres(cluster, name, n):
    lat, lon = position_sql("i", "(i % 86400)")
    keeptrack_tools.fill_postgres(
        cluster, name, "key, device, seq, kind, time, position, h_acc, format, received, valid",
        f"""'id:{DEVICE}:' || (i + 1), '{DEVICE}', i + 1, 'location', to_timestamp({T0} + i),
            ST_SetSRID(ST_MakePoint({lon}, {lat}), 4326)::geography, 5, 'json', to_timestamp({T0} + i), true""",
        f"generate_series(0::bigint, {n - 1}) i",
        ["positions_device_time", "positions_position", "positions_locations"])


def timed(url, path, runs, check):
    times, _ = keeptrack_tools.timed_gets(url, path, runs, check, TOKEN, timeout=300)
    return statistics.median(times), max(times)


def expect(what, got, want):
    if got != want:
        sys.exit(f"bench-stops: {what}: {got}, expected {want}")


def queries(days):
    day = (T0 + 10 * 86400, T0 + 11 * 86400)
    base = f"/v1/devices/{DEVICE}"
    return [
        (f"stops, {days} days", f"{base}/stops", "stops", 2 * days + 1, days * 86400),
        (f"trips, {days} days", f"{base}/trips", "trips", 2 * days, days * 86400),
        ("stops, one day", f"{base}/stops?from={day[0]}&to={day[1]}", "stops", 3, 86401),
        ("trips, one day", f"{base}/trips?from={day[0]}&to={day[1]}", "trips", 2, 86401),
    ]


def measure(binary, database, days, runs, rows, store, peer):
    p, url = serve(binary, database)
    try:
        # The store was filled behind the server's back: its first query computes all (once).
        start = time.perf_counter()
        conn = http.client.HTTPConnection(url.hostname, url.port, timeout=600)
        conn.request("GET", f"/v1/devices/{DEVICE}/stops", headers={"Authorization": f"Bearer {TOKEN}"})
        r = conn.getresponse()
        expect("first query", (r.status, len(json.loads(r.read())["stops"])), (200, 2 * days + 1))
        conn.close()
        first = (time.perf_counter() - start) * 1000
        rows.append(f"| {store} | first query: computes all | {days * 86400:,} | {2 * days + 1} | {first:,.0f} | "
                    f"{first:,.0f} | | |")
        conn = http.client.HTTPConnection(url.hostname, url.port, timeout=60)
        conn.request("GET", f"/v1/devices/{DEVICE}/trail?limit=100", headers={"Authorization": f"Bearer {TOKEN}"})
        conn.getresponse().read()
        conn.close()
        before = peak_kib(p)
        results = []
        for name, path, member, want, points in queries(days):
            med, slowest = timed(url, path, runs, lambda j: expect(name, len(j[member]), want))
            results.append((name, want, points, med, slowest, peer(points)))
        after = peak_kib(p)
        for name, want, points, med, slowest, alone in results:
            rows.append(f"| {store} | {name} | {points:,} | {want} | {med:,.0f} | {slowest:,.0f} | {alone:,.0f} "
                        f"| {before / 1024:,.0f} → {after / 1024:,.0f} |")
    finally:
        keeptrack_tools.stop(p)


def run_sqlite(binary, days, runs, rows, keep=None, label="SQLite"):
    tmp = keep or tempfile.mkdtemp(prefix="bench-stops-")
    os.makedirs(tmp, exist_ok=True)
    path = os.path.join(tmp, f"stops-{days}d.sqlite")
    n = days * 86400
    if not os.path.exists(path):
        p, _ = serve(binary, path)
        keeptrack_tools.stop(p)
        start = time.perf_counter()
        fill_sqlite(path, n)
        print(f"sqlite: {n:,} positions filled in {time.perf_counter() - start:.0f} s "
              f"({os.path.getsize(path) / 2**30:.2f} GiB)", file=sys.stderr)
    db = sqlite3.connect(path)

    def peer(points):
        lo = T0 if points > 86401 else T0 + 10 * 86400
        hi = lo + points
        return keeptrack_tools.best_ms(lambda: db.execute(
            "SELECT count(*), sum(lat + lon + ifnull(hAcc, 0) + ifnull(speed, 0)) FROM points "
            "INDEXED BY points_locations WHERE device = ? AND time >= ? AND time <= ? AND kind = 'location' "
            "AND valid = 1", (DEVICE, lo, hi)).fetchone(), 3)
    try:
        measure(binary, path, days, runs, rows, label, peer)
    finally:
        db.close()
        if keep is None:
            subprocess.run(["rm", "-rf", tmp])


def run_postgres(binary, days, runs, rows, label="PostgreSQL"):
    import pgcluster
    cluster = pgcluster.Cluster()
    try:
        url_db = cluster.create_database("stops")
        p, _ = serve(binary, url_db)
        keeptrack_tools.stop(p)
        n = days * 86400
        start = time.perf_counter()
        fill_postgres(cluster, "stops", n)
        print(f"postgres: {n:,} positions filled in {time.perf_counter() - start:.0f} s", file=sys.stderr)

        def peer(points):
            lo = T0 if points > 86401 else T0 + 10 * 86400
            hi = lo + points
            q = ("SELECT extract(epoch FROM time)::float8, ST_Y(position::geometry), ST_X(position::geometry), h_acc, "
                 f"speed FROM positions WHERE device = '{DEVICE}' AND kind = 'location' AND valid "
                 f"AND time >= to_timestamp({lo}) AND time <= to_timestamp({hi}) ORDER BY time")
            best = None
            for _ in range(3):
                ms = json.loads(cluster.psql(f"EXPLAIN (ANALYZE, FORMAT JSON) {q}", "stops"))[0]["Execution Time"]
                best = ms if best is None else min(best, ms)
            return best
        measure(binary, url_db, days, runs, rows, label, peer)
    finally:
        cluster.remove()


def position(i):
    """lat and lon of point `i` (seconds since T0), as position_sql computes them."""
    sod = i % 86400

    def along(a, b):
        (out_start, out_end), (back_start, back_end) = LEG
        if sod < out_start:
            return a
        if sod < out_end:
            return a + (b - a) * (sod - out_start) / float(out_end - out_start)
        if sod < back_start:
            return b
        if sod < back_end:
            return b + (a - b) * (sod - back_start) / float(back_end - back_start)
        return a
    return (along(HOME[0], WORK[0]) + ((i * 7919) % 61 - 30) * 0.000001,
            along(HOME[1], WORK[1]) + ((i * 104729) % 61 - 30) * 0.0000015)


def iso(t):
    return time.strftime("%Y-%m-%dT%H:%M:%S.000Z", time.gmtime(t))


def post_all(url, bodies):
    conn = http.client.HTTPConnection(url.hostname, url.port, timeout=60)
    headers = {"Authorization": f"Bearer {TOKEN}", "Content-Type": "application/json"}
    start = time.perf_counter()
    for body in bodies:
        conn.request("POST", "/v1/locations", body=body, headers=headers)
        r = conn.getresponse()
        r.read()
        if r.status != 200:
            sys.exit(f"bench-stops: POST /v1/locations: {r.status}")
    conn.close()
    return time.perf_counter() - start


def ingest_bodies(first, count, per_batch):
    bodies = []
    for b in range(first, first + count, per_batch):
        records = []
        for i in range(b, min(first + count, b + per_batch)):
            lat, lon = position(i)
            records.append(f'{{"seq":{i + 1},"kind":"location","time":"{iso(T0 + i)}","lat":{lat:.7f},'
                           f'"lon":{lon:.7f},"hAcc":5}}')
        bodies.append(f'{{"device":"{DEVICE}","records":[{",".join(records)}]}}')
    return bodies


def run_ingest(binary, postgres, rows):
    day = ingest_bodies(0, 86400, 100)
    single = ingest_bodies(86400, 3000, 1)
    cluster = None
    if postgres:
        import pgcluster
        cluster = pgcluster.Cluster()
    try:
        for label, skip in (("with the detector at ingest", False), ("without (device never computed)", True)):
            for store in (["SQLite"] + (["PostgreSQL"] if postgres else [])):
                tmp = tempfile.mkdtemp(prefix="bench-stops-ingest-")
                mark = f"INSERT INTO stop_detectors (device, dirty_from) VALUES ('{DEVICE}', -1e300)"
                if store == "SQLite":
                    database = os.path.join(tmp, "ingest.sqlite")
                    p, _ = serve(binary, database)
                    keeptrack_tools.stop(p)
                    if skip:
                        db = sqlite3.connect(database)
                        db.execute(mark)
                        db.commit()
                        db.close()
                else:
                    name = f"ingest_{len(rows)}"
                    database = cluster.create_database(name)
                    p, _ = serve(binary, database)
                    keeptrack_tools.stop(p)
                    if skip:
                        cluster.psql(mark, name)
                p, url = serve(binary, database)
                try:
                    batched = post_all(url, day)
                    one = post_all(url, single)
                    # The stops kept at ingest (or computed by this first query) are the trail's.
                    conn = http.client.HTTPConnection(url.hostname, url.port, timeout=600)
                    conn.request("GET", f"/v1/devices/{DEVICE}/stops", headers={"Authorization": f"Bearer {TOKEN}"})
                    r = conn.getresponse()
                    body = r.read()
                    if r.status != 200:
                        sys.exit(f"bench-stops: {label} {store}: GET stops: {r.status} {body[:200]!r}")
                    expect(f"{label} {store} stops after ingest", len(json.loads(body)["stops"]), 3)
                    conn.close()
                finally:
                    keeptrack_tools.stop(p)
                    subprocess.run(["rm", "-rf", tmp])
                rows.append(f"| {store} | {label} | {86400 / batched:,.0f} | {3000 / one:,.0f} |")
    finally:
        if cluster:
            cluster.remove()


def main():
    a = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    a.add_argument("--days", type=int, default=30)
    a.add_argument("--runs", type=int, default=5)
    a.add_argument("--postgres", action="store_true")
    a.add_argument("--sqlite-dir")
    a.add_argument("--keeptrack", default=os.path.join(ROOT, ".build-release", "release", "keeptrack"))
    a.add_argument("--ingest", action="store_true")
    a.add_argument("--baseline", help="another keeptrack build to measure beside this one, in the same run")
    args = a.parse_args()
    rows = []
    build = "release build" if ".build-release" in args.keeptrack else "debug build"
    if args.ingest:
        run_ingest(args.keeptrack, args.postgres, rows)
        print(f"{build}: ingest of one day of 1 Hz points (86,400) in JSON batches of 100, then 3,000 one per request, "
              "over one kept-alive connection (loopback), each on a fresh store")
        print("| store | stops and trips | points stored per second, batches of 100 | points per second, one per request |")
        print("|---|---|---|---|")
        for r in rows:
            print(r)
        return
    if args.baseline:
        run_sqlite(args.baseline, args.days, args.runs, rows, label="SQLite, baseline")
        if args.postgres:
            run_postgres(args.baseline, args.days, args.runs, rows, label="PostgreSQL, baseline")
    this = ", this build" if args.baseline else ""
    run_sqlite(args.keeptrack, args.days, args.runs, rows, args.sqlite_dir, label="SQLite" + this)
    if args.postgres:
        run_postgres(args.keeptrack, args.days, args.runs, rows, label="PostgreSQL" + this)
    print(f"{build}: one device, {args.days} days of 1 Hz points ({args.days * 86400:,}); {args.runs} requests each "
          "over one kept-alive connection (loopback), stops and trips kept at ingest")
    print("| store | query | points in the range | stops or trips | through keeptrack serve, median ms | slowest ms "
          "| the database alone reading them, ms | serve's peak memory, MiB (before → after) |")
    print("|---|---|---|---|---|---|---|---|")
    for r in rows:
        print(r)


if __name__ == "__main__":
    main()
