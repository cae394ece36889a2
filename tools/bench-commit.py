#!/usr/bin/env python3
"""What "durable before delivered" costs: the outbox committing each fix's records before they are
printed (the default) beside group commits (`--commit-within 10s`, the opt-in), at 1 Hz and 10 Hz,
in CPU and in bytes written, with Python's sqlite3 doing the same work on the same schema in the
same run as the peer.

    tools/bench-commit.py [--seconds 3600] [--bin-dir DIR]

Each row is an hour of tracking (--seconds of fix time, as fast as the machine goes: the cost of a
commit does not depend on the time between them) appended to a fresh outbox by `upload-bench
--commit-cost` (release build, the outbox the tracker uses: SQLite WAL, synchronous=NORMAL), with
the uploader's acknowledgements every 30 s deleting what was sent, as a tracker with a reachable
endpoint does. A commit per record at 1 Hz and 10 Hz (one fix, one location: a fix's region
transitions share its commit) beside a commit per 10 s (10 records at 1 Hz, 100 at 10 Hz). Bytes
written are what the process passed to write(2) (`wchar` of /proc/self/io): the WAL's frames and
the checkpoints into the database file, what the flash sees before the page cache merges anything.
The last columns: the same work by Python's sqlite3 on the outbox as it was before issue 25 (v5:
AUTOINCREMENT, an index on (priority, seq), 4 KB pages), what a commit per fix cost then.
"""
import argparse, json, os, resource, sqlite3, subprocess, sys, tempfile

import keeptrack_tools

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
ROWS = [(1, 1), (1, 10), (10, 1), (10, 100)]


def build(bin_dir):
    return os.path.join(bin_dir, "upload-bench") if bin_dir else keeptrack_tools.build("upload-bench")


def io_counters():
    written = calls = 0
    with open("/proc/self/io") as f:
        for line in f:
            key, value = line.split(":")
            if key == "wchar":
                written = int(value)
            elif key == "syscw":
                calls = int(value)
    return written, calls


def cpu_seconds():
    u = resource.getrusage(resource.RUSAGE_SELF)
    return u.ru_utime + u.ru_stime


# The outbox as migrations v1-v5 left it (before issue 25): AUTOINCREMENT, an index on (priority, seq),
# SQLite's default 4 KB pages.
V5_SCHEMA = [
    """CREATE TABLE outbox (seq INTEGER PRIMARY KEY AUTOINCREMENT, kind TEXT NOT NULL, region TEXT,
       time REAL NOT NULL, lat REAL NOT NULL, lon REAL NOT NULL, alt REAL, hAcc REAL, vAcc REAL, speed REAL,
       course REAL, priority INTEGER NOT NULL, appended REAL NOT NULL, decided REAL)""",
    "CREATE INDEX outbox_order ON outbox (priority, seq)",
    "CREATE TABLE meta (key TEXT PRIMARY KEY, value NOT NULL)",
]


def schema_of(path):
    source = sqlite3.connect(path)
    statements = [sql for (sql,) in source.execute(
        "SELECT sql FROM sqlite_master WHERE sql IS NOT NULL AND name NOT LIKE 'sqlite_%' ORDER BY rowid")]
    page_size = source.execute("PRAGMA page_size").fetchone()[0]
    source.close()
    return statements, page_size


def peer(statements, page_size, work, rate, group, seconds):
    """Python's sqlite3: the same rows into the same schema and page size, the same commits and
    acknowledgements."""
    path = os.path.join(work, f"peer-{page_size}.sqlite")
    db = sqlite3.connect(path, isolation_level=None)
    db.execute(f"PRAGMA page_size = {page_size}")
    db.execute("PRAGMA journal_mode = WAL")
    db.execute("PRAGMA synchronous = NORMAL")
    for sql in statements:
        db.execute(sql)
    db.execute("INSERT OR IGNORE INTO meta (key, value) VALUES ('evicted', 0), ('uploaded', 0)")
    insert = ("INSERT INTO outbox (kind, region, time, lat, lon, alt, hAcc, vAcc, speed, course, priority, appended,"
              " decided) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)")
    total = int(seconds * rate)
    cpu0, (w0, c0) = cpu_seconds(), io_counters()
    waiting, sent, last_ack = [], [], 0.0
    for i in range(total):
        t = i / rate
        waiting.append(("location", None, 1_715_679_000 + t, 48.1 + i * 1e-6, 11.5 + i * 1e-6, 520, 4.5, 7.5, 1.25,
                        90, 1, 1_715_679_000 + t, None))
        if len(waiting) >= group:
            db.execute("BEGIN IMMEDIATE")
            for row in waiting:
                db.execute(insert, row)
                sent.append(db.execute("SELECT last_insert_rowid()").fetchone()[0])
            db.execute("COMMIT")
            waiting = []
        if t - last_ack >= 30:
            db.execute("BEGIN IMMEDIATE")
            db.execute("DELETE FROM outbox WHERE seq BETWEEN ? AND ?", (min(sent, default=0), max(sent, default=0)))
            db.execute("UPDATE meta SET value = value + ? WHERE key = 'uploaded'", (len(sent),))
            db.execute("COMMIT")
            sent, last_ack = [], t
    cpu, (w1, c1) = cpu_seconds() - cpu0, io_counters()
    db.close()
    return {"cpuSeconds": cpu, "bytesWritten": w1 - w0, "writeCalls": c1 - c0, "records": total}


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--seconds", type=float, default=3600, help="fix time per row (default: an hour)")
    ap.add_argument("--bin-dir", help="where upload-bench is (default: a release build in .build-release)")
    args = ap.parse_args()
    bench = build(args.bin_dir)
    hours = args.seconds / 3600
    print(f"bench-commit: {args.seconds:.0f} s of fixes a row; CPU-s/h and MB/day scaled from it")
    print(f"{'rate':>5} {'commit':>18} | {'keeptrack us/rec':>16} {'CPU-s/h':>8} {'B/rec':>7} {'MB/day':>7} | "
          f"{'sqlite3 (Python) us/rec':>23} {'B/rec':>7} {'MB/day':>7} | {'v5 schema B/rec':>15} {'MB/day':>7}")
    for rate, group in ROWS:
        work = tempfile.mkdtemp(prefix="keeptrack-bench-commit-")
        try:
            out = subprocess.run([bench, "--commit-cost", "--dir", work, "--rate", str(rate), "--group", str(group),
                                  "--seconds", str(args.seconds)], check=True, capture_output=True, text=True).stdout
            k = json.loads(out)
            if k["pending"] != 0 or k["records"] != int(args.seconds * rate):
                sys.exit(f"bench-commit: upload-bench left {k['pending']} records or appended {k['records']}")
            p = peer(*schema_of(os.path.join(work, "outbox.sqlite")), work, rate, group, args.seconds)
            v5 = peer(V5_SCHEMA, 4096, work, rate, group, args.seconds)
        finally:
            subprocess.run(["rm", "-rf", work])
        label = "each fix (default)" if group == 1 else f"{group} a group (10s)"
        per_day = 24 / hours / 1e6
        print(f"{rate:>3}Hz {label:>18} | {k['cpuMicrosecondsPerRecord']:>16.1f} {k['cpuSeconds'] / hours:>8.2f} "
              f"{k['bytesPerRecord']:>7.0f} {k['bytesWritten'] * per_day:>7.1f} | "
              f"{p['cpuSeconds'] * 1e6 / p['records']:>23.1f} {p['bytesWritten'] / p['records']:>7.0f} "
              f"{p['bytesWritten'] * per_day:>7.1f} | {v5['bytesWritten'] / v5['records']:>15.0f} "
              f"{v5['bytesWritten'] * per_day:>7.1f}")


if __name__ == "__main__":
    main()
