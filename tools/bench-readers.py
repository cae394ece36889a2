#!/usr/bin/env python3
"""Track file readers at scale: `keeptrack replay` of a generated 100 MB GPX and a 1 GB Google Takeout
Records.json, beside the NMEA reader on logs of the same fixes and gpsbabel reading the same GPX, in the
same run (issue 29, item 5: bounded memory whatever the file's size).

    tools/bench-readers.py [--gpx-mb 100] [--takeout-mb 1000] [--binary BUILD] [--keep DIR]

The files are written to a temporary directory (removed at the end unless --keep): a walk at 1 Hz, as
GPX 1.1 track points (ele, time), as Takeout records (Google's layout: latitudeE7, accuracy, activity,
timestamp, ...), and each fix list again as an NMEA log (RMC + GGA). Each is replayed once by the
release build, `keeptrack replay FILE` with standard output to /dev/null (every fix still formatted as
a JSON line); time is wall-clock, peak RSS the child's own (wait4). Before reporting, it checks that
each replay delivered exactly the fixes written, and gpsbabel's CSV holds as many lines.
"""
import argparse, math, os, shutil, subprocess, sys, tempfile, time

import keeptrack_tools

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
START = 1_715_679_000  # 2024-05-14T09:30:00Z


def walk(n):
    """n fixes of a walk at 1 Hz: (seconds since 1970, lat, lon, altitude)."""
    for i in range(n):
        yield (START + i, 48.1373663 + 0.00001 * i * math.cos(i / 5000.0) % 0.5,
               11.5754087 + 0.000012 * i * math.sin(i / 7000.0) % 0.5, 520 + 10 * math.sin(i / 300.0))


def iso(t, fraction=""):
    return time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(t)) + fraction + "Z"


def nmea_sentence(body):
    c = 0
    for ch in body.encode():
        c ^= ch
    return "$%s*%02X\r\n" % (body, c)


def ddmm(value, positive, negative, width):
    h = positive if value >= 0 else negative
    value = abs(value)
    d = int(value)
    return "%0*d%09.6f" % (width, d, (value - d) * 60), h


def write_nmea(path, n):
    with open(path, "w", buffering=1 << 20) as f:
        for t, lat, lon, alt in walk(n):
            hms = time.strftime("%H%M%S", time.gmtime(t)) + ".00"
            dmy = time.strftime("%d%m%y", time.gmtime(t))
            la, lah = ddmm(lat, "N", "S", 2)
            lo, loh = ddmm(lon, "E", "W", 3)
            f.write(nmea_sentence("GPRMC,%s,A,%s,%s,%s,%s,2.7,45.0,%s,,,A" % (hms, la, lah, lo, loh, dmy)))
            f.write(nmea_sentence("GPGGA,%s,%s,%s,%s,%s,1,09,0.9,%.1f,M,47.0,M,," % (hms, la, lah, lo, loh, alt)))


def write_points(f, megabytes, text):
    """Writes `text(n, t, lat, lon, alt)` for the walk's points, n from 0, until `megabytes` MB are
    written; returns how many."""
    n, size, limit = 0, 0, megabytes * 1_000_000
    for t, lat, lon, alt in walk(10**9):
        item = text(n, t, lat, lon, alt)
        f.write(item)
        size += len(item)
        n += 1
        if size >= limit:
            break
    return n


def write_gpx(path, megabytes):
    with open(path, "w", buffering=1 << 20) as f:
        f.write('<?xml version="1.0" encoding="UTF-8"?>\n<gpx version="1.1" creator="tools/bench-readers.py" '
                'xmlns="http://www.topografix.com/GPX/1/1">\n <trk><name>walk</name><trkseg>\n')
        n = write_points(f, megabytes, lambda n, t, lat, lon, alt: (
            '  <trkpt lat="%.7f" lon="%.7f"><ele>%.1f</ele><time>%s</time></trkpt>\n' % (lat, lon, alt, iso(t))))
        f.write(" </trkseg></trk>\n</gpx>\n")
    return n


TAKEOUT = """    {
      "latitudeE7": %d,
      "longitudeE7": %d,
      "accuracy": 13,
      "velocity": 1,
      "heading": 45,
      "altitude": %d,
      "verticalAccuracy": 3,
      "activity": [{
        "activity": [{
          "type": "WALKING",
          "confidence": 90
        }, {
          "type": "ON_FOOT",
          "confidence": 90
        }],
        "timestamp": "%s"
      }],
      "source": "GPS",
      "deviceTag": 1234567890,
      "platformType": "ANDROID",
      "timestamp": "%s"
    }"""


def write_takeout(path, megabytes):
    with open(path, "w", buffering=1 << 20) as f:
        f.write('{\n  "locations": [')
        n = write_points(f, megabytes, lambda n, t, lat, lon, alt: ("" if n == 0 else ",") + "\n" + TAKEOUT % (
            round(lat * 1e7), round(lon * 1e7), round(alt), iso(t, ".123"), iso(t, ".000")))
        f.write("\n  ]\n}\n")
    return n


def measure(args):
    """(seconds, peak RSS in MB, stderr) of one run, its output to /dev/null."""
    with open(os.devnull, "w") as null, tempfile.TemporaryFile() as err:
        started = time.monotonic()
        p = subprocess.Popen(args, cwd=ROOT, stdout=null, stderr=err)
        _, status, usage = os.wait4(p.pid, 0)
        elapsed = time.monotonic() - started
        p.returncode = os.waitstatus_to_exitcode(status)
        err.seek(0)
        text = err.read().decode(errors="replace")
    if p.returncode != 0:
        sys.exit(f"bench-readers: {' '.join(args)} failed ({p.returncode}): {text[-500:]}")
    return elapsed, usage.ru_maxrss / 1024, text


def replayed_fixes(stderr):
    for line in stderr.splitlines():
        if " fixes" in line and ": " in line:
            return int(line.split(": ")[1].split(" fixes")[0].replace(",", ""))
    return None


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--gpx-mb", type=int, default=100)
    ap.add_argument("--takeout-mb", type=int, default=1000)
    ap.add_argument("--binary", help="this keeptrack instead of a release build")
    ap.add_argument("--keep", help="write the files here and keep them")
    args = ap.parse_args()
    binary = args.binary or keeptrack_tools.build()
    if not shutil.which("gpsbabel"):
        sys.exit("bench-readers: gpsbabel is not installed (tools/setup installs it)")
    work = args.keep or tempfile.mkdtemp(prefix="keeptrack-bench-readers-")
    os.makedirs(work, exist_ok=True)
    try:
        paths = {k: os.path.join(work, k) for k in ("walk.gpx", "walk-gpx.nmea", "Records.json", "walk-takeout.nmea")}
        gpx_n = write_gpx(paths["walk.gpx"], args.gpx_mb)
        write_nmea(paths["walk-gpx.nmea"], gpx_n)
        takeout_n = write_takeout(paths["Records.json"], args.takeout_mb)
        write_nmea(paths["walk-takeout.nmea"], takeout_n)
        rows = []
        for name, n in (("walk.gpx", gpx_n), ("walk-gpx.nmea", gpx_n), ("Records.json", takeout_n),
                        ("walk-takeout.nmea", takeout_n)):
            seconds, rss, err = measure([binary, "replay", paths[name]])
            got = replayed_fixes(err)
            if got != n:
                sys.exit(f"bench-readers: {name}: {got} fixes replayed, {n} written: {err[-300:]}")
            rows.append((name, os.path.getsize(paths[name]) / 1e6, n, seconds, rss))
        csv = os.path.join(work, "gpsbabel.csv")
        seconds, rss, _ = measure(["gpsbabel", "-t", "-i", "gpx", "-f", paths["walk.gpx"], "-o", "unicsv", "-F", csv])
        with open(csv) as f:
            lines = sum(1 for _ in f) - 1
        if lines != gpx_n:
            sys.exit(f"bench-readers: gpsbabel wrote {lines} points, {gpx_n} in the GPX")
        rows.append(("walk.gpx (gpsbabel -t -o unicsv)", os.path.getsize(paths["walk.gpx"]) / 1e6, gpx_n, seconds, rss))
        print(f"bench-readers: keeptrack replay FILE > /dev/null, release build, one run each (peer: gpsbabel)")
        print(f"  {'file':32} {'size':>9} {'fixes':>10} {'time':>8} {'fixes/s':>10} {'peak RSS':>9}")
        for name, mb, n, seconds, rss in rows:
            print(f"  {name:32} {mb:6.0f} MB {n:10,} {seconds:6.2f} s {n / seconds:10,.0f} {rss:6.1f} MB")
    finally:
        if not args.keep:
            shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
