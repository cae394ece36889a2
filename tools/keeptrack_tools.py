"""What the Python tools under tools/ share: building the package's executables, ports on 127.0.0.1
without a race, a process's CPU time read one way, and an endpoint's store filled fast for a benchmark.

A tool imports it as `import keeptrack_tools` (Python puts the script's directory, tools/, first on
sys.path).
"""
import json, os, socket, sqlite3, subprocess, sys, time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
# Where release builds go: apart from the debug build in .build, so that neither evicts the other.
RELEASE_SCRATCH = os.path.join(ROOT, ".build-release")


def build(*products, release=True, scratch_path=None):
    """Builds `products` (default: keeptrack) with `swift build` in the package root and returns the path
    of each executable: one path for one product, a tuple for several. A release build goes to
    `scratch_path` (default .build-release), a debug build to `scratch_path` or SwiftPM's .build."""
    products = products or ("keeptrack",)
    options = ["-c", "release"] if release else []
    scratch_path = scratch_path or (RELEASE_SCRATCH if release else None)
    if scratch_path:
        options += ["--scratch-path", scratch_path]
    for product in products:
        subprocess.run(["swift", "build", *options, "--product", product], cwd=ROOT, check=True,
                       stdout=subprocess.DEVNULL)
    bin_dir = subprocess.run(["swift", "build", *options, "--show-bin-path"], cwd=ROOT, check=True,
                             capture_output=True, text=True).stdout.strip()
    paths = tuple(os.path.join(bin_dir, product) for product in products)
    return paths[0] if len(paths) == 1 else paths


# Each thread's CPU time when last read, by process and thread id (cpu_seconds).
_threads_seen = {}


def cpu_seconds(pid):
    """CPU time (user + system) of process `pid` in seconds, all its threads, to the nanosecond:
    /proc/PID/task/*/schedstat (/proc/PID/stat's ticks are 10 ms, too coarse for a client that uses
    milliseconds a minute). A thread that has ended (a reconnect's) counts with the time it had when a
    call last saw it: call this at least at the start and end of what is measured, and more often for
    a process whose threads come and go."""
    seen = _threads_seen.setdefault(pid, {})
    try:
        tids = os.listdir(f"/proc/{pid}/task")
    except OSError:
        tids = []
    for tid in tids:
        try:
            with open(f"/proc/{pid}/task/{tid}/schedstat") as f:
                seen[tid] = int(f.read().split()[0])
        except OSError:
            pass  # the thread ended between listdir and open
    return sum(seen.values()) / 1e9


def candidate_port(attempt=0):
    """A port on 127.0.0.1 that nobody has bound right now, for a program that takes its port on its
    command line (gpsd, mosquitto, postgres). Drawn from a block of 64 below the kernel's ephemeral
    range chosen by this process's pid, so that parallel runs rarely draw the same one; another program
    may still bind it before ours does: start it with `on_free_port`, which tries another then."""
    blocks = (32768 - 20000) // 64
    for n in range(attempt, attempt + 64 * blocks):
        port = 20000 + (os.getpid() + 37 + n // 64) % blocks * 64 + n % 64
        with socket.socket() as s:
            try:
                s.bind(("127.0.0.1", port))
            except OSError:
                continue
            return port
    raise OSError("no free port on 127.0.0.1")


def on_free_port(start, attempts=10):
    """`start(port)` on candidate ports until it returns something other than None (None: the program
    found the port taken, EADDRINUSE), up to `attempts` times; returns what it returned."""
    port = 0
    for attempt in range(attempts):
        port = candidate_port(attempt)
        started = start(port)
        if started is not None:
            return started
    raise OSError(f"every port tried on 127.0.0.1 was taken (the last {port})")


def listening_port(line):
    """The port in `keeptrack serve`'s first line, `{"event":"listening","url":"http://127.0.0.1:PORT",...}`
    (serve --port 0 picks a free one and says which), or None if the line is not that."""
    try:
        event = json.loads(line)
    except ValueError:
        return None
    if not isinstance(event, dict) or event.get("event") != "listening":
        return None
    return int(event["url"].rsplit(":", 1)[1].split("/")[0])


def status_mb(pid, key="VmHWM"):
    """A memory line of /proc/PID/status in MB (VmHWM: peak RSS; VmRSS: RSS now), NaN if absent."""
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith(key + ":"):
                return int(line.split()[1]) / 1024
    return float("nan")


def serve(binary, database, token, log_level="error"):
    """`keeptrack serve` on a port it picks (--port 0) over `database`: the process and its URL, once it
    listens. Exits the tool, saying so, if it does not start."""
    p = subprocess.Popen([binary, "serve", "--port", "0", "--db", database, "--token", token, "--log-level", log_level],
                         stdout=subprocess.PIPE, text=True)
    line = p.stdout.readline()
    if listening_port(line) is None:
        sys.exit(f"{os.path.basename(sys.argv[0])}: keeptrack serve --db {database} did not start")
    return p, json.loads(line)["url"]


def stop(p, seconds=30):
    """SIGTERM to `p`, SIGKILL if it has not exited within `seconds`."""
    p.terminate()
    try:
        p.wait(seconds)
    except subprocess.TimeoutExpired:
        p.kill()
        p.wait()


def fill_sqlite(path, count, columns, values, indexes):
    """Fills the `points` of a SQLite store `keeptrack serve --db` made (its own schema, migrated) with
    `count` generated rows, fast, for a benchmark: `INSERT INTO points (columns) SELECT values` over a
    recursive CTE counting `i` from 0; the named `indexes` dropped before and made again after, from the
    store's own definitions; then the devices' summaries (counts, times, latest position) computed from
    the points, as the server keeps them, and ANALYZE."""
    db = sqlite3.connect(path)
    made = [db.execute("SELECT sql FROM sqlite_master WHERE type = 'index' AND name = ?", (name,)).fetchone()[0]
            for name in indexes]
    db.executescript("".join(f"DROP INDEX {name}; " for name in indexes) + "PRAGMA synchronous = OFF;")
    db.execute(f"""
        WITH RECURSIVE n(i) AS (SELECT 0 UNION ALL SELECT i + 1 FROM n WHERE i + 1 < {count})
        INSERT INTO points ({columns}) SELECT {values} FROM n
    """)
    db.commit()
    db.executescript("".join(f"{sql};\n" for sql in made) + """
        INSERT INTO devices (id, points, first, last, lastReceived)
            SELECT device, COUNT(*), MIN(time), MAX(time), MAX(received) FROM points GROUP BY device;
        UPDATE devices SET (latestTime, latestLat, latestLon, latestAlt, latestHAcc, latestSpeed, latestCourse) =
            (SELECT time, lat, lon, alt, hAcc, speed, course FROM points
             WHERE device = devices.id AND valid = 1 ORDER BY time DESC LIMIT 1);
        ANALYZE;
    """)
    db.commit()
    db.close()


def fill_postgres(cluster, database, columns, values, rows, indexes):
    """Fills the `positions` of a PostgreSQL store `keeptrack serve --db` made (tools/pgcluster.py's
    `cluster`, `database`) the same way: `INSERT INTO positions (columns) SELECT values FROM rows` (rows: a
    FROM clause, generate_series), the primary key and the named `indexes` dropped before and made again
    after from the store's own definitions, the devices' summaries computed once at the end (not by the
    trigger, row by row), then VACUUM ANALYZE."""
    made = [cluster.psql(f"SELECT pg_get_indexdef('{name}'::regclass)", database).strip() for name in indexes]
    cluster.psql(f"""
        ALTER TABLE positions DROP CONSTRAINT positions_key;
        {"".join(f"DROP INDEX {name}; " for name in indexes)}
        ALTER TABLE positions DISABLE TRIGGER positions_devices;
        INSERT INTO positions ({columns}) SELECT {values} FROM {rows};
        ALTER TABLE positions ADD CONSTRAINT positions_key PRIMARY KEY (key);
        {"".join(f"{sql}; " for sql in made)}
        INSERT INTO devices (id, points, first, last, last_received)
            SELECT device, count(*), min(time), max(time), max(received) FROM positions GROUP BY device;
        UPDATE devices d SET (latest_time, latest_lat, latest_lon, latest_alt, latest_h_acc, latest_speed, latest_course) =
            (SELECT time, ST_Y(position::geometry), ST_X(position::geometry), alt, h_acc, speed, course FROM positions p
             WHERE p.device = d.id AND p.valid ORDER BY time DESC LIMIT 1);
        ALTER TABLE positions ENABLE TRIGGER positions_devices;
    """, database)
    cluster.psql("VACUUM ANALYZE", database)


def timed_gets(url, path, runs, check, token, timeout=120):
    """GET `path` of `url` (a urllib.parse result) `runs` + 1 times over one kept-alive connection, with
    the bearer `token`: the first answer, a warm-up, goes to `check` (its JSON) and is not timed. Returns
    the others' times in milliseconds and the last body. Exits the tool, saying so, on a status but 200."""
    import http.client
    conn = http.client.HTTPConnection(url.hostname, url.port, timeout=timeout)
    headers = {"Authorization": f"Bearer {token}"}
    times, body = [], b""
    for i in range(runs + 1):
        start = time.perf_counter()
        conn.request("GET", path, headers=headers)
        r = conn.getresponse()
        body = r.read()
        elapsed = time.perf_counter() - start
        if r.status != 200:
            sys.exit(f"{os.path.basename(sys.argv[0])}: GET {path}: {r.status} {body[:200]!r}")
        if i == 0:
            check(json.loads(body))
        else:
            times.append(elapsed * 1000)
    conn.close()
    return times, body


def best_ms(fn, runs):
    """The fastest of `runs` calls of `fn`, in milliseconds."""
    out = []
    for _ in range(runs):
        start = time.perf_counter()
        fn()
        out.append((time.perf_counter() - start) * 1000)
    return min(out)


def cpu_per_hour(procs, windows, seconds):
    """CPU seconds per hour of each of `procs` ({name: Popen}), measured side by side over `windows`
    windows of `seconds` each: {name: [a figure a window]}, each window's said on stderr. Exits the tool,
    saying which, if one of them exits meanwhile."""
    per_window = {name: [] for name in procs}
    for w in range(windows):
        before = {name: cpu_seconds(p.pid) for name, p in procs.items()}
        t0 = time.monotonic()
        time.sleep(seconds)
        elapsed = time.monotonic() - t0
        for name, p in procs.items():
            if p.poll() is not None:
                sys.exit(f"{os.path.basename(sys.argv[0])}: {name} exited early ({p.returncode})")
            per_window[name].append((cpu_seconds(p.pid) - before[name]) / elapsed * 3600)
        print(f"  window {w + 1}/{windows}: " + ", ".join(f"{n} {per_window[n][-1]:.2f} CPU-s/h" for n in procs),
              file=sys.stderr)
    return per_window


def gpsfake_start(log=os.path.join(ROOT, "fixtures", "walk-15min.nmea"), cycle="0.125"):
    """A real gpsd under gpsfake on loopback playing `log` (tools/gpsfake-run start): its port, and the
    pid and directory `gpsfake_stop` takes."""
    out = subprocess.run([os.path.join(ROOT, "tools", "gpsfake-run"), "start", log, cycle], check=True,
                         capture_output=True, text=True).stdout.split()
    return out[0], out[1], out[2]


def gpsfake_stop(pid, directory):
    subprocess.run([os.path.join(ROOT, "tools", "gpsfake-run"), "stop", pid, directory])
