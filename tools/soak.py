#!/usr/bin/env python3
"""Soak: `keeptrack track` as a user runs it, for a long time, through gpsd and endpoint restarts.

    tools/soak.py [--minutes 30] [--restart-every 300] [--binary BUILD]

A receiver plays fixtures/walk-15min.nmea in a loop at 1 Hz on a pty (tools/fake-receiver.py --now
--loop: times moved to the present, so fixes are live), a real gpsd reads it, and
`keeptrack track --gpsd ... --significant-changes --upload URL` (release build) tracks it and
uploads to `keeptrack serve`. (gpsfake cannot move a log's times to the present, and the location
service rejects fixes older than 10 s, so the receiver is the fake one and gpsd is real.) Every
--restart-every seconds, in turn: gpsd is killed and started again, or the endpoint is killed with
SIGKILL and started again 20 s later. Every 30 s the tracker's CPU time and resident memory are
sampled. At the end the tracker gets SIGTERM (it uploads its outbox and exits), and the endpoint's
points are compared with the locations the tracker printed.

Targets (issue 7): <= 3 CPU-s per hour, RSS <= 30 MB and flat once running, 0 lost.

    tools/soak.py --targets 1,2 [--minutes 30] ...

Upload targets side by side (issue 29): one tracker per count, on the same gpsd at the same time,
each uploading to that many `keeptrack serve` endpoints of its own (`--upload` repeated); a row per
tracker, so that the cost of a second target is read beside the first's, measured in the same run
(0: no --upload, the pipeline's floor).
"""
import argparse, json, os, signal, socket, sqlite3, subprocess, sys, tempfile, time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

import keeptrack_tools


def wait_port(port, seconds=10):
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.5):
                return True
        except OSError:
            time.sleep(0.1)
    return False


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--minutes", type=float, default=30)
    ap.add_argument("--restart-every", type=float, default=300)
    ap.add_argument("--binary", help="soak this keeptrack (e.g. another build) instead of building one")
    ap.add_argument("--targets", default="1",
                    help="upload targets per tracker, a tracker per count, side by side (e.g. 1,2; default 1)")
    args = ap.parse_args()
    keeptrack = args.binary or keeptrack_tools.build()
    work = tempfile.mkdtemp(prefix="keeptrack-soak-")
    link = os.path.join(work, "ttyGPS")
    # Distinct candidates: nothing binds them until gpsd and the endpoints start, so the same port
    # could come twice (two targets of one tracker would then be one).
    taken = set()

    def distinct_port():
        attempt = 0
        while True:
            port = keeptrack_tools.candidate_port(attempt)
            attempt += 1
            if port not in taken:
                taken.add(port)
                return port

    gpsd_port = distinct_port()
    counts = [int(n) for n in args.targets.split(",")]
    serve_ports = [[distinct_port() for _ in range(n)] for n in counts]
    receiver = subprocess.Popen([os.path.join(ROOT, "tools", "fake-receiver.py"), os.path.join(ROOT, "fixtures", "walk-15min.nmea"),
                                 "--now", "--loop", "--rate", "1", "--baud", "9600", "--link", link],
                                stdout=subprocess.PIPE, text=True)
    receiver.stdout.readline()

    def start_gpsd():
        p = subprocess.Popen(["gpsd", "-N", "-n", "-s", "9600", "-S", str(gpsd_port), "-F", os.path.join(work, "gpsd.sock"),
                              link], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        if not wait_port(gpsd_port):
            sys.exit("soak: gpsd did not start")
        return p

    def db(i, j):
        return os.path.join(work, "endpoint.sqlite" if len(counts) == 1 and j == 0 else f"endpoint-{i}-{j}.sqlite")

    def start_serves():
        ps = []
        for i, ports in enumerate(serve_ports):
            for j, port in enumerate(ports):
                p = subprocess.Popen([keeptrack, "serve", "--port", str(port), "--db", db(i, j), "--token", "soak"],
                                     stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
                p.stdout.readline()
                ps.append(p)
        return ps

    gpsd = start_gpsd()
    serves = start_serves()
    trackers = []  # (process, data directory, events file, control socket)
    for i, ports in enumerate(serve_ports):
        data = work if len(counts) == 1 else os.path.join(work, f"tracker-{i}")
        os.makedirs(data, exist_ok=True)
        out_path = os.path.join(data, "events.jsonl")
        control = os.path.join(data, "control.sock")
        uploads = [a for port in ports for a in ("--upload", f"http://127.0.0.1:{port}/v1/locations")]
        # No target (0): the pipeline without uploads, the floor the first target's cost is read against.
        uploads += ["--token", "soak", "--device-id", "soak"] if ports else []
        proc = subprocess.Popen([keeptrack, "track", "--gpsd", f"127.0.0.1:{gpsd_port}", "--significant-changes",
                                 *uploads, "--data-dir", data,
                                 "--control", control, "--max-backoff", "30", "--shutdown-timeout", "60"],
                                stdout=open(out_path, "w"), stderr=open(os.path.join(data, "track.err"), "w"))
        trackers.append((proc, data, out_path, control))
    track, _, out_path, control = trackers[0]
    started = time.monotonic()
    samples = []  # (seconds, cpu, rss)
    restarts = {"gpsd": 0, "endpoint": 0}
    next_restart = started + args.restart_every
    which = 0
    end = started + args.minutes * 60
    cpu0 = None
    try:
        time.sleep(5)
        cpu0 = keeptrack_tools.cpu_seconds(track.pid)
        cpus0 = [keeptrack_tools.cpu_seconds(t[0].pid) for t in trackers]
        t0 = time.monotonic()
        next_sample = t0
        while time.monotonic() < end:
            now = time.monotonic()
            if track.poll() is not None:
                sys.exit(f"soak: the tracker exited ({track.returncode}); see {work}/track.err")
            if now >= next_sample:
                samples.append((now - t0, keeptrack_tools.cpu_seconds(track.pid) - cpu0, keeptrack_tools.status_mb(track.pid, "VmRSS")))
                print(f"  {samples[-1][0] / 60:5.1f} min: CPU {samples[-1][1]:.2f} s, RSS {samples[-1][2]:.1f} MB, "
                      f"restarts {restarts}", file=sys.stderr)
                next_sample += 30
            if now >= next_restart:
                if which % 2 == 0:
                    gpsd.send_signal(signal.SIGKILL)
                    gpsd.wait()
                    time.sleep(5)
                    gpsd = start_gpsd()
                    restarts["gpsd"] += 1
                else:
                    for serve in serves:
                        serve.send_signal(signal.SIGKILL)
                        serve.wait()
                    time.sleep(20)
                    serves = start_serves()
                    restarts["endpoint"] += 1
                which += 1
                next_restart += args.restart_every
            time.sleep(1)
        elapsed = time.monotonic() - t0
        cpu = keeptrack_tools.cpu_seconds(track.pid) - cpu0
        cpus = [keeptrack_tools.cpu_seconds(t[0].pid) - c0 for t, c0 in zip(trackers, cpus0)]
        rsss = [keeptrack_tools.status_mb(t[0].pid, "VmRSS") for t in trackers]
        peak = keeptrack_tools.status_mb(track.pid)
        metrics = subprocess.run([keeptrack, "status", "--prometheus", "--control", control], capture_output=True,
                                 text=True).stdout
        fixes = next((float(l.split()[-1]) for l in metrics.splitlines() if l.startswith("keeptrack_fixes_total ")), -1)
        # Why standard updates did not deliver the others (stale, inaccurate, ...): kept beside the samples.
        with open(os.path.join(work, "metrics.txt"), "w") as f:
            f.write(metrics)
        for t in trackers:
            t[0].send_signal(signal.SIGTERM)
        for t in trackers:
            t[0].wait(120)
    finally:
        for p in [t[0] for t in trackers] + [gpsd] + serves + [receiver]:
            if p.poll() is None:
                p.terminate()
                try:
                    p.wait(10)
                except subprocess.TimeoutExpired:
                    p.kill()
    if len(counts) > 1:
        print(f"soak: {elapsed / 60:.1f} min of keeptrack track --gpsd --significant-changes, one tracker per "
              f"target count side by side, {restarts['gpsd']} gpsd restarts, {restarts['endpoint']} endpoint kills "
              f"and restarts")
        print("  targets  CPU-s  CPU-s/hour  RSS MB  delivered  stored (each endpoint)  left")
        for i, ((_, data, path, _), n, c, r) in enumerate(zip(trackers, counts, cpus, rsss)):
            delivered = sum(1 for line in open(path) if line.startswith('{"event":"location"'))
            stored = [sqlite3.connect(db(i, j)).execute(
                "SELECT COUNT(*) FROM points WHERE device = 'soak' AND kind = 'location'").fetchone()[0]
                for j in range(n)]
            outbox = os.path.join(data, "outbox.sqlite")
            left = sqlite3.connect(outbox).execute("SELECT COUNT(*) FROM outbox").fetchone()[0] if n else 0
            print(f"  {n:7d}  {c:5.2f}  {c / elapsed * 3600:10.2f}  {r:6.1f}  {delivered:9d}  "
                  f"{'/'.join(map(str, stored)) or '-':>22}  {left:4d}")
        print(f"  work directory: {work}")
        return
    delivered = sum(1 for line in open(out_path) if line.startswith('{"event":"location"'))
    stored = sqlite3.connect(os.path.join(work, "endpoint.sqlite")).execute(
        "SELECT COUNT(*) FROM points WHERE device = 'soak' AND kind = 'location'").fetchone()[0]
    pending = sqlite3.connect(os.path.join(work, "outbox.sqlite")).execute("SELECT COUNT(*) FROM outbox").fetchone()[0]
    rss = [s[2] for s in samples]
    first_half = [s[2] for s in samples if s[0] < elapsed / 2]
    second_half = [s[2] for s in samples if s[0] >= elapsed / 2]
    print(f"soak: {elapsed / 60:.1f} min of keeptrack track --gpsd --significant-changes --upload, "
          f"{restarts['gpsd']} gpsd restarts, {restarts['endpoint']} endpoint kills and restarts")
    print(f"  CPU {cpu:.2f} s = {cpu / elapsed * 3600:.2f} CPU-s/hour (target <= 3)")
    # The target is on what the running tracker keeps resident: the peak is start-up's, before the
    # tracker gives back the clean pages start-up touched (CleanPages, at its first location).
    print(f"  RSS {min(rss):.1f}-{max(rss):.1f} MB over time (target <= 30; first half max {max(first_half):.1f}, "
          f"second half max {max(second_half):.1f}); peak {peak:.1f} MB at start-up")
    print(f"  fixes received {int(fixes)}, locations delivered {delivered}, stored by the endpoint {stored}, "
          f"left in the outbox {pending}: lost {delivered - stored - pending}")
    print(f"  work directory: {work} (metrics.txt: why fixes were filtered)")
    with open(os.path.join(work, "samples.json"), "w") as f:
        json.dump(samples, f)


if __name__ == "__main__":
    main()
