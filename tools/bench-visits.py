#!/usr/bin/env python3
"""What visit monitoring adds to a replay: `keeptrack replay --visits` beside the same replay without
it, on the same log, interleaved, in the same run (issue 27's target: at most 10 % more CPU a fix).

    tools/bench-visits.py [--rounds 5] [--binary BUILD] [--baseline OTHER_BUILD] [LOG]

LOG defaults to fixtures/day-24h.nmea.gz (a day at 1 Hz). Each round runs both (`replay --max-fix-age
none [--visits] LOG`: location events in both), in turn, as fast as possible, standard output to /dev/null (the JSON lines are still formatted: it is a file); CPU is
the child's user + system time. Before reporting, it checks that --visits printed visit lines and
the run without printed none. Prints the median of the rounds and each round's figures.

With --baseline, each round also runs `replay --visits` through OTHER_BUILD (another build of
keeptrack, e.g. main's in its own scratch path), interleaved with this build's, and reports what this
build's --visits costs against it (issue 36's target: smoothing adds at most 10 % to `replay
--visits`): the medians, the best rounds, and the median of each round's ratio, with each run's user +
system seconds. --also BUILD (repeatable) runs more builds' `replay
--visits` in the same rounds and reports each against the baseline as well (a change's before and
after, side by side: `--binary AFTER --also BEFORE --baseline REFERENCE`).
"""
import argparse, os, resource, statistics, subprocess, sys

import keeptrack_tools

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def run(binary, log, visits):
    """(CPU seconds, fixes, visit lines) of one replay."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    # Location events in both (any location option turns them on; this one changes nothing in a replay,
    # whose clock is the log's): the same pipeline, with and without the detector.
    args = [binary, "replay", "--max-fix-age", "none"] + (["--visits"] if visits else []) + [log]
    p = subprocess.run(args, cwd=ROOT, capture_output=True, text=True)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if p.returncode != 0:
        sys.exit(f"bench-visits: {' '.join(args)} failed ({p.returncode}): {p.stderr[-500:]}")
    visit_lines = p.stdout.count('"event":"visit"')
    fixes = 0
    for line in p.stderr.splitlines():
        if " fixes, " in line:
            fixes = int(line.split(": ")[-1].split(" fixes")[0].replace(",", ""))
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return cpu, fixes, visit_lines


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--binary", help="this keeptrack instead of a release build")
    ap.add_argument("--baseline", help="another keeptrack build to compare this build's replay --visits with")
    ap.add_argument("--also", action="append", default=[],
                    help="more keeptrack builds whose replay --visits runs in the same rounds (with --baseline)")
    ap.add_argument("log", nargs="?", default=os.path.join("fixtures", "day-24h.nmea.gz"))
    args = ap.parse_args()
    binary = args.binary or keeptrack_tools.build()
    without, with_visits, baseline, seconds, baseline_seconds = [], [], [], [], []
    also = {b: [] for b in args.also}
    for r in range(args.rounds):
        # Every other round the baseline goes first: no build always runs after the other.
        early = run(args.baseline, args.log, True) if args.baseline and r % 2 else None
        cpu0, fixes0, visits0 = run(binary, args.log, False)
        cpu1, fixes1, visits1 = run(binary, args.log, True)
        if visits0 != 0 or visits1 == 0 or fixes0 != fixes1 or fixes0 == 0:
            sys.exit(f"bench-visits: round {r}: {visits0} visit lines without --visits, {visits1} with; "
                     f"fixes {fixes0} and {fixes1}")
        without.append(cpu0 / fixes0)
        with_visits.append(cpu1 / fixes1)
        seconds.append(cpu1)
        line = f"  round {r + 1}: {cpu0 * 1e6 / fixes0:.2f} us a fix without, {cpu1 * 1e6 / fixes1:.2f} with"
        if args.baseline:
            cpu2, fixes2, visits2 = early or run(args.baseline, args.log, True)
            if visits2 == 0 or fixes2 != fixes1:
                sys.exit(f"bench-visits: round {r}: the baseline printed {visits2} visit lines, {fixes2} fixes")
            baseline.append(cpu2 / fixes2)
            baseline_seconds.append(cpu2)
            line += f", {cpu2 * 1e6 / fixes2:.2f} with through the baseline ({cpu1:.2f} s and {cpu2:.2f} s)"
            for other in args.also:
                cpu3, fixes3, visits3 = run(other, args.log, True)
                if visits3 == 0 or fixes3 != fixes1:
                    sys.exit(f"bench-visits: round {r}: {other} printed {visits3} visit lines, {fixes3} fixes")
                also[other].append(cpu3 / fixes3)
                line += f", {cpu3 * 1e6 / fixes3:.2f} through {other}"
        print(line + f" ({visits1} visit lines)", file=sys.stderr)
    a, b = statistics.median(without), statistics.median(with_visits)
    print(f"bench-visits: {fixes0} fixes of {args.log} replayed, {args.rounds} rounds interleaved (medians)")
    print(f"  without --visits: {a * 1e6:.2f} us CPU a fix")
    print(f"  with --visits:    {b * 1e6:.2f} us CPU a fix ({visits1} visit lines)")
    print(f"  visits add {100 * (b - a) / a:+.1f} % (target <= 10 %); rounds without: "
          + ", ".join(f"{x * 1e6:.2f}" for x in without) + "; with: " + ", ".join(f"{x * 1e6:.2f}" for x in with_visits))
    if args.baseline:
        c = statistics.median(baseline)
        print(f"  with --visits through the baseline: {c * 1e6:.2f} us CPU a fix; this build's --visits "
              f"{100 * (b - c) / c:+.1f} % against it (target <= 10 %)")
        # The machine's noise (a shared VM: the same replay varies by a quarter from round to round) is
        # added time: the best round of each is the figure least touched by it, and the ratio within a
        # round (both runs back to back) cancels slow drifts.
        best, best_baseline = min(with_visits), min(baseline)
        ratios = sorted(x / y for x, y in zip(with_visits, baseline))
        q = statistics.quantiles(ratios, n=4) if len(ratios) >= 2 else [ratios[0]] * 3
        print(f"  best round: this build {best * 1e6:.2f}, the baseline {best_baseline * 1e6:.2f} us CPU a fix: "
              f"{100 * (best - best_baseline) / best_baseline:+.1f} %; within each round, this build against the "
              f"baseline: median {100 * (q[1] - 1):+.1f} % (quartiles {100 * (q[0] - 1):+.1f} %, {100 * (q[2] - 1):+.1f} %)")
        print("  user + system seconds a replay --visits, this build: " + ", ".join(f"{x:.2f}" for x in seconds)
              + "; the baseline: " + ", ".join(f"{x:.2f}" for x in baseline_seconds))
        for other, figures in also.items():
            d = statistics.median(figures)
            print(f"  with --visits through {other}: {d * 1e6:.2f} us CPU a fix, {100 * (d - c) / c:+.1f} % against "
                  "the baseline; rounds: " + ", ".join(f"{x * 1e6:.2f}" for x in figures))


if __name__ == "__main__":
    main()
