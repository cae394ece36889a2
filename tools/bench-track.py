#!/usr/bin/env python3
"""What live tracking costs: keeptrack beside gpxlogger on the same gpsd, and serial latency.

    tools/bench-track.py [--windows 5] [--window-seconds 30] [--latency-epochs 60]

1. Cost. A real gpsd runs under gpsfake on loopback, fed fixtures/walk-15min.nmea at one epoch
   per second (-c 0.125: 8 sentences per epoch). `keeptrack track --gpsd` and gpsd's own
   `gpxlogger` watch it at the same time. Over several windows it samples each process's CPU time
   (/proc/PID/schedstat) and reports CPU seconds per hour of tracking (median of the
   windows, from /proc/PID/schedstat) and peak RSS (VmHWM). Target: keeptrack <= 1.5x gpxlogger's CPU, RSS <= 15 MB.

2. Latency. tools/fake-receiver.py plays the walk on a pty at 9600 baud and stamps the moment it
   wrote each epoch's last byte (CLOCK_MONOTONIC); `keeptrack track --serial` reads the pty and
   this tool stamps each fix line as it arrives on keeptrack's stdout. Latency = arrival - last
   byte written, median and p99 (an upper bound of "sentence written to fix leaving the
   source": it includes JSON output and the pipe). The serial source ends an epoch after 50 ms of
   quiet, which sets the floor.

    tools/bench-track.py --syscalls 60 --binary BUILD [--before OLD_BUILD]

    tools/bench-track.py --memory --binary BUILD [--before OLD_BUILD] [--drop-caches]

4. Memory (instead of 1 and 2): each program alone on one gpsd at 1 Hz for --memory-seconds, then
   its peak RSS (VmHWM), RSS, PSS and private memory (/proc/PID/smaps_rollup), and where keeptrack's
   resident pages come from. The targets are on RSS once running: keeptrack gives back the clean
   pages start-up touched at its first location (CleanPages), so its peak is start-up's. Beside keeptrack: `track --gpsd --upload` (to a `keeptrack serve` on
   loopback), OLD_BUILD's, gpxlogger, and the floor of any Swift program, built here with the
   same toolchain and linked as BUILD is (static or dynamic Swift runtime): one that prints and
   waits, and one that also uses Foundation. --drop-caches (root) empties the page cache before
   each program, as after a boot: how much of a file a fault maps depends on what is cached.

3. System calls (instead of 1, 2 and 4): `strace -c -f` on `keeptrack track --gpsd` (and on OLD_BUILD's,
   if given) and on gpxlogger, side by side on one gpsd for that many seconds at 1 Hz, grouped by
   what they are for. Counts are stable on a shared machine, unlike CPU time.
"""
import argparse, os, select, shutil, signal, statistics, subprocess, sys, tempfile, time

import keeptrack_tools

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def cost(keeptrack, windows, seconds):
    port, gf_pid, gf_dir = keeptrack_tools.gpsfake_start()
    procs = {}
    try:
        procs["keeptrack track --gpsd"] = subprocess.Popen(
            [keeptrack, "track", "--gpsd", f"127.0.0.1:{port}"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        procs["gpxlogger"] = subprocess.Popen(
            ["gpxlogger", f"127.0.0.1:{port}"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        time.sleep(3)  # both connected and past start-up
        per_window = keeptrack_tools.cpu_per_hour(procs, windows, seconds)
        rss = {name: keeptrack_tools.status_mb(p.pid) for name, p in procs.items()}
    finally:
        for p in procs.values():
            keeptrack_tools.stop(p, 3)
        keeptrack_tools.gpsfake_stop(gf_pid, gf_dir)
    return per_window, rss


def latency(keeptrack, epochs):
    work = tempfile.mkdtemp(prefix="keeptrack-latency-")
    link = os.path.join(work, "ttyGPS")
    stamps = os.path.join(work, "stamps")
    fake = subprocess.Popen([os.path.join(ROOT, "tools", "fake-receiver.py"),
                             os.path.join(ROOT, "fixtures", "walk-15min.nmea"), "--baud", "9600", "--rate", "1",
                             "--link", link, "--stamp", stamps], stdout=subprocess.PIPE, text=True)
    fake.stdout.readline()
    track = subprocess.Popen([keeptrack, "track", "--serial", link, "--baud", "9600"], stdout=subprocess.PIPE)
    arrivals = {}
    try:
        buf = b""
        deadline = time.monotonic() + epochs + 30
        while len(arrivals) < epochs and time.monotonic() < deadline:
            r, _, _ = select.select([track.stdout], [], [], 1.0)
            if not r:
                continue
            chunk = os.read(track.stdout.fileno(), 65536)
            now = time.monotonic_ns()
            if not chunk:
                break
            buf += chunk
            while b"\n" in buf:
                line, buf = buf.split(b"\n", 1)
                if line.startswith(b'{"time":"'):
                    t = line[9:].split(b'"', 1)[0].decode()
                    hhmmss = t.split("T")[-1].rstrip("Z").replace(":", "")
                    arrivals[hhmmss] = now
    finally:
        track.terminate()
        fake.terminate()
        track.wait()
        fake.wait()
    written = {}
    with open(stamps) as f:
        for line in f:
            _, t, ns = line.split()
            written[t] = int(ns)
    lat = sorted((arrivals[t] - written[t]) / 1e6 for t in arrivals if t in written)
    lat = lat[1:]  # the first epoch may have been joined mid-way
    return lat


SYSCALL_ROWS = [
    ("wait for a report (`poll`, `pselect6`)", ["poll", "pselect6"]),
    ("`recvfrom` (reports)", ["recvfrom"]),
    ("`write` (output lines)", ["write"]),
    ("`futex` (thread hand-offs; start-up included)", ["futex"]),
    ("libdispatch's timer thread (`epoll_wait`, `timerfd_settime`)", ["epoll_wait", "timerfd_settime"]),
]


def strace_counts(path):
    """Calls per system call from an `strace -c` summary file."""
    counts = {}
    for line in open(path):
        parts = line.split()
        if len(parts) >= 5 and parts[-1] != "total" and parts[3].isdigit():
            counts[parts[-1]] = int(parts[3])
    return counts


def syscalls(programs, seconds):
    """`strace -c -f` of each program (name -> argv prefix, gpsd's address appended) on one gpsd."""
    port, gf_pid, gf_dir = keeptrack_tools.gpsfake_start()
    work = tempfile.mkdtemp(prefix="keeptrack-syscalls-")
    tracers = {}
    try:
        for name, argv in programs.items():
            out = os.path.join(work, f"{len(tracers)}.strace")
            tracers[name] = (subprocess.Popen(["strace", "-c", "-f", "-o", out] + argv + [f"127.0.0.1:{port}"],
                                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL), out)
        time.sleep(seconds)
    finally:
        # SIGTERM to the traced programs (strace itself would only detach), then strace writes its summary.
        for tracer, _ in tracers.values():
            for child in subprocess.run(["pgrep", "-P", str(tracer.pid)], capture_output=True, text=True).stdout.split():
                os.kill(int(child), signal.SIGTERM)
        for tracer, _ in tracers.values():
            try:
                tracer.wait(10)
            except subprocess.TimeoutExpired:
                tracer.kill()
        keeptrack_tools.gpsfake_stop(gf_pid, gf_dir)
    return {name: strace_counts(out) for name, (_, out) in tracers.items()}


FLOOR_PROGRAMS = {
    "Swift, no Foundation": 'import Glibc\nprint("waiting")\nfflush(stdout)\nwhile true { pause() }\n',
    "Swift with Foundation": 'import Foundation\nprint(ProcessInfo.processInfo.processIdentifier)\n'
                             'fflush(stdout)\nwhile true { pause() }\n',
}


def links_swift_statically(binary):
    needed = subprocess.run(["readelf", "-d", binary], check=True, capture_output=True, text=True).stdout
    return "libswiftCore" not in needed


def build_floor(work, static):
    """The floor programs, linked as keeptrack is (lld, packed relocations; static or dynamic runtime)."""
    built = {}
    for i, (name, source) in enumerate(FLOOR_PROGRAMS.items()):
        src = os.path.join(work, f"floor{i}.swift")
        with open(src, "w") as f:
            f.write(source)
        out = os.path.join(work, f"floor{i}")
        subprocess.run(["swiftc", "-O", src, "-o", out, "-use-ld=lld", "-Xlinker", "-z", "-Xlinker",
                        "pack-relative-relocs"] + (["-static-stdlib", "-Xlinker", "--no-export-dynamic"] if static else []),
                       check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        built[name] = [out]
    return built


def smaps(pid, binary):
    """smaps_rollup's totals in MB, peak RSS, and RSS by where the pages come from."""
    rollup = {}
    with open(f"/proc/{pid}/smaps_rollup") as f:
        for line in f:
            parts = line.split()
            if len(parts) == 3 and parts[2] == "kB":
                rollup[parts[0].rstrip(":")] = int(parts[1]) / 1024
    origin = {"the binary": 0.0, "Swift runtime, Foundation, ICU": 0.0, "system libraries": 0.0, "anonymous": 0.0}
    real = os.path.realpath(binary)
    name = None
    with open(f"/proc/{pid}/smaps") as f:
        for line in f:
            first = line.split(maxsplit=5)
            if "-" in first[0] and len(first) >= 5 and not first[0].endswith(":"):
                name = first[5].strip() if len(first) == 6 else ""
            elif first[0] == "Rss:":
                kb = int(first[1]) / 1024
                if name and os.path.realpath(name) == real:
                    origin["the binary"] += kb
                elif "/swift/" in name or "libdispatch" in name or "libBlocksRuntime" in name:
                    origin["Swift runtime, Foundation, ICU"] += kb
                elif name.startswith("/"):
                    origin["system libraries"] += kb
                else:
                    origin["anonymous"] += kb
    return {"peak": keeptrack_tools.status_mb(pid), "rss": rollup.get("Rss", 0), "pss": rollup.get("Pss", 0),
            "private": rollup.get("Private_Clean", 0) + rollup.get("Private_Dirty", 0), "origin": origin}


def start_serve(keeptrack, data):
    """A `keeptrack serve` on a free loopback port; returns it and its ingest URL."""
    serve = subprocess.Popen([keeptrack, "serve", "--port", "0", "--db", os.path.join(data, "endpoint.sqlite")],
                             stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    return serve, serve.stdout.readline().split('"url":"', 1)[1].split('"', 1)[0] + "/v1/locations"


def memory(programs, seconds, drop_caches):
    """Each program alone on one gpsd. programs: name -> (argv, whether gpsd's address is appended,
    the binary whose pages count as its own, a keeptrack to serve the upload URL that argv's "URL" stands for)."""
    port, gf_pid, gf_dir = keeptrack_tools.gpsfake_start()
    results = {}
    try:
        for name, (argv, gpsd, binary, serving) in programs.items():
            data = tempfile.mkdtemp(prefix="keeptrack-memory-")
            serve = None
            if serving:  # started before the page cache is dropped: it shares the binary's pages
                serve, url = start_serve(serving, data)
                argv = [url if a == "URL" else a for a in argv]
            if drop_caches:
                subprocess.run(["sync"], check=True)
                with open("/proc/sys/vm/drop_caches", "w") as f:
                    f.write("3\n")
            out = open(os.path.join(data, "stdout"), "w+")
            p = subprocess.Popen(argv + ([f"127.0.0.1:{port}"] if gpsd else []), stdout=out,
                                 stderr=subprocess.DEVNULL, env=dict(os.environ, XDG_DATA_HOME=data))
            try:
                time.sleep(seconds)
                if p.poll() is not None:
                    sys.exit(f"bench-track: {name} exited early ({p.returncode})")
                results[name] = smaps(p.pid, binary)
            finally:
                p.send_signal(signal.SIGTERM)
                try:
                    p.wait(10)
                except subprocess.TimeoutExpired:
                    p.kill()
                if serve:
                    serve.terminate()
                    serve.wait()
            out.seek(0)
            results[name]["lines"] = sum(1 for line in out if '"lat":' in line)
            # A tracker that delivered nothing (fixes refused as stale, say) is not measured.
            if name.startswith("keeptrack") and results[name]["lines"] == 0:
                sys.exit(f"bench-track: {name} printed no location in {seconds:.0f} s")
            out.close()
            shutil.rmtree(data, ignore_errors=True)
            print(f"  {name}: RSS {results[name]['rss']:.1f} MB", file=sys.stderr)
    finally:
        keeptrack_tools.gpsfake_stop(gf_pid, gf_dir)
    return results


def print_memory(results, seconds):
    print(f"| process (alone on one gpsd at 1 Hz, after {seconds:.0f} s) | peak RSS MB | RSS MB | PSS MB | private MB |")
    print("|---|---:|---:|---:|---:|")
    for name, r in results.items():
        print(f"| {name} | {r['peak']:.1f} | {r['rss']:.1f} | {r['pss']:.1f} | {r['private']:.1f} |")
    ours = results["keeptrack track --gpsd"]
    print("\nkeeptrack track --gpsd's RSS by origin: " + ", ".join(
        f"{k} {v:.1f} MB" for k, v in ours["origin"].items()))
    upload = results.get("keeptrack track --gpsd --upload")
    # The targets are on what a running tracker keeps resident; the peak is start-up's, before the
    # tracker gives back the clean pages it touched (CleanPages, at its first location).
    print(f"keeptrack RSS {ours['rss']:.1f} MB after {seconds:.0f} s (target <= 15; peak {ours['peak']:.1f})" +
          (f", with --upload {upload['rss']:.1f} MB (target <= 30; peak {upload['peak']:.1f})" if upload else ""))


def memory_main(args):
    keeptrack = os.path.abspath(args.binary)
    static = links_swift_statically(keeptrack)
    work = tempfile.mkdtemp(prefix="keeptrack-memory-floor-")
    try:
        programs = {"keeptrack track --gpsd": ([keeptrack, "track", "--gpsd"], True, keeptrack, None),
                    "keeptrack track --gpsd --upload": ([keeptrack, "track", "--upload", "URL", "--max-fix-age", "none",
                                                         "--gpsd"], True,
                                                        keeptrack, keeptrack)}
        if args.before:
            programs["keeptrack before, track --gpsd"] = ([args.before, "track", "--gpsd"], True, args.before, None)
        programs["gpxlogger"] = (["gpxlogger"], True, shutil.which("gpxlogger"), None)
        for name, argv in build_floor(work, static).items():
            programs[name + (" (static runtime)" if static else " (dynamic runtime)")] = (argv, False, argv[0], None)
        print(f"memory: {args.memory_seconds:.0f} s of each, one at a time...", file=sys.stderr)
        results = memory(programs, args.memory_seconds, args.drop_caches)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    print(f"keeptrack: {keeptrack} (Swift runtime linked {'statically' if static else 'dynamically'})")
    print_memory(results, args.memory_seconds)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--windows", type=int, default=5)
    ap.add_argument("--window-seconds", type=float, default=30)
    ap.add_argument("--latency-epochs", type=int, default=60)
    ap.add_argument("--binary", help="measure this keeptrack (e.g. the .deb's static build) instead of building one")
    ap.add_argument("--syscalls", type=float, metavar="SECONDS", help="count system calls instead (strace -c -f)")
    ap.add_argument("--before", help="with --syscalls: also count this older keeptrack build's")
    ap.add_argument("--memory", action="store_true", help="measure memory instead (with --binary)")
    ap.add_argument("--memory-seconds", type=float, default=20)
    ap.add_argument("--drop-caches", action="store_true", help="with --memory: empty the page cache first (root)")
    args = ap.parse_args()
    if args.memory:
        if not args.binary:
            sys.exit("bench-track: --memory needs --binary BUILD (e.g. .build-release/release/keeptrack)")
        return memory_main(args)
    keeptrack = args.binary or keeptrack_tools.build()
    if args.syscalls:
        programs = {}
        if args.before:
            programs["keeptrack before"] = [args.before, "track", "--gpsd"]
        programs["keeptrack"] = [keeptrack, "track", "--gpsd"]
        programs["gpxlogger"] = ["gpxlogger"]
        print(f"system calls: {args.syscalls:.0f} s of each on gpsd/gpsfake at 1 Hz...", file=sys.stderr)
        counts = syscalls(programs, args.syscalls)
        if args.before:
            print(f"| system calls in {args.syscalls:.0f} s, same gpsd at 1 Hz | keeptrack before | keeptrack | gpxlogger |")
        else:
            print(f"| system calls in {args.syscalls:.0f} s, same gpsd at 1 Hz | keeptrack | gpxlogger |")
        print("|---|" + "---:|" * len(programs))
        for label, names in SYSCALL_ROWS:
            print(f"| {label} | " + " | ".join(" + ".join(str(counts[p].get(n, 0)) for n in names) for p in programs) + " |")
        print("| all (start-up included) | " + " | ".join(f"{sum(counts[p].values()):,}" for p in programs) + " |")
        return
    print(f"cost: {args.windows} windows of {args.window_seconds:.0f} s on gpsd/gpsfake at 1 Hz...", file=sys.stderr)
    per_window, rss = cost(keeptrack, args.windows, args.window_seconds)
    print(f"latency: {args.latency_epochs} epochs on a pty at 9600 baud...", file=sys.stderr)
    lat = latency(keeptrack, args.latency_epochs)
    if len(lat) < args.latency_epochs // 2:
        sys.exit(f"bench-track: only {len(lat)} latency samples; not reporting")
    print("| process (same gpsd, same window) | CPU-s per hour (median) | min..max | peak RSS MB |")
    print("|---|---:|---:|---:|")
    for name, values in per_window.items():
        print(f"| {name} | {statistics.median(values):.2f} | {min(values):.2f}..{max(values):.2f} | {rss[name]:.1f} |")
    ours = statistics.median(per_window["keeptrack track --gpsd"])
    peer = statistics.median(per_window["gpxlogger"])
    print(f"\nkeeptrack / gpxlogger CPU: {ours / peer if peer > 0 else float('inf'):.2f}x (target <= 1.5x); "
          f"keeptrack peak RSS {rss['keeptrack track --gpsd']:.1f} MB (target <= 15 MB)")
    p99 = lat[min(len(lat) - 1, int(round(0.99 * (len(lat) - 1))))]
    print(f"serial latency, last byte written -> fix line read ({len(lat)} epochs): "
          f"median {statistics.median(lat):.1f} ms, p99 {p99:.1f} ms, max {lat[-1]:.1f} ms")


if __name__ == "__main__":
    main()
