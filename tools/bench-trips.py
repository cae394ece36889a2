#!/usr/bin/env python3
"""Trip figures against the fixtures' truth (issue 36): every trip of `keeptrack replay --visits` on the
day fixtures beside the truth's, with the receiver's speeds and with positions only, for this build and
(with --baseline) another one.

    tools/bench-trips.py [--binary BUILD] [--baseline OTHER_BUILD] [FIXTURE ...]

FIXTURE defaults to fixtures/visits-night.nmea.gz and fixtures/day-24h.nmea.gz, each with its truth
sidecar (`trips`: distance along the true path, average and maximum speed). "Positions only" replays
the same fixes without their speeds: `keeptrack decode --format csv`, the speed column left out, then
`replay --visits` of that CSV. Before printing, it checks that each run found as many trips as the
truth has and that no trip's average speed is above its maximum. Prints a Markdown table: distance
and error a trip, then each fixture's total, then the speeds.
"""
import argparse, csv, io, json, os, subprocess, sys, tempfile

import keeptrack_tools

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def trips(binary, path):
    """The trip events of `replay --visits` of `path`."""
    p = subprocess.run([binary, "replay", "--visits", "--max-fix-age", "none", path], cwd=ROOT,
                       capture_output=True, text=True)
    if p.returncode != 0:
        sys.exit(f"bench-trips: {binary} replay --visits {path} failed ({p.returncode}): {p.stderr[-500:]}")
    return [json.loads(line) for line in p.stdout.splitlines() if line.startswith('{"event":"trip"')]


def without_speeds(binary, fixture, directory):
    """A CSV of the fixture's fixes (time, position, accuracy) without their speeds."""
    p = subprocess.run([binary, "decode", "--format", "csv", fixture], cwd=ROOT, capture_output=True, text=True)
    if p.returncode != 0:
        sys.exit(f"bench-trips: decode {fixture} failed: {p.stderr[-500:]}")
    out = os.path.join(directory, os.path.basename(fixture).split(".")[0] + "-positions.csv")
    with open(out, "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["time", "lat", "lon", "hacc"])
        for row in csv.DictReader(io.StringIO(p.stdout)):
            if row["lat"] and row["lon"] and row["hAcc"]:
                w.writerow([row["time"], row["lat"], row["lon"], row["hAcc"]])
    return out


def checked(found, truth, what):
    if len(found) != len(truth):
        sys.exit(f"bench-trips: {what}: {len(found)} trips, the truth has {len(truth)}")
    for t in found:
        if t["avgSpeed"] > t["maxSpeed"]:
            sys.exit(f"bench-trips: {what}: a trip's average {t['avgSpeed']} is above its maximum {t['maxSpeed']}")
    return found


def error(found, truth):
    return f"{found:,.1f} ({100 * (found - truth) / truth:+.2f} %)"


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--binary", help="this keeptrack instead of a release build")
    ap.add_argument("--baseline", help="another keeptrack build to put beside it")
    ap.add_argument("fixtures", nargs="*",
                    default=[os.path.join("fixtures", "visits-night.nmea.gz"), os.path.join("fixtures", "day-24h.nmea.gz")])
    args = ap.parse_args()
    binary = args.binary or keeptrack_tools.build()
    columns = ["this build", "positions only"] + (["baseline"] if args.baseline else [])
    rows, totals, speeds = [], [], []
    with tempfile.TemporaryDirectory() as directory:
        for fixture in args.fixtures:
            name = os.path.basename(fixture).split(".")[0]
            with open(os.path.join(ROOT, "fixtures", name + ".truth.json")) as f:
                truth = json.load(f)["trips"]
            runs = [checked(trips(binary, fixture), truth, f"{name}, this build"),
                    checked(trips(binary, without_speeds(binary, fixture, directory)), truth, f"{name}, positions only")]
            if args.baseline:
                runs.append(checked(trips(args.baseline, fixture), truth, f"{name}, baseline"))
            for i, t in enumerate(truth):
                cells = [error(run[i]["distance"], t["distance_m"]) for run in runs]
                rows.append(f"| {name} | {t['start'][11:19]}-{t['end'][11:19]} | {t['distance_m']:,.1f} | " + " | ".join(cells) + " |")
                speeds.append(f"| {name} | {t['start'][11:19]} | {t['avg_speed_mps']:.3f} / {t['max_speed_mps']:.3f} | "
                              + " | ".join(f"{run[i]['avgSpeed']:.3f} / {run[i]['maxSpeed']:.3f}" for run in runs) + " |")
            total = sum(t["distance_m"] for t in truth)
            totals.append(f"| {name} | all {len(truth)} trips | {total:,.1f} | "
                          + " | ".join(error(sum(t["distance"] for t in run), total) for run in runs) + " |")
    if args.baseline:
        print("| fixture | trip (true times, UTC) | true metres | this build: metres (error) "
              "| positions only: metres (error) | baseline: metres (error) |")
    else:
        print("| fixture | trip (true times, UTC) | true metres | this build: metres (error) "
              "| positions only: metres (error) |")
    print("|---|---|---:|" + "---:|" * len(columns))
    for line in rows + totals:
        print(line)
    print()
    if args.baseline:
        print("| fixture | trip | true average / maximum m/s | this build: average / maximum "
              "| positions only: average / maximum | baseline: average / maximum |")
    else:
        print("| fixture | trip | true average / maximum m/s | this build: average / maximum "
              "| positions only: average / maximum |")
    print("|---|---|---:|" + "---:|" * len(columns))
    for line in speeds:
        print(line)


if __name__ == "__main__":
    main()
