"""The map page (`/map`) in a real browser: Debian's chromium driven by Playwright for Python.

    tools/browser-check [--binary PATH] [--screenshot FILE] [--day-screenshot FILE] [--large]

Starts `keeptrack serve --tiles none` on a temporary SQLite store with an admin token and a device
token, stores a walk (with a region entered and left) for `walker` and a few points for `cyclist`,
and checks, in headless Chromium (`executable_path=/usr/bin/chromium`: no browser download):

1. the page loads with no console error, no page error and no request to a host other than loopback,
   and keeps no token in its address or its HTML (it moves `?token=` to sessionStorage);
2. the device list shows each device (`li[data-device-id]`), each with a marker titled with its id;
3. posting a point moves that device's marker, without a reload;
4. choosing a range draws the trail (every location of it, the region transitions as markers);
5. a device token's page shows that device only;
6. live means live (issue 36, item 5): a device sending records of 2024 today is not listed live,
   neither from the snapshot nor from the stream; one sending records of now is;
7. the day (issue 38): the night fixture (fixtures/visits-night.nmea.gz, replayed into the server as
   device `night`) opened as /map?device=night&date=2025-03-14 in New York's zone: the timeline lists
   every visit and trip the API gives, each within 2 minutes of the fixture's truth, its distance
   the API's, its times shown in the viewer's zone, the open visit "still there"; a click on a trip
   frames it; the slider moves the replay marker to where the trail was at that time; playing at x60
   moves it on; the speed chart is drawn and a click on it moves the slider there; the trip's GPX
   and the day's GeoJSON downloads hold the trail's points;
8. the month strip: drawn from /v1/devices/{id}/stats when the server has that route (the day's
   bar its distance), hidden when the route answers 404;
9. live outliers: a live day's trail whose device then sends a 0,0 fix, a jump and back, and a point far
   away that the next one confirms: once the stream's `outliers` event comes, no line point and no
   marker at 0,0 or at the jump, the map's view not stretched to 0,0, the marker back at the last good
   location, and the confirmed point back in the line in time order (bounded waits on the page's state);
10. share links, when the server has them (POST /v1/shares not 404): /s/TOKEN in a fresh context
   without credentials shows that device's day, no device list; revoked, it says the link expired;
   a share of a window that has ended opens on the window's day, its timeline the API's for the share;
   expired by time, a page open on it (a day of one point) says so when it expires and hides the day,
   and the link opened after answers 410
   saying when it expired (the server's own clock: a share of a few seconds, and bounded waits on the
   page's conditions).

With --screenshot, the page (the walk's trail, the other device moving) is saved as a PNG; with
--day-screenshot, the night fixture's day (timeline, trips, visits, replay, chart).
With --large, a day of 60,000 points is stored and the time the page takes to read and draw it is
printed (a figure, not a check). Exits 1 with what failed; prints one JSON line of results (with
`skipped`: the checks the server could not be put to, and why).
"""
import argparse, json, math, os, shutil, signal, subprocess, sys, tempfile, time, urllib.error, urllib.request
from datetime import datetime, timedelta, timezone
from urllib.parse import urlencode, urlsplit
from zoneinfo import ZoneInfo

from playwright.sync_api import sync_playwright

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
CHROMIUM = os.environ.get("KEEPTRACK_CHROMIUM", "/usr/bin/chromium")
ADMIN = "browser-check-admin"
failures = []
skipped = {}
NIGHT_ZONE = "America/New_York"


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


def expected_failure(message):
    """Whether a console error is Chromium's note of an answer the page expects: /stats's 404 on a server
    without statistics (the page hides its strip), a share link's 401 or 410 (the page says the link is
    not valid, or expired). Not the favicon: the pages name an empty one, so no browser asks the
    server (which answers 401 with --token)."""
    where = urlsplit(message.location.get("url") or "")
    return message.text.startswith("Failed to load resource") and (
        (where.path.startswith("/v1/devices/") and where.path.endswith("/stats") and "404" in message.text)
        or ("share=" in where.query and ("401" in message.text or "410" in message.text)))


def call(url, path, token=ADMIN, method="GET", body=None):
    """(status, parsed JSON or text) of an API request."""
    data = json.dumps(body).encode() if body is not None else None
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    if data is not None:
        headers["Content-Type"] = "application/json"
    request = urllib.request.Request(url + path, data=data, method=method, headers=headers)
    try:
        with urllib.request.urlopen(request, timeout=60) as r:
            status, text = r.status, r.read().decode()
    except urllib.error.HTTPError as e:
        status, text = e.code, e.read().decode()
    try:
        return status, json.loads(text)
    except ValueError:
        return status, text


def parse_iso(text):
    return datetime.fromisoformat(text.replace("Z", "+00:00"))


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
    parser.add_argument("--day-screenshot")
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
            page.on("console", lambda m: console.append(f"{m.type}: {m.text} ({m.location.get('url')})")
                    if m.type == "error" and not expected_failure(m) else None)
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

            # Choosing a range draws the trail, page by page: the walk may cross midnight, so all of it.
            page.click('#devices li[data-device-id="walker"]')
            page.click("#trail-all")
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

            live_means_live(browser, url, now)
            results["live_outliers"] = live_outliers(browser, url)
            results["night"] = night_day(browser, url, args.binary, work, args.day_screenshot)
            shares(browser, url)

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
                page.click("#trail-all")
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
    results["skipped"] = skipped
    print(json.dumps(results))
    return 1 if failures else 0


def open_page(browser, url, path, zone="UTC"):
    """A fresh context's page at `path`, watched for console and page errors."""
    context = browser.new_context(viewport={"width": 1400, "height": 900}, timezone_id=zone, accept_downloads=True)
    page = context.new_page()
    page.errors = []
    page.on("console", lambda m: page.errors.append(f"{m.type}: {m.text} ({m.location.get('url')})")
            if m.type == "error" and not expected_failure(m) else None)
    page.on("pageerror", lambda e: page.errors.append(str(e)))
    page.goto(url + path, wait_until="load")
    return context, page


def live_means_live(browser, url, now):
    """A device sending 2024's records today is not live, from the snapshot or from the stream."""
    old = {"seq": 1, "kind": "location", "time": "2024-05-14T09:30:00.000Z", "lat": 48.15, "lon": 11.55}
    post(url, {"device": "replayer", "records": [old]})
    context, page = open_page(browser, url, f"/map?token={ADMIN}")
    page.wait_for_selector('#devices li[data-device-id="replayer"]', timeout=20000)
    state = page.eval_on_selector('#devices li[data-device-id="replayer"]', "e => [e.dataset.live, e.dataset.state, e.textContent]")
    check(state[0] == "false" and state[1] == "late" and "live" not in state[2],
          f"a device sending 2024's records now is listed {state} (snapshot)")
    walker = page.eval_on_selector('#devices li[data-device-id="walker"]', "e => [e.dataset.live, e.textContent]")
    check(walker[0] == "true" and "live" in walker[1], f"the walker, sending now, is listed {walker}")
    # A record of another year is dated without its time of day; the item keeps to one line.
    check(state[2].startswith("replayer") and "sending old records · " in state[2] and "2024" in state[2]
          and "09:3" not in state[2], f"the replayer's last record is shown as {state[2]!r}")
    long_id = "a-device-whose-id-is-far-too-long-for-the-side-panel-0123456789"
    post(url, {"device": long_id, "records": [dict(old, seq=1)]})
    page.wait_for_selector(f'#devices li[data-device-id="{long_id}"]', timeout=20000)
    shape = page.eval_on_selector(f'#devices li[data-device-id="{long_id}"]',
                                  "e => { const n = e.querySelector('.name'); const s = e.querySelector('.state');"
                                  " return [n.title, n.scrollWidth > n.clientWidth,"
                                  " Math.abs(n.getBoundingClientRect().top - s.getBoundingClientRect().top) < 8,"
                                  " s.getClientRects().length]; }")
    check(shape[0] == long_id and shape[1] and shape[2] and shape[3] == 1,
          f"a long id is not cut to one line beside its state: {shape}")
    # From the stream: an old record arrives; the device stays not live, its time the record's.
    post(url, {"device": "replayer", "records": [dict(old, seq=2, time="2024-05-14T09:31:00.000Z", lat=48.151)]})
    page.wait_for_function("() => { const d = window.keeptrack.devices.get('replayer');"
                           " return d && d.time === '2024-05-14T09:31:00.000Z'; }", timeout=20000)
    state = page.eval_on_selector('#devices li[data-device-id="replayer"]', "e => [e.dataset.live, e.dataset.state, e.textContent]")
    check(state[0] == "false" and state[1] == "late" and "live" not in state[2],
          f"a device sending 2024's records now is listed {state} (stream)")
    # A record of now makes it live.
    post(url, {"device": "replayer", "records": [dict(old, seq=3, time=iso(datetime.now(timezone.utc)), lat=48.152)]})
    page.wait_for_selector('#devices li[data-device-id="replayer"][data-live="true"]', state="attached", timeout=20000)
    check(not page.errors, f"live-means-live page errors: {page.errors}")
    context.close()
    # An address that names no device, or no day, is said, not silently replaced.
    for path, words in [(f"/map?token={ADMIN}&device=nosuch", "No device 'nosuch' here"),
                        (f"/map?token={ADMIN}&device=walker&date=2024-13-45", "date '2024-13-45' is no day")]:
        context, page = open_page(browser, url, path)
        page.wait_for_function("words => document.getElementById('status').textContent.includes(words)", arg=words,
                               timeout=20000)
        check(not page.errors, f"{path} page errors: {page.errors}")
        context.close()


def live_outliers(browser, url):
    """A live map's line and marker leave out what the stream's outliers events mark, and take back what they clear."""
    start = datetime.now(timezone.utc) - timedelta(seconds=120)
    good = [{"seq": i + 1, "kind": "location", "time": iso(start + timedelta(seconds=i)), "lat": 48.13,
             "lon": round(11.57 + 0.00001 * i, 7), "hAcc": 5} for i in range(6)]
    post(url, {"device": "jumper", "records": good})
    context, page = open_page(browser, url, f"/map?token={ADMIN}&device=jumper")
    page.wait_for_selector('#day[data-loaded="true"]', state="attached", timeout=30000)
    line = "window.keeptrack.trailLayer ? window.keeptrack.trailLayer.getLatLngs().map(p => [p.lat, p.lng]) : []"
    check(page.evaluate(line) == [[48.13, r["lon"]] for r in good], "the jumper's live line is not its six points")

    def send(seq, seconds, lat, lon):
        post(url, {"device": "jumper", "records": [
            {"seq": seq, "kind": "location", "time": iso(start + timedelta(seconds=seconds)), "lat": lat, "lon": lon,
             "hAcc": 5}]})

    def settled(events, points):
        """Waits (bounded) for the page to have had `events` outliers events and to draw `points` locations."""
        try:
            page.wait_for_function(
                "([events, points]) => { const s = window.keeptrack; return s.outlierEvents >= events &&"
                " s.trailLayer && s.trailLayer.getLatLngs().length === points; }", arg=[events, points], timeout=20000)
            return True
        except Exception as error:
            check(False, f"live outliers: {events} events and {points} points not reached: {error}")
            return False

    marker = "(() => { const p = window.keeptrack.markers.get('jumper').getLatLng(); return [p.lat, p.lng]; })()"
    last_good = [48.13, good[-1]["lon"]]
    # A 0,0 fix: never drawn, marked by the event.
    send(7, 6, 0, 0)
    if settled(1, 6):
        check([0, 0] not in page.evaluate(line), "a line point at 0,0")
        check(page.evaluate(marker) == last_good, f"the marker is at {page.evaluate(marker)} after a 0,0 fix")
        check(not page.evaluate("window.keeptrack.map.getBounds().contains([0, 0])"), "the view stretches to 0,0")
    # 40 km in a second: held (pending), out of the line; then back: a jump.
    send(8, 7, 48.5, 11.57)
    if settled(2, 6):
        check([48.5, 11.57] not in page.evaluate(line), "the held jump is in the line")
        check(page.evaluate(marker) == last_good, f"the marker is at {page.evaluate(marker)} after a jump")
    send(9, 8, 48.13, 11.5701)
    settled(3, 7)
    # 7 km in a second, then the next point there too: held, then cleared and back before it.
    send(10, 9, 48.19, 11.57)
    settled(4, 7)
    send(11, 10, 48.19, 11.5701)
    if settled(5, 9):
        check(page.evaluate(line)[-2:] == [[48.19, 11.57], [48.19, 11.5701]],
              f"the cleared point is not back in time order: {page.evaluate(line)[-3:]}")
        check(page.evaluate(marker) == [48.19, 11.5701], f"the marker is at {page.evaluate(marker)}")
        check([0, 0] not in page.evaluate(line) and [48.5, 11.57] not in page.evaluate(line), "an outlier in the line")
    check(not page.errors, f"live-outliers page errors: {page.errors}")
    events = page.evaluate("window.keeptrack.outlierEvents")
    context.close()
    return {"events": events}


def replay_fixture(binary, url, work, device, fixture):
    """The fixture replayed into the server as `device`, by keeptrack replay --upload."""
    subprocess.run([binary, "replay", "--upload", url + "/v1/locations", "--token", ADMIN, "--device-id", device,
                    "--data-dir", os.path.join(work, "replay-" + device), os.path.join(ROOT, fixture)],
                   capture_output=True, text=True, check=True, timeout=600)


def night_day(browser, url, binary, work, screenshot=None):
    """The night fixture's day in the viewer's zone: timeline, replay, chart, exports, month strip."""
    replay_fixture(binary, url, work, "night", "fixtures/visits-night.nmea.gz")
    truth = json.load(open(os.path.join(ROOT, "fixtures/visits-night.truth.json")))
    zone = ZoneInfo(NIGHT_ZONE)
    day0 = datetime(2025, 3, 14, tzinfo=zone)
    span = {"from": iso(day0.astimezone(timezone.utc)),
            "to": iso((day0 + timedelta(days=1)).astimezone(timezone.utc) - timedelta(milliseconds=1))}
    # Asked as the page asks: from the day's start, without an end (the fixture is all in that day).
    _, stops = call(url, "/v1/devices/night/stops?" + urlencode({"from": span["from"]}))
    _, trips = call(url, "/v1/devices/night/trips?" + urlencode({"from": span["from"]}))
    api = sorted([("visit", s) for s in stops["stops"]] + [("trip", t) for t in trips["trips"]],
                 key=lambda e: e[1]["start"])
    expected = sorted([("visit", v["arrival"], v["departure"], None) for v in truth["visits"]]
                      + [("trip", t["start"], t["end"], t["distance_m"]) for t in truth["trips"]], key=lambda e: e[1])
    context, page = open_page(browser, url, f"/map?token={ADMIN}&device=night&date=2025-03-14", NIGHT_ZONE)
    page.wait_for_selector('#day[data-loaded="true"]', state="attached", timeout=60000)
    entries = page.eval_on_selector_all("#timeline li", """els => els.map(e => ({kind: e.dataset.kind,
        start: e.dataset.start, end: e.dataset.end || null, distance: e.dataset.distance ? Number(e.dataset.distance) : null,
        open: e.dataset.open === "true", text: e.textContent}))""")
    check([e["kind"] for e in entries] == [e[0] for e in expected],
          f"the timeline lists {[e['kind'] for e in entries]}, the truth {[e[0] for e in expected]}")
    check(len(entries) == len(api), f"the timeline lists {len(entries)} entries, the API {len(api)}")
    worst = 0.0
    for got, want, (kind, given) in zip(entries, expected, api):
        for field, true in [("start", want[1]), ("end", want[2])]:
            if true is None:
                check(got[field] is None and got["open"] and "still there" in got["text"],
                      f"the open visit is shown as {got}")
                continue
            if got[field] is None:
                check(False, f"{kind} at {got['start']} has no {field}")
                continue
            off = abs((parse_iso(got[field]) - parse_iso(true)).total_seconds())
            worst = max(worst, off)
            check(off <= 120, f"{kind} {field} {got[field]} is {off:.0f} s from the truth's {true}")
            local = parse_iso(got[field]).astimezone(zone).strftime("%H:%M")
            check(local in got["text"], f"{kind} {field}: '{got['text']}' does not show {local} ({NIGHT_ZONE})")
        if kind == "trip":
            check(got["distance"] == given["distance"], f"trip at {got['start']}: {got['distance']} m, the API {given['distance']} m")
            shown = f"{given['distance'] / 1000:.2f} km"
            check(shown in got["text"], f"trip at {got['start']}: '{got['text']}' does not show {shown}")
            check(parse_iso(got["start"]) == parse_iso(given["start"]), f"trip start {got['start']} is not the API's {given['start']}")
    results_night = {"entries": len(entries), "worst_seconds_from_truth": round(worst, 1)}

    # A click on the first trip frames it.
    first_trip = next(i for i, e in enumerate(entries) if e["kind"] == "trip")
    trip = api[first_trip][1]
    page.click(f"#timeline li:nth-child({first_trip + 1}) button.fit")
    # Leaflet animates the zoom: the bounds are the trip's once the animation ends (a bounded wait on
    # that, not on time).
    try:
        page.wait_for_function(f"""() => {{ const b = window.keeptrack.map.getBounds();
            return b.contains([{trip['startLat']}, {trip['startLon']}]) && b.contains([{trip['endLat']}, {trip['endLon']}]); }}""",
            timeout=10000)
        framed = True
    except Exception:
        framed = False
    check(framed, "a click on the first trip does not frame it")
    check(page.get_attribute(f"#timeline li:nth-child({first_trip + 1})", "aria-current") == "true",
          "the clicked trip is not marked current")

    # The slider moves the marker to where the trail was at that time.
    _, day_trail = call(url, "/v1/devices/night/trail?" + urlencode(dict(span, format="json", limit=100000)))
    locations = [r for r in day_trail["records"] if r["kind"] == "location"]
    first = parse_iso(locations[0]["time"])
    middle = parse_iso(trip["start"]) + (parse_iso(trip["end"]) - parse_iso(trip["start"])) / 2
    seconds = int((middle - first).total_seconds())
    at = first + timedelta(seconds=seconds)
    before = next(k for k in range(len(locations)) if parse_iso(locations[k]["time"]) >= at)
    a, b = locations[max(before - 1, 0)], locations[before]
    ta, tb = parse_iso(a["time"]), parse_iso(b["time"])
    f = 0 if tb == ta else (at - ta).total_seconds() / (tb - ta).total_seconds()
    want = (a["lat"] + f * (b["lat"] - a["lat"]), a["lon"] + f * (b["lon"] - a["lon"])) if before > 0 else (b["lat"], b["lon"])
    page.eval_on_selector("#replay-slider", f"e => {{ e.value = '{seconds}'; e.dispatchEvent(new Event('input')); }}")
    got = page.evaluate("() => { const p = window.keeptrack.replay.marker.getLatLng(); return [p.lat, p.lng]; }")
    off = math.hypot((got[0] - want[0]) * 111320, (got[1] - want[1]) * 111320 * math.cos(math.radians(want[0])))
    check(off < 1, f"the slider at {at.isoformat()} puts the marker {off:.1f} m from the trail there")
    shown = page.text_content("#replay-time")
    check(shown == at.astimezone(zone).strftime("%H:%M:%S"), f"the replay shows '{shown}' at {at.astimezone(zone)}")
    # Playing at x60 moves it on.
    page.click('#replay-speeds button[data-speed="60"]')
    t0 = page.evaluate("window.keeptrack.replay.t")
    page.click("#replay-play")
    page.wait_for_function(f"() => window.keeptrack.replay.t > {t0} + 30000", timeout=20000)
    page.click("#replay-play")
    moved = page.evaluate("() => { const p = window.keeptrack.replay.marker.getLatLng(); return [p.lat, p.lng]; }")
    check(moved != got, "playing did not move the marker")
    check(page.text_content("#replay-time") != shown, "playing did not change the time shown")

    # The speed chart: drawn, its cursor at the replay's time, a click on it moves the replay there.
    chart = page.evaluate("() => window.keeptrack.chart ? window.keeptrack.chart.numRows() : 0")
    check(chart > 100, f"the speed chart has {chart} rows")
    check(page.locator("#chart canvas").count() >= 1, "the speed chart has no canvas")
    box = page.locator("#chart").bounding_box()
    area = page.evaluate("() => window.keeptrack.chart.getArea()")
    page.mouse.click(box["x"] + area["x"] + area["w"] * 0.25, box["y"] + area["y"] + area["h"] / 2)
    linked = page.evaluate("""() => { const k = window.keeptrack, c = k.chart, x = c.toDomXCoord(k.replay.t);
        const slider = Number(document.getElementById('replay-slider').value);
        return [Math.abs(x - c.getArea().x - c.getArea().w * 0.25), Math.abs(slider - Math.round((k.replay.t - k.replay.first) / 1000)),
                Math.abs(parseFloat(document.getElementById('chart-cursor').style.left) - x)]; }""")
    check(linked[0] < 2 and linked[1] == 0 and linked[2] < 1, f"the chart and the slider are not linked: {linked}")
    if screenshot:
        page.click("#fit")
        page.evaluate("() => new Promise(r => requestAnimationFrame(() => requestAnimationFrame(r)))")
        page.screenshot(path=screenshot)
        results_night["screenshot"] = screenshot

    # Exports: the trip as GPX, the day as GeoJSON, every point of the trail.
    with page.expect_download() as download:
        page.click(f'#timeline li:nth-child({first_trip + 1}) .export button[data-format="gpx"]')
    gpx = open(download.value.path()).read()
    in_trip = sum(1 for r in locations if parse_iso(trip["start"]) <= parse_iso(r["time"]) <= parse_iso(trip["end"]))
    check(gpx.count("<trkpt") == in_trip, f"the trip's GPX has {gpx.count('<trkpt')} points, the trail {in_trip}")
    with page.expect_download() as download:
        page.click('#day-export button[data-format="geojson"]')
    geo = json.load(open(download.value.path()))
    points = len(geo["features"][0]["geometry"]["coordinates"])
    check(points == len(locations), f"the day's GeoJSON has {points} points, the trail {len(locations)}")
    results_night["exported_points"] = points

    # The month strip, from /stats where the server has it.
    status, stats = call(url, "/v1/devices/night/stats?" + urlencode(
        {"from": iso(datetime(2025, 3, 1, tzinfo=zone).astimezone(timezone.utc)),
         "to": iso(datetime(2025, 4, 1, tzinfo=zone).astimezone(timezone.utc)), "by": "day", "tz": NIGHT_ZONE}))
    page.wait_for_function("() => window.keeptrack.month && (window.keeptrack.month.ready || window.keeptrack.month.status)",
                           timeout=20000)
    if status == 404:
        check(page.is_hidden("#month"), "the month strip is shown though /stats answers 404")
        skipped["month strip"] = "GET /v1/devices/{id}/stats answers 404 on this server: the strip is hidden, as it should"
    else:
        days = page.eval_on_selector_all("#month-days a", "els => els.map(e => [e.dataset.date, Number(e.dataset.distance)])")
        check(len(days) == 31, f"the month strip has {len(days)} days")
        mine = next((p for p in stats["periods"] if parse_iso(p["start"]).astimezone(zone).date().isoformat() == "2025-03-14"), None)
        shown = dict(days).get("2025-03-14")
        check(mine is not None and shown == mine["distance"], f"the strip's 14 March is {shown} m, /stats {mine}")
        check(page.get_attribute('#month-days a[data-date="2025-03-14"]', "aria-current") == "date",
              "the strip does not mark the day shown")
    check(not page.errors, f"the night's page errors: {page.errors}")
    context.close()
    return results_night


def shares(browser, url):
    """A share link in a fresh context without credentials; revoked, it says so. A forged one says it is
    not valid (401, on any server: without a share, the request has no credential)."""
    context, page = open_page(browser, url, "/map?share=AAAAAAAAAAAAAAAAAAAAAA&device=night&date=2025-03-14", NIGHT_ZONE)
    page.wait_for_selector('#share-note[data-state="ended"]', state="attached", timeout=20000)
    check("not valid" in page.text_content("#share-note"), f"a forged share says '{page.text_content('#share-note')}'")
    check(page.is_hidden("#devices") and page.is_hidden("#day"), "a forged share's page shows the list or a day")
    context.close()
    status, made = call(url, "/v1/shares", method="POST", body={"device": "night", "expires": "2h"})
    if status == 404 or status == 405:
        skipped["share links"] = f"POST /v1/shares answers {status} on this server"
        return
    if not check(status == 201, f"POST /v1/shares answered {status}: {made}"):
        return
    context, page = open_page(browser, url, made["url"] + "?date=2025-03-14", NIGHT_ZONE)
    page.wait_for_selector('#day[data-loaded="true"]', state="attached", timeout=60000)
    check(page.is_hidden("#devices"), "the share link's page shows the device list")
    check(page.locator("#timeline li").count() == 7, f"the share link's timeline has {page.locator('#timeline li').count()} entries")
    check(page.evaluate("sessionStorage.getItem('keeptrack.token')") is None, "the share link's page has a token")
    status, _ = call(url, f"/v1/shares/{made['id']}", method="DELETE")
    check(status == 200, f"DELETE /v1/shares/ID answered {status}")
    # The page as /map?share=TOKEN (the page itself is /map's): the API's 410 makes it say so.
    page.goto(url + "/map?share=" + made["token"] + "&date=2025-03-14", wait_until="load")
    page.wait_for_selector('#share-note[data-state="ended"]', state="attached", timeout=20000)
    check("expired" in page.text_content("#share-note"), f"the revoked link says '{page.text_content('#share-note')}'")
    check(page.is_hidden("#day") and page.locator(".leaflet-marker-icon").count() == 0,
          "the revoked link's page still shows the device")
    status, _ = call(url, made["url"], token=None)
    check(status == 410, f"the revoked {made['url']} answers {status}")
    context.close()
    share_window(browser, url)
    share_expiry(browser, url)


def share_window(browser, url):
    """A share of a window that has ended, the device's latest record after it: opened without a date,
    the page learns its device and window from /v1/shares, says them, and shows the window's day (the
    fixture's evening in New York) with what the API gives the share, without a live stream."""
    status, made = call(url, "/v1/shares", method="POST", body={
        "device": "night", "expires": "2h", "from": "2025-03-14T22:00:00Z", "to": "2025-03-15T00:30:00Z"})
    if not check(status == 201, f"POST /v1/shares with a window answered {status}: {made}"):
        return
    context, page = open_page(browser, url, made["url"], NIGHT_ZONE)
    page.wait_for_selector('#day[data-loaded="true"]', state="attached", timeout=60000)
    note = page.text_content("#share-note")
    check("of night from " in note and "Its time is over" in note, f"the windowed share's page says '{note}'")
    check(page.input_value("#trail-date") == "2025-03-14",
          f"the windowed share's page shows {page.input_value('#trail-date')}, not the window's day")
    entries = page.locator("#timeline li").count()
    _, stops = call(url, "/v1/devices/night/stops?share=" + made["token"], token=None)
    _, trips = call(url, "/v1/devices/night/trips?share=" + made["token"], token=None)
    expected = len(stops.get("stops", [])) + len(trips.get("trips", []))
    check(entries > 0 and entries == expected,
          f"the windowed share's timeline has {entries} entries, its API {expected}")
    check(not page.errors, f"the windowed share's page errors: {page.errors}")
    context.close()


def share_expiry(browser, url):
    """A share link that expires by time, in the browser. `keeptrack serve` has no clock a check could
    move (its clock is the system's; the tests use a manual one, ShareLinkTests), so the share lives a
    few seconds (`"expires": "Ns"`) and every wait is bounded and on the page's own condition, never a
    fixed sleep: a page open on the link while it is live says it expired once it has (the server
    closes the page's live stream at the expiry, and the page, asking again, gets 410); the link opened
    afterwards answers 410 with a page saying when it expired, and the page as /map?share=TOKEN says it expired. If the page was not live before the share expired
    (a slow machine), again with a share three times longer, up to 3 times."""
    # The day of a device that sent one point: fitting it once zoomed the map without bound (no tiles:
    # no zoom limit), and the page, ending the share, threw on the NaN coordinates before it hid the day.
    post(url, {"device": "lone", "records": [
        {"seq": 1, "kind": "location", "time": iso(datetime.now(timezone.utc)), "lat": 48.1405, "lon": 11.5805}]})
    life = 8
    for attempt in range(3):
        status, made = call(url, "/v1/shares", method="POST", body={"device": "lone", "expires": f"{life}s"})
        if not check(status == 201, f"POST /v1/shares (expires {life}s) answered {status}: {made}"):
            return
        expires = parse_iso(made["expires"]).timestamp()
        context, page = open_page(browser, url, made["url"], NIGHT_ZONE)
        page.wait_for_function("() => ['active', 'ended'].includes(document.getElementById('share-note').dataset.state)",
                               timeout=(life + 60) * 1000)
        if page.get_attribute("#share-note", "data-state") == "active":
            break
        context.close()
        life *= 3
    else:
        check(False, f"a share link's page was never live before its expiry (last: {life // 3} s)")
        return
    check(time.time() < expires, "the share link expired before its page was live")
    # The page stays open; the server's clock passes the expiry.
    page.wait_for_selector('#share-note[data-state="ended"]', state="attached", timeout=(life + 60) * 1000)
    ended = time.time()
    note = page.text_content("#share-note")
    check("expired" in note, f"the open page of the expired link says '{note}'")
    check(ended >= expires - 1, f"the open page said the link ended {expires - ended:.1f} s before its expiry")
    check(page.is_hidden("#day") and page.locator(".leaflet-marker-icon").count() == 0,
          "the expired link's open page still shows the device")
    check(not page.errors, f"the expiring share's page errors: {page.errors}")
    context.close()
    # Opened after its expiry, in a fresh context: /s/TOKEN is the 410 itself, a page that says the link
    # ended and when it expired; the page as /map?share=TOKEN says so in its note.
    context = browser.new_context(viewport={"width": 1400, "height": 900}, timezone_id=NIGHT_ZONE)
    page = context.new_page()
    answer = page.goto(url + made["url"], wait_until="load")
    text = page.text_content("body") or ""
    check(answer.status == 410 and "This share link has ended" in text and "expired at" in text,
          f"the expired {made['url']} opened in a browser: {answer.status}, '{text[:200]}'")
    page.goto(url + "/map?share=" + made["token"] + "&date=2025-03-14", wait_until="load")
    page.wait_for_selector('#share-note[data-state="ended"]', state="attached", timeout=20000)
    note = page.text_content("#share-note")
    check("expired" in note, f"the expired link's page, opened after, says '{note}'")
    check(page.is_hidden("#day"), "the expired link's page shows the day")
    context.close()
    status, _ = call(url, "/v1/devices/latest?share=" + made["token"], token=None)
    check(status == 410, f"the expired link's /v1/devices/latest answers {status}")


if __name__ == "__main__":
    sys.exit(main())
