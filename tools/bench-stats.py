#!/usr/bin/env python3
"""Statistics over a year of 1 Hz points for one device through a release `keeptrack serve` (issue 38's
target: `GET /v1/devices/{id}/stats` for a year of 1 Hz points, 31.5 million, under 1 s on SQLite and on
PostgreSQL), beside the database alone reading the same points, in one run.

    tools/bench-stats.py [--days 365] [--runs 5] [--postgres] [--keeptrack BIN] [--sqlite-dir DIR]

1. A store of --days × 86,400 positions of one device made by `keeptrack serve --db` (its own schema,
   migrated), then filled with SQL directly, as tools/bench-stops.py fills it (its commuter: home, a
   30-minute drive to work, work, the drive home, every day; 2 × days + 1 visits, 2 × days trips).
2. `keeptrack serve` on it. A store filled behind the server's back has no stops, trips or statistics
   yet (as a store upgraded from before they were kept): the first statistics query computes them all,
   timed on its own ("first query: computes all", the work ingest does point by point otherwise).
3. Each query --runs times over one kept-alive connection after one checked warm-up (the totals'
   trips and visits): the year by day in UTC, by week in Europe/Berlin, by month in Asia/Kolkata, and
   one day.
4. The peer, in the same run: the database alone reading the year's points once (SQLite: `SELECT
   count(*), sum(lat + lon)` over the same index range, by Python's sqlite3 on the same file;
   PostgreSQL: `EXPLAIN (ANALYZE)`'s execution time of the stops' own query of the points): what any
   answer that re-reads the points costs at least.

Prints docs/performance.md rows (median and slowest, milliseconds). Exits 1 if a check failed. Needs
`swift build -c release --scratch-path .build-release --product keeptrack` first.
"""
import argparse, http.client, importlib.util, json, os, sqlite3, statistics, subprocess, sys, tempfile, time
import urllib.parse

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "tools"))
import keeptrack_tools  # noqa: E402

_spec = importlib.util.spec_from_file_location("bench_stops", os.path.join(ROOT, "tools", "bench-stops.py"))
stops = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(stops)
TOKEN, T0, DEVICE = stops.TOKEN, stops.T0, stops.DEVICE


def expect(what, got, want):
    if got != want:
        sys.exit(f"bench-stats: {what}: {got}, expected {want}")


def queries(days):
    base = f"/v1/devices/{DEVICE}/stats"
    year = f"from={T0}&to={T0 + days * 86400}"
    day = f"from={T0 + 10 * 86400}&to={T0 + 11 * 86400}"
    return [
        (f"{days} days by day, UTC", f"{base}?{year}&by=day", days, 2 * days, 2 * days + 1),
        (f"{days} days by week, Europe/Berlin", f"{base}?{year}&by=week&tz=Europe/Berlin", None, 2 * days, 2 * days + 1),
        (f"{days} days by month, Asia/Kolkata", f"{base}?{year}&by=month&tz=Asia/Kolkata", None, 2 * days,
         2 * days + 1),
        ("one day by day", f"{base}?{day}&by=day", 1, 2, 3),
    ]


def check(name, periods, trips, visits):
    def f(j):
        if periods is not None:
            expect(f"{name}: periods", len(j["periods"]), periods)
        expect(f"{name}: trips", j["totals"]["trips"], trips)
        expect(f"{name}: visits", j["totals"]["visits"], visits)
    return f


def measure(binary, database, days, runs, rows, store, peer):
    p, url = stops.serve(binary, database)
    try:
        start = time.perf_counter()
        conn = http.client.HTTPConnection(url.hostname, url.port, timeout=3600)
        conn.request("GET", f"/v1/devices/{DEVICE}/stats?by=month", headers={"Authorization": f"Bearer {TOKEN}"})
        r = conn.getresponse()
        j = json.loads(r.read())
        expect("first query", (r.status, j["totals"]["trips"]), (200, 2 * days))
        conn.close()
        first = (time.perf_counter() - start) * 1000
        rows.append(f"| {store} | first query: computes all | {days * 86400:,} | {first:,.0f} | {first:,.0f} | |")
        alone = peer()
        for name, path, periods, trips, visits in queries(days):
            times, _ = keeptrack_tools.timed_gets(url, path, runs, check(name, periods, trips, visits), TOKEN,
                                                   timeout=300)
            rows.append(f"| {store} | {name} | {days * 86400:,} | {statistics.median(times):,.1f} | "
                        f"{max(times):,.1f} | {alone:,.0f} |")
    finally:
        keeptrack_tools.stop(p)


def run_sqlite(binary, days, runs, rows, keep=None):
    tmp = keep or tempfile.mkdtemp(prefix="bench-stats-")
    os.makedirs(tmp, exist_ok=True)
    path = os.path.join(tmp, f"stats-{days}d.sqlite")
    n = days * 86400
    if not os.path.exists(path):
        p, _ = stops.serve(binary, path)
        keeptrack_tools.stop(p)
        start = time.perf_counter()
        stops.fill_sqlite(path, n)
        print(f"sqlite: {n:,} positions filled in {time.perf_counter() - start:.0f} s "
              f"({os.path.getsize(path) / 2**30:.2f} GiB)", file=sys.stderr)
    db = sqlite3.connect(path)

    def peer():
        return keeptrack_tools.best_ms(lambda: db.execute(
            "SELECT count(*), sum(lat + lon) FROM points INDEXED BY points_locations WHERE device = ? "
            "AND time >= ? AND time < ? AND kind = 'location' AND valid = 1",
            (DEVICE, T0, T0 + n)).fetchone(), 3)
    try:
        measure(binary, path, days, runs, rows, "SQLite", peer)
    finally:
        db.close()
        if keep is None:
            subprocess.run(["rm", "-rf", tmp])


def run_postgres(binary, days, runs, rows):
    import pgcluster
    cluster = pgcluster.Cluster()
    try:
        url_db = cluster.create_database("stats")
        p, _ = stops.serve(binary, url_db)
        keeptrack_tools.stop(p)
        n = days * 86400
        start = time.perf_counter()
        stops.fill_postgres(cluster, "stats", n)
        print(f"postgres: {n:,} positions filled in {time.perf_counter() - start:.0f} s", file=sys.stderr)

        def peer():
            q = ("SELECT extract(epoch FROM time)::float8, ST_Y(position::geometry), ST_X(position::geometry), h_acc, "
                 f"speed FROM positions WHERE device = '{DEVICE}' AND kind = 'location' AND valid "
                 f"AND time >= to_timestamp({T0}) AND time < to_timestamp({T0 + n}) ORDER BY time")
            return json.loads(cluster.psql(f"EXPLAIN (ANALYZE, FORMAT JSON) {q}", "stats"))[0]["Execution Time"]
        measure(binary, url_db, days, runs, rows, "PostgreSQL", peer)
    finally:
        cluster.remove()


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--days", type=int, default=365)
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--postgres", action="store_true", help="also PostgreSQL (tools/pgcluster.py)")
    ap.add_argument("--keeptrack", default=os.path.join(ROOT, ".build-release", "release", "keeptrack"))
    ap.add_argument("--sqlite-dir", help="keep the SQLite store here (and reuse it)")
    args = ap.parse_args()
    rows = []
    run_sqlite(args.keeptrack, args.days, args.runs, rows, args.sqlite_dir)
    if args.postgres:
        run_postgres(args.keeptrack, args.days, args.runs, rows)
    print("| store | query | points | median ms | slowest ms | the database reading the points, ms |")
    print("|---|---|--:|--:|--:|--:|")
    for row in rows:
        print(row)


if __name__ == "__main__":
    main()
