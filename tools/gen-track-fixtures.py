#!/usr/bin/env python3
"""Writes fixtures/tracks/: the first two minutes of fixtures/walk-15min.nmea in every track file
format `keeptrack replay` reads (GPX 1.1 and 1.0, GeoJSON, CSV, OwnTracks .rec, Google Takeout), plus
hostile and malformed files. Standard library only; deterministic (gzip without a time or name).

    tools/gen-track-fixtures.py            # rewrite fixtures/tracks/
"""
import gzip
import io
import json
import os
import sys

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")
OUT = os.path.join(ROOT, "fixtures", "tracks")
SECONDS = 120


def dm(value, hemisphere):
    d = int(float(value) / 100)
    v = d + (float(value) - d * 100) / 60
    return -v if hemisphere in "SW" else v


def fixes():
    """RMC (date, time, position, speed, course) merged with GGA's altitude, one per second."""
    out, alt = [], {}
    with open(os.path.join(ROOT, "fixtures", "walk-15min.nmea")) as f:
        lines = [l.strip() for l in f]
    for l in lines:
        p = l.split("*")[0].split(",")
        if p[0].endswith("GGA") and p[6] != "0" and p[9]:
            alt[p[1]] = float(p[9])
    for l in lines:
        p = l.split("*")[0].split(",")
        if not p[0].endswith("RMC") or p[2] != "A":
            continue
        t, d = p[1], p[9]
        iso = "20%s-%s-%sT%s:%s:%sZ" % (d[4:6], d[2:4], d[0:2], t[0:2], t[2:4], t[4:6])
        out.append(dict(time=iso, lat=round(dm(p[3], p[4]), 7), lon=round(dm(p[5], p[6]), 7),
                        alt=alt.get(t), speed=round(float(p[7]) * 0.514444, 3), course=float(p[8] or 0)))
        if len(out) == SECONDS:
            break
    return out


def epoch(iso):
    import calendar, time
    return calendar.timegm(time.strptime(iso, "%Y-%m-%dT%H:%M:%SZ"))


def write(name, text, mode="w"):
    with open(os.path.join(OUT, name), mode) as f:
        f.write(text)


def main():
    os.makedirs(OUT, exist_ok=True)
    fx = fixes()
    first = fx[0]
    # GPX 1.1: a timed waypoint (first in the file, as 1.1 orders them), an untimed one, a track in two segments.
    g = ['<?xml version="1.0" encoding="UTF-8"?>',
         '<!-- two minutes of fixtures/walk-15min.nmea; tools/gen-track-fixtures -->',
         '<gpx version="1.1" creator="KeepTrack &amp; friends" xmlns="http://www.topografix.com/GPX/1/1"'
         ' xmlns:gpxtpx="http://www.garmin.com/xmlschemas/TrackPointExtension/v2">',
         '  <metadata><name>Walk &lt;Munich&gt;</name><desc><![CDATA[Marienplatz <to> Odeonsplatz]]></desc></metadata>',
         '  <wpt lat="%.7f" lon="%.7f"><time>%s</time><name>Start &#x2192; &#8594;</name></wpt>' % (first["lat"], first["lon"], first["time"]),
         '  <wpt lat="48.0" lon="11.0"><name>no time: left out</name></wpt>',
         '  <trk><name>walk</name>']
    for k, seg in enumerate((fx[:60], fx[60:])):
        g.append('    <trkseg>')
        for p in seg:
            g.append('      <trkpt lat="%.7f" lon=\'%.7f\'><ele>%.1f</ele><time>%s</time><hdop>1.8</hdop><sat>4</sat>'
                     '<extensions><gpxtpx:TrackPointExtension><gpxtpx:speed>%.3f</gpxtpx:speed>'
                     '<gpxtpx:course>%.2f</gpxtpx:course></gpxtpx:TrackPointExtension></extensions></trkpt>'
                     % (p["lat"], p["lon"], p["alt"], p["time"], p["speed"], p["course"]))
        g.append('    </trkseg>')
    g += ['  </trk>', '</gpx>', '']
    gpx11 = "\n".join(g)
    write("walk-2min.gpx", gpx11)
    with open(os.path.join(OUT, "walk-2min.gpx.gz"), "wb") as f:
        with gzip.GzipFile(filename="", mode="wb", fileobj=f, mtime=0) as z:
            z.write(gpx11.encode())
    # GPX 1.0: a route (no times: left out), then the track with speed and course as children.
    g = ['<?xml version="1.0"?>', '<gpx version="1.0" creator="gen" xmlns="http://www.topografix.com/GPX/1/0">',
         '<rte><rtept lat="48.1" lon="11.5"/><rtept lat="48.2" lon="11.6"></rtept></rte>', '<trk><trkseg>']
    for p in fx:
        g.append('<trkpt lat="%.7f" lon="%.7f"><ele>%.1f</ele><time>%s</time><course>%.2f</course><speed>%.3f</speed>'
                 '</trkpt>' % (p["lat"], p["lon"], p["alt"], p["time"], p["course"], p["speed"]))
    g += ['</trkseg></trk></gpx>', '']
    write("walk-2min.gpx10.gpx", "\n".join(g))
    # GeoJSON: a MultiLineString whose coordTimes come before its coordinates, nested per line.
    lines = [fx[:60], fx[60:]]
    feature = {"type": "Feature",
               "properties": {"name": "walk", "coordTimes": [[p["time"] for p in l] for l in lines]},
               "geometry": {"type": "MultiLineString",
                            "coordinates": [[[p["lon"], p["lat"], p["alt"]] for p in l] for l in lines]}}
    write("walk-2min.geojson", json.dumps({"type": "FeatureCollection", "features": [
        {"type": "Feature", "properties": {"name": "area"},
         "geometry": {"type": "Polygon", "coordinates": [[[11.5, 48.1], [11.6, 48.1], [11.6, 48.2], [11.5, 48.1]]]}},
        feature]}, indent=1) + "\n")
    # GeoJSON: Point features, times as epoch seconds and ISO 8601 by turns, geometry last.
    write("walk-2min.points.geojson", json.dumps({"type": "FeatureCollection", "features": [
        {"type": "Feature",
         "properties": {"time": p["time"] if i % 2 else epoch(p["time"]), "speed": p["speed"], "course": p["course"],
                        "horizontal_accuracy": 5},
         "geometry": {"type": "Point", "coordinates": [p["lon"], p["lat"], p["alt"]]}} for i, p in enumerate(fx)]})
          + "\n")
    # CSV: ISO times, every optional column, CRLF, a quoted name with a comma and a quote.
    rows = ['time,lat,lon,altitude,speed,course,accuracy,name']
    for p in fx:
        rows.append('%s,%.7f,%.7f,%.1f,%.3f,%.2f,5,"walk, ""Munich"""' % (p["time"], p["lat"], p["lon"], p["alt"],
                                                                         p["speed"], p["course"]))
    write("walk-2min.csv", "\r\n".join(rows) + "\r\n")
    # CSV: semicolons, OwnTracks' names, epoch milliseconds, an empty row and a row without a position.
    rows = ['"tst";"Latitude";"Longitude"']
    for i, p in enumerate(fx):
        rows.append('%d;%.7f;%.7f' % (epoch(p["time"]) * 1000, p["lat"], p["lon"]))
        if i == 10:
            rows += ['', '%d;;' % (epoch(p["time"]) * 1000)]
    write("walk-2min.ms.csv", "\n".join(rows) + "\n")
    # OwnTracks Recorder .rec: location lines, a transition and an lwt.
    rows = []
    for i, p in enumerate(fx):
        payload = {"_type": "location", "tid": "ph", "lat": p["lat"], "lon": p["lon"], "tst": epoch(p["time"]),
                   "acc": 5, "alt": round(p["alt"]), "vel": round(p["speed"] * 3.6), "cog": round(p["course"]),
                   "batt": 80, "inregions": ["home"]}
        rows.append("%s\t*                 \t%s" % (p["time"], json.dumps(payload, separators=(",", ":"))))
        if i == 30:
            rows.append("%s\t*                 \t%s" % (p["time"], json.dumps(
                {"_type": "transition", "event": "leave", "desc": "home", "lat": 1, "lon": 1, "tst": epoch(p["time"])})))
    rows.append("%s\tlwt               \t%s" % (fx[-1]["time"], '{"_type":"lwt","tst":%d}' % epoch(fx[-1]["time"])))
    write("walk-2min.rec", "\n".join(rows) + "\n")
    # Google Takeout Records.json: timestamp (ISO) and timestampMs by turns, activity nested with its own timestamps.
    locations = []
    for i, p in enumerate(fx):
        r = {"latitudeE7": round(p["lat"] * 1e7), "longitudeE7": round(p["lon"] * 1e7), "accuracy": 5,
             "altitude": round(p["alt"]), "velocity": round(p["speed"]), "heading": round(p["course"]),
             "activity": [{"activity": [{"type": "WALKING", "confidence": 90}], "timestamp": "2001-01-01T00:00:00Z"}],
             "source": "WIFI", "deviceTag": 12345}
        if i % 2:
            r["timestamp"] = p["time"].replace("Z", ".000Z")
        else:
            r["timestampMs"] = str(epoch(p["time"]) * 1000)
        locations.append(r)
    write("walk-2min.takeout.json", json.dumps({"locations": locations}, indent=2) + "\n")
    # Hostile and malformed.
    write("billion-laughs.gpx", '<?xml version="1.0"?>\n<!DOCTYPE lolz [\n <!ENTITY lol "lol">\n'
          + "".join(' <!ENTITY lol%d "%s">\n' % (k, ("&lol%s;" % ("" if k == 1 else k - 1)) * 10) for k in range(1, 10))
          + ']>\n<gpx version="1.1"><wpt lat="1" lon="1"><time>2024-01-01T00:00:00Z</time><name>&lol9;</name></wpt></gpx>\n')
    write("external-entity.gpx", '<?xml version="1.0"?>\n<gpx version="1.1"><wpt lat="1" lon="1">'
          '<time>2024-01-01T00:00:00Z</time><name>&xxe;</name></wpt></gpx>\n')
    cut = gpx11.index("<trkpt", gpx11.index("<trkpt") + 4000)
    write("truncated.gpx", gpx11[:cut + 30])
    write("mismatched.gpx", '<gpx version="1.1">\n<trk><trkseg>\n<trkpt lat="48.1" lon="11.5"><time>2024-05-14T09:30:00Z'
          '</time></trkpt>\n<trkpt lat="48.1" lon="11.5"><time>2024-05-14T09:30:01Z</trkpt>\n</trkseg></trk></gpx>\n')
    rows = ['time,lat,lon'] + ['%s,%.7f,%.7f' % (p["time"], p["lat"], p["lon"]) for p in fx[:5]] \
        + ['%s,north,%.7f' % (fx[5]["time"], fx[5]["lon"])]
    write("bad-cell.csv", "\n".join(rows) + "\n")
    takeout = open(os.path.join(OUT, "walk-2min.takeout.json")).read()
    write("truncated.takeout.json", takeout[:len(takeout) // 2])


if __name__ == "__main__":
    sys.exit(main())
