#!/usr/bin/env python3
"""Fleet queries through a release `keeptrack serve` (issue 15, item 4's target: `GET /v1/devices/latest`
for 10,000 devices and a box query over 10 million positions, each under 50 ms), beside the same
queries run by the database alone, in one run.

    tools/bench-fleet.py [--devices 10000] [--per-device 1000] [--runs 30] [--postgres] [--keeptrack BIN]
                      [--sqlite-dir DIR]

1. A store of --devices × --per-device positions, made by `keeptrack serve --db` (so the schema is its
   own, migrated), then filled with SQL directly for speed: one INSERT ... SELECT over a generated
   series (SQLite: a recursive CTE; PostgreSQL: generate_series), its indexes dropped before and built
   after, the devices table (counts, times, latest position) computed from the points. Positions are
   spread evenly (integer hashes of device and index) over 48.0-48.5 N, 11.2-11.9 E (about 55 × 52 km),
   one every 43 minutes per device over 30 days.
2. `keeptrack serve` on it; each query --runs times over one kept-alive connection, after one warm-up:
   `GET /v1/devices/latest`, a 0.01° box (about 1.1 × 0.75 km: "who was at the depot", all 30 days, one
   page of up to 10,000), the same box for one day, and `near` with a 500 m radius for one day. Each
   answer is checked (status, number of positions = what the database counts) before it is timed.
3. The peers, in the same run: the same query by the database itself (Python's sqlite3 on the same
   file; psql with `EXPLAIN (ANALYZE)`'s execution time for PostgreSQL), and for SQLite what the
   query costs without the devices table or the grid index (latest per device from the points; the
   box by a scan).

Prints docs/performance.md rows (median and 95th percentile, milliseconds). Exits 1 if a check failed.
With --sqlite-dir, the SQLite store is kept in DIR and used again when it is there (filled for the
same sizes). With --postgres, also on a throwaway PostgreSQL 15 + PostGIS cluster (tools/pgcluster.py).
Needs `swift build -c release --scratch-path .build-release --product keeptrack` first.
"""
import argparse, json, os, sqlite3, statistics, subprocess, sys, tempfile, time, urllib.parse

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "tools"))
import keeptrack_tools  # noqa: E402
TOKEN = "bench"
T0 = 1715679000
STEP = 2592  # seconds between a device's positions: 1,000 over 30 days
BOX = (11.55, 48.25, 11.56, 48.26)
DAY = (T0 + 10 * 86400, T0 + 11 * 86400)
NEAR = (48.255, 11.555, 500)


def serve(binary, database):
    p, url = keeptrack_tools.serve(binary, database, TOKEN)
    return p, urllib.parse.urlparse(url)


def lat_sql(d, j):
    return f"48.0 + (({d} * 7919 + {j} * 104729) % 50000) / 100000.0"


def lon_sql(d, j):
    return f"11.2 + (({d} * 15485863 + {j} * 32452843) % 70000) / 100000.0"


def fill_sqlite(path, devices, per):
    keeptrack_tools.fill_sqlite(
        path, devices * per, "key, device, seq, kind, time, lat, lon, format, received",
        f"""'id:dev-' || (i / {per}) || ':' || (i % {per}), 'dev-' || (i / {per}), i % {per}, 'location',
            {T0} + (i % {per}) * {STEP} + (i / {per}) % {STEP}, {lat_sql(f'(i / {per})', f'(i % {per})')},
            {lon_sql(f'(i / {per})', f'(i % {per})')}, 'json', {T0} + (i % {per}) * {STEP}""",
        ["points_page", "points_cell"])


def fill_postgres(cluster, name, devices, per):
    d, j = "d::bigint", "j::bigint"
    keeptrack_tools.fill_postgres(
        cluster, name, "key, device, seq, kind, time, position, format, received, valid",
        f"""'id:dev-' || d || ':' || j, 'dev-' || d, j, 'location', to_timestamp({T0} + j * {STEP} + d % {STEP}),
            ST_SetSRID(ST_MakePoint({lon_sql(d, j)}, {lat_sql(d, j)}), 4326)::geography, 'json',
            to_timestamp({T0} + j * {STEP}), true""",
        f"generate_series(0, {devices - 1}) d, generate_series(0, {per - 1}) j",
        ["positions_device_time", "positions_position"])


def timed(url, path, runs, check):
    times, body = keeptrack_tools.timed_gets(url, path, runs, check, TOKEN)
    times.sort()
    return statistics.median(times), times[int(len(times) * 0.95) - 1], len(body)


def expect(what, got, want):
    if got != want:
        sys.exit(f"bench-fleet: {what}: {got}, expected {want}")


def queries():
    w, s, e, n = BOX
    lat, lon, radius = NEAR
    return [
        ("devices/latest", "/v1/devices/latest", "devices"),
        ("box 0.01°, 30 days", f"/v1/positions?bbox={w},{s},{e},{n}", "positions"),
        ("box 0.01°, one day", f"/v1/positions?bbox={w},{s},{e},{n}&from={DAY[0]}&to={DAY[1]}", "positions"),
        ("near 500 m, one day", f"/v1/positions?near={lat},{lon}&radius={radius}&from={DAY[0]}&to={DAY[1]}", "positions"),
    ]


def run_sqlite(binary, devices, per, runs, rows, keep=None):
    tmp = keep or tempfile.mkdtemp(prefix="bench-fleet-")
    os.makedirs(tmp, exist_ok=True)
    path = os.path.join(tmp, f"fleet-{devices}x{per}.sqlite")
    if not os.path.exists(path):
        p, _ = serve(binary, path)
        keeptrack_tools.stop(p)
        start = time.perf_counter()
        fill_sqlite(path, devices, per)
        fill = time.perf_counter() - start
        print(f"sqlite: {devices * per:,} positions filled in {fill:.0f} s ({os.path.getsize(path) / 2**30:.1f} GiB)",
              file=sys.stderr)
    db = sqlite3.connect(path)
    w, s, e, n = BOX
    lat, lon, radius = NEAR
    box = f"lat BETWEEN {s} AND {n} AND lon BETWEEN {w} AND {e} AND valid = 1"
    counts = [
        db.execute("SELECT COUNT(*) FROM devices WHERE latestTime IS NOT NULL").fetchone()[0],
        db.execute(f"SELECT COUNT(*) FROM points WHERE {box}").fetchone()[0],
        db.execute(f"SELECT COUNT(*) FROM points WHERE {box} AND time BETWEEN {DAY[0]} AND {DAY[1]}").fetchone()[0],
    ]
    # The circle's count the way the store's exact test counts: haversine on the mean sphere.
    import math
    def hav(a, b):
        p1, p2 = math.radians(lat), math.radians(a)
        dp, dl = p2 - p1, math.radians(b - lon)
        h = math.sin(dp / 2) ** 2 + math.cos(p1) * math.cos(p2) * math.sin(dl / 2) ** 2
        return 2 * 6371008.8 * math.asin(min(1, math.sqrt(h)))
    dlat = radius / 111195.0 * 1.01
    near = [r for r in db.execute(f"SELECT lat, lon FROM points WHERE lat BETWEEN {lat - dlat} AND {lat + dlat} "
                                  f"AND lon BETWEEN {lon - 2 * dlat} AND {lon + 2 * dlat} AND valid = 1 "
                                  f"AND time BETWEEN {DAY[0]} AND {DAY[1]}") if hav(*r) <= radius]
    counts.append(len(near))
    # The database alone: the store's own SQL for the latest positions; the box through the grid index.
    cells = lambda: db.execute(f"""
        WITH RECURSIVE band(row) AS (SELECT {int((s + 90) * 100)} UNION ALL SELECT row + 1 FROM band WHERE row < {int((n + 90) * 100)})
        SELECT p.* FROM band CROSS JOIN points p ON p.cell BETWEEN band.row * 36001 + {int((w + 180) * 100)}
            AND band.row * 36001 + {int((e + 180) * 100)}
        WHERE {box.replace('lat', 'p.lat').replace('lon', 'p.lon').replace('valid', 'p.valid')} ORDER BY p.time, p.key LIMIT 10001""").fetchall()
    alone = [keeptrack_tools.best_ms(lambda: db.execute("SELECT * FROM devices WHERE latestTime IS NOT NULL ORDER BY id").fetchall(), 5),
             keeptrack_tools.best_ms(cells, 5)]
    naive = [keeptrack_tools.best_ms(lambda: db.execute("""SELECT device, time, lat, lon FROM points p WHERE valid = 1 AND time =
                 (SELECT MAX(time) FROM points WHERE device = p.device AND valid = 1) ORDER BY device""").fetchall(), 1),
             keeptrack_tools.best_ms(lambda: db.execute(f"SELECT * FROM points NOT INDEXED WHERE {box} ORDER BY time, key LIMIT 10001").fetchall(), 1)]
    db.close()
    p, url = serve(binary, path)
    try:
        for k, (name, path_q, member) in enumerate(queries()):
            want = min(counts[k], 10000)
            med, p95, size = timed(url, path_q, runs, lambda j: expect(name, len(j[member]), want))
            peer = f"{alone[k]:.1f}" if k < len(alone) else "—"
            scan = f"{naive[k]:,.0f}" if k < len(naive) else "—"
            rows.append(f"| SQLite | {name} | {want:,} | {med:.1f} | {p95:.1f} | {size / 1024:,.0f} KiB | {peer} | {scan} |")
    finally:
        keeptrack_tools.stop(p)
        if keep is None:
            subprocess.run(["rm", "-rf", tmp])


def run_postgres(binary, devices, per, runs, rows):
    import pgcluster
    cluster = pgcluster.Cluster()
    try:
        url_db = cluster.create_database("fleet")
        p, _ = serve(binary, url_db)
        keeptrack_tools.stop(p)
        start = time.perf_counter()
        fill_postgres(cluster, "fleet", devices, per)
        print(f"postgres: {devices * per:,} positions filled in {time.perf_counter() - start:.0f} s", file=sys.stderr)
        w, s, e, n = BOX
        lat, lon, radius = NEAR
        box = f"ST_Y(position::geometry) BETWEEN {s} AND {n} AND ST_X(position::geometry) BETWEEN {w} AND {e} AND valid"
        env = f"position && ST_Segmentize(ST_MakeEnvelope({w - 0.001}, {s - 0.001}, {e + 0.001}, {n + 0.001}, 4326), 0.1)::geography"
        day = f"time BETWEEN to_timestamp({DAY[0]}) AND to_timestamp({DAY[1]})"
        dwithin = f"ST_DWithin(position, ST_SetSRID(ST_MakePoint({lon}, {lat}), 4326)::geography, {radius}, false)"
        sqls = [
            "SELECT * FROM devices WHERE latest_time IS NOT NULL ORDER BY id",
            f"SELECT * FROM positions WHERE {env} AND {box} ORDER BY time, key LIMIT 10001",
            f"SELECT * FROM positions WHERE {env} AND {box} AND {day} ORDER BY time, key LIMIT 10001",
        ]
        counts = [int(cluster.psql(f"SELECT count(*) FROM ({q}) x", "fleet")) for q in sqls]
        counts.append(int(cluster.psql(f"SELECT count(*) FROM positions WHERE valid AND {day} AND {dwithin}", "fleet")))
        sqls.append(f"SELECT * FROM positions WHERE valid AND {dwithin} AND {day} ORDER BY time, key LIMIT 10001")

        def execution_ms(q):
            best = None
            for _ in range(5):
                out = cluster.psql(f"EXPLAIN (ANALYZE, FORMAT JSON) {q}", "fleet")
                ms = json.loads(out)[0]["Execution Time"]
                best = ms if best is None else min(best, ms)
            return best
        alone = [execution_ms(q) for q in sqls]
        p, url = serve(binary, url_db)
        try:
            for k, (name, path_q, member) in enumerate(queries()):
                want = min(counts[k], 10000)
                med, p95, size = timed(url, path_q, runs, lambda j: expect(name, len(j[member]), want))
                rows.append(f"| PostgreSQL | {name} | {want:,} | {med:.1f} | {p95:.1f} | {size / 1024:,.0f} KiB "
                            f"| {alone[k]:.1f} | — |")
        finally:
            keeptrack_tools.stop(p)
    finally:
        cluster.remove()


def main():
    a = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    a.add_argument("--devices", type=int, default=10000)
    a.add_argument("--per-device", type=int, default=1000)
    a.add_argument("--runs", type=int, default=30)
    a.add_argument("--postgres", action="store_true")
    a.add_argument("--sqlite-dir")
    a.add_argument("--keeptrack", default=os.path.join(ROOT, ".build-release", "release", "keeptrack"))
    args = a.parse_args()
    rows = []
    run_sqlite(args.keeptrack, args.devices, args.per_device, args.runs, rows, args.sqlite_dir)
    if args.postgres:
        run_postgres(args.keeptrack, args.devices, args.per_device, args.runs, rows)
    print(f"{args.devices:,} devices, {args.devices * args.per_device:,} positions; {args.runs} requests each over "
          "one kept-alive connection (release build, loopback)")
    print("| store | query | positions or devices returned | through keeptrack serve, median ms | p95 ms | answer "
          "| the database alone, ms | without the devices table or the grid index, ms |")
    print("|---|---|---|---|---|---|---|---|")
    for r in rows:
        print(r)


if __name__ == "__main__":
    main()
