#!/usr/bin/env python3
"""Where PostgreSQL ingest's time goes: tools/bench-pg.py's load, with parts of the store's work
switched off one at a time, in one run, on one cluster.

    tools/bench-pg-profile.py [--records 100000] [--devices 1000] [--rounds 2] [--variants a,b,...]
                              [--geofences N] [--keeptrack PATH] [--keeptrack-as NAME=PATH ...]

Starts one throwaway PostgreSQL 15 + PostGIS cluster (tools/pgcluster.py) with pg_stat_statements
loaded and trigger functions timed (track_functions = all), then for each variant and each of one
and two `keeptrack serve` instances (the release build) loads a fresh database with
tools/fleet-load.py (as tools/bench-pg.py does), the variants interleaved round by round (a shared
machine's speed moves from minute to minute: compare within a round). Variants:

    baseline     the store as it is
    nostops      the stop detector's trigger off (no device marked dirty: the catch-up's
                 transactions find nothing and write nothing)
    nonotify     the live stream's NOTIFY trigger off
    neither      both off
    NAME         a binary given with --keeptrack-as NAME=PATH (a build with a change to try)

For each load it reports records/s, commits (pg_stat_database) and rows per commit, PostgreSQL's
statements by total execution time (pg_stat_statements, the top ones), the trigger functions' time
(pg_stat_user_functions), and what backends waited on (pg_stat_activity sampled every 20 ms during
the load: wait event type and name, as a share of the samples of active backends; and, for the
backends waiting on a lock, what they wait for from pg_locks: the lock's type and mode, and its
table or, for an `object` lock on pg_database, "notify queue": the lock every transaction that
sent a NOTIFY holds from its commit's start to its end, WAL flush included). With --geofences N,
each database gets N geofences first, as tools/bench-pg.py --geofences puts them.

A steady load instead of the burst: --steady HZ --minutes M sends a fix every 1/HZ s from each
device (--devices, in batches of --batch) for M minutes, after --preload N records sent as fast as
answered and left out of the figures (the listener's catch-up looks up to 100,000 storage numbers
back: a preload past that shows what its look every 15 s reads in the steady state).
"""
import argparse, collections, importlib.machinery, json, os, subprocess, sys, threading, time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "tools"))
import pgcluster  # noqa: E402

bench = importlib.machinery.SourceFileLoader("benchpg", os.path.join(ROOT, "tools", "bench-pg.py")).load_module()

NO_NOTIFY = ["ALTER TABLE positions DISABLE TRIGGER positions_stored"]
SWITCHES = {
    "baseline": [],
    "nostops": list(bench.BARE),  # bench-pg.py's "nothing derived" row
    "nonotify": NO_NOTIFY,
    "neither": list(bench.BARE) + NO_NOTIFY,
}


def sampler(cluster, database, stop, counts):
    """Counts (wait_event_type, wait_event) of the database's active backends every 20 ms."""
    query = ("SELECT coalesce(wait_event_type, 'CPU'), coalesce(wait_event, '-') FROM pg_stat_activity "
             f"WHERE datname = '{database}' AND state = 'active' AND pid <> pg_backend_pid()")
    # What the lock waiters wait for; an `object` lock on pg_database (classid 1262) is the one
    # PostgreSQL takes at the commit of every transaction that notified (async.c, PreCommit_Notify).
    query += (";\nSELECT 'lock ' || l.locktype || ' ' || l.mode || ' ' || CASE WHEN l.locktype = 'object' "
              "AND l.classid = 1262 THEN 'notify queue' ELSE coalesce(c.relname, '-') END FROM pg_locks l "
              "LEFT JOIN pg_class c ON c.oid = l.relation WHERE NOT l.granted")
    args = ["psql", "-X", "-q", "-A", "-t", "-F", "|", "-h", cluster.dir, "-p", str(cluster.port), "-U", cluster.user,
            "-d", "postgres"]
    p = subprocess.Popen(args, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, bufsize=1, cwd="/tmp")
    marker = "--end--"
    while not stop.is_set():
        p.stdin.write(query + f";\nSELECT '{marker}';\n")
        p.stdin.flush()
        while True:
            line = p.stdout.readline().strip()
            if not line or line == marker:
                break
            counts[line] += 1
        counts["samples"] += 1
        time.sleep(0.02)
    p.stdin.close()
    p.wait()


def steady(args, urls, pids, database_pid):
    """fleet-load.py at --steady fixes a second per device for --minutes: its summary. Devices of their
    own (not the preload's, whose fixes cover the same hour: each batch would be a late point)."""
    cmd = [sys.executable, os.path.join(ROOT, "tools", "fleet-load.py"), "--devices", str(args.devices), "--rate",
           str(args.steady), "--minutes", str(args.minutes), "--batch", str(args.batch), "--token", "t",
           "--connections", str(args.connections), "--processes", "2", "--json", "--database-pid", str(database_pid)]
    for u in urls:
        cmd += ["--url", u]
    for p in pids:
        cmd += ["--server-pid", str(p)]
    r = subprocess.run(cmd, stdout=subprocess.PIPE, text=True)
    return json.loads(r.stdout.strip().splitlines()[-1])


def run(args, cluster, variant, binary, count, name):
    url = cluster.create_database(name)
    bench.BINARY = binary
    bench.migrate(url)
    for sql in SWITCHES.get(variant, []):
        cluster.psql(sql, name)
    cluster.psql("SELECT pg_stat_statements_reset()", name)
    cluster.psql("SELECT pg_stat_reset()", name)
    before = bench.commits(cluster, name)
    servers = [bench.serve(url, "t") for _ in range(count)]
    if args.geofences:
        bench.put_geofences(servers[0][1], args.geofences)
    urls, pids = [u for _, u in servers], [p.pid for p, _ in servers]
    if args.preload:
        preload = argparse.Namespace(**vars(args))
        preload.records = args.preload
        bench.load(preload, urls, pids, None, "preload")
        cluster.psql("SELECT pg_stat_statements_reset()", name)
        cluster.psql("SELECT pg_stat_reset()", name)
        # The servers stay connected: their backends hand their counts in idle, within 10 s.
        before = int(cluster.psql(f"SELECT xact_commit FROM pg_stat_database WHERE datname = '{name}'").strip())
    cluster.psql("CHECKPOINT")
    counts = collections.Counter()
    stop = threading.Event()
    t = threading.Thread(target=sampler, args=(cluster, name, stop, counts))
    t.start()
    if args.steady:
        summary = steady(args, urls, pids, cluster.pids()[0])
    else:
        summary = bench.load(args, urls, pids, cluster.pids()[0], f"{variant} x{count}")
    stop.set()
    t.join()
    for p, _ in servers:
        p.kill()
        p.wait()
    summary["commits"] = bench.commits(cluster, name) - before
    statements = cluster.psql(
        "SELECT round(total_exec_time)::bigint, calls, rows, regexp_replace(left(query, 90), '\\s+', ' ', 'g') "
        "FROM pg_stat_statements WHERE dbid = (SELECT oid FROM pg_database WHERE datname = current_database()) "
        "ORDER BY total_exec_time DESC LIMIT 8", name)
    functions = cluster.psql(
        "SELECT funcname, calls, round(total_time)::bigint, round(self_time)::bigint FROM pg_stat_user_functions "
        "ORDER BY total_time DESC", name)
    samples = counts.pop("samples", 1)
    waits = sorted(counts.items(), key=lambda kv: -kv[1])[:12]
    return summary, statements, functions, waits, samples


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--records", type=int, default=100_000)
    ap.add_argument("--devices", type=int, default=1000)
    ap.add_argument("--batch", type=int, default=100)
    ap.add_argument("--connections", type=int, default=16)
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--variants", default="baseline,nostops,nonotify,neither")
    ap.add_argument("--instances", default="1,2")
    ap.add_argument("--geofences", type=int, default=0, help="geofences put before each load (default none)")
    ap.add_argument("--steady", type=float, default=0, help="fixes a second per device, for --minutes (default: a burst)")
    ap.add_argument("--minutes", type=float, default=1.0, help="how long a --steady load runs")
    ap.add_argument("--preload", type=int, default=0, help="records sent first, left out of the figures")
    ap.add_argument("--keeptrack", default=bench.BINARY)
    ap.add_argument("--keeptrack-as", action="append", default=[], help="NAME=PATH: a variant run with that binary")
    args = ap.parse_args()
    binaries = {v: args.keeptrack for v in SWITCHES}
    for item in args.keeptrack_as:
        name, path = item.split("=", 1)
        binaries[name] = path
    variants = args.variants.split(",")
    for v in variants:
        if v not in binaries:
            sys.exit(f"bench-pg-profile: no variant {v}")
        if not os.path.exists(binaries[v]):
            sys.exit(f"bench-pg-profile: {binaries[v]} does not exist (swift build -c release --scratch-path .build-release)")
    cluster = pgcluster.Cluster(settings=("shared_preload_libraries=pg_stat_statements", "track_functions=all",
                                          "pg_stat_statements.track=all"))
    results = collections.defaultdict(list)
    try:
        cluster.psql("CREATE EXTENSION pg_stat_statements", "template1")
        for r in range(args.rounds):
            order = variants[r % len(variants):] + variants[:r % len(variants)]
            if r % 2:
                order.reverse()
            for v in order:
                for count in [int(c) for c in args.instances.split(",")]:
                    name = f"{v}_{count}_{r}"
                    summary, statements, functions, waits, samples = run(args, cluster, v, binaries[v], count, name)
                    rate = summary["stored_per_s"]
                    results[(v, count)].append(rate)
                    print(f"\n## round {r + 1}, {v}, {count} instance{'s' if count > 1 else ''}: {rate:,} records/s, "
                          f"{summary['commits']} commits ({summary['stored'] / max(1, summary['commits']):.0f} rows a commit), "
                          f"keeptrack CPU {summary['server_cpu_percent']} %, PostgreSQL CPU "
                          f"{summary['database_cpu_percent']} %, exact: {summary['exact']}", flush=True)
                    print("statements (total ms | calls | rows | query):")
                    for line in statements.strip().splitlines():
                        print("  " + line)
                    print("trigger functions (name | calls | total ms | self ms):")
                    for line in functions.strip().splitlines():
                        print("  " + line)
                    print(f"waits ({samples} samples of active backends, per sample):")
                    for (what, n) in waits:
                        print(f"  {what}: {n / samples:.2f}")
        print("\n| variant | instances | records/s per round | median |")
        print("|---|---:|---|---:|")
        for (v, count), rates in sorted(results.items()):
            rates_sorted = sorted(rates)
            med = rates_sorted[len(rates) // 2] if len(rates) % 2 else sum(rates_sorted[len(rates) // 2 - 1:len(rates) // 2 + 1]) / 2
            print(f"| {v} | {count} | {', '.join(f'{x:,.0f}' for x in rates)} | {med:,.0f} |")
    finally:
        cluster.remove()


if __name__ == "__main__":
    main()
