"""The map page (`/map`) in a real browser: Debian's chromium driven by Playwright for Python.

    tools/browser-check [--binary PATH] [--screenshot FILE] [--large]

Starts `keeptrack serve --tiles none` on a temporary SQLite store with an admin token and a device
token, stores a walk (with a region entered and left) for `walker` and a few points for `cyclist`,
and checks, in headless Chromium (`executable_path=/usr/bin/chromium`: no browser download):

1. the page loads with no console error, no page error and no request to a host other than loopback,
   and keeps no token in its address or its HTML (it moves `?token=` to sessionStorage);
2. the device list shows each device (`li[data-device-id]`), each with a marker titled with its id;
3. posting a point moves that device's marker, without a reload;
4. choosing a range draws the trail (every location of it, the region transitions as markers);
5. a device token's page shows that device only.

With --screenshot, the page (the walk's trail, the other device moving) is saved as a PNG.
With --large, a day of 60,000 points is stored and the time the page takes to read and draw it is
printed (a figure, not a check). Exits 1 with what failed; prints one JSON line of results.
"""
import argparse, json, math, os, shutil, signal, subprocess, sys, tempfile, time, urllib.request
from datetime import datetime, timedelta, timezone
from urllib.parse import urlsplit

from playwright.sync_api import sync_playwright

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
CHROMIUM = os.environ.get("KEEPTRACK_CHROMIUM", "/usr/bin/chromium")
ADMIN = "browser-check-admin"
failures = []


def check(ok, what):
    if not ok:
        failures.append(what)
    return ok


def iso(t):
    return t.strftime("%Y-%m-%dT%H:%M:%S.") + f"{t.microsecond // 1000:03d}Z"


def post(url, body, token=ADMIN):
    request = urllib.request.Request(url + "/v1/locations", data=json.dumps(body).encode(), method="POST",
                                     headers={"Content-Type": "application/json", "Authorization": f"Bearer {token}"})
    with urllib.request.urlopen(request, timeout=60) as r:
        return json.loads(r.read())


def walk(now, count=180):
    """A loop walk ending a second before `now`, 5 s apart, entering and leaving a region halfway."""
    records, start = [], now - timedelta(seconds=5 * count + 1)
    for i in range(count):
        a = 2 * math.pi * i / count
        lat, lon = 48.1372 + 0.004 * math.sin(a), 11.5755 + 0.006 * (1 - math.cos(a))
        records.append({"seq": i + 1, "kind": "location", "time": iso(start + timedelta(seconds=5 * i)),
                        "lat": round(lat, 7), "lon": round(lon, 7), "hAcc": 5})
    for seq, kind, i in [(count + 1, "enter", count // 3), (count + 2, "exit", 2 * count // 3)]:
        r = dict(records[i])
        r.update(seq=seq, kind=kind, region="park")
        records.append(r)
    return records


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--binary", default=os.path.join(ROOT, ".build/debug/keeptrack"))
    parser.add_argument("--screenshot")
    parser.add_argument("--large", action="store_true")
    args = parser.parse_args()
    work = tempfile.mkdtemp(prefix="keeptrack-browser.")
    db = os.path.join(work, "endpoint.sqlite")
    serve = None
    results = {}
    try:
        added = subprocess.run([args.binary, "serve", "devices", "add", "cyclist", "--db", db],
                               capture_output=True, text=True, check=True)
        cyclist_token = added.stdout.strip()
        serve = subprocess.Popen([args.binary, "serve", "--db", db, "--port", "0", "--token", ADMIN, "--tiles", "none"],
                                 stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True)
        line = serve.stdout.readline()
        if not line:
            raise SystemExit("keeptrack serve did not start: " + serve.stderr.read())
        url = json.loads(line)["url"]
        now = datetime.now(timezone.utc)
        # Close to midnight (UTC, the browser's zone here) "today" may not hold the walk: use "all".
        day_range = "today" if now - timedelta(minutes=20) > now.replace(hour=0, minute=0, second=0) else "all"
        trail = walk(now)
        post(url, {"device": "walker", "records": trail})
        post(url, {"device": "cyclist", "records": [
            {"seq": 1, "kind": "location", "time": iso(now - timedelta(seconds=60)), "lat": 48.1420, "lon": 11.5800},
        ]}, token=cyclist_token)
        locations = sum(1 for r in trail if r["kind"] == "location")

        with sync_playwright() as p:
            browser = p.chromium.launch(executable_path=CHROMIUM, headless=True, args=["--no-sandbox", "--disable-gpu"])
            context = browser.new_context(viewport={"width": 1280, "height": 800}, timezone_id="UTC")
            page = context.new_page()
            console, errors, foreign = [], [], []

            def route(r):
                host = urlsplit(r.request.url).hostname
                if r.request.url.startswith(("data:", "blob:")) or host in ("127.0.0.1", "localhost", "::1"):
                    return r.continue_()
                foreign.append(r.request.url)
                return r.abort()

            page.route("**/*", route)
            page.on("console", lambda m: console.append(f"{m.type}: {m.text}") if m.type == "error" else None)
            page.on("pageerror", lambda e: errors.append(str(e)))
            page.goto(f"{url}/map?token={ADMIN}", wait_until="load")
            for device in ["walker", "cyclist"]:
                page.wait_for_selector(f'#devices li[data-device-id="{device}"]', timeout=20000)
                page.wait_for_selector(f'.leaflet-marker-icon[title="{device}"]', state="attached", timeout=20000)
            check(ADMIN not in page.url, "the token is still in the address bar")
            check(ADMIN not in page.content(), "the token is in the page's HTML")
            check(page.evaluate("sessionStorage.getItem('keeptrack.token')") == ADMIN, "the token is not kept in sessionStorage")
            listed = page.eval_on_selector_all("#devices li", "els => els.map(e => e.dataset.deviceId)")
            check(listed == ["cyclist", "walker"], f"the device list shows {listed}")

            # A point posted moves its marker, without a reload.
            page.evaluate("window.__notReloaded = true")
            post(url, {"device": "cyclist", "records": [
                {"seq": 2, "kind": "location", "time": iso(now), "lat": 48.1401, "lon": 11.5790}]}, token=cyclist_token)
            moved = page.wait_for_function(
                "() => { const m = window.keeptrack.markers.get('cyclist'); const p = m && m.getLatLng();"
                " return p && Math.abs(p.lat - 48.1401) < 1e-6 && Math.abs(p.lng - 11.5790) < 1e-6; }", timeout=20000)
            check(bool(moved), "the cyclist's marker did not move")
            check(page.evaluate("window.__notReloaded === true"), "the page reloaded")

            # Choosing a range draws the trail, page by page.
            page.click('#devices li[data-device-id="walker"]')
            page.select_option("#trail-range", day_range)
            page.wait_for_selector('#trail-controls[data-loaded="true"]', state="attached", timeout=30000)
            drawn = page.evaluate("window.keeptrack.trailLayer ? window.keeptrack.trailLayer.getLatLngs().length : 0")
            check(drawn == locations, f"the trail has {drawn} points drawn, {locations} stored")
            transitions = page.evaluate("window.keeptrack.regionMarkers.length")
            check(transitions == 2, f"{transitions} region transitions drawn, 2 stored")
            check(page.locator(".leaflet-overlay-pane canvas").count() >= 1, "no canvas in the overlay pane")
            results["trail_points"] = drawn
            if args.screenshot:
                page.click("#fit")
                page.wait_for_timeout(300)
                page.screenshot(path=args.screenshot)
                results["screenshot"] = args.screenshot
            check(not console, f"console errors: {console}")
            check(not errors, f"page errors: {errors}")
            check(not foreign, f"requests to other hosts: {foreign}")

            # A device token's page shows that device only.
            other = browser.new_context(viewport={"width": 1024, "height": 700}, timezone_id="UTC")
            own = other.new_page()
            own.goto(f"{url}/map?token={cyclist_token}", wait_until="load")
            own.wait_for_function("() => window.keeptrack && window.keeptrack.connected", timeout=20000)
            mine = own.eval_on_selector_all("#devices li", "els => els.map(e => e.dataset.deviceId)")
            check(mine == ["cyclist"], f"the cyclist's page lists {mine}")
            check(own.locator('.leaflet-marker-icon[title="walker"]').count() == 0, "the cyclist's page shows the walker")
            other.close()

            if args.large:
                day = now.replace(hour=0, minute=0, second=0, microsecond=0)
                for start in range(0, 60_000, 10_000):
                    post(url, {"device": "large", "records": [
                        {"seq": i + 1, "kind": "location", "time": iso(day + timedelta(seconds=i * 86399 / 60000)),
                         "lat": 48.1 + 0.05 * math.sin(i / 900), "lon": 11.5 + 0.05 * math.cos(i / 1300)}
                        for i in range(start, start + 10_000)]})
                page.goto(f"{url}/map", wait_until="load")
                page.wait_for_selector('#devices li[data-device-id="large"]', timeout=20000)
                page.click('#devices li[data-device-id="large"]')
                started = time.time()
                page.select_option("#trail-range", "all")
                page.wait_for_selector('#trail-controls[data-loaded="true"]', state="attached", timeout=60000)
                page.evaluate("() => new Promise(r => requestAnimationFrame(() => requestAnimationFrame(r)))")
                results["large_points"] = page.evaluate("window.keeptrack.trailLayer.getLatLngs().length")
                results["large_seconds"] = round(time.time() - started, 2)
            browser.close()
    finally:
        if serve is not None:
            serve.send_signal(signal.SIGTERM)
            try:
                serve.wait(timeout=10)
            except subprocess.TimeoutExpired:
                serve.kill()
        shutil.rmtree(work, ignore_errors=True)
    results["failures"] = failures
    print(json.dumps(results))
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
