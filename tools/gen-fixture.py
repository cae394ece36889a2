#!/usr/bin/env python3
"""gen-fixture -- deterministic NMEA 0183 fixture generator for KeepTrack.

Usage:
    tools/gen-fixture.py SCENARIO.json -o OUTPUT [--seed N]
    tools/gen-fixture.py --all          # regenerate every fixture from fixtures/routes/*.json

A scenario (route spec) describes a start time, rate, talker configuration and a
list of route segments (legs through waypoints with a trapezoidal speed profile,
and stops).  The generator builds the true piecewise-linear path, simulates a
GNSS receiver following it (correlated position noise consistent with the DOPs
it reports, satellites in view, outages) and writes NMEA 0183 sentences plus a
truth sidecar (NAME.truth.json).

Accuracy convention (shared with the decoder):
    hAcc [m] = HDOP * 5.0   (UERE)      per-axis horizontal sigma = hAcc / sqrt(2)
    vAcc [m] = VDOP * 5.0               vertical sigma = vAcc

Python 3 standard library only.  Output is byte-for-byte deterministic.
"""

import argparse
import datetime as dt
import glob
import gzip
import io
import json
import math
import os
import random
import sys

UERE = 5.0
R_EARTH = 6371008.8
KN_PER_MPS = 3600.0 / 1852.0
KMH_PER_MPS = 3.6
GM_TAU_POS = 30.0      # s, position error correlation time
GM_TAU_DOP = 180.0     # s, DOP wander correlation time

# environment -> (HDOP mean, HDOP wander amplitude, SNR penalty dB)
ENV = {
    "open": (0.80, 0.10, 0.0),
    "suburban": (1.00, 0.15, 2.0),
    "city": (1.35, 0.25, 5.0),
    "canyon": (1.85, 0.30, 8.0),
    "indoor": (2.05, 0.20, 11.0),
}

# constellation key -> GSV talker, NMEA 4.1 system id, signal id, PRN pool, orbit period (s)
CONSTELLATIONS = {
    "GP": dict(talker="GP", sysid=1, sig=1, prns=list(range(1, 33)), nsat=31, period=43082.0),
    "GL": dict(talker="GL", sysid=2, sig=1, prns=list(range(65, 89)), nsat=24, period=40544.0),
    "GA": dict(talker="GA", sysid=3, sig=7, prns=list(range(1, 37)), nsat=24, period=50680.0),
    "GB": dict(talker="GB", sysid=4, sig=1, prns=list(range(1, 38)), nsat=28, period=46404.0),
    "BD": dict(talker="BD", sysid=4, sig=1, prns=list(range(1, 38)), nsat=28, period=46404.0),
}

DEFAULT_ORDER = ["RMC", "VTG", "GGA", "GSA", "GSV", "GLL", "GNS", "GST", "ZDA"]


# --------------------------------------------------------------------------- helpers

def nmea_checksum(body):
    x = 0
    for c in body.encode("ascii"):
        x ^= c
    return "%02X" % x


def sentence(body, lead="$"):
    return "%s%s*%s\r\n" % (lead, body, nmea_checksum(body))


def parse_time(s):
    s = s.replace("Z", "+00:00")
    t = dt.datetime.fromisoformat(s)
    if t.tzinfo is None:
        t = t.replace(tzinfo=dt.timezone.utc)
    return t.astimezone(dt.timezone.utc)


def iso(t):
    ms = t.microsecond // 1000
    return t.strftime("%Y-%m-%dT%H:%M:%S") + (".%03dZ" % ms)


def fmt_time(t, decimals):
    if decimals == 3:
        return "%02d%02d%02d.%03d" % (t.hour, t.minute, t.second, t.microsecond // 1000)
    return "%02d%02d%02d.%02d" % (t.hour, t.minute, t.second, t.microsecond // 10000)


def fmt_ddmm(value, width, positive, negative):
    """Degrees and minutes as NMEA writes them (`width` digits of degrees, minutes to 5 decimals, a
    rounding up to 60 minutes carried into the degrees), and the hemisphere letter."""
    h = positive if value >= 0 else negative
    a = abs(value)
    d = int(a)
    m = round((a - d) * 60.0, 5)
    if m >= 60.0:
        d += 1
        m -= 60.0
    return "%0*d%08.5f" % (width, d, m), h


def fmt_lat(lat):
    return fmt_ddmm(lat, 2, "N", "S")


def fmt_lon(lon):
    return fmt_ddmm(lon, 3, "E", "W")


def seg_metrics(p, q):
    """Length (m) and bearing (deg) of the straight lat/lon segment p->q (local equirectangular)."""
    latm = math.radians((p[0] + q[0]) / 2.0)
    dx = math.radians(q[1] - p[1]) * R_EARTH * math.cos(latm)
    dy = math.radians(q[0] - p[0]) * R_EARTH
    return math.hypot(dx, dy), (math.degrees(math.atan2(dx, dy)) + 360.0) % 360.0


class GaussMarkov:
    """First-order Gauss-Markov process with unit stationary variance."""

    def __init__(self, rng, tau):
        self.rng = rng
        self.tau = tau
        self.x = rng.gauss(0.0, 1.0)

    def step(self, dts):
        phi = math.exp(-dts / self.tau)
        self.x = phi * self.x + math.sqrt(1.0 - phi * phi) * self.rng.gauss(0.0, 1.0)
        return self.x


# --------------------------------------------------------------------------- route / truth

class Route:
    """Builds the true path as timed knots; truth at any time = linear interpolation of knots."""

    def __init__(self, spec):
        self.spec = spec
        self.accel = float(spec.get("accel", 1.5))
        self.decel = float(spec.get("decel", 2.0))
        sp = spec["start_pos"]
        self.pos = (float(sp[0]), float(sp[1]), float(sp[2]) if len(sp) > 2 else float(spec.get("alt", 0.0)))
        self.knots = []        # [t_ms, lat, lon, alt, speed, course]
        self.intervals = []    # (start_ms, end_ms, info dict) one per segment
        self.stops = []
        self.course = None
        self.t = 0
        self._shint, self._ihint = [0], [0]
        self._add_knot(0, self.pos, 0.0, None)
        for idx, seg in enumerate(spec["route"]):
            start = self.t
            if seg["type"] == "leg":
                self._leg(seg)
            elif seg["type"] == "stop":
                self._stop(seg)
            else:
                raise ValueError("unknown segment type %r" % seg["type"])
            info = dict(index=idx, type=seg["type"], env=seg.get("env", spec.get("env", "city")),
                        drift=bool(seg.get("drift", False)), name=seg.get("name"))
            self.intervals.append((start, self.t, info))
        want = spec.get("duration_s")
        if want is not None:
            want_ms = int(round(float(want) * 1000))
            if self.t < want_ms:
                start = self.t
                self._stop({"duration": (want_ms - self.t) / 1000.0, "name": "end-pad"})
                self.intervals.append((start, self.t, dict(index=len(spec["route"]), type="stop",
                                                           env=spec.get("env", "city"), drift=False,
                                                           name="end-pad")))
            elif self.t > want_ms:
                self._truncate(want_ms)
        self.end_ms = self.t
        # course for knots that had none (before first motion): first known course
        first = next((k[5] for k in self.knots if k[5] is not None), 0.0)
        for k in self.knots:
            if k[5] is None:
                k[5] = first
            else:
                break

    def _add_knot(self, t_ms, pos, speed, course):
        k = [int(t_ms), pos[0], pos[1], pos[2], speed, course]
        if self.knots and self.knots[-1][0] == k[0]:
            self.knots[-1] = k
        else:
            self.knots.append(k)

    def _leg(self, seg):
        pts = [self.pos]
        for w in seg["waypoints"]:
            alt = float(w[2]) if len(w) > 2 else pts[-1][2]
            pts.append((float(w[0]), float(w[1]), alt))
        lens, brgs, cum = [], [], [0.0]
        for p, q in zip(pts, pts[1:]):
            l, b = seg_metrics(p, q)
            lens.append(l)
            brgs.append(b)
            cum.append(cum[-1] + l)
        L = cum[-1]
        if L <= 0.0:
            return
        v = float(seg["speed"])
        a = float(seg.get("accel", self.accel))
        d = float(seg.get("decel", self.decel))
        if v * v / (2 * a) + v * v / (2 * d) > L:
            v = math.sqrt(2 * L * a * d / (a + d))
        ta, td = v / a, v / d
        tc = (L - v * v / (2 * a) - v * v / (2 * d)) / v
        T = ta + tc + td
        La = 0.5 * a * ta * ta

        def s_of(t):
            if t <= 0:
                return 0.0
            if t < ta:
                return 0.5 * a * t * t
            if t < ta + tc:
                return La + v * (t - ta)
            if t < T:
                u = t - ta - tc
                return La + v * tc + v * u - 0.5 * d * u * u
            return L

        def v_of(t):
            if t <= 0 or t >= T:
                return 0.0
            if t < ta:
                return a * t
            if t < ta + tc:
                return v
            return max(0.0, v - d * (t - ta - tc))

        def t_of_s(s):
            if s <= La:
                return math.sqrt(2 * s / a)
            if s <= La + v * tc:
                return ta + (s - La) / v
            r = L - s
            return T - math.sqrt(max(0.0, 2 * r / d))

        times = set()
        k = 0.0
        while k < ta:
            times.add(k)
            k += 1.0
        times.add(ta)
        times.add(ta + tc)
        k = 1.0
        while ta + tc + k < T:
            times.add(ta + tc + k)
            k += 1.0
        for c in cum[1:-1]:
            times.add(t_of_s(c))
        T_ms = int(round(T * 1000))
        rel = sorted({min(T_ms, int(round(x * 1000))) for x in times} | {T_ms})

        def at_s(s):
            s = min(max(s, 0.0), L)
            i = 0
            while i < len(lens) - 1 and s > cum[i + 1] - 1e-9:
                i += 1
            f = 0.0 if lens[i] == 0 else (s - cum[i]) / lens[i]
            f = min(max(f, 0.0), 1.0)
            p, q = pts[i], pts[i + 1]
            return (p[0] + (q[0] - p[0]) * f, p[1] + (q[1] - p[1]) * f, p[2] + (q[2] - p[2]) * f), brgs[i]

        for r in rel:
            t = r / 1000.0
            if r == T_ms:
                pos, brg = pts[-1], brgs[-1]
                spd = 0.0
            else:
                s = s_of(t)
                pos, brg = at_s(s + 1e-6)
                pos, _ = at_s(s)
                spd = v_of(t)
            self._add_knot(self.t + r, pos, spd, brg)
            self.course = brg
        self.t += T_ms
        self.pos = pts[-1]

    def _stop(self, seg):
        dur = int(round(float(seg["duration"]) * 1000))
        self._add_knot(self.t, self.pos, 0.0, self.course)
        start = self.t
        self.t += dur
        self._add_knot(self.t, self.pos, 0.0, self.course)
        self.stops.append(dict(start_ms=start, end_ms=self.t, lat=self.pos[0], lon=self.pos[1],
                               drift=bool(seg.get("drift", False)), name=seg.get("name")))

    def _truncate(self, want_ms):
        st = self.state(want_ms)
        self.knots = [k for k in self.knots if k[0] < want_ms]
        self.knots.append([want_ms, st[0], st[1], st[2], st[3], st[4]])
        self.intervals = [(a, min(b, want_ms), i) for (a, b, i) in self.intervals if a < want_ms]
        self.stops = [dict(s, end_ms=min(s["end_ms"], want_ms)) for s in self.stops if s["start_ms"] < want_ms]
        self.t = want_ms

    def state(self, t_ms):
        ks = self.knots
        hint = self._shint
        i = hint[0]
        if i >= len(ks) or ks[i][0] > t_ms:
            i = 0
        while i + 1 < len(ks) and ks[i + 1][0] <= t_ms:
            i += 1
        hint[0] = i
        k0 = ks[i]
        if i + 1 >= len(ks):
            return k0[1], k0[2], k0[3], k0[4], k0[5]
        k1 = ks[i + 1]
        f = (t_ms - k0[0]) / float(k1[0] - k0[0])
        return (k0[1] + (k1[1] - k0[1]) * f, k0[2] + (k1[2] - k0[2]) * f,
                k0[3] + (k1[3] - k0[3]) * f, k0[4] + (k1[4] - k0[4]) * f, k0[5])

    def interval(self, t_ms):
        iv = self.intervals
        hint = self._ihint
        i = hint[0]
        if i >= len(iv) or iv[i][0] > t_ms:
            i = 0
        while i + 1 < len(iv) and iv[i][1] <= t_ms:
            i += 1
        hint[0] = i
        return iv[i] if iv else (0, 0, dict(type="stop", env="city", drift=False))


def region_crossings(knots, t0, centre, radius):
    """Enter/exit events of the truth path w.r.t. a circle (local equirectangular about centre)."""
    lat0, lon0 = centre
    c = math.cos(math.radians(lat0))

    def xy(k):
        return (math.radians(k[2] - lon0) * R_EARTH * c, math.radians(k[1] - lat0) * R_EARTH)

    events = []
    p0 = xy(knots[0])
    inside0 = math.hypot(*p0) < radius
    inside = inside0
    for k0, k1 in zip(knots, knots[1:]):
        a0, a1 = xy(k0), xy(k1)
        dx, dy = a1[0] - a0[0], a1[1] - a0[1]
        A = dx * dx + dy * dy
        if A == 0:
            continue
        B = 2 * (a0[0] * dx + a0[1] * dy)
        C = a0[0] ** 2 + a0[1] ** 2 - radius * radius
        disc = B * B - 4 * A * C
        if disc <= 0:
            continue
        sq = math.sqrt(disc)
        for f in sorted([(-B - sq) / (2 * A), (-B + sq) / (2 * A)]):
            if 0.0 < f <= 1.0:
                # direction: derivative of distance^2 at f
                deriv = 2 * A * f + B
                entering = deriv < 0
                if entering and not inside:
                    inside = True
                elif not entering and inside:
                    inside = False
                else:
                    continue
                t_ms = k0[0] + f * (k1[0] - k0[0])
                events.append(dict(kind="enter" if entering else "exit",
                                   time=iso(t0 + dt.timedelta(milliseconds=round(t_ms)))))
    return inside0, events


# --------------------------------------------------------------------------- satellites

class Sky:
    def __init__(self, rng, keys):
        self.rng = rng
        self.sats = {}
        for key in keys:
            c = CONSTELLATIONS[key]
            prns = sorted(rng.sample(c["prns"], c["nsat"]))
            lst = []
            for prn in prns:
                lst.append(dict(prn=prn, A=rng.uniform(75, 105), B=rng.uniform(30, 37),
                                phi=rng.uniform(0, 2 * math.pi), az0=rng.uniform(0, 360),
                                azs=rng.choice([-1, 1]) * rng.uniform(0.4, 1.2),
                                bias=rng.gauss(0, 2.0)))
            self.sats[key] = (c, lst)
        self._cache_sec = None
        self._cache = None

    def geometry(self, tsec):
        """Visible satellites per constellation at integer second tsec: list of (prn, el, az, bias)."""
        if self._cache_sec == tsec:
            return self._cache
        out = {}
        for key, (c, lst) in self.sats.items():
            P = c["period"]
            vis = []
            for s in lst:
                ph = 2 * math.pi * tsec / P + s["phi"]
                el = s["A"] * math.sin(ph) - s["B"]
                if el < 5:
                    continue
                el = min(el, 88.0)
                az = (s["az0"] + 50 * math.sin(ph + 1.0) + s["azs"] * 360.0 * tsec / P) % 360.0
                vis.append((s["prn"], int(round(el)), int(round(az)) % 360, s["bias"]))
            out[key] = vis
        self._cache_sec, self._cache = tsec, out
        return out


# --------------------------------------------------------------------------- receiver simulation

class Epoch:
    __slots__ = ("index", "t_ms", "time", "lines", "fix", "addresses")


def simulate(spec, seed):
    """Returns (epochs, route, meta).  epochs: list of Epoch with .lines = [(address, text)]."""
    route = Route(spec)
    t0 = parse_time(spec["start"])
    rate = int(spec.get("rate_hz", 1))
    step_ms = 1000 // rate
    tdec = int(spec.get("time_decimals", 2))
    talker = spec.get("talker", "GP")
    nmea41 = str(spec.get("nmea_version", "2.3")) == "4.1"
    keys = spec.get("constellations", [talker if talker != "GN" else "GP"])
    sentences = spec.get("sentences", ["RMC", "VTG", "GGA", "GSA", "GSV"])
    slow = spec.get("every_s", {})          # e.g. {"GSA": 10, "GSV": 10}
    order = [s for s in spec.get("order", DEFAULT_ORDER) if s in sentences]
    variants = spec.get("order_variants", [])
    geoid = float(spec.get("geoid_sep", 47.0))
    wf = float(spec.get("white_fraction", 0.05))
    fixq = int(spec.get("fix_quality", 1))
    mode_ch = "D" if fixq == 2 else "A"
    initial_nofix_ms = int(float(spec.get("initial_nofix_s", 0)) * 1000)
    multi_gnss = len(keys) > 1

    rng_pos = random.Random("%d/pos" % seed)
    rng_dop = random.Random("%d/dop" % seed)
    rng_sky = random.Random("%d/sky" % seed)
    rng_vel = random.Random("%d/vel" % seed)
    rng_gst = random.Random("%d/gst" % seed)
    gm_n, gm_e, gm_u = (GaussMarkov(rng_pos, GM_TAU_POS) for _ in range(3))
    gm_h, gm_v = GaussMarkov(rng_dop, GM_TAU_DOP), GaussMarkov(rng_dop, GM_TAU_DOP)
    gm_or = GaussMarkov(rng_gst, 300.0)
    sky = Sky(rng_sky, keys)

    # outages
    outages = []
    for o in spec.get("outages", []):
        if "leg" in o:
            base = route.intervals[int(o["leg"])][0]
            start = base + int(round(float(o.get("offset_s", 0)) * 1000))
        else:
            start = int(round(float(o["at_s"]) * 1000))
        end = start + int(round(float(o["duration_s"]) * 1000))
        # snap to the epoch grid so that start/end are epoch times
        start = -(-start // step_ms) * step_ms
        end = -(-end // step_ms) * step_ms
        outages.append(dict(kind=o["kind"], start_ms=start, end_ms=end))

    def in_outage(t_ms, kind):
        return any(o["kind"] == kind and o["start_ms"] <= t_ms < o["end_ms"] for o in outages)

    # multipath bursts: the reported position jumps `metres` on `bearing` for a few epochs (drawn
    # from no random stream, so specs without bursts give the same bytes as before)
    bursts = []
    for m in spec.get("multipath", []):
        base = route.intervals[int(m["leg"])][0] if "leg" in m else 0
        start = base + int(round(float(m.get("offset_s", m.get("at_s", 0))) * 1000))
        start = -(-start // step_ms) * step_ms
        end = start + int(round(float(m["duration_s"]) * 1000))
        bursts.append(dict(start_ms=start, end_ms=end, metres=float(m["metres"]), bearing=float(m["bearing"])))

    def burst_at(t_ms):
        return next((b for b in bursts if b["start_ms"] <= t_ms < b["end_ms"]), None)

    n_epochs = route.end_ms // step_ms + 1
    dts = step_ms / 1000.0
    epochs = []
    hold = None           # static-hold (position, alt) while in a non-drift stop
    last_course = None
    for idx in range(n_epochs):
        t_ms = idx * step_ms
        tsec = t_ms // 1000
        # always advance the random processes (time-based), even when nothing is emitted
        gn, ge, gu = gm_n.step(dts), gm_e.step(dts), gm_u.step(dts)
        wn, we, wu = rng_pos.gauss(0, 1), rng_pos.gauss(0, 1), rng_pos.gauss(0, 1)
        hx, vx = gm_h.step(dts), gm_v.step(dts)
        orient = gm_or.step(dts)
        lat, lon, alt, spd, crs = route.state(t_ms)
        iv = route.interval(t_ms)
        info = iv[2]
        env = info["env"]
        hmean, hamp, snr_pen = ENV[env]
        if multi_gnss:
            hmean *= 0.8
        hdop = round(min(2.5, max(0.6, hmean + hamp * hx)), 2)
        vdop = round(min(4.0, max(hdop * 1.15, hdop * 1.5 + 0.12 * vx)), 2)
        pdop = round(math.hypot(hdop, vdop), 2)
        sig_h = hdop * UERE / math.sqrt(2.0)
        sig_v = vdop * UERE
        a, b = math.sqrt(1 - wf), math.sqrt(wf)
        en = sig_h * (a * gn + b * wn)
        ee = sig_h * (a * ge + b * we)
        eu = sig_v * (a * gu + b * wu)
        vel_noise = rng_vel.gauss(0, 1)
        crs_noise = rng_vel.gauss(0, 1)

        if in_outage(t_ms, "dropout"):
            continue
        tunnel = in_outage(t_ms, "tunnel") or t_ms < initial_nofix_ms
        fix = not tunnel

        static_stop = info["type"] == "stop" and not info["drift"]
        drift_stop = info["type"] == "stop" and info["drift"]
        if fix:
            if static_stop and spd == 0.0:
                if hold is None:
                    hold = (lat + math.degrees(en / R_EARTH),
                            lon + math.degrees(ee / (R_EARTH * math.cos(math.radians(lat)))),
                            alt + eu)
                rlat, rlon, ralt = hold
                rspd = 0.0
                rcrs = last_course
            else:
                hold = None
                rlat = lat + math.degrees(en / R_EARTH)
                rlon = lon + math.degrees(ee / (R_EARTH * math.cos(math.radians(lat))))
                ralt = alt + eu
                if drift_stop or spd == 0.0:
                    rspd = abs(vel_noise) * 0.06
                    base = last_course if last_course is not None else crs
                    rcrs = (base + 25.0 * crs_noise) % 360.0
                else:
                    rspd = max(0.0, spd + vel_noise * (0.03 + 0.02 * hdop))
                    sd = min(30.0, 2.0 / max(spd, 0.1))
                    rcrs = (crs + sd * crs_noise) % 360.0
                    if rspd < 0.1 and last_course is not None:
                        rcrs = last_course
            burst = burst_at(t_ms)
            if burst is not None:
                brg = math.radians(burst["bearing"])
                rlat += math.degrees(burst["metres"] * math.cos(brg) / R_EARTH)
                rlon += math.degrees(burst["metres"] * math.sin(brg) / (R_EARTH * math.cos(math.radians(lat))))
                rspd = max(rspd, 2.5)
            if rcrs is not None:
                last_course = rcrs
        t_utc = t0 + dt.timedelta(milliseconds=t_ms)
        tstr = fmt_time(t_utc, tdec)
        datestr = t_utc.strftime("%d%m%y")

        # satellites
        geo = sky.geometry(tsec)
        used = {}
        gsv_sats = {}
        total_cands = []
        snr_rng = random.Random("%d/snr/%d" % (seed, tsec))
        for key in keys:
            lst = []
            for prn, el, az, bias in geo[key]:
                snr = 27 + 0.3 * el - snr_pen + bias + snr_rng.gauss(0, 1.2)
                snr = int(round(min(52, max(10, snr))))
                if tunnel or snr < 18:
                    snr = None
                lst.append((prn, el, az, snr))
                if snr is not None and el >= 10 and snr >= 26:
                    total_cands.append((snr, key, prn))
            gsv_sats[key] = lst
            used[key] = []
        if fix:
            frac = min(1.0, max(0.45, 1.25 - 0.3 * hdop))
            n = max(min(4, len(total_cands)), int(round(len(total_cands) * frac)))
            if len(total_cands) < 4:  # never report a fix with < 4 satellites
                extra = [(0, k, p) for k in keys for (p, el, az, s) in gsv_sats[k]
                         if (s, k, p) not in total_cands]
                total_cands += extra[: 4 - len(total_cands)]
                n = len(total_cands)
            chosen = sorted(total_cands, key=lambda x: (-x[0], x[1], x[2]))[:n]
            for _, key, prn in chosen:
                if len(used[key]) < 12:
                    used[key].append(prn)
            for key in keys:
                used[key].sort()
        nused = sum(len(v) for v in used.values())
        if not nmea41:
            nused = min(nused, 12)

        lines = []
        latf, lath = fmt_lat(rlat) if fix else ("", "")
        lonf, lonh = fmt_lon(rlon) if fix else ("", "")
        sog_kn = "%.3f" % (rspd * KN_PER_MPS) if fix else ""
        sog_kmh = "%.3f" % (rspd * KMH_PER_MPS) if fix else ""
        cog = ("%.2f" % rcrs) if (fix and rcrs is not None) else ""
        navst = ("S" if fix else "V")

        def due(name):
            every = slow.get(name)
            if every is None:
                return True
            return t_ms % int(every * 1000) == 0

        ep_order = order
        for var in variants:
            a_ms = int((parse_time(var["from"]) - t0).total_seconds() * 1000)
            b_ms = int((parse_time(var["to"]) - t0).total_seconds() * 1000)
            if a_ms <= t_ms <= b_ms:
                ep_order = [s for s in var["order"] if s in sentences]

        for name in ep_order:
            if not due(name):
                continue
            if name == "GGA":
                if fix:
                    body = "%sGGA,%s,%s,%s,%s,%s,%d,%02d,%.2f,%.1f,M,%.1f,M,," % (
                        talker, tstr, latf, lath, lonf, lonh, fixq, nused, hdop, ralt, geoid)
                else:
                    body = "%sGGA,%s,,,,,0,00,99.99,,,,,," % (talker, tstr)
                lines.append((talker + "GGA", sentence(body)))
            elif name == "RMC":
                mode = mode_ch if fix else "N"
                body = "%sRMC,%s,%s,%s,%s,%s,%s,%s,%s,%s,,,%s" % (
                    talker, tstr, "A" if fix else "V", latf, lath, lonf, lonh, sog_kn, cog, datestr, mode)
                if nmea41:
                    body += "," + navst
                lines.append((talker + "RMC", sentence(body)))
            elif name == "VTG":
                mode = mode_ch if fix else "N"
                if fix:
                    body = "%sVTG,%s,T,,M,%s,N,%s,K,%s" % (talker, cog, sog_kn, sog_kmh, mode)
                else:
                    body = "%sVTG,,T,,M,,N,,K,N" % talker
                lines.append((talker + "VTG", sentence(body)))
            elif name == "GLL":
                mode = mode_ch if fix else "N"
                body = "%sGLL,%s,%s,%s,%s,%s,%s,%s" % (talker, latf, lath, lonf, lonh, tstr,
                                                       "A" if fix else "V", mode)
                lines.append((talker + "GLL", sentence(body)))
            elif name == "GNS":
                modes = "".join((mode_ch if (fix and used[k]) else "N") for k in keys)
                if fix:
                    body = "%sGNS,%s,%s,%s,%s,%s,%s,%02d,%.2f,%.1f,%.1f,," % (
                        talker, tstr, latf, lath, lonf, lonh, modes, nused, hdop, ralt, geoid)
                else:
                    body = "%sGNS,%s,,,,,%s,00,99.99,,,," % (talker, tstr, modes)
                if nmea41:
                    body += "," + navst
                lines.append((talker + "GNS", sentence(body)))
            elif name == "GSA":
                fixtype = "3" if fix else "1"
                pd, hd, vd = ("%.2f" % pdop, "%.2f" % hdop, "%.2f" % vdop) if fix else ("99.99",) * 3
                if nmea41:
                    for key in keys:
                        prns = ["%02d" % p for p in used[key]] + [""] * (12 - len(used[key]))
                        body = "%sGSA,A,%s,%s,%s,%s,%s,%d" % ("GN" if multi_gnss else talker, fixtype,
                                                            ",".join(prns), pd, hd, vd,
                                                            CONSTELLATIONS[key]["sysid"])
                        lines.append((body[:5], sentence(body)))
                else:
                    allp = [p for k in keys for p in used[k]][:12]
                    prns = ["%02d" % p for p in allp] + [""] * (12 - len(allp))
                    body = "%sGSA,A,%s,%s,%s,%s,%s" % (talker, fixtype, ",".join(prns), pd, hd, vd)
                    lines.append((body[:5], sentence(body)))
            elif name == "GSV":
                for key in keys:
                    c = CONSTELLATIONS[key]
                    sats = gsv_sats[key]
                    nmsg = max(1, (len(sats) + 3) // 4)
                    for m in range(nmsg):
                        chunk = sats[m * 4:(m + 1) * 4]
                        parts = ["%sGSV" % c["talker"], str(nmsg), str(m + 1), "%02d" % len(sats)]
                        for prn, el, az, snr in chunk:
                            parts += ["%02d" % prn, "%02d" % el, "%03d" % az, "" if snr is None else "%02d" % snr]
                        if nmea41:
                            parts.append("%X" % c["sig"])
                        body = ",".join(parts)
                        lines.append((c["talker"] + "GSV", sentence(body)))
            elif name == "GST":
                if fix:
                    smaj = sig_h * 1.12
                    smin = sig_h * 0.86
                    ori = (90.0 + 60.0 * orient) % 180.0
                    rms = sig_h * 0.55
                    body = "%sGST,%s,%.1f,%.2f,%.2f,%.1f,%.3f,%.3f,%.3f" % (
                        talker, tstr, rms, smaj, smin, ori, sig_h, sig_h, sig_v)
                else:
                    body = "%sGST,%s,,,,,,," % (talker, tstr)
                lines.append((talker + "GST", sentence(body)))
            elif name == "ZDA":
                body = "%sZDA,%s,%02d,%02d,%04d,00,00" % (talker, tstr, t_utc.day, t_utc.month, t_utc.year)
                lines.append((talker + "ZDA", sentence(body)))
        e = Epoch()
        e.index, e.t_ms, e.time, e.lines, e.fix = idx, t_ms, t_utc, lines, fix
        epochs.append(e)

    meta = dict(t0=t0, rate=rate, outages=outages, n_epochs_grid=n_epochs, keys=keys, talker=talker,
                nmea41=nmea41, sentences=sentences, bursts=bursts)
    return epochs, route, meta


# --------------------------------------------------------------------------- truth

def build_truth(spec, seed, epochs, route, meta, output_name):
    t0 = meta["t0"]

    def at(ms):
        return iso(t0 + dt.timedelta(milliseconds=ms))

    path = [[at(k[0]), round(k[1], 8), round(k[2], 8), round(k[3], 2), round(k[4], 3), round(k[5], 2)]
            for k in route.knots]
    counts = {}
    for e in epochs:
        for addr, _ in e.lines:
            counts[addr] = counts.get(addr, 0) + 1
    end = t0 + dt.timedelta(milliseconds=route.end_ms)
    midnight = None
    if end.date() != t0.date():
        midnight = iso(dt.datetime.combine(end.date(), dt.time(0, 0), tzinfo=dt.timezone.utc))
    has_pos = any(a[2:] in ("GGA", "RMC", "GLL", "GNS") for a in counts)
    regions = []
    for r in spec.get("regions", []):
        inside0, events = region_crossings(route.knots, t0, r["centre"], float(r["radius_m"]))
        regions.append(dict(id=r["id"], centre=r["centre"], radius_m=r["radius_m"],
                            inside_at_start=inside0, events=events))
    truth = {
        "scenario": spec["name"],
        "description": spec.get("description", ""),
        "file": output_name,
        "generator": "tools/gen-fixture",
        "seed": seed,
        "start_utc": at(0),
        "end_utc": at(route.end_ms),
        "first_epoch_utc": iso(epochs[0].time) if epochs else None,
        "last_epoch_utc": iso(epochs[-1].time) if epochs else None,
        "rate_hz": meta["rate"],
        "time_decimals": int(spec.get("time_decimals", 2)),
        "nmea_version": str(spec.get("nmea_version", "2.3")),
        "talker": meta["talker"],
        "constellations": meta["keys"],
        "sentence_types": sorted(counts),
        "sentence_counts": dict(sorted(counts.items())),
        "sentence_order": [s for s in spec.get("order", DEFAULT_ORDER) if s in meta["sentences"]],
        "order_variants": spec.get("order_variants", []),
        "every_s": spec.get("every_s", {}),
        "date_known": any(a[2:] in ("RMC", "ZDA") for a in counts),
        "geoid_separation_m": float(spec.get("geoid_sep", 47.0)),
        "accuracy_convention": {
            "uere_m": UERE,
            "hAcc_m": "HDOP * 5.0",
            "vAcc_m": "VDOP * 5.0",
            "per_axis_horizontal_sigma_m": "hAcc / sqrt(2)",
            "vertical_sigma_m": "vAcc",
            "gst": "GST lat/lon sigma = hAcc/sqrt(2), alt sigma = vAcc (computed from the printed HDOP/VDOP)",
            "noise_model": "first-order Gauss-Markov (tau %.0f s) + %.0f%% white, scaled by current sigma; "
                           "non-drift stops use static hold (position frozen)" % (
                               GM_TAU_POS, 100 * float(spec.get("white_fraction", 0.05))),
        },
        "truth_path_format": ["t_iso", "lat", "lon", "alt_msl_m", "speed_mps", "course_deg"],
        "truth_path_note": "true position at any time = linear interpolation (in lat/lon/alt/speed) between "
                           "consecutive points; course_deg is the course of the motion starting at that point",
        "path": path,
        "stops": [dict(name=s["name"], start=at(s["start_ms"]), end=at(s["end_ms"]), lat=round(s["lat"], 8),
                       lon=round(s["lon"], 8), drift=s["drift"]) for s in route.stops],
        "outages": [dict(kind=o["kind"], start=at(o["start_ms"]), end=at(o["end_ms"]),
                         note="epochs with start <= t < end affected") for o in meta["outages"]],
        "midnight_crossing_utc": midnight,
        "epochs_total": len(epochs),
        "epochs_with_valid_position": sum(1 for e in epochs if e.fix) if has_pos else 0,
        "epochs_without_fix": sum(1 for e in epochs if not e.fix),
        "epochs_dropped": meta["n_epochs_grid"] - len(epochs),
        "lines_total": sum(len(e.lines) for e in epochs),
        "regions": regions,
        "region_distance_note": "distance = local equirectangular about the centre, R = 6371008.8 m",
    }
    if spec.get("initial_nofix_s"):
        truth["initial_nofix_s"] = spec["initial_nofix_s"]
    if meta["bursts"]:
        truth["multipath"] = [dict(start=at(b["start_ms"]), end=at(b["end_ms"]), metres=b["metres"],
                                   bearing=b["bearing"], note="epochs with start <= t < end jumped")
                              for b in meta["bursts"]]
    if "visit_truth" in spec:
        truth.update(visit_truth(spec["visit_truth"], route, at))
    return truth


def path_between(knots, a_ms, b_ms):
    """Metres along the truth path from a_ms to b_ms (local equirectangular per piece), and the
    highest true speed in between."""
    def lerp(k0, k1, t):
        f = (t - k0[0]) / float(k1[0] - k0[0])
        return [t, k0[1] + (k1[1] - k0[1]) * f, k0[2] + (k1[2] - k0[2]) * f, 0.0, k0[4] + (k1[4] - k0[4]) * f]
    pts = []
    for k0, k1 in zip(knots, knots[1:]):
        if k1[0] <= a_ms or k0[0] >= b_ms:
            continue
        if not pts:
            pts.append(lerp(k0, k1, max(a_ms, k0[0])))
        pts.append(lerp(k0, k1, min(b_ms, k1[0])))
    dist = sum(seg_metrics(p[1:3], q[1:3])[0] for p, q in zip(pts, pts[1:]))
    return dist, max((p[4] for p in pts), default=0.0)


def visit_truth(vt, route, at):
    """The true visits (stops of at least min_duration_s; one that runs to the end of the log is
    open) and the trips between consecutive visits, along the truth path."""
    min_ms = int(float(vt.get("min_duration_s", 180)) * 1000)
    # A stop that begins where the one before it ends (the pad after the last stop) is the same stay.
    stops = []
    for s in route.stops:
        if stops and stops[-1]["end_ms"] == s["start_ms"]:
            stops[-1] = dict(stops[-1], end_ms=s["end_ms"])
        else:
            stops.append(s)
    stays = [s for s in stops if s["end_ms"] - s["start_ms"] >= min_ms]
    visits = []
    for s in stays:
        open_end = s["end_ms"] >= route.end_ms
        visits.append(dict(name=s["name"], arrival=at(s["start_ms"]), departure=None if open_end else at(s["end_ms"]),
                           duration_s=round((s["end_ms"] - s["start_ms"]) / 1000.0, 3), open=open_end,
                           lat=round(s["lat"], 8), lon=round(s["lon"], 8)))
    trips = []
    for a, b in zip(stays, stays[1:]):
        dist, vmax = path_between(route.knots, a["end_ms"], b["start_ms"])
        dur = (b["start_ms"] - a["end_ms"]) / 1000.0
        trips.append(dict(start=at(a["end_ms"]), end=at(b["start_ms"]), duration_s=round(dur, 3),
                          distance_m=round(dist, 1), avg_speed_mps=round(dist / dur, 3) if dur > 0 else 0.0,
                          max_speed_mps=round(vmax, 3), start_lat=round(a["lat"], 8), start_lon=round(a["lon"], 8),
                          end_lat=round(b["lat"], 8), end_lon=round(b["lon"], 8)))
    short = [dict(name=s["name"], start=at(s["start_ms"]), duration_s=round((s["end_ms"] - s["start_ms"]) / 1000.0, 3))
             for s in stops if s["end_ms"] - s["start_ms"] < min_ms]
    return {"visit_min_duration_s": min_ms / 1000.0, "visits": visits, "trips": trips, "short_stops": short,
            "visits_note": "a visit is a stop of at least visit_min_duration_s; arrival/departure are the true "
                           "stop's start and end; open = still there at the end of the log (departure null); "
                           "a trip runs from one visit's departure to the next one's arrival, its distance "
                           "along the truth path"}


def truth_path_for(output):
    base = output
    for ext in (".gz", ".nmea"):
        if base.endswith(ext):
            base = base[: -len(ext)]
    return base + ".truth.json"


def write_json(path, obj):
    with open(path, "w", encoding="utf-8") as f:
        json.dump(obj, f, indent=1, ensure_ascii=True)
        f.write("\n")


def write_bytes(path, data):
    if path.endswith(".gz"):
        buf = io.BytesIO()
        with gzip.GzipFile(filename="", mode="wb", fileobj=buf, mtime=0, compresslevel=9) as g:
            g.write(data)
        data = buf.getvalue()
    with open(path, "wb") as f:
        f.write(data)


# --------------------------------------------------------------------------- corruption

def esc(b):
    out = []
    for c in b:
        if c == 0x5C:
            out.append("\\\\")
        elif c == 0x0D:
            out.append("\\r")
        elif c == 0x0A:
            out.append("\\n")
        elif 0x20 <= c < 0x7F:
            out.append(chr(c))
        else:
            out.append("\\x%02x" % c)
    return "".join(out)


def _reck(text):
    """Recompute checksum of a '$...*hh\\r\\n' sentence after editing its body."""
    body = text[1:text.index("*")]
    return sentence(body, text[0])


def _field_edit(text, idx, value):
    body = text[1:text.index("*")]
    f = body.split(",")
    f[idx] = value
    return sentence(",".join(f), text[0])


INSERTS = {
    "unknown_sentence": lambda e: sentence("GPXYZ,%s,1,2,3,ABC" % fmt_time(e.time, 2)).encode(),
    "proprietary_pubx": lambda e: sentence(
        "PUBX,00,%s,4808.24580,N,01134.52940,E,527.312,G3,2.1,3.0,0.007,77.52,0.007,,0.92,1.19,0.77,9,0,0"
        % fmt_time(e.time, 2)).encode(),
    "proprietary_pgrme": lambda e: sentence("PGRME,15.0,M,45.0,M,25.0,M").encode(),
    "ais_vdm": lambda e: sentence("AIVDM,1,1,,A,13aGmP0P00PD;88MD5MTDww@2<0L,0", "!").encode(),
    "binary_garbage_line": lambda e: b"\x00\xff\xfe\x13\x80\x00\x1b[2J\x7f\xff\x00\x00\xb5b\x01\x07\x00\r\n",
    "overlong_line": lambda e: (("ABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789,.-" * 40)[:1500]).encode() + b"\r\n",
}
PREFIXES = {
    "nul_run_prefix": b"\x00" * 16,
    "ff_run_prefix": b"\xff" * 8 + b"\x00\xff",
}


def corrupt(spec, base_spec, seed):
    epochs, route, meta = simulate(base_spec, seed)
    by_index = {e.index: e for e in epochs}
    # records: list of dict(bytes, epoch, addr, intact, is_fix_sentence, corruption)
    plan = {}
    for c in spec["corruptions"]:
        plan.setdefault(c["epoch"], []).append(c)
    records = []
    injected = []
    fix_ok = {}   # epoch index -> set of intact valid fix sentences
    for e in epochs:
        pl = plan.get(e.index, [])
        for c in pl:
            if c["class"] in INSERTS and c.get("where", "before") == "before":
                records.append(dict(data=INSERTS[c["class"]](e), corruption=c, epoch=e.index))
        for li, (addr, text) in enumerate(e.lines):
            kind = addr[2:]
            hits = [c for c in pl if c.get("sentence") == addr and c.get("nth", 0) == sum(
                1 for a, _ in e.lines[:li] if a == addr)]
            data = text.encode()
            original = data
            intact = True
            prefix = b""
            for c in hits:
                k = c["class"]
                if k == "bad_checksum":
                    cs = int(text[text.index("*") + 1:text.index("*") + 3], 16) ^ 0x5A
                    data = (text[:text.index("*") + 1] + "%02X" % cs + "\r\n").encode()
                    intact = False
                elif k == "missing_checksum":
                    data = (text[:text.index("*")] + "\r\n").encode()
                    intact = False
                elif k == "nonhex_checksum":
                    data = (text[:text.index("*") + 1] + "ZQ\r\n").encode()
                    intact = False
                elif k == "truncated":
                    cut = int(len(text) * 0.55)
                    data = (text[:cut] + "\r\n").encode()
                    intact = False
                elif k == "lf_only_ending":
                    data = (text[:-2] + "\n").encode()
                elif k == "cr_only_ending":
                    data = (text[:-2] + "\r").encode()
                elif k in PREFIXES:
                    prefix = PREFIXES[k]
                elif k == "empty_numeric_fields":
                    t = text
                    if kind == "GGA":
                        for fi in (2, 3, 4, 5):
                            t = _field_edit(t, fi, "")
                    else:
                        for fi in (7,):  # RMC speed empty and lat empty
                            t = _field_edit(t, fi, "")
                        for fi in (3, 4):
                            t = _field_edit(t, fi, "")
                    data = t.encode()
                    intact = False
                elif k == "letters_in_numeric":
                    fi = 2 if kind == "GGA" else 5
                    f = text[1:text.index("*")].split(",")
                    v = f[fi]
                    v = v[:2] + "a" + v[3:] if kind == "GGA" else v[:3] + "O" + v[4:]
                    data = _field_edit(text, fi, v).encode()
                    intact = False
                elif k == "out_of_range_minutes":
                    fi = 2 if kind == "GGA" else 3
                    f = text[1:text.index("*")].split(",")
                    data = _field_edit(text, fi, f[fi][:2] + "63" + f[fi][4:]).encode()
                    intact = False
                elif k == "out_of_range_lat":
                    fi = 2 if kind == "GGA" else 3
                    data = _field_edit(text, fi, "9130.00000").encode()
                    intact = False
                elif k == "out_of_range_month":
                    f = text[1:text.index("*")].split(",")
                    data = _field_edit(text, 9, f[9][:2] + "13" + f[9][4:]).encode()
                    intact = False
                elif k == "out_of_range_hour":
                    f = text[1:text.index("*")].split(",")
                    data = _field_edit(text, 1, "25" + f[1][2:]).encode()
                    intact = False
                elif k == "too_few_fields":
                    f = text[1:text.index("*")].split(",")
                    data = sentence(",".join(f[:4])).encode()
                    intact = False
                else:
                    raise ValueError("unknown corruption class %r" % k)
            if hits and prefix:
                records.append(dict(data=prefix, corruption=[c for c in hits if c["class"] in PREFIXES][0],
                                    epoch=e.index, precedes=addr))
            rec = dict(data=data, epoch=e.index, addr=addr, intact=intact, original=original)
            mods = [c for c in hits if c["class"] not in PREFIXES]
            if mods:
                rec["corruption"] = mods[0]
            records.append(rec)
            if intact and e.fix and kind in ("GGA", "RMC"):
                fix_ok.setdefault(e.index, set()).add(kind)
        for c in pl:
            if c["class"] in INSERTS and c.get("where") == "after":
                records.append(dict(data=INSERTS[c["class"]](e), corruption=c, epoch=e.index))
    # serialise and locate
    out = bytearray()
    intact_counts = {}
    for r in records:
        off = len(out)
        line_no = out.count(b"\n") + 1
        out += r["data"]
        if "corruption" in r:
            c = r["corruption"]
            entry = dict(line=line_no, byte_offset=off, cls=c["class"], epoch_utc=iso(by_index[r["epoch"]].time),
                         sentence=r.get("addr"), length=len(r["data"]), bytes=esc(r["data"]))
            if "original" in r and r["data"] != r["original"]:
                entry["original"] = esc(r["original"])
            if c["class"] in PREFIXES:
                entry["note"] = "bytes directly precede an intact %s sentence on the same line" % r["precedes"]
                entry["sentence"] = r["precedes"]
            if c["class"] == "cr_only_ending":
                entry["note"] = "sentence is intact; terminated by CR only, so the next sentence shares its LF line"
            if c["class"] == "lf_only_ending":
                entry["note"] = "sentence is intact; terminated by LF only"
            entry["sentence_valid"] = c["class"] in ("lf_only_ending", "cr_only_ending") or c["class"] in PREFIXES
            if c["class"] in INSERTS:
                entry["sentence_valid"] = c["class"] in ("unknown_sentence", "proprietary_pubx",
                                                          "proprietary_pgrme", "ais_vdm")
                entry["sentence"] = None
            if c.get("comment"):
                entry["comment"] = c["comment"]
            injected.append(entry)
        if r.get("addr") and r.get("intact"):
            intact_counts[r["addr"]] = intact_counts.get(r["addr"], 0) + 1
    for j in injected:
        j["class"] = j.pop("cls")
    data = bytes(out)
    return data, epochs, route, meta, injected, fix_ok, intact_counts


# --------------------------------------------------------------------------- drivers

def load_spec(path):
    with open(path, encoding="utf-8") as f:
        return json.load(f)


def generate(spec_path, output, seed=None, quiet=False):
    spec = load_spec(spec_path)
    if spec.get("type") == "corrupt" and seed is None:
        seed = load_spec(os.path.join(os.path.dirname(spec_path), spec["base"])).get("seed", 1)
    seed = int(spec.get("seed", 1) if seed is None else seed)
    name = os.path.basename(output)
    if spec.get("type") == "corrupt":
        base_spec = load_spec(os.path.join(os.path.dirname(spec_path), spec["base"]))
        data, epochs, route, meta, injected, fix_ok, intact_counts = corrupt(spec, base_spec, seed)
        truth = build_truth(base_spec, seed, epochs, route, meta, name)
        truth["scenario"] = spec["name"]
        truth["description"] = spec.get("description", "")
        truth["derived_from"] = base_spec["name"]
        truth["line_counting"] = ("line = 1 + number of LF (0x0A) bytes before byte_offset; byte_offset is "
                                  "0-based from the start of the file")
        classes = {}
        for j in injected:
            classes[j["class"]] = classes.get(j["class"], 0) + 1
        gga = sum(1 for v in fix_ok.values() if "GGA" in v)
        rmc = sum(1 for v in fix_ok.values() if "RMC" in v)
        truth["corruptions"] = injected
        truth["corruption_count"] = len(injected)
        truth["corruption_counts_by_class"] = dict(sorted(classes.items()))
        truth["lf_lines_total"] = data.count(b"\n")
        truth["bytes_total"] = len(data)
        truth["intact_sentence_counts"] = dict(sorted(intact_counts.items()))
        truth["intact_sentences_total"] = sum(intact_counts.values())
        truth["valid_position_fixes"] = {
            "gga": gga,
            "rmc": rmc,
            "epochs_with_any_valid_fix_sentence": len(fix_ok),
            "epochs_with_both": sum(1 for v in fix_ok.values() if len(v) == 2),
            "note": "counts intact GGA (quality>0) / RMC (status A) sentences; every sentence listed in "
                    "corruptions with sentence_valid=false must be rejected whole; the sentences next to "
                    "prefix garbage / CR-only endings are GSV/VTG, so fix counts do not depend on resync",
        }
        truth["epochs_with_valid_position"] = len(fix_ok)
        for k in ("sentence_counts", "sentence_types", "lines_total"):
            truth["base_" + k] = truth.pop(k)
    else:
        epochs, route, meta = simulate(spec, seed)
        data = "".join(text for e in epochs for _, text in e.lines).encode("ascii")
        truth = build_truth(spec, seed, epochs, route, meta, name)
    write_bytes(output, data)
    write_json(truth_path_for(output), truth)
    if not quiet:
        print("%-22s %9d bytes raw  %7d lines  epochs %6d  fixes %6d  duration %ds" % (
            name, len(data), data.count(b"\n"), truth["epochs_total"] if "corruptions" not in truth else
            len(epochs), truth["epochs_with_valid_position"], route.end_ms // 1000))
    return truth


def main(argv=None):
    ap = argparse.ArgumentParser(description="Deterministic NMEA 0183 fixture generator")
    ap.add_argument("scenario", nargs="?", help="route spec JSON")
    ap.add_argument("-o", "--output", help="output .nmea (or .nmea.gz) path")
    ap.add_argument("--seed", type=int, help="override the seed in the spec")
    ap.add_argument("--all", action="store_true", help="regenerate every fixture from fixtures/routes/*.json")
    args = ap.parse_args(argv)
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    if args.all:
        fx = os.path.join(root, "fixtures")
        for p in sorted(glob.glob(os.path.join(fx, "routes", "*.json"))):
            spec = load_spec(p)
            generate(p, os.path.join(fx, spec["output"]), args.seed)
        return 0
    if not args.scenario or not args.output:
        ap.error("need SCENARIO.json -o OUTPUT, or --all")
    generate(args.scenario, args.output, args.seed)
    return 0


if __name__ == "__main__":
    sys.exit(main())
