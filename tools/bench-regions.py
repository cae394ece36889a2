#!/usr/bin/env python3
"""Regions at scale through the product: import, replay and live tracking with 1,000,000 circles.

    tools/bench-regions.py [--regions 1000000] [--window-seconds 30] [--rate 10] [--binary PATH] [--keep]

Generates a GeoJSON FeatureCollection of N circles (1,000 within 10 km of the walk fixture's start
in Munich, the rest uniform over the globe; radius 50..500 m; fixed seed) and one of the 10 circles
along the walk, in a private temporary directory, then runs the release binary (loopback only,
every run bounded):

1. `keeptrack regions import FILE --data-dir D`: wall time and peak RSS (wait4's ru_maxrss).
2. `keeptrack replay --regions FILE fixtures/walk-15min.nmea`: time to the first location line and
   peak RSS then, and to the end of the log.
3. `keeptrack track --serial PTY --baud 115200 --desired-accuracy best-for-navigation` with the
   regions stored (imported in 1), while tools/fake-receiver.py plays the walk at --rate epochs/s
   (--now): after the first location, for --window-seconds, the locations delivered against the
   epochs the receiver wrote (its --stamp file), the tracker's CPU per fix (/proc/PID/task/*/schedstat),
   its resident memory (VmRSS) and peak (VmHWM), the `state` lines it printed, a control-socket
   `state ID` answer; then SIGTERM and the time to exit. The same with the 10 circles gives the
   per-fix cost and memory to compare against.

It checks what it reports: the import's count line, a location from each replay, an answer from the
control socket, every run's exit status; a check that fails stops it without printing rows. The
rows are printed in docs/performance.md's table format.
"""
import argparse, math, os, random, select, shutil, signal, socket, subprocess, sys, tempfile, time

import keeptrack_tools

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
WALK = os.path.join(ROOT, "fixtures", "walk-15min.nmea")
START = (48.137366333, 11.575408667)


def fail(message):
    print(f"bench-regions: {message}; not reporting", file=sys.stderr)
    sys.exit(1)


def destination(lat, lon, bearing, distance):
    r = 6371008.8
    d = distance / r
    b = math.radians(bearing)
    p1, l1 = math.radians(lat), math.radians(lon)
    p2 = math.asin(math.sin(p1) * math.cos(d) + math.cos(p1) * math.sin(d) * math.cos(b))
    l2 = l1 + math.atan2(math.sin(b) * math.sin(d) * math.cos(p1), math.cos(d) - math.sin(p1) * math.sin(p2))
    return math.degrees(p2), (math.degrees(l2) + 540) % 360 - 180


def walk_points():
    """Every 90th RMC position of the walk (10 points along it)."""
    points = []
    with open(WALK) as f:
        for line in f:
            if line.startswith("$GPRMC"):
                x = line.split(",")
                if x[2] != "A":
                    continue
                lat = int(x[3][:2]) + float(x[3][2:]) / 60
                lon = int(x[5][:3]) + float(x[5][3:]) / 60
                points.append((lat, lon))
    return [points[i * len(points) // 10] for i in range(10)]


def write_geojson(path, circles):
    with open(path, "w") as f:
        f.write('{"type":"FeatureCollection","features":[\n')
        for i, (rid, lat, lon, radius) in enumerate(circles):
            f.write(('' if i == 0 else ',\n') + '{"type":"Feature","id":"%s","geometry":{"type":"Point",'
                    '"coordinates":[%.7f,%.7f]},"properties":{"radius":%.1f}}' % (rid, lon, lat, radius))
        f.write('\n]}\n')


def generate(directory, count):
    rng = random.Random(2024)
    big = os.path.join(directory, f"regions-{count}.geojson")
    small = os.path.join(directory, "regions-10.geojson")
    shared = [(f"walk{i}", lat, lon, 40 + 10 * i) for i, (lat, lon) in enumerate(walk_points())]
    write_geojson(small, shared)

    def circles():
        yield from shared
        for i in range(count - len(shared)):
            if i < 1000:
                lat, lon = destination(START[0], START[1], rng.random() * 360, rng.random() * 10_000)
            else:
                lat = math.degrees(math.asin(2 * rng.random() - 1))
                lon = rng.random() * 360 - 180
            yield (f"r{i}", lat, lon, 50 + rng.random() * 450)

    write_geojson(big, circles())
    return small, big


def run_measured(argv, env=None, timeout=600):
    """Runs to the end; returns (status, stdout, wall seconds, peak RSS MB)."""
    t0 = time.monotonic()
    p = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env, cwd=ROOT)
    out = []
    deadline = t0 + timeout
    while True:
        r, _, _ = select.select([p.stdout], [], [], max(0.1, deadline - time.monotonic()))
        if time.monotonic() > deadline:
            p.kill()
            fail(f"{argv[1]} ran over {timeout} s")
        if r:
            chunk = os.read(p.stdout.fileno(), 1 << 16)
            if not chunk:
                break
            out.append(chunk)
    _, status, usage = os.wait4(p.pid, 0)
    wall = time.monotonic() - t0
    p.returncode = os.waitstatus_to_exitcode(status)
    err = p.stderr.read().decode(errors="replace")
    if p.returncode != 0:
        fail(f"{' '.join(argv[1:3])} exited {p.returncode}: {err.strip()[:300]}")
    return b"".join(out).decode(errors="replace"), wall, usage.ru_maxrss / 1024, usage.ru_utime + usage.ru_stime


def proc_kb(pid, key):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith(key + ":"):
                return int(line.split()[1])
    return 0


def replay(binary, geojson):
    """Time to the first location line and to the end; peak RSS at the first location and at the end."""
    t0 = time.monotonic()
    p = subprocess.Popen([binary, "replay", "--regions", geojson, WALK], stdout=subprocess.PIPE,
                         stderr=subprocess.DEVNULL, cwd=ROOT)
    first, hwm_first, buffer, states, locations = None, None, b"", 0, 0
    deadline = t0 + 600
    while True:
        r, _, _ = select.select([p.stdout], [], [], 1)
        if time.monotonic() > deadline:
            p.kill()
            fail("replay ran over 600 s")
        if not r:
            continue
        chunk = os.read(p.stdout.fileno(), 1 << 16)
        if not chunk:
            break
        buffer += chunk
        *lines, buffer = buffer.split(b"\n")
        for line in lines:
            if line.startswith(b'{"event":"location"'):
                locations += 1
                if first is None:
                    first = time.monotonic() - t0
                    hwm_first = proc_kb(p.pid, "VmHWM") / 1024
            elif line.startswith(b'{"event":"state"'):
                states += 1
    _, status, usage = os.wait4(p.pid, 0)
    if os.waitstatus_to_exitcode(status) != 0 or first is None:
        fail(f"replay --regions {os.path.basename(geojson)} failed or printed no location")
    return (first, hwm_first, time.monotonic() - t0, usage.ru_maxrss / 1024, states, locations,
            usage.ru_utime + usage.ru_stime)


def track(binary, data_dir, runtime, window, rate, probe_id):
    stamp = os.path.join(runtime, "stamps")
    open(stamp, "w").close()
    fake = subprocess.Popen([sys.executable, os.path.join(ROOT, "tools", "fake-receiver.py"), WALK, "--baud", "115200",
                             "--rate", str(rate), "--now", "--stamp", stamp], stdout=subprocess.PIPE,
                            stderr=subprocess.DEVNULL, cwd=ROOT)
    try:
        device = fake.stdout.readline().decode().split()[0]
        control = os.path.join(runtime, "control.sock")
        env = dict(os.environ, XDG_RUNTIME_DIR=runtime)
        t0 = time.monotonic()
        kt = subprocess.Popen([binary, "track", "--serial", device, "--baud", "115200", "--data-dir", data_dir,
                               "--desired-accuracy", "best-for-navigation", "--control", control],
                              stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, env=env, cwd=ROOT)
        buffer, states, first = b"", 0, None
        times = []  # arrival of each location line
        window_start = window_end = None
        cpu0 = sent0 = None
        answer = None
        while True:
            now = time.monotonic()
            if now - t0 > 600:
                fail("track: no end to the window within 600 s")
            if window_end is not None and now >= window_end:
                break
            r, _, _ = select.select([kt.stdout], [], [], 0.05)
            if r:
                chunk = os.read(kt.stdout.fileno(), 1 << 16)
                if not chunk:
                    fail("track ended by itself")
                buffer += chunk
                *lines, buffer = buffer.split(b"\n")
                for line in lines:
                    if line.startswith(b'{"event":"location"'):
                        times.append(time.monotonic())
                        if first is None:
                            first = time.monotonic() - t0
                            hwm_start = proc_kb(kt.pid, "VmHWM") / 1024
                            # The window starts one second after the first location.
                            window_start = time.monotonic() + 1
                            window_end = window_start + window
                    elif line.startswith(b'{"event":"state"'):
                        states += 1
            if window_start is not None and cpu0 is None and time.monotonic() >= window_start:
                cpu0 = keeptrack_tools.cpu_seconds(kt.pid)
                sent0 = sum(1 for _ in open(stamp))
                ts0 = time.monotonic()
            if cpu0 is not None and answer is None and time.monotonic() >= window_start + window / 2:
                s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
                s.settimeout(5)
                q0 = time.monotonic()
                s.connect(control)
                s.sendall(f"state {probe_id}\n".encode())
                data = b""
                while not data.endswith(b"\n"):
                    more = s.recv(4096)
                    if not more:
                        break
                    data += more
                s.close()
                answer = (data.decode().strip(), (time.monotonic() - q0) * 1000)
        cpu1 = keeptrack_tools.cpu_seconds(kt.pid)
        sent1 = sum(1 for _ in open(stamp))
        ts1 = time.monotonic()
        delivered = sum(1 for t in times if ts0 <= t < ts1)
        rss = proc_kb(kt.pid, "VmRSS") / 1024
        hwm = proc_kb(kt.pid, "VmHWM") / 1024
        # Stop: SIGTERM, time to exit (bounded).
        q0 = time.monotonic()
        kt.send_signal(signal.SIGTERM)
        try:
            kt.wait(timeout=120)
        except subprocess.TimeoutExpired:
            kt.kill()
            fail("track did not exit within 120 s of SIGTERM")
        exit_s = time.monotonic() - q0
        if kt.returncode != 0:
            fail(f"track exited {kt.returncode} after SIGTERM")
        if answer is None or '"state"' not in answer[0]:
            fail(f"the control socket gave no state: {answer}")
        sent = sent1 - sent0
        return dict(first=first, hwm_start=hwm_start, states=states, delivered=delivered, sent=sent,
                    cpu_ms_per_fix=(cpu1 - cpu0) / max(1, sent) * 1000, rss=rss, hwm=hwm, exit=exit_s, answer=answer)
    finally:
        keeptrack_tools.stop(fake, 5)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--regions", type=int, default=1_000_000)
    ap.add_argument("--window-seconds", type=float, default=30)
    ap.add_argument("--rate", type=float, default=10)
    ap.add_argument("--binary", help="a built keeptrack (default: build the release one)")
    ap.add_argument("--keep", action="store_true", help="keep the temporary directory")
    args = ap.parse_args()
    binary = args.binary or keeptrack_tools.build()
    work = tempfile.mkdtemp(prefix="bench-regions.", dir="/tmp")
    try:
        t = time.monotonic()
        small, big = generate(work, args.regions)
        size_mb = os.path.getsize(big) / 1e6
        print(f"generated {args.regions:,} circles: {size_mb:.0f} MB GeoJSON in {time.monotonic() - t:.0f} s", flush=True)
        n = args.regions

        rows = []
        # 1. import
        for label, file, count in (("10", small, 10), (f"{n:,}", big, n)):
            d = os.path.join(work, f"data-{count}")
            out, wall, peak, cpu = run_measured([binary, "regions", "import", file, "--data-dir", d])
            if f"imported {count} regions ({count} new)" not in out:
                fail(f"import said: {out.strip()}")
            rows.append(("import", label, wall, cpu, peak, count))
        print("imports done", flush=True)
        # 2. replay --regions
        replays = {}
        for label, file, count in (("10", small, 10), (f"{n:,}", big, n)):
            replays[count] = replay(binary, file)
        print("replays done", flush=True)
        # 3. track with the regions stored
        tracks = {}
        for count in (10, n):
            runtime = tempfile.mkdtemp(prefix="rt.", dir=work)
            tracks[count] = track(binary, os.path.join(work, f"data-{count}"), runtime, args.window_seconds, args.rate,
                                  "walk3")
            print(f"track with {count:,} regions done", flush=True)
    finally:
        if not args.keep:
            shutil.rmtree(work, ignore_errors=True)

    print()
    print(f"Input: {n:,} circles, {size_mb:.0f} MB GeoJSON; the walk at {args.rate:g} epochs/s for {args.window_seconds:g} s.")
    print()
    print("| command (release build) | regions | wall s | CPU s | peak RSS MB | bytes per region (peak) | state lines |")
    print("|---|---:|---:|---:|---:|---:|---:|")
    small_peak = rows[0][4]
    for what, label, wall, cpu, peak, count in rows:
        per = "-" if count == 10 else f"{(peak - small_peak) * 1048576 / count:,.0f}"
        print(f"| keeptrack regions {what} | {label} | {wall:.2f} | {cpu:.2f} | {peak:.0f} | {per} | - |")
    for count in (10, n):
        first, hwm_first, total, peak, states, locations, cpu = replays[count]
        per = "-" if count == 10 else f"{(peak - replays[10][3]) * 1048576 / count:,.0f}"
        print(f"| keeptrack replay --regions, to the first location (whole walk) | {count:,} | {first:.2f} ({total:.2f}) "
              f"| ({cpu:.2f}) | {hwm_first:.0f} ({peak:.0f}) | {per} | {states} |")
    print()
    print("| keeptrack track --serial, regions stored | regions | to first location s | state lines at start "
          "| delivered / sent | CPU ms per fix | cost vs 10 regions | RSS MB (peak) | bytes per region | SIGTERM to exit s |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    base = tracks[10]
    for count in (10, n):
        r = tracks[count]
        per = "-" if count == 10 else f"{(r['rss'] - base['rss']) * 1048576 / count:,.0f}"
        print(f"| {args.rate:g} Hz | {count:,} | {r['first']:.2f} | {r['states']} | {r['delivered']} / {r['sent']} "
              f"| {r['cpu_ms_per_fix']:.3f} | {r['cpu_ms_per_fix'] / base['cpu_ms_per_fix']:.1f}x | {r['rss']:.0f} "
              f"({r['hwm']:.0f}) | {per} | {r['exit']:.2f} |")
    a = tracks[n]["answer"]
    print()
    print(f"Control socket `state walk3` with {n:,} regions: {a[0]} in {a[1]:.1f} ms.")
    # Issue 16's targets, from the figures above.
    big, small = tracks[n], tracks[10]
    load = max(rows[1][2], replays[n][0])
    peak = max(rows[1][4], replays[n][1], big["hwm"])
    steady = (big["rss"] - small["rss"]) * 1048576 / n
    ratio = big["cpu_ms_per_fix"] / small["cpu_ms_per_fix"]
    checks = [
        (f"import {rows[1][2]:.2f} s ({rows[1][3]:.2f} s CPU), load to the first location {replays[n][0]:.2f} s "
         f"({replays[n][6]:.2f} s CPU for the whole walk)", load <= 5, "<= 5 s"),
        (f"peak {peak:.0f} MB against the tracker's steady {big['rss']:.0f} MB: {peak / big['rss']:.2f}x",
         peak <= 2 * big["rss"], "<= 2x"),
        (f"steady state {steady:,.0f} bytes per region", steady <= 200, "<= 200"),
        (f"every fix delivered at {args.rate:g} Hz ({big['delivered']} of {big['sent']}; with 10 regions "
         f"{small['delivered']} of {small['sent']})",
         big["delivered"] + 1 >= big["sent"], "all, but for one the window's edges cut"),
        (f"CPU per fix {ratio:.2f}x that with 10 regions", ratio <= 3, "<= 3x"),
        (f"SIGTERM to exit {big['exit']:.2f} s", big["exit"] < 2, "< 2 s"),
    ]
    print()
    print("Targets (issue 16): " + "; ".join(f"{what} ({target}): {'met' if ok else 'NOT met'}"
                                          for what, ok, target in checks) + ".")


if __name__ == "__main__":
    main()
