#!/usr/bin/env python3
"""What suspension saves: a suspended tracker beside an active one and gpxlogger, on one gpsd.

    tools/bench-suspend.py [--windows 3] [--window-seconds 60]

A real gpsd runs under gpsfake on loopback, fed fixtures/walk-15min.nmea at one epoch per second
(as tools/bench-track.py). Three clients watch it at once:
  - `keeptrack track --gpsd --significant-changes` in the foreground (active: every fix through
    the location service, events printed),
  - the same with `--background --background-modes none`: suspended 5 s after start, its gpsd
    watch released, one fix sampled every 60 s (the Linux meaning of "suspended", docs/background.md),
  - gpsd's own `gpxlogger`, the peer.
It reports CPU seconds per hour of each (median of the windows, all threads, /proc/PID/task/*/
schedstat), peak RSS, and for the suspended tracker the share of the time its watch was held
(from its released/acquired events).
"""
import argparse, json, os, signal, statistics, subprocess, sys, tempfile, threading, time

import keeptrack_tools

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--windows", type=int, default=3)
    ap.add_argument("--window-seconds", type=float, default=60)
    args = ap.parse_args()
    keeptrack = keeptrack_tools.build()
    port, gf_pid, gf_dir = keeptrack_tools.gpsfake_start()
    work = tempfile.mkdtemp(prefix="keeptrack-bench-suspend-")
    procs, events = {}, []
    try:
        common = [keeptrack, "track", "--gpsd", f"127.0.0.1:{port}", "--significant-changes", "--data-dir", work]
        procs["keeptrack active"] = subprocess.Popen(
            common + ["--control", os.path.join(work, "active.sock")], stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL)
        suspended = subprocess.Popen(
            common + ["--control", os.path.join(work, "suspended.sock"), "--background", "--background-modes", "none"],
            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
        procs["keeptrack suspended"] = suspended

        def collect():
            for line in suspended.stdout:
                if '"kind":"released"' in line or '"kind":"acquired"' in line:
                    events.append((time.monotonic(), "released" if "released" in line else "acquired"))
        threading.Thread(target=collect, daemon=True).start()
        procs["gpxlogger"] = subprocess.Popen(["gpxlogger", f"127.0.0.1:{port}"], stdout=subprocess.DEVNULL,
                                              stderr=subprocess.DEVNULL)
        time.sleep(8)  # connected, and the background one suspended
        measured_from = time.monotonic()
        per_window = keeptrack_tools.cpu_per_hour(procs, args.windows, args.window_seconds)
        measured_to = time.monotonic()
        rss = {name: keeptrack_tools.status_mb(p.pid) for name, p in procs.items()}
    finally:
        for p in procs.values():
            keeptrack_tools.stop(p, 3)
        keeptrack_tools.gpsfake_stop(gf_pid, gf_dir)

    # Share of the measured span with the watch held: from each acquired to the next released.
    held, holding_since = 0.0, None
    samples = 0
    for t, kind in events:
        if kind == "acquired":
            holding_since = max(t, measured_from)
            samples += 1
        elif holding_since is not None:
            held += max(0.0, min(t, measured_to) - holding_since)
            holding_since = None
    if holding_since is not None:
        held += measured_to - holding_since
    span = measured_to - measured_from
    print(f"\nOne gpsd at 1 Hz, {args.windows} windows of {args.window_seconds:.0f} s (median, min-max):")
    for name in procs:
        v = per_window[name]
        print(f"  {name:22s} {statistics.median(v):6.2f} CPU-s/h ({min(v):.2f}-{max(v):.2f}), peak RSS {rss[name]:.1f} MB")
    a, s = statistics.median(per_window["keeptrack active"]), statistics.median(per_window["keeptrack suspended"])
    print(f"  suspended / active: {s / a:.2f}; gpsd watch held {100 * held / span:.1f}% of the time "
          f"({samples} samples in {span:.0f} s)")


if __name__ == "__main__":
    main()
