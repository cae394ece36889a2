#!/usr/bin/env python3
# Generates the WGS84 geodesic reference table used by GeoTests:
#     Tests/GeoTests/Resources/geodesic-reference.csv
#
# How to regenerate (from the repository root):
#     pip install geographiclib        # only needed here, not in CI
#     tools/geodesic-reference.py          # rewrites the CSV in place
#     tools/geodesic-reference.py -o -     # or print it to stdout instead
#     git diff --stat Tests/GeoTests/Resources/geodesic-reference.csv
#
# Output is deterministic: the case list below is fixed (the "random-*" cases
# come from a fixed-seed random.Random), and each value is written with
# repr(), i.e. the shortest decimal string that round-trips to the same IEEE
# double, so Swift's Double(String) reads back exactly what GeographicLib
# computed.  Re-running with the same geographiclib version must give a
# byte-identical file (checked with geographiclib 2.1).
#
# Every row is the result of Geodesic.WGS84.Inverse(lat1, lon1, lat2, lon2):
#   s12_m     geodesic distance in metres
#   azi1_deg  forward azimuth at point 1, degrees clockwise from north
#   azi2_deg  forward azimuth at point 2 (direction of travel on arrival)
# Azimuths are in GeographicLib's range (-180, 180]; compare them modulo 360.
# Rows built "from a direction" (short hops etc.) first call Direct(lat1, lon1,
# azi, s) to get point 2, then Inverse on the exact doubles, so every row is
# self-consistent and can be used for both directions of the problem:
#   Inverse test:  (lat1, lon1, lat2, lon2) -> s12_m, azi1_deg, azi2_deg
#   Direct test:   (lat1, lon1, azi1_deg, s12_m) -> lat2, lon2, azi2_deg
#
# Caveats for the test author:
#   * identical-* rows: s12 = 0; the azimuths are arbitrary (GeographicLib
#     reports 180) - do not compare them.
#   * rows with a point on a pole (|lat| = 90): the azimuth at that point
#     depends on the longitude convention at the pole; compare distance only
#     (or the azimuth at the non-pole end).
#   * antipodal-* rows: nearly antipodal pairs where Vincenty's inverse method
#     fails to converge or is inaccurate; skip or loosen them on the Swift side.
#   * pole-to-pole / antimeridian / equator rows include the special cases a
#     naive implementation gets wrong (lon wrap, equatorial geodesics, etc.).
#   * lon2 from Direct is reduced to [-180, 180).

import argparse
import os
import random
import sys

try:
    from geographiclib.geodesic import Geodesic
except ImportError:  # pragma: no cover
    sys.exit("geodesic-reference: needs geographiclib (pip install geographiclib)")

G = Geodesic.WGS84
ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DEFAULT_OUT = os.path.join(ROOT, "Tests", "GeoTests", "Resources", "geodesic-reference.csv")
HEADER = "case,lat1,lon1,lat2,lon2,s12_m,azi1_deg,azi2_deg"


def num(x):
    """Full-precision, round-trippable decimal; normalise -0.0 to 0.0."""
    x = float(x)
    if x == 0.0:
        x = 0.0
    return repr(x)


def build_cases():
    """Return a list of (label, lat1, lon1, lat2, lon2)."""
    rows = []

    def pair(label, lat1, lon1, lat2, lon2):
        rows.append((label, float(lat1), float(lon1), float(lat2), float(lon2)))

    def hop(label, lat1, lon1, azi, s):
        d = G.Direct(lat1, lon1, azi, s)
        pair(label, lat1, lon1, d["lat2"], d["lon2"])

    # --- short distances: 1 m, 10 m, 100 m, 1 km, several directions/latitudes
    short_starts = [
        (0.0, 0.0),
        (37.5, -122.25),
        (-33.8688, 151.2093),
        (51.4779, -0.0015),
        (-51.3, -59.9),
        (64.1466, -21.9426),
        (78.2232, 15.6267),
    ]
    azimuths = [0.0, 90.0, 225.0, -30.0]
    for (lat, lon) in short_starts:
        for s, tag in [(1.0, "1m"), (10.0, "10m"), (100.0, "100m"), (1000.0, "1km")]:
            for azi in azimuths:
                # keep the table ~200 rows: all four azimuths at 1 m and 1 km,
                # two at 10 m and 100 m
                if tag in ("10m", "100m") and azi in (225.0, -30.0):
                    continue
                hop("short-%s-lat%g-azi%g" % (tag, lat, azi), lat, lon, azi, s)

    # --- city scale (2-50 km)
    for (lat, lon, azi, s) in [
        (48.8566, 2.3522, 45.0, 5000.0),
        (40.7128, -74.0060, 160.0, 12000.0),
        (-23.5505, -46.6333, 300.0, 25000.0),
        (35.6762, 139.6503, 200.0, 50000.0),
        (59.3293, 18.0686, 90.0, 8000.0),
        (-1.2921, 36.8219, 10.0, 2000.0),
    ]:
        hop("city-%gkm" % (s / 1000.0), lat, lon, azi, s)
    pair("city-london-heathrow-city", 51.4700, -0.4543, 51.5048, 0.0495)
    pair("city-sf-oakland", 37.7749, -122.4194, 37.8044, -122.2712)
    pair("city-manhattan-jfk", 40.7831, -73.9712, 40.6413, -73.7781)
    pair("city-sydney-parramatta", -33.8688, 151.2093, -33.8150, 151.0011)

    # --- continental
    for (label, a, b, c, d) in [
        ("paris-berlin", 48.8566, 2.3522, 52.5200, 13.4050),
        ("madrid-moscow", 40.4168, -3.7038, 55.7558, 37.6173),
        ("newyork-losangeles", 40.7128, -74.0060, 34.0522, -118.2437),
        ("seattle-miami", 47.6062, -122.3321, 25.7617, -80.1918),
        ("sydney-perth", -33.8688, 151.2093, -31.9505, 115.8605),
        ("beijing-mumbai", 39.9042, 116.4074, 19.0760, 72.8777),
        ("cairo-capetown", 30.0444, 31.2357, -33.9249, 18.4241),
        ("bogota-buenosaires", 4.7110, -74.0721, -34.6037, -58.3816),
        ("anchorage-mexicocity", 61.2181, -149.9003, 19.4326, -99.1332),
        ("helsinki-lisbon", 60.1699, 24.9384, 38.7223, -9.1393),
    ]:
        pair("continental-" + label, a, b, c, d)

    # --- intercontinental
    for (label, a, b, c, d) in [
        ("london-newyork", 51.5074, -0.1278, 40.7128, -74.0060),
        ("london-tokyo", 51.5074, -0.1278, 35.6762, 139.6503),
        ("sydney-santiago", -33.8688, 151.2093, -33.4489, -70.6693),
        ("johannesburg-singapore", -26.2041, 28.0473, 1.3521, 103.8198),
        ("losangeles-auckland", 34.0522, -118.2437, -36.8485, 174.7633),
        ("reykjavik-capetown", 64.1466, -21.9426, -33.9249, 18.4241),
        ("honolulu-dubai", 21.3069, -157.8583, 25.2048, 55.2708),
        ("saopaulo-beijing", -23.5505, -46.6333, 39.9042, 116.4074),
        ("jfk-sin", 40.6413, -73.7781, 1.3644, 103.9915),
        ("mcmurdo-ushuaia", -77.8419, 166.6863, -54.8019, -68.3030),
    ]:
        pair("intercontinental-" + label, a, b, c, d)

    # --- along the equator (equatorial geodesics up to (1-f)*180 deg apart)
    for dlon in [0.001, 1.0, 10.0, 45.0, 90.0, 135.0, 170.0, 179.0]:
        pair("equator-dlon%g" % dlon, 0.0, 0.0, 0.0, dlon)
    pair("equator-westward", 0.0, 30.0, 0.0, -60.0)

    # --- meridional (same longitude)
    for (lat1, lat2, lon) in [
        (0.0, 1.0, 0.0),
        (0.0, 45.0, 10.0),
        (-45.0, 45.0, -75.0),
        (0.0, 90.0, 0.0),
        (60.0, 61.0, 25.0),
        (-10.0, -80.0, 140.0),
        (10.0, -10.0, 179.0),
        (89.0, 90.0, -120.0),
    ]:
        pair("meridian-%g-to-%g" % (lat1, lat2), lat1, lon, lat2, lon)
    # over the pole along a meridian pair (lon and lon+180)
    pair("meridian-over-pole", 80.0, 30.0, 80.0, -150.0)

    # --- pole to pole
    pair("pole-to-pole", 90.0, 0.0, -90.0, 0.0)
    pair("pole-to-pole-dlon90", 90.0, 0.0, -90.0, 90.0)
    pair("pole-to-pole-south-north", -90.0, 0.0, 90.0, 45.0)

    # --- near the poles
    pair("near-pole-north-across", 89.9, 0.0, 89.9, 180.0)
    pair("near-pole-north-90deg", 89.99, 10.0, 89.99, 100.0)
    pair("near-pole-north-to-pole", 89.5, 45.0, 90.0, 0.0)
    pair("near-pole-south-across", -89.9, -60.0, -89.9, 120.0)
    pair("near-pole-south-to-pole", -89.999, 123.0, -90.0, 0.0)
    pair("near-pole-north-1e-6", 89.999999, 0.0, 89.999999, 90.0)
    hop("near-pole-north-hop-100m", 89.9999, 0.0, 30.0, 100.0)
    hop("near-pole-south-hop-1km", -89.995, 77.0, 200.0, 1000.0)
    pair("near-pole-north-lat88", 88.0, -170.0, 88.0, 170.0)
    pair("near-pole-svalbard-alert", 78.2232, 15.6267, 82.5018, -62.3481)

    # --- across the antimeridian
    for lat in [0.0, 30.0, -45.0, 65.0, -75.0]:
        pair("antimeridian-179.9-lat%g" % lat, lat, 179.9, lat, -179.9)
    pair("antimeridian-tiny", 10.0, 179.99999, 10.0, -179.99999)
    pair("antimeridian-diag", -16.5, 179.5, -17.5, -179.0)
    pair("antimeridian-fiji-samoa", -18.1248, 178.4501, -13.7590, -172.1046)
    pair("antimeridian-lon180-vs-minus180", 20.0, 180.0, 20.0, -180.0)
    hop("antimeridian-hop-east-10km", 51.0, 179.99, 90.0, 10000.0)

    # --- identical points (s12 = 0; azimuths arbitrary)
    for (label, lat, lon) in [
        ("origin", 0.0, 0.0),
        ("mid-latitude", 45.0, 10.0),
        ("sydney", -33.8688, 151.2093),
        ("lat89", 89.0, -45.0),
        ("north-pole", 90.0, 0.0),
        ("equator-lon180", 0.0, 180.0),
    ]:
        pair("identical-" + label, lat, lon, lat, lon)

    # --- nearly antipodal (Vincenty fails to converge / is inaccurate here)
    for (label, a, b, c, d) in [
        ("equator-179.5", 0.0, 0.0, 0.5, 179.5),
        ("equator-179.7", 0.0, 0.0, 0.5, 179.7),
        ("equator-exact-180", 0.0, 0.0, 0.0, 180.0),
        ("equator-179.9", 0.0, 0.0, 0.0, 179.9),
        ("lat30", 30.0, 0.0, -30.0, 179.8),
        ("lat-30-offset", -30.0, 0.0, 29.9, 179.8),
        ("lat45", 45.0, 10.0, -45.0, -170.3),
        ("lat60", 60.0, -20.0, -59.95, 159.9),
        ("lat10", 10.0, 50.0, -10.1, -130.05),
        ("lat1", 1.0, 0.0, -1.0, 179.4),
        ("lat20-dlon179.6", 20.0, 0.0, -20.05, 179.6),
    ]:
        pair("antipodal-" + label, a, b, c, d)

    # --- global, fixed-seed pseudo-random pairs
    rnd = random.Random(84)  # WGS84
    for i in range(30):
        lat1 = rnd.uniform(-85.0, 85.0)
        lon1 = rnd.uniform(-180.0, 180.0)
        lat2 = rnd.uniform(-85.0, 85.0)
        lon2 = rnd.uniform(-180.0, 180.0)
        # round to 1e-9 deg so the inputs are easy to read and copy
        pair("random-%02d" % i, round(lat1, 9), round(lon1, 9), round(lat2, 9), round(lon2, 9))

    return rows


def main():
    ap = argparse.ArgumentParser(description="Regenerate the WGS84 geodesic reference CSV (GeographicLib).")
    ap.add_argument("-o", "--output", default=DEFAULT_OUT, help="output file, or - for stdout (default: %(default)s)")
    args = ap.parse_args()

    cases = build_cases()
    labels = [c[0] for c in cases]
    dupes = sorted({l for l in labels if labels.count(l) > 1})
    if dupes:
        sys.exit("geodesic-reference: duplicate case labels: %s" % ", ".join(dupes))

    lines = [HEADER]
    for (label, lat1, lon1, lat2, lon2) in cases:
        r = G.Inverse(lat1, lon1, lat2, lon2)
        lines.append(",".join([label] + [num(v) for v in (lat1, lon1, lat2, lon2, r["s12"], r["azi1"], r["azi2"])]))
    text = "\n".join(lines) + "\n"

    if args.output == "-":
        sys.stdout.write(text)
    else:
        os.makedirs(os.path.dirname(os.path.abspath(args.output)), exist_ok=True)
        with open(args.output, "w", newline="\n") as f:
            f.write(text)
        print("wrote %d rows to %s" % (len(cases), os.path.relpath(args.output)), file=sys.stderr)


if __name__ == "__main__":
    main()
