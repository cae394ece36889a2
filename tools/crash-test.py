#!/usr/bin/env python3
"""Nothing lost, nothing stored twice: kill the uploader with SIGKILL at random moments while the
endpoint is down, failing, slow or dropping answers, and check what the endpoint holds at the end.

    tools/crash-test.py [--kills 100] [--seed N] [--speed 60] [--keep]

A real `keeptrack serve` runs on a loopback port with its own SQLite database. Again and again,
`keeptrack replay --upload URL` replays fixtures/walk-15min.nmea (paced --speed times real time)
into its outbox and uploads it in small batches; the script kills it with SIGKILL after a random
0.1-3 s and starts it again (a restarted replay appends the walk anew: new records, new ids). Between
kills the endpoint goes through phases: healthy, failing 50 % of requests with 503, slow (0.4 s a
request), dropping 30 % of answers after storing them, refusing connections, and down (the server
process itself killed with SIGKILL, then restarted on the same port and database). At the end the
endpoint is healthy, one last replay runs to completion, and the check is:

- the outbox is empty and has no dead letters;
- the endpoint holds, for the device, exactly the ids 1..N the outbox ever gave — no gap (nothing
  lost), no id twice (nothing stored twice) — and, ordered by id, the times of each replay run
  increase (order kept);
- the last, complete run delivered all of the walk's 895 locations;
- every location a run printed (its standard output, kept per run) is stored at the endpoint: a
  location is committed to the outbox before it is printed, so a SIGKILL never loses one that was
  shown (`--commit-within`, an opt-in, would: `--commit-within 10s` shows the loss).

Run k replays the walk moved k days forward, so that every printed location names its run.

It prints the counts: kills, endpoint restarts, phases, retries (requests the endpoint failed,
dropped or refused, from its metrics), duplicates it recognised, records. Exit status 0 on success.

    tools/crash-test.py --postgres [--kills 100] [--seed N] [--speed 60] [--keep]

The same, with the endpoint on PostgreSQL (a throwaway cluster, tools/pgcluster.py, fsync on) and
two more phases: PostgreSQL restarted (a fast shutdown and a start) or killed (SIGKILL to the
postmaster, then a start that recovers from the WAL) at a random moment of the run; the uploader
retries what the endpoint could not store. The check reads the `positions` table.

    tools/crash-test.py --mqtt [--kills 100] [--seed N] [--speed 60] [--keep]

The same over MQTT: a private mosquitto (its own config on a free loopback port, persistence on so
that a restart keeps the endpoint's session and the messages queued for it) between
`keeptrack replay --upload mqtt://...` and `keeptrack serve --mqtt mqtt://...`. Run k replays the walk
moved k days forward (OwnTracks messages carry no id: the endpoint tells records apart by device, kind
and time). Between kills the broker is healthy, down (stopped for the whole run, started after the
kill) or restarted at a random moment of the run (SIGTERM: it saves its state). At the end the endpoint
is restarted, one last replay runs to completion, and the check is: the outbox is empty with no dead
letters; for each run k the endpoint holds exactly the first n_k fixes of its walk (nothing lost inside
a run), the n_k add up to every record the outbox ever gave (nothing lost at all), each once; in the
order the endpoint received them the times increase (order kept); the last run delivered all 895;
every location a run printed is stored.

    tools/crash-test.py --two-targets [--kills 100] [--seed N] [--speed 60] [--keep]

Two targets (issue 29): every replay uploads to two `keeptrack serve` endpoints at once
(`--upload A --upload B`, one outbox, a lane each). Endpoint A goes through the healthy, failing, slow,
dropping and refusing phases; endpoint B is killed with SIGKILL and restarted again and again (before
a run, in the middle of one, or left up). At the end both are healthy and one last replay runs to
completion; the check is the first mode's for each endpoint: ids 1..N exactly once, no gap, order kept,
every printed location stored, and the outbox empty (no record still waiting for either target).
"""
import argparse, json, os, random, signal, socket, sqlite3, subprocess, sys, tempfile, time, urllib.request

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import keeptrack_tools  # noqa: E402
import pgcluster  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
WALK = os.path.join(ROOT, "fixtures", "walk-15min.nmea")
WALK_FIXES = 895
TOKEN = "crash-test-token"
DEVICE = "crash-test"


class Endpoint:
    """`keeptrack serve`: first on a port it picks (--port 0) and says, then, restarted, on that one."""

    def __init__(self, keeptrack, work, port=0, db=None):
        self.keeptrack, self.port, self.proc = keeptrack, port, None
        self.db = db or os.path.join(work, "endpoint.sqlite")
        self.restarts = 0
        self.metrics_total = {}

    def start(self):
        self.proc = subprocess.Popen([self.keeptrack, "serve", "--port", str(self.port), "--db", self.db,
                                      "--token", TOKEN, "--faults"], stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
        line = self.proc.stdout.readline()
        port = keeptrack_tools.listening_port(line)
        if port is None:
            sys.exit(f"crash-test: the endpoint did not start: {line!r}")
        self.port = port

    def kill(self):
        if self.proc and self.proc.poll() is None:
            self.collect_metrics()
            self.proc.send_signal(signal.SIGKILL)
            self.proc.wait()
            self.restarts += 1

    def stop(self):
        if self.proc and self.proc.poll() is None:
            self.collect_metrics()
            self.proc.terminate()
            self.proc.wait(10)

    def request(self, method, path, body=None):
        req = urllib.request.Request(f"http://127.0.0.1:{self.port}{path}", method=method,
                                     data=None if body is None else json.dumps(body).encode(),
                                     headers={"Authorization": f"Bearer {TOKEN}", "Content-Type": "application/json"})
        with urllib.request.urlopen(req, timeout=10) as r:
            return r.read().decode()

    def faults(self, **f):
        self.request("PUT", "/v1/faults", f)

    def collect_metrics(self):
        """Counters reset when the process dies: add them up before it does."""
        try:
            text = self.request("GET", "/metrics")
        except OSError:
            return
        for line in text.splitlines():
            if line.startswith("#") or not line.strip():
                continue
            name, value = line.rsplit(" ", 1)
            if "_total" in name:
                self.metrics_total[name] = self.metrics_total.get(name, 0) + int(float(value))


def replay(keeptrack, url, work, speed, run, batch_wait="0.2", extra=()):
    """Run `run` of the walk (moved `run` days forward), its standard output kept in printed-RUN.jsonl;
    `url` is one URL or a list of them (one --upload each)."""
    uploads = [a for u in ([url] if isinstance(url, str) else url) for a in ("--upload", u)]
    with open(printed_path(work, run), "w") as out:
        return subprocess.Popen([keeptrack, "replay", *uploads, "--token", TOKEN, "--device-id", DEVICE,
                                 "--data-dir", work, "--speed", str(speed), "--batch-size", "25",
                                 "--batch-wait", batch_wait, "--max-backoff", "1", "--quiet", *extra,
                                 shifted_walk(work, run)],
                                stdout=out, stderr=subprocess.PIPE, text=True)


def last_sequence(outbox):
    """The last sequence number the outbox gave: the largest stored, or its high-water mark."""
    return outbox.execute("SELECT max(ifnull((SELECT max(seq) FROM outbox), 0), "
                          "(SELECT value FROM meta WHERE key = 'lastseq'))").fetchone()[0]


def printed_path(work, run):
    return os.path.join(work, f"printed-{run}.jsonl")


def printed_locations(work, runs):
    """The times (Unix seconds, to the millisecond) of every location the runs printed. A line cut by
    the kill was not printed whole: it is not counted."""
    import datetime
    times = []
    for run in range(runs):
        with open(printed_path(work, run)) as f:
            for line in f:
                if not line.endswith("\n") or '"event":"location"' not in line:
                    continue
                t = json.loads(line)["time"]
                times.append(round(datetime.datetime.fromisoformat(t.replace("Z", "+00:00")).timestamp(), 3))
    return times


def unstored(printed, stored_times):
    """The printed locations the endpoint does not hold."""
    stored = {round(t, 3) for t in stored_times}
    return [t for t in printed if t not in stored]


PHASES = ["healthy", "failing", "slow", "dropping", "refusing", "down"]


def kill_runs(args, rng, pick, start_run):
    """The loop of every mode: runs until `args.kills` SIGKILLs. Before each run `pick()` draws its phases,
    sets the endpoints up for them, and returns the words of the progress line, a call to make at a random
    moment of the run (or None) and one to make after it (or None); `start_run(run)` starts run `run`,
    which is killed after a random 0.1-3 s. Returns the kills and the number of runs."""
    kills, run = 0, 0
    while kills < args.kills:
        words, midway, after = pick()
        proc = start_run(run)
        lifetime = rng.uniform(0.1, 3.0)
        if midway:
            first = rng.uniform(0, lifetime)
            time.sleep(first)
            midway()
            time.sleep(max(0.0, lifetime - first))
        else:
            time.sleep(lifetime)
        if proc.poll() is None:
            proc.send_signal(signal.SIGKILL)
            kills += 1
        proc.wait()
        run += 1
        if after:
            after()
        print(f"  kill {kills}/{args.kills} during {words}", file=sys.stderr, end="\r")
    print(file=sys.stderr)
    return kills, run


def final_run(proc):
    """Waits for the last, complete replay; exits the tool if it failed."""
    _, err = proc.communicate(timeout=600)
    if proc.returncode != 0:
        sys.exit(f"crash-test: the final replay failed ({proc.returncode}): {err}")


def outbox_at_end(work):
    """The outbox once the last run ended: its connection, the last id it gave, the records still pending
    and the dead letters, and those two as problems."""
    outbox = sqlite3.connect(os.path.join(work, "outbox.sqlite"))
    last_seq = last_sequence(outbox)
    pending = outbox.execute("SELECT COUNT(*) FROM outbox").fetchone()[0]
    dead = outbox.execute("SELECT COUNT(*) FROM dead_letter").fetchone()[0]
    problems = []
    if pending:
        problems.append(f"{pending} records still in the outbox")
    if dead:
        problems.append(f"{dead} dead letters")
    return outbox, last_seq, pending, dead, problems


def finish(args, work, problems, ok):
    """Removes the work directory (unless --keep), then says FAILED with the problems (exit status 1) or
    OK with `ok`."""
    if not args.keep:
        subprocess.run(["rm", "-rf", work])
    else:
        print(f"  work directory: {work}")
    if problems:
        print("FAILED: " + "; ".join(problems))
        sys.exit(1)
    print("OK: " + ok)


class Broker:
    """A private mosquitto: its own config, persistence on, stopped and started by pid."""

    def __init__(self, work):
        self.port, self.proc, self.restarts = None, None, 0
        self.dir = os.path.join(work, "broker")
        os.makedirs(self.dir, exist_ok=True)

    def configure(self, port):
        import pwd
        self.port = port
        with open(os.path.join(self.dir, "mosquitto.conf"), "w") as f:
            f.write(f"listener {port} 127.0.0.1\nallow_anonymous true\npersistence true\n"
                    f"persistence_location {self.dir}/\nlog_dest file {self.dir}/log\n"
                    # The default (1000) drops what an offline subscriber's session would get past it.
                    f"max_queued_messages 0\n"
                    f"user {pwd.getpwuid(os.getuid()).pw_name}\n")

    def start(self):
        """Starts mosquitto: the first time on a candidate port, another if that one was taken (it exits
        then), up to 10; a restart on the port its clients know."""
        if self.port is None:
            keeptrack_tools.on_free_port(lambda port: self.configure(port) or self.run())
        elif not self.run():
            sys.exit(f"crash-test: mosquitto did not start on port {self.port} (see {self.dir}/log)")

    def run(self):
        """mosquitto on self.port: True once the port accepts connections, None if it exited."""
        self.proc = subprocess.Popen(["/usr/sbin/mosquitto", "-c", os.path.join(self.dir, "mosquitto.conf")],
                                     stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:  # a readiness probe: the port accepts connections
            try:
                socket.create_connection(("127.0.0.1", self.port), timeout=1).close()
                return True
            except OSError:
                if self.proc.poll() is not None:
                    return None
                time.sleep(0.02)
        sys.exit(f"crash-test: mosquitto did not start on port {self.port} (see {self.dir}/log)")

    def stop(self):
        if self.proc and self.proc.poll() is None:
            self.proc.terminate()  # SIGTERM: it saves sessions and queued messages
            self.proc.wait(10)
            self.restarts += 1


def shifted_walk(work, days):
    """The walk moved `days` forward: RMC dates changed, checksums recomputed."""
    import datetime
    path = os.path.join(work, f"walk+{days}.nmea")
    if os.path.exists(path):
        return path
    out = []
    with open(WALK) as f:
        for line in f:
            line = line.rstrip("\r\n")
            if line.startswith("$GPRMC"):
                body = line[1:line.index("*")]
                fields = body.split(",")
                d = datetime.datetime.strptime(fields[9], "%d%m%y") + datetime.timedelta(days=days)
                fields[9] = d.strftime("%d%m%y")
                body = ",".join(fields)
                check = 0
                for c in body.encode():
                    check ^= c
                line = f"${body}*{check:02X}"
            out.append(line + "\r\n")
    with open(path, "w") as f:
        f.writelines(out)
    return path


def walk_start():
    """The time of the walk's first fix (its first RMC), in Unix seconds."""
    import calendar
    with open(WALK) as f:
        for line in f:
            if line.startswith("$GPRMC"):
                fields = line.split(",")
                t, d = fields[1], fields[9]
                return calendar.timegm((2000 + int(d[4:6]), int(d[2:4]), int(d[0:2]), int(t[0:2]), int(t[2:4]),
                                        int(t[4:6]))) + float(t[6:] or 0)
    sys.exit("crash-test: the walk has no RMC")


def mqtt_serve(keeptrack, work, broker_port):
    p = subprocess.Popen([keeptrack, "serve", "--port", "0", "--db", os.path.join(work, "endpoint.sqlite"),
                          "--mqtt", f"mqtt://127.0.0.1:{broker_port}"], stdout=subprocess.PIPE,
                         stderr=subprocess.DEVNULL, text=True)
    url = json.loads(p.stdout.readline())["url"]
    if '"subscribed"' not in p.stdout.readline():
        sys.exit("crash-test: serve --mqtt did not subscribe")
    return p, url


def mqtt_main(args, keeptrack, seed, rng):
    work = tempfile.mkdtemp(prefix="keeptrack-crash-mqtt-")
    broker = Broker(work)
    broker.start()
    serve, serve_url = mqtt_serve(keeptrack, work, broker.port)
    url = f"mqtt://127.0.0.1:{broker.port}"
    phases = {p: 0 for p in ["healthy", "down", "restart"]}
    started = time.monotonic()

    def replay_run(run, speed, batch_wait="0.2"):
        with open(printed_path(work, run), "w") as out:
            return subprocess.Popen([keeptrack, "replay", "--upload", url, "--device-id", DEVICE, "--data-dir", work,
                                     "--speed", str(speed), "--batch-size", "25", "--batch-wait", batch_wait,
                                     "--max-backoff", "1", "--quiet", *args.replay_option, shifted_walk(work, run)],
                                    stdout=out, stderr=subprocess.PIPE, text=True)
    def restart():
        broker.stop()
        broker.start()

    def pick():
        phase = rng.choice(list(phases))
        phases[phase] += 1
        if phase == "down":
            broker.stop()
        return f"'{phase}'", restart if phase == "restart" else None, broker.start if phase == "down" else None

    try:
        kills, run = kill_runs(args, rng, pick, lambda run: replay_run(run, args.speed))
        # The end: the endpoint restarted (it reconnects at once; its session kept what came meanwhile)
        # and one complete run, which also sends what earlier runs left.
        before = urllib.request.urlopen(serve_url + "/metrics", timeout=10).read().decode()
        serve.terminate()
        serve.wait(10)
        serve, serve_url = mqtt_serve(keeptrack, work, broker.port)
        final_run(replay_run(run, args.speed * 4, batch_wait="0.05"))
        run += 1
        _, last_seq, pending, dead, problems = outbox_at_end(work)
        # Delivery to the endpoint goes on after the broker's PUBACK: wait (bounded) until it holds the count.
        store = sqlite3.connect(os.path.join(work, "endpoint.sqlite"))
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            n = store.execute("SELECT COUNT(*) FROM points WHERE device = ?", ("keeptrack/" + DEVICE,)).fetchone()[0]
            if n >= last_seq:
                break
            time.sleep(0.1)
        metrics = before + urllib.request.urlopen(serve_url + "/metrics", timeout=10).read().decode()
    finally:
        serve.terminate()
        serve.wait(10)
        broker.stop()

    rows = store.execute("SELECT time, received FROM points WHERE device = ? ORDER BY received, time",
                         ("keeptrack/" + DEVICE,)).fetchall()
    # Each run's records: a prefix of its walk (one fix a second, 895 of them), by day.
    # Run k's walk starts k days after the walk's own first fix (not the first stored: a run 0 killed
    # before its first record would move every run's day by one).
    first_time = walk_start()
    by_run = {}
    for t, _ in rows:
        by_run.setdefault(int((t - first_time) // 86_400), []).append(t)
    # The walk's fix times (895 over 900 s) from the complete last run, checked for completeness below.
    walk = sorted(t - (first_time + (run - 1) * 86_400) for t in by_run.get(run - 1, []))
    for k, times in sorted(by_run.items()):
        offsets = sorted(t - (first_time + k * 86_400) for t in times)
        if offsets != walk[:len(offsets)]:
            problems.append(f"run {k}: {len(times)} records that are not the first {len(times)} fixes of its walk")
    if len(rows) != last_seq:
        problems.append(f"the outbox gave {last_seq} records; the endpoint holds {len(rows)}")
    backwards = sum(1 for a, b in zip(rows, rows[1:]) if b[0] < a[0])
    if backwards:
        problems.append(f"{backwards} places where a record was received before an earlier one")
    if len(by_run.get(run - 1, [])) != WALK_FIXES:
        problems.append(f"the complete last run delivered {len(by_run.get(run - 1, []))} of {WALK_FIXES} locations")
    printed = printed_locations(work, run)
    lost = unstored(printed, [r[0] for r in rows])
    if lost:
        problems.append(f"{len(lost)} of {len(printed)} printed locations not stored")
    duplicates = 0
    for line in metrics.splitlines():
        if line.startswith("keeptrack_serve_records_duplicate_total"):
            duplicates += int(float(line.split()[-1]))
    print(f"crash-test --mqtt (seed {seed}, {time.monotonic() - started:.0f} s): {kills} SIGKILLs of the uploader, "
          f"{broker.restarts} broker stops and restarts, phases {phases}")
    print(f"  endpoint: {len(rows)} records from {len(by_run)} runs; {duplicates} duplicates recognised and not "
          f"stored")
    print(f"  outbox gave {last_seq} records; pending {pending}, dead letters {dead}")
    print(f"  printed {len(printed)} locations; stored {len(printed) - len(lost)} of them")
    finish(args, work, problems, "nothing lost, every printed location stored, nothing stored twice, order kept")


def check_endpoint(rows, last_seq, printed, name=None):
    """What is wrong with what an endpoint holds (`rows`: seq, time by seq): gaps, twice, order, printed;
    each problem starts with `name` when given. Also returns how many printed locations it holds."""
    at = f"{name}: " if name else ""
    seqs = [r[0] for r in rows]
    problems = []
    missing = sorted(set(range(1, last_seq + 1)) - set(seqs))
    if missing:
        problems.append(f"{at}{len(missing)} ids lost, e.g. {missing[:10]}")
    if len(seqs) != len(set(seqs)):
        problems.append(f"{at}an id stored twice")
    extra = [s for s in seqs if s < 1 or s > last_seq]
    if extra:
        problems.append(f"{at}{len(extra)} ids the outbox never gave")
    # Order: run k's walk is k days after run k-1's, so by id the times increase throughout.
    backwards = sum(1 for a, b in zip(rows, rows[1:]) if b[1] < a[1])
    if backwards:
        problems.append(f"{at}{backwards} places where the time goes backwards")
    lost = unstored(printed, [r[1] for r in rows])
    if lost:
        problems.append(f"{at}{len(lost)} of {len(printed)} printed locations not stored")
    return problems, len(printed) - len(lost)


def two_targets_main(args, keeptrack, seed, rng):
    work = tempfile.mkdtemp(prefix="keeptrack-crash-two-")
    a = Endpoint(keeptrack, work, db=os.path.join(work, "a.sqlite"))
    b = Endpoint(keeptrack, work, db=os.path.join(work, "b.sqlite"))
    a.start()
    b.start()
    urls = [f"http://127.0.0.1:{e.port}/v1/locations" for e in (a, b)]
    names = ["--target-name", "a", "--target-name", "b"]
    phases_a = {p: 0 for p in PHASES[:5]}
    phases_b = {p: 0 for p in ["up", "down", "killed-mid-run"]}
    started = time.monotonic()

    def restart_b():
        b.kill()
        b.start()

    def pick():
        pa, pb = rng.choice(list(phases_a)), rng.choice(list(phases_b))
        phases_a[pa] += 1
        phases_b[pb] += 1
        if b.proc.poll() is not None:
            b.start()
        if pb == "down":
            b.kill()
        a.faults(failRate=0.5 if pa == "failing" else 0.0, failStatus=503, delay=0.4 if pa == "slow" else 0.0,
                 dropRate=0.3 if pa == "dropping" else 0.0, refuse=pa == "refusing")
        return f"A '{pa}', B '{pb}'", restart_b if pb == "killed-mid-run" else None, None

    try:
        kills, run = kill_runs(args, rng, pick, lambda run: replay(keeptrack, urls, work, args.speed, run,
                                                                  extra=names + args.replay_option))
        if b.proc.poll() is not None:
            b.start()
        a.faults()
        final_run(replay(keeptrack, urls, work, args.speed * 4, run, batch_wait="0.05", extra=names + args.replay_option))
        run += 1
    finally:
        a.stop()
        b.stop()
    outbox, last_seq, pending, dead, problems = outbox_at_end(work)
    acks = outbox.execute("SELECT COUNT(*) FROM target_ack").fetchone()[0]
    printed = printed_locations(work, run)
    if acks:
        problems.append(f"{acks} acknowledgement rows left")
    print(f"crash-test --two-targets (seed {seed}, {time.monotonic() - started:.0f} s): {kills} SIGKILLs of the "
          f"uploader, {b.restarts} kills and restarts of endpoint B; A's phases {phases_a}, B's {phases_b}")
    print(f"  outbox gave ids 1..{last_seq}; pending {pending}, dead letters {dead}; printed {len(printed)} locations")
    for name, e in (("A", a), ("B", b)):
        rows = sqlite3.connect(e.db).execute("SELECT seq, time FROM points WHERE device = ? ORDER BY seq",
                                             (DEVICE,)).fetchall()
        found, stored = check_endpoint(rows, last_seq, printed, name)
        problems += found
        m = e.metrics_total
        print(f"  endpoint {name}: holds {len(rows)} ({len({r[0] for r in rows})} distinct), "
              f"{m.get('keeptrack_serve_records_duplicate_total', 0)} duplicates recognised and not stored; "
              f"{stored} of the printed locations stored")
    finish(args, work, problems, "both targets hold every printed location exactly once, nothing lost, order kept")


def main():
    # A parent that blocks or ignores SIGTERM (a test runner) passes that on to every child: mosquitto
    # would not stop on SIGTERM. Children get the defaults back.
    signal.pthread_sigmask(signal.SIG_SETMASK, [])
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--kills", type=int, default=100)
    ap.add_argument("--seed", type=int, default=None)
    ap.add_argument("--speed", type=float, default=60, help="replay pace (default 60: the walk in 15 s)")
    ap.add_argument("--keep", action="store_true", help="keep the work directory")
    ap.add_argument("--keeptrack", help="the binary (default: swift build's)")
    ap.add_argument("--mqtt", action="store_true", help="over MQTT: uploader to a mosquitto to serve --mqtt")
    ap.add_argument("--postgres", action="store_true", help="the endpoint on PostgreSQL, restarted and killed too")
    ap.add_argument("--two-targets", action="store_true",
                    help="two endpoints at once (--upload twice), the second killed and restarted again and again")
    ap.add_argument("--replay-option", action="append", default=[], metavar="OPTION",
                    help="an option added to every replay (repeatable; e.g. --replay-option=--commit-within=10s "
                         "to see what grouped commits lose)")
    args = ap.parse_args()
    seed = args.seed if args.seed is not None else random.randrange(1 << 30)
    rng = random.Random(seed)
    keeptrack = args.keeptrack or keeptrack_tools.build(release=False)
    if args.mqtt:
        return mqtt_main(args, keeptrack, seed, rng)
    if args.two_targets:
        return two_targets_main(args, keeptrack, seed, rng)
    work = tempfile.mkdtemp(prefix="keeptrack-crash-")
    cluster = pgcluster.Cluster() if args.postgres else None
    endpoint = Endpoint(keeptrack, work, db=cluster.create_database("crash") if cluster else None)
    endpoint.start()
    url = f"http://127.0.0.1:{endpoint.port}/v1/locations"
    all_phases = PHASES + (["pg-restart", "pg-killed"] if cluster else [])
    phases = {p: 0 for p in all_phases}
    started = time.monotonic()

    def pick():
        phase = rng.choice(all_phases)
        phases[phase] += 1
        if endpoint.proc.poll() is not None:
            endpoint.start()
        if phase == "down":
            endpoint.kill()
        else:
            endpoint.faults(failRate=0.5 if phase == "failing" else 0.0, failStatus=503,
                            delay=0.4 if phase == "slow" else 0.0, dropRate=0.3 if phase == "dropping" else 0.0,
                            refuse=phase == "refusing")
        midway = {"pg-restart": cluster.restart, "pg-killed": cluster.kill}.get(phase) if cluster else None
        return f"'{phase}'", midway, endpoint.start if phase == "down" else None

    try:
        kills, run = kill_runs(args, rng, pick, lambda run: replay(keeptrack, url, work, args.speed, run,
                                                                  extra=args.replay_option))
        # The end: a healthy endpoint and one complete run (which also sends what earlier runs left).
        if endpoint.proc.poll() is not None:
            endpoint.start()
        endpoint.faults()
        final_run(replay(keeptrack, url, work, args.speed * 4, run, batch_wait="0.05", extra=args.replay_option))
        run += 1
    finally:
        endpoint.stop()
        if cluster:
            rows = [(int(seq), float(t)) for seq, t in (line.split("|") for line in cluster.psql(
                "SELECT seq, extract(epoch FROM time) FROM positions WHERE device = 'crash-test' ORDER BY seq",
                "crash").split())]
            cluster.remove()

    # The outbox: every id it ever gave, and nothing left.
    _, last_seq, pending, dead, problems = outbox_at_end(work)
    if not cluster:
        store = sqlite3.connect(endpoint.db)
        rows = store.execute("SELECT seq, time FROM points WHERE device = ? ORDER BY seq", (DEVICE,)).fetchall()
    seqs = [r[0] for r in rows]
    printed = printed_locations(work, run)
    found, stored = check_endpoint(rows, last_seq, printed)
    problems += found
    last_run = [r for r in rows if r[0] > last_seq - WALK_FIXES]
    if len(last_run) != WALK_FIXES:
        problems.append(f"the complete last run delivered {len(last_run)} of {WALK_FIXES} locations")

    m = endpoint.metrics_total
    retried = sum(v for k, v in m.items() if k.startswith("keeptrack_serve_requests_total") and "served" not in k)
    print(f"crash-test (seed {seed}, {time.monotonic() - started:.0f} s): {kills} SIGKILLs of the uploader, "
          f"{endpoint.restarts} endpoint kills and restarts, phases {phases}")
    accepted = m.get('keeptrack_serve_records_accepted_total{format="json"}', 0)
    print(f"  endpoint: {accepted} records accepted, "
          f"{m.get('keeptrack_serve_records_duplicate_total', 0)} duplicates recognised and not stored, "
          f"{retried} requests failed, dropped or refused (each retried)")
    print(f"  outbox gave ids 1..{last_seq}; the endpoint holds {len(seqs)} ({len(set(seqs))} distinct); "
          f"pending {pending}, dead letters {dead}")
    print(f"  printed {len(printed)} locations; stored {stored} of them")
    finish(args, work, problems, "nothing lost, every printed location stored, nothing stored twice, order kept")


if __name__ == "__main__":
    main()
