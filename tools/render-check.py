#!/usr/bin/env python3
"""Check that trail pictures render in a real browser: headless Chromium (Debian's `chromium`).

    tools/render-check.py [--out docs/walk.png]

Replays fixtures/walk-15min.nmea with its regions into the embedded endpoint (a temporary data
directory), exports the trail as SVG (`keeptrack export --format svg`), serves the same database
with `keeptrack serve` and opens `/map/svg` (the page without JavaScript) too; Chromium renders both
to PNG. The check decodes the PNGs and counts pixels of the track's colour (#d6452f), the regions'
outline (#4f8fd6) and the enter/exit markers (#2e9e44, #b23a8a): each must be there. The SVG's
picture is copied to --out (README's example). Needs `apt-get install chromium` (not in CI: a large download).
"""
import argparse, json, os, shutil, struct, subprocess, sys, tempfile, zlib

import keeptrack_tools

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
COLOURS = {"track": (0xd6, 0x45, 0x2f), "region outline": (0x4f, 0x8f, 0xd6), "enter": (0x2e, 0x9e, 0x44),
           "exit": (0xb2, 0x3a, 0x8a)}


def png_pixels(path):
    """(width, height, rows of RGB tuples) of an 8-bit RGB/RGBA PNG."""
    data = open(path, "rb").read()
    assert data[:8] == b"\x89PNG\r\n\x1a\n", "not a PNG"
    pos, idat, width = 8, b"", 0
    while pos < len(data):
        length, kind = struct.unpack(">I4s", data[pos:pos + 8])
        body = data[pos + 8:pos + 8 + length]
        if kind == b"IHDR":
            width, height, depth, colour = struct.unpack(">IIBB", body[:10])
            assert depth == 8 and colour in (2, 6), f"unsupported PNG ({depth}-bit, colour type {colour})"
            channels = 3 if colour == 2 else 4
        elif kind == b"IDAT":
            idat += body
        pos += 12 + length
    raw = zlib.decompress(idat)
    stride = width * channels
    rows, prev = [], bytearray(stride)
    for y in range(height):
        f = raw[y * (stride + 1)]
        line = bytearray(raw[y * (stride + 1) + 1:(y + 1) * (stride + 1)])
        for x in range(stride):
            a = line[x - channels] if x >= channels else 0
            b = prev[x]
            c = prev[x - channels] if x >= channels else 0
            if f == 1:
                line[x] = (line[x] + a) & 255
            elif f == 2:
                line[x] = (line[x] + b) & 255
            elif f == 3:
                line[x] = (line[x] + (a + b) // 2) & 255
            elif f == 4:
                p = a + b - c
                pa, pb, pc = abs(p - a), abs(p - b), abs(p - c)
                line[x] = (line[x] + (a if pa <= pb and pa <= pc else b if pb <= pc else c)) & 255
        rows.append(line)
        prev = line
    return width, height, channels, rows


def count_colours(path):
    width, height, channels, rows = png_pixels(path)
    counts = {k: 0 for k in COLOURS}
    for line in rows:
        for x in range(0, width * channels, channels):
            r, g, b = line[x], line[x + 1], line[x + 2]
            for name, (cr, cg, cb) in COLOURS.items():
                if abs(r - cr) < 12 and abs(g - cg) < 12 and abs(b - cb) < 12:
                    counts[name] += 1
    return width, height, counts


def chromium(url_or_file, png, size):
    browser = shutil.which("chromium") or shutil.which("chromium-browser")
    if not browser:
        sys.exit("render-check: needs Chromium: apt-get install chromium")
    subprocess.run([browser, "--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars",
                    f"--screenshot={png}", f"--window-size={size}", url_or_file],
                   check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, timeout=120)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", default=os.path.join(ROOT, "docs", "walk.png"))
    args = ap.parse_args()
    keeptrack = keeptrack_tools.build(release=False)
    work = tempfile.mkdtemp(prefix="keeptrack-render-")
    regions = os.path.join(ROOT, "fixtures", "walk-15min.regions.geojson")
    subprocess.run([keeptrack, "replay", "--upload", "embedded", "--regions", regions, "--data-dir", work, "--quiet",
                    os.path.join(ROOT, "fixtures", "walk-15min.nmea")], check=True, stdout=subprocess.DEVNULL)
    svg = os.path.join(work, "walk.svg")
    subprocess.run([keeptrack, "export", "--data-dir", work, "--regions", regions, "--output", svg], check=True,
                   stderr=subprocess.DEVNULL)
    results = {}
    chromium(svg, os.path.join(work, "svg.png"), "1000,1280")
    results["keeptrack export --format svg"] = count_colours(os.path.join(work, "svg.png"))
    serve = subprocess.Popen([keeptrack, "serve", "--port", "0", "--db", os.path.join(work, "endpoint.sqlite"),
                              "--token", "render"], stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    try:
        url = json.loads(serve.stdout.readline())["url"]
        chromium(f"{url}/map/svg?token=render", os.path.join(work, "map.png"), "1000,1400")
        results["keeptrack serve: /map/svg"] = count_colours(os.path.join(work, "map.png"))
    finally:
        serve.terminate()
        serve.wait()
    failed = False
    for name, (w, h, counts) in results.items():
        missing = [k for k, v in counts.items() if v < 20 and not (name.endswith("/map/svg") and k == "region outline")]
        print(f"{name}: {w}x{h} px, " + ", ".join(f"{k} {v} px" for k, v in counts.items())
              + (f"  MISSING: {missing}" if missing else "  ok"))
        failed |= bool(missing)
    os.makedirs(os.path.dirname(args.out), exist_ok=True)
    shutil.copy(os.path.join(work, "svg.png"), args.out)
    print(f"picture: {args.out}")
    shutil.rmtree(work)
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
