#!/usr/bin/env python3
"""Region monitoring per location in instructions (callgrind), 1,000,000 circles against 10.

    tools/regions-bench-instructions.py [--binary .build-release/release/regions-bench] [--sizes 10,1000000]

Runs regions-bench under valgrind's callgrind once per monitor size, counting only the timed
passes (its `timedPasses` function: 3 runs x 20 passes over the walk's 894 locations), and prints
instructions per location with the ratio to the first size: the same work as regions-bench's ns
column, but steady on a shared machine. It checks that each run printed its row and that the
shared regions' events were identical before reporting.
"""
import argparse, os, re, subprocess, sys, tempfile

import keeptrack_tools

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--binary", help="a built regions-bench (default: build the release one)")
    ap.add_argument("--sizes", default="10,1000000")
    args = ap.parse_args()
    binary = args.binary or keeptrack_tools.build("regions-bench")
    rows = []
    for size in [int(s) for s in args.sizes.split(",")]:
        with tempfile.TemporaryDirectory(prefix="regions-ir.") as d:
            r = subprocess.run(["valgrind", "--tool=callgrind", "--toggle-collect=$s13regions_bench11timedPasses*",
                                f"--callgrind-out-file={d}/out", binary, "--no-day", "--sizes", str(size)],
                               cwd=ROOT, capture_output=True, text=True, timeout=3600)
        out = r.stdout + r.stderr
        collected = re.search(r"Collected : (\d+)", out)
        locations = re.search(r"\((\d+) locations of the walk fixture", out)
        if r.returncode != 0 or not collected or not locations or f"| {size} |" not in out \
                or "identical in every monitor" not in out:
            print(f"regions-bench-instructions: the run with {size} regions failed; not reporting\n{out[-2000:]}",
                  file=sys.stderr)
            sys.exit(1)
        rows.append((size, int(collected.group(1)) / (3 * 20 * int(locations.group(1)))))
    print("| regions | instructions per location (callgrind) | cost vs 10 regions |")
    print("|---:|---:|---:|")
    for size, ir in rows:
        print(f"| {size:,} | {ir:,.0f} | {ir / rows[0][1]:.2f}x |")


if __name__ == "__main__":
    main()
