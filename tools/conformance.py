#!/usr/bin/env python3
"""Compare `keeptrack decode` with gpsd's own output on the shared receiver corpus.

For every NAME.log in the corpus (default: ../shared/corpus relative to the
repository root) that has a NAME.log.chk (gpsd's regression output), run

    KEEPTRACK decode --all --format jsonl NAME.log

and compare our fixes with gpsd's TPV records.

Metric, per log:
  * gpsd epochs: TPV records with mode >= 2 that have time, lat and lon,
    grouped by time (one group per run of consecutive TPVs with the same
    time, so a receiver whose clock jumps back and repeats a second gives two
    epochs).  The last TPV of each group is gpsd's answer for that epoch.
  * matched: we output a fix (mode 2d/3d) whose time of day equals gpsd's
    (milliseconds of the day; the date is ignored because gpsd may shift
    dates by 1024 weeks) and whose lat and lon are both within --tolerance
    degrees (default 1e-6) of gpsd's.
  * extra (information only): 2d/3d fixes of ours that did not pair with any
    gpsd epoch, including fixes with no time.
Logs with no gpsd epoch are "n/a" and do not count against the target.

Exit status: 0 if every log (except n/a) has share >= --target (default 99),
1 otherwise, 2 on usage errors (corpus or decoder not found).

Examples (from the repository root):
    swift build -c release && tools/conformance.py
    tools/conformance.py --details /tmp/conformance.txt
    KEEPTRACK=/path/to/keeptrack tools/conformance.py --only garmin15x --only 'ublox*'

Only the Python 3 standard library is used.
"""

import argparse
import fnmatch
import glob
import json
import math
import os
import re
import shlex
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DEFAULT_CORPUS = os.path.normpath(os.path.join(ROOT, "..", "shared", "corpus"))
DEFAULT_KEEPTRACK = os.path.join(ROOT, ".build", "release", "keeptrack")
DEFAULT_SHOW = 5

_TIME_RE = re.compile(r"(?:^|T)(\d{1,2}):(\d{2}):(\d{2})(?:\.(\d+))?")


def time_of_day_ms(value):
    """Milliseconds of the day of an ISO 8601 time ("2022-10-18T11:32:58.000Z"
    or "11:32:58.000Z"); None if absent or unparseable."""
    if not isinstance(value, str):
        return None
    m = _TIME_RE.search(value)
    if not m:
        return None
    h, mi, s, frac = m.groups()
    ms = 0
    if frac:
        ms = int(round(float("0." + frac) * 1000))
    return ((int(h) * 60 + int(mi)) * 60 + int(s)) * 1000 + ms


def fmt_tod(ms):
    if ms is None:
        return "--:--:--.---"
    ms = int(ms)
    h, rem = divmod(ms, 3600000)
    mi, rem = divmod(rem, 60000)
    s, rem = divmod(rem, 1000)
    return "%02d:%02d:%02d.%03d" % (h, mi, s, rem)


def is_num(x):
    return isinstance(x, (int, float)) and not isinstance(x, bool) and math.isfinite(x)


def approx_metres(lat1, lon1, lat2, lon2):
    """Rough horizontal distance (equirectangular), for readable details only."""
    r = 6371008.8
    dlon = (lon2 - lon1 + 540.0) % 360.0 - 180.0
    x = math.radians(dlon) * math.cos(math.radians((lat1 + lat2) / 2.0))
    y = math.radians(lat2 - lat1)
    return r * math.hypot(x, y)


# --------------------------------------------------------------------------
# gpsd side


class GpsdStats:
    def __init__(self):
        self.json_lines = 0
        self.bad_json = 0
        self.tpv = 0
        self.tpv_fix = 0              # mode >= 2
        self.fix_no_time = 0          # mode >= 2 without time
        self.fix_no_pos = 0           # mode >= 2 without lat/lon
        self.backwards = 0            # time of day went backwards between epochs
        self.revisits = 0             # an epoch whose time was already seen earlier
        self.inconsistent = 0         # TPVs of one epoch disagreeing by > tolerance


def read_gpsd(chk_path, tolerance):
    """Return (epochs, stats); epochs = list of dicts in log order."""
    stats = GpsdStats()
    epochs = []
    seen = set()
    with open(chk_path, "r", encoding="utf-8", errors="replace") as f:
        for lineno, line in enumerate(f, 1):
            if not line.startswith("{"):
                continue  # raw sentence echoed by gpsd's regression output
            stats.json_lines += 1
            try:
                o = json.loads(line)
            except ValueError:
                stats.bad_json += 1
                continue
            if not isinstance(o, dict) or o.get("class") != "TPV":
                continue
            stats.tpv += 1
            mode = o.get("mode", 0)
            if not is_num(mode) or mode < 2:
                continue
            stats.tpv_fix += 1
            has_time = isinstance(o.get("time"), str)
            has_pos = is_num(o.get("lat")) and is_num(o.get("lon"))
            if not has_time:
                stats.fix_no_time += 1
            if not has_pos:
                stats.fix_no_pos += 1
            if not (has_time and has_pos):
                continue
            tod = time_of_day_ms(o["time"])
            if tod is None:
                stats.fix_no_time += 1
                continue
            rec = {"time": o["time"], "tod": tod, "lat": float(o["lat"]), "lon": float(o["lon"]),
                   "mode": int(mode), "chk_line": lineno}
            if epochs and epochs[-1]["time"] == o["time"]:
                prev = epochs[-1]
                if abs(prev["lat"] - rec["lat"]) > tolerance or abs(prev["lon"] - rec["lon"]) > tolerance:
                    prev["inconsistent"] = True
                rec["inconsistent"] = prev.get("inconsistent", False)
                epochs[-1] = rec  # last TPV of the epoch wins
            else:
                if epochs and tod < epochs[-1]["tod"]:
                    stats.backwards += 1
                if o["time"] in seen:
                    stats.revisits += 1
                seen.add(o["time"])
                epochs.append(rec)
    stats.inconsistent = sum(1 for e in epochs if e.get("inconsistent"))
    return epochs, stats


# --------------------------------------------------------------------------
# our side


class RunResult:
    def __init__(self):
        self.records = []       # every JSON object we printed
        self.bad_lines = 0
        self.returncode = None
        self.error = None       # could not run / timed out
        self.stderr_tail = ""


def run_keeptrack(cmd, log_path, timeout):
    res = RunResult()
    argv = cmd + ["decode", "--all", "--format", "jsonl", log_path]
    try:
        p = subprocess.run(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=timeout)
    except FileNotFoundError as e:
        res.error = "cannot run %s: %s" % (cmd[0], e)
        return res
    except PermissionError as e:
        res.error = "cannot run %s: %s" % (cmd[0], e)
        return res
    except subprocess.TimeoutExpired:
        res.error = "timed out after %gs" % timeout
        return res
    res.returncode = p.returncode
    res.stderr_tail = p.stderr.decode("utf-8", "replace").strip()[-500:]
    for line in p.stdout.decode("utf-8", "replace").splitlines():
        line = line.strip()
        if not line:
            continue
        if not line.startswith("{"):
            res.bad_lines += 1
            continue
        try:
            o = json.loads(line)
        except ValueError:
            res.bad_lines += 1
            continue
        if isinstance(o, dict):
            res.records.append(o)
        else:
            res.bad_lines += 1
    return res


def our_fixes(records):
    """Our 2d/3d fixes with a position, in output order."""
    fixes = []
    for i, o in enumerate(records):
        mode = o.get("mode")
        if mode not in ("2d", "3d"):
            continue
        if not (is_num(o.get("lat")) and is_num(o.get("lon"))):
            continue
        fixes.append({"idx": i, "time": o.get("time"), "tod": time_of_day_ms(o.get("time")),
                      "lat": float(o["lat"]), "lon": float(o["lon"]), "mode": mode,
                      "lines": o.get("lines")})
    return fixes


# --------------------------------------------------------------------------
# comparison


def within(a, b, tol):
    return abs(a["lat"] - b["lat"]) <= tol and abs(a["lon"] - b["lon"]) <= tol


def compare(epochs, records, tolerance):
    fixes = our_fixes(records)
    # every record with a time, fix or not, to explain misses ("ours mode none")
    by_tod_all = {}
    for i, o in enumerate(records):
        tod = time_of_day_ms(o.get("time"))
        if tod is not None:
            by_tod_all.setdefault(tod, []).append(o)
    by_tod = {}
    for fx in fixes:
        if fx["tod"] is not None:
            by_tod.setdefault(fx["tod"], []).append(fx)

    used = set()
    matched = 0
    problems = []
    for ep in epochs:
        cands = by_tod.get(ep["tod"], [])
        fresh = [c for c in cands if c["idx"] not in used]
        pick = next((c for c in fresh if within(c, ep, tolerance)), None)
        if pick is None:
            # a fix already paired with an earlier epoch of the same time may still agree
            pick = next((c for c in cands if within(c, ep, tolerance)), None)
        if pick is not None:
            used.add(pick["idx"])
            matched += 1
            continue
        if fresh:
            ours = fresh[0]
            used.add(ours["idx"])
            problems.append({"kind": "differs", "gpsd": ep, "ours": ours})
        elif cands:
            problems.append({"kind": "differs", "gpsd": ep, "ours": cands[0]})
        else:
            nonfix = by_tod_all.get(ep["tod"], [])
            problems.append({"kind": "missing", "gpsd": ep,
                             "nonfix": nonfix[-1] if nonfix else None})
    extras = [fx for fx in fixes if fx["idx"] not in used]
    return {"fixes": fixes, "matched": matched, "problems": problems, "extras": extras}


def describe_ours(fx):
    lines = fx.get("lines")
    ltxt = ""
    if isinstance(lines, list) and lines:
        ltxt = " lines %s" % "-".join(str(x) for x in lines)
    return "%s %.9f %.9f%s" % (fx["mode"], fx["lat"], fx["lon"], ltxt)


def describe_problem(p):
    g = p["gpsd"]
    gtxt = "gpsd %dd %.9f %.9f (chk line %d)" % (g["mode"], g["lat"], g["lon"], g["chk_line"])
    head = "%s  %-7s " % (fmt_tod(g["tod"]), p["kind"])
    if p["kind"] == "missing":
        nf = p.get("nonfix")
        if nf is not None:
            o = "ours: mode %s lat %s lon %s (not a fix)" % (nf.get("mode"), nf.get("lat"), nf.get("lon"))
        else:
            o = "ours: missing"
        return head + gtxt + "  |  " + o
    o = p["ours"]
    d = approx_metres(g["lat"], g["lon"], o["lat"], o["lon"])
    return head + gtxt + "  |  ours " + describe_ours(o) + "  (dlat %.2e dlon %.2e, ~%.3g m)" % (
        o["lat"] - g["lat"], o["lon"] - g["lon"], d)


def describe_extra(fx):
    t = fmt_tod(fx["tod"]) if fx["tod"] is not None else "no-time     "
    return "%s  extra   ours %s (time %s)" % (t, describe_ours(fx), json.dumps(fx["time"]))


# --------------------------------------------------------------------------
# main


def keeptrack_command(arg):
    value = arg or os.environ.get("KEEPTRACK") or DEFAULT_KEEPTRACK
    if os.path.exists(value):
        return [value], value
    return shlex.split(value), value


def render_table(rows, headers, aligns):
    widths = [len(h) for h in headers]
    for r in rows:
        if r is None:
            continue
        for i, c in enumerate(r):
            widths[i] = max(widths[i], len(c))
    def fmt(r):
        out = []
        for c, w, a in zip(r, widths, aligns):
            out.append(c.rjust(w) if a == "r" else c.ljust(w))
        return "  ".join(out).rstrip()
    sep = "  ".join("-" * w for w in widths)
    lines = [fmt(headers), sep]
    for r in rows:
        lines.append(sep if r is None else fmt(r))
    return "\n".join(lines)


def main(argv=None):
    ap = argparse.ArgumentParser(
        description="Compare `keeptrack decode` fixes with gpsd's .chk output on the receiver corpus.",
        formatter_class=argparse.RawDescriptionHelpFormatter, epilog=__doc__.split("\n\n", 1)[1])
    ap.add_argument("--corpus", default=DEFAULT_CORPUS, help="corpus directory (default: %(default)s)")
    ap.add_argument("--keeptrack", default=None,
                    help="decoder executable (default: $KEEPTRACK or %s)" % os.path.relpath(DEFAULT_KEEPTRACK, ROOT))
    ap.add_argument("--details", metavar="FILE", default=None,
                    help="write every disagreement and extra fix to FILE ('-' for stdout); "
                         "default: print the first %d per log" % DEFAULT_SHOW)
    ap.add_argument("--target", type=float, default=99.0, help="minimum match share per log, in %% (default: %(default)s)")
    ap.add_argument("--tolerance", type=float, default=1e-6, help="lat/lon tolerance in degrees (default: %(default)s)")
    ap.add_argument("--timeout", type=float, default=120.0, help="seconds per decoder run (default: %(default)s)")
    ap.add_argument("--only", action="append", default=[], metavar="PATTERN",
                    help="only logs whose name (without .log) matches this glob; repeatable")
    args = ap.parse_args(argv)

    if not os.path.isdir(args.corpus):
        print("conformance: corpus directory not found: %s" % args.corpus, file=sys.stderr)
        return 2
    cmd, shown = keeptrack_command(args.keeptrack)
    if not cmd:
        print("conformance: empty decoder command", file=sys.stderr)
        return 2
    exe = cmd[0]
    if os.sep in exe and not os.path.exists(exe):
        print("conformance: decoder not found: %s (build it with `swift build -c release`, "
              "or pass --keeptrack / set KEEPTRACK)" % exe, file=sys.stderr)
        return 2

    logs = sorted(glob.glob(os.path.join(args.corpus, "*.log")))
    if args.only:
        logs = [p for p in logs if any(fnmatch.fnmatch(os.path.basename(p)[:-4], pat) for pat in args.only)]
    if not logs:
        print("conformance: no .log files selected in %s" % args.corpus, file=sys.stderr)
        return 2

    rows = []
    details = []          # (name, [lines]) for the detail report
    failing = []
    tot_epochs = tot_matched = tot_extra = 0
    counted = 0
    for path in logs:
        name = os.path.basename(path)[:-4]
        chk = path + ".chk"
        if not os.path.exists(chk):
            rows.append([name, "-", "-", "-", "-", "-", "-", "-", "no .chk, skipped"])
            continue
        epochs, gst = read_gpsd(chk, args.tolerance)
        run = run_keeptrack(cmd, path, args.timeout)
        notes = []
        if run.error:
            notes.append("ERROR " + run.error)
        elif run.returncode:
            notes.append("exit %d" % run.returncode)
        if run.bad_lines:
            notes.append("%d non-JSON lines" % run.bad_lines)
        if gst.bad_json:
            notes.append("%d bad .chk JSON" % gst.bad_json)
        if gst.revisits:
            notes.append("gpsd time repeats x%d" % gst.revisits)
        if gst.inconsistent:
            notes.append("gpsd TPVs disagree in %d epochs" % gst.inconsistent)

        cmp_ = compare(epochs, run.records, args.tolerance)
        n = len(epochs)
        m = cmp_["matched"]
        missing = sum(1 for p in cmp_["problems"] if p["kind"] == "missing")
        differs = sum(1 for p in cmp_["problems"] if p["kind"] == "differs")
        extra = len(cmp_["extras"])
        if n == 0:
            share_txt = "n/a"
            if run.error:
                failing.append(name)
        else:
            share = 100.0 * m / n
            # round down so that e.g. 99.96% never prints as 100%
            share_txt = "100%" if m == n else "%.1f%%" % (math.floor(share * 10.0) / 10.0)
            counted += 1
            tot_epochs += n
            tot_matched += m
            if share < args.target or run.error:
                failing.append(name)
                notes.insert(0, "BELOW TARGET")
        tot_extra += extra
        rows.append([name, str(n), str(m), share_txt, str(missing), str(differs), str(extra),
                     str(len(cmp_["fixes"])), "; ".join(notes)])

        lines = [describe_problem(p) for p in cmp_["problems"]] + [describe_extra(x) for x in cmp_["extras"]]
        if run.error:
            lines.insert(0, "ERROR: " + run.error)
        elif run.returncode and run.stderr_tail:
            lines.insert(0, "decoder exited %d; stderr tail: %s" % (run.returncode, run.stderr_tail.replace("\n", " | ")))
        if lines:
            details.append((name, lines))

    share_total = "%.2f%%" % (100.0 * tot_matched / tot_epochs) if tot_epochs else "n/a"
    rows.append(None)
    rows.append(["TOTAL (%d logs, %d n/a)" % (counted, len(logs) - counted), str(tot_epochs), str(tot_matched),
                 share_total, "", "", str(tot_extra), "",
                 "%d/%d logs >= %g%%" % (counted - len(failing), counted, args.target)])

    headers = ["log", "gpsd", "matched", "share", "missing", "differ", "extra", "ours", "notes"]
    aligns = ["l", "r", "r", "r", "r", "r", "r", "r", "l"]
    print("decoder: %s" % shown)
    print("corpus:  %s   tolerance %g deg, target %g%%" % (args.corpus, args.tolerance, args.target))
    print()
    print(render_table(rows, headers, aligns))
    print()
    print("gpsd = gpsd epochs (mode>=2 TPVs with time, lat, lon; last TPV per time); matched = our 2d/3d fix at the")
    print("same time of day within tolerance; missing = no fix of ours at that time; differ = ours at that time but")
    print("elsewhere (or not 2d/3d); extra = our 2d/3d fixes with no gpsd epoch (information only); ours = our 2d/3d fixes.")

    def write_details(out, limit):
        for name, lines in details:
            out.write("== %s (%d)\n" % (name, len(lines)))
            shown_lines = lines if limit is None else lines[:limit]
            for l in shown_lines:
                out.write("  " + l + "\n")
            if limit is not None and len(lines) > limit:
                out.write("  ... %d more (use --details FILE for all)\n" % (len(lines) - limit))

    if args.details:
        if args.details == "-":
            print()
            write_details(sys.stdout, None)
        else:
            with open(args.details, "w", encoding="utf-8") as f:
                f.write("# tools/conformance.py details: decoder %s, corpus %s, tolerance %g deg\n"
                        % (shown, args.corpus, args.tolerance))
                write_details(f, None)
            print("\ndetails: %s" % args.details)
    elif details:
        print()
        write_details(sys.stdout, DEFAULT_SHOW)

    if failing:
        print("\nFAIL: %d log(s) below %g%%: %s" % (len(failing), args.target, ", ".join(failing)))
        return 1
    print("\nOK: every log with gpsd fixes is at or above %g%%" % args.target)
    return 0


if __name__ == "__main__":
    sys.exit(main())
