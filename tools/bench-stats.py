#!/usr/bin/env python3
"""Statistics over a year of 1 Hz points for one device through a release `keeptrack serve` (issue 38's
target: `GET /v1/devices/{id}/stats` for a year of 1 Hz points, 31.5 million, under 1 s on SQLite and on
PostgreSQL), beside the database alone reading the same points, in one run.

    tools/bench-stats.py [--days 365] [--runs 5] [--postgres] [--load http|sql] [--batch 10000]
                         [--budget MINUTES] [--keeptrack BIN] [--sqlite-dir DIR] [--migrate-with BIN]

1. A store of --days × 86,400 positions of one device, the commuter of tools/bench-stops.py (home, a
   30-minute drive to work, work, the drive home, every day; 2 × days + 1 visits, 2 × days trips),
   made by `keeptrack serve --db` (its own schema, migrated) and loaded:
   - `--load http` (the default): through the server's ingest, `POST /v1/locations`, JSON batches of
     --batch records in time order over one kept-alive connection, as a phone catching up would send
     them. The store keeps its stops, trips and statistics buckets at ingest (SQLite in each batch's
     transaction; PostgreSQL stores each batch with COPY and its detector catches up behind the
     answers). Timed, with the points per second; `--budget` stops the load after that many minutes
     (at the end of a day) and measures at the scale reached.
   - `--load sql`: filled with SQL directly, as tools/bench-stops.py fills it: the store has no stops,
     trips or statistics yet (as a store upgraded from before they were kept), and the first query
     computes them all.
2. The first statistics query, timed on its own ("first query"): after an HTTP load, whatever the
   detector has still to catch up; after an SQL fill, everything.
3. Each query --runs times over one kept-alive connection after one checked warm-up (the totals'
   trips and visits): the year by day in UTC, by week in Europe/Berlin, by month in Asia/Kolkata, and
   one day.
4. The peer, in the same run: the database alone reading the year's points once (SQLite: `SELECT
   count(*), sum(lat + lon)` over the same index range, by Python's sqlite3 on the same file;
   PostgreSQL: `EXPLAIN (ANALYZE)`'s execution time of the stops' own query of the points): what any
   answer that re-reads the points costs at least.

Prints the machine's load (`uptime`) at the start and the end, the loads' figures, and
docs/performance.md rows (median and slowest, milliseconds; each also on standard error as it is
measured). Exits 1 if a check failed. Needs
`swift build -c release --scratch-path .build-release --product keeptrack` first.
"""
import argparse, http.client, importlib.util, json, os, sqlite3, statistics, subprocess, sys, tempfile, time
import queue, threading, urllib.parse

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
    one = min(10, days - 1)
    day = f"from={T0 + one * 86400}&to={T0 + (one + 1) * 86400}"
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


def day_bodies(day, batch):
    """The JSON bodies of day `day` (from T0) of the commuter, `batch` records each, in time order: the
    points tools/bench-stops.py's SQL fill makes (its `position`), seq = seconds since T0 + 1."""
    prefix = time.strftime("%Y-%m-%dT", time.gmtime(T0 + day * 86400))
    first = day * 86400
    records = []
    for sod in range(86400):
        i = first + sod
        lat, lon = stops.position(i)
        records.append(f'{{"seq":{i + 1},"kind":"location","time":"{prefix}{sod // 3600:02d}:{sod // 60 % 60:02d}:'
                       f'{sod % 60:02d}.000Z","lat":{lat:.7f},"lon":{lon:.7f},"hAcc":5}}')
        if len(records) == batch:
            yield f'{{"device":"{DEVICE}","records":[{",".join(records)}]}}'.encode()
            records = []
    if records:
        yield f'{{"device":"{DEVICE}","records":[{",".join(records)}]}}'.encode()


def load_http(url, store, days, batch, budget):
    """Posts `days` days of the commuter to `url`'s `POST /v1/locations`, `batch` records a request, in
    time order over one kept-alive connection; the bodies are made by a thread ahead of the sender.
    Stops at the end of a day once `budget` seconds have passed (None: never). Returns the days loaded
    and the seconds it took."""
    bodies = queue.Queue(maxsize=16)
    stopping = threading.Event()

    def make():
        for day in range(days):
            for body in day_bodies(day, batch):
                bodies.put(body)
            bodies.put(day)
            if stopping.is_set():
                break
        bodies.put(None)
    threading.Thread(target=make, daemon=True).start()
    conn = http.client.HTTPConnection(url.hostname, url.port, timeout=600)
    headers = {"Authorization": f"Bearer {TOKEN}", "Content-Type": "application/json"}
    start = time.perf_counter()
    loaded = 0
    while True:
        body = bodies.get()
        if body is None:
            break
        if isinstance(body, int):
            loaded = body + 1
            elapsed = time.perf_counter() - start
            if loaded % 10 == 0 or loaded == days:
                print(f"{store}: {loaded} days ({loaded * 86400:,} points) posted in {elapsed:,.0f} s "
                      f"({loaded * 86400 / elapsed:,.0f} points/s); {uptime()}", file=sys.stderr, flush=True)
            if budget is not None and elapsed > budget:
                stopping.set()
            continue
        conn.request("POST", "/v1/locations", body=body, headers=headers)
        r = conn.getresponse()
        answer = r.read()
        if r.status != 200:
            sys.exit(f"bench-stats: {store}: POST /v1/locations: {r.status} {answer[:200]!r}")
    conn.close()
    return loaded, time.perf_counter() - start


def uptime():
    with open("/proc/loadavg") as f:
        return "load average " + ", ".join(f.read().split()[:3])


def measure(binary, database, days, runs, rows, loads, store, peer, load):
    """`keeptrack serve` on `database`; `load(url)` (None: already loaded) returns the days it loaded and
    its seconds; then the first query and the others, over the days loaded."""
    p, url = stops.serve(binary, database)
    try:
        if load is not None:
            days, seconds = load(url)
            loads.append(f"{store}: {days * 86400:,} points ({days} days) through POST /v1/locations in "
                         f"{seconds:,.0f} s, {days * 86400 / seconds:,.0f} points/s")
        start = time.perf_counter()
        conn = http.client.HTTPConnection(url.hostname, url.port, timeout=3600)
        conn.request("GET", f"/v1/devices/{DEVICE}/stats?by=month", headers={"Authorization": f"Bearer {TOKEN}"})
        r = conn.getresponse()
        j = json.loads(r.read())
        expect("first query", (r.status, j["totals"]["trips"]), (200, 2 * days))
        conn.close()
        first = (time.perf_counter() - start) * 1000
        what = "first query: computes all" if load is None else "first query: after the load"
        rows.append(f"| {store} | {what} | {days * 86400:,} | {first:,.0f} | {first:,.0f} | |")
        print(rows[-1], file=sys.stderr, flush=True)
        alone = peer(days * 86400)
        for name, path, periods, trips, visits in queries(days):
            times, _ = keeptrack_tools.timed_gets(url, path, runs, check(name, periods, trips, visits), TOKEN,
                                                   timeout=300)
            rows.append(f"| {store} | {name} | {days * 86400:,} | {statistics.median(times):,.1f} | "
                        f"{max(times):,.1f} | {alone:,.0f} |")
            print(rows[-1], file=sys.stderr, flush=True)
    finally:
        keeptrack_tools.stop(p)


def prepare_sqlite(args, cleanups):
    """The SQLite store, filled unless it is loaded through HTTP; returns what measures it."""
    days, keep = args.days, args.sqlite_dir
    tmp = keep or tempfile.mkdtemp(prefix="bench-stats-")
    os.makedirs(tmp, exist_ok=True)
    if keep is None:
        cleanups.append(lambda: subprocess.run(["rm", "-rf", tmp]))
    path = os.path.join(tmp, f"stats-{days}d-{args.load}.sqlite")
    n = days * 86400
    load = None
    if not os.path.exists(path):
        if args.load == "http":
            def load(url):
                return load_http(url, "SQLite", days, args.batch, args.budget)
        else:
            p, _ = stops.serve(args.migrate_with, path)
            keeptrack_tools.stop(p)
            start = time.perf_counter()
            stops.fill_sqlite(path, n)
            print(f"sqlite: {n:,} positions filled in {time.perf_counter() - start:.0f} s "
                  f"({os.path.getsize(path) / 2**30:.2f} GiB); {uptime()}", file=sys.stderr, flush=True)
    db = sqlite3.connect(path)
    cleanups.append(db.close)

    def peer(points):
        return keeptrack_tools.best_ms(lambda: db.execute(
            "SELECT count(*), sum(lat + lon) FROM points INDEXED BY points_locations WHERE device = ? "
            "AND time >= ? AND time < ? AND kind = 'location' AND valid = 1",
            (DEVICE, T0, T0 + points)).fetchone(), 3)
    return lambda rows, loads: measure(args.keeptrack, path, days, args.runs, rows, loads, "SQLite", peer, load)


def prepare_postgres(args, cleanups):
    """A throwaway cluster's store, filled unless it is loaded through HTTP; returns what measures it."""
    import pgcluster
    days = args.days
    cluster = pgcluster.Cluster()
    cleanups.append(cluster.remove)
    url_db = cluster.create_database("stats")
    load = None
    if args.load == "http":
        def load(url):
            return load_http(url, "PostgreSQL", days, args.batch, args.budget)
    else:
        p, _ = stops.serve(args.migrate_with, url_db)
        keeptrack_tools.stop(p)
        n = days * 86400
        start = time.perf_counter()
        stops.fill_postgres(cluster, "stats", n)
        print(f"postgres: {n:,} positions filled in {time.perf_counter() - start:.0f} s; {uptime()}", file=sys.stderr,
              flush=True)

    def peer(points):
        q = ("SELECT extract(epoch FROM time)::float8, ST_Y(position::geometry), ST_X(position::geometry), h_acc, "
             f"speed FROM positions WHERE device = '{DEVICE}' AND kind = 'location' AND valid "
             f"AND time >= to_timestamp({T0}) AND time < to_timestamp({T0 + points}) ORDER BY time")
        return json.loads(cluster.psql(f"EXPLAIN (ANALYZE, FORMAT JSON) {q}", "stats"))[0]["Execution Time"]
    return lambda rows, loads: measure(args.keeptrack, url_db, days, args.runs, rows, loads, "PostgreSQL", peer, load)


def wait_for(binary):
    """Returns once `binary` exists and has not changed for 10 s (a build still linking it: waits)."""
    said = False
    while True:
        try:
            st = os.stat(binary)
            if time.time() - st.st_mtime > 10:
                return
        except FileNotFoundError:
            pass
        if not said:
            print(f"bench-stats: waiting for {binary}", file=sys.stderr, flush=True)
            said = True
        time.sleep(5)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--days", type=int, default=365)
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--postgres", action="store_true", help="also PostgreSQL (tools/pgcluster.py)")
    ap.add_argument("--load", choices=("http", "sql"), default="http",
                    help="through POST /v1/locations (default), or SQL behind the server's back")
    ap.add_argument("--batch", type=int, default=10_000, help="records a request with --load http")
    ap.add_argument("--budget", type=float, help="minutes of loading a store at most (--load http)")
    ap.add_argument("--keeptrack", default=os.path.join(ROOT, ".build-release", "release", "keeptrack"))
    ap.add_argument("--sqlite-dir", help="keep the SQLite store here (and reuse it)")
    ap.add_argument("--migrate-with", help="the binary that makes the stores' schema before an SQL fill (default "
                    "--keeptrack): the same commit's debug build lets the fills start while the release build "
                    "compiles; the measures wait for --keeptrack")
    args = ap.parse_args()
    args.migrate_with = args.migrate_with or args.keeptrack
    if args.budget is not None:
        args.budget *= 60
    build = "release build" if ".build-release" in args.keeptrack else "debug build"
    print(f"bench-stats: {build}, start: {uptime()}", file=sys.stderr)
    rows, loads, cleanups = [], [], []
    try:
        measures = [prepare_sqlite(args, cleanups)]
        if args.postgres:
            measures.append(prepare_postgres(args, cleanups))
        wait_for(args.keeptrack)
        for m in measures:
            m(rows, loads)
    finally:
        for c in reversed(cleanups):
            c()
    print(f"{build}; one device, 1 Hz; {args.runs} requests each over one kept-alive connection (loopback)")
    print(f"the machine at the end: {uptime()}")
    for line in loads:
        print(line)
    print("| store | query | points | median ms | slowest ms | the database reading the points, ms |")
    print("|---|---|--:|--:|--:|--:|")
    for row in rows:
        print(row)


if __name__ == "__main__":
    main()
