#!/usr/bin/env python3
"""Events exactly once over kill -9: two `keeptrack serve` instances on one PostgreSQL database, each
killed with SIGKILL in turn while a fleet uploads across geofences; every event reaches an idempotent
webhook receiver, signed, and is processed once.

    tools/events-crash-test.py [--devices 20] [--seconds 600] [--kills 6] [--seed 7] [--keeptrack PATH]

A throwaway PostgreSQL 15 + PostGIS cluster (tools/pgcluster.py) holds one database; two instances of
`keeptrack serve --allow-private-hooks` share it. Geofences (circles of 400 m on a grid of about a
kilometre over the fleet's area) and one webhook hook to tools/webhook-receiver.py (its `third` mode:
500 to every third post) are put through the first instance's API. The fleet (tools/fleet-load.py's
vehicles, one record a second of their own time) uploads batches of 10 records, each device in order,
to either instance; a batch whose instance is gone goes to the other. Meanwhile the instances are
killed with SIGKILL in turn (--kills in all, spread over the upload) and restarted.

The instances declare a device offline after --offline-after (30 s by default), so when the upload
ends every device falls silent and gets its `offline` (and an `online` after any silence as long
during the upload). Then, both instances up, it waits until the receiver has processed as many
distinct events as the database holds and every device is offline (an instance killed holding
leases lets them run out: 60 s), and checks:

- every event the database holds (`GET /v1/events`) was processed by the receiver exactly once, every
  post it got whole carried a valid signature (a post an instance was killed in the middle of
  arrives cut short, is refused, and is counted apart), and it processed nothing else;
- the database holds exactly the events a reference run finds: the same batches stored, in the same
  order, by one `keeptrack serve` on SQLite that nobody kills (event ids are their causes': the same
  events have the same ids): nothing lost, nothing made twice. Presence depends on the wall clock,
  not on the batches, so `offline` and `online` are left out of that comparison and checked on
  their own: every device has exactly one `offline` more than `online` (one per silence, the last
  still running), whatever the kills.

It prints the counts (records, kills, events by kind, posts, failed posts) and `OK: ...` last; exit
status 0 on success.
"""
import argparse, collections, json, math, os, random, signal, subprocess, sys, tempfile, threading, time
import urllib.error, urllib.request

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "tools"))
import pgcluster  # noqa: E402
from keeptrack_tools import listening_port  # noqa: E402

SECRET = "a secret of more than 16 bytes"
PRESENCE = {"offline", "online"}
TOKEN = "t"


class Vehicle:
    """tools/fleet-load.py's vehicle: a heading that wanders, 3 to 30 m/s, one record a second."""

    def __init__(self, ident, rng, start):
        self.id, self.rng, self.seq, self.t = ident, rng, 0, start
        self.lat = 48.137 + rng.uniform(-0.05, 0.05)
        self.lon = 11.575 + rng.uniform(-0.08, 0.08)
        self.heading = rng.uniform(0, 360)
        self.speed = rng.uniform(3, 30)

    def batch(self, n):
        out = []
        for _ in range(n):
            self.seq += 1
            self.t += 1
            self.heading = (self.heading + self.rng.gauss(0, 4)) % 360
            self.speed = min(30.0, max(0.0, self.speed + self.rng.gauss(0, 0.5)))
            self.lat += self.speed * math.cos(math.radians(self.heading)) / 111_320
            self.lon += self.speed * math.sin(math.radians(self.heading)) / (111_320 * math.cos(math.radians(self.lat)))
            stamp = time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(self.t)) + ".000Z"
            out.append('{"seq":%d,"kind":"location","time":"%s","lat":%.7f,"lon":%.7f,"hAcc":5.0,"speed":%.2f}'
                       % (self.seq, stamp, self.lat, self.lon, self.speed))
        return '{"device":"%s","records":[%s]}' % (self.id, ",".join(out))


def geofences():
    features = []
    for i in range(-8, 9):
        for j in range(-10, 11):
            lat, lon = 48.137 + i * 0.01, 11.575 + j * 0.015
            features.append({"type": "Feature", "id": f"g{i + 8}-{j + 10}",
                             "geometry": {"type": "Point", "coordinates": [round(lon, 6), round(lat, 6)]},
                             "properties": {"radius": 400}})
    return json.dumps({"type": "FeatureCollection", "features": features})


def request(url, method="GET", body=None, timeout=30):
    data = body.encode() if isinstance(body, str) else body
    r = urllib.request.Request(url, data=data, method=method,
                               headers={"Authorization": f"Bearer {TOKEN}", "Content-Type": "application/json"})
    with urllib.request.urlopen(r, timeout=timeout) as answer:
        return answer.status, answer.read()


class Serve:
    def __init__(self, binary, database, extra=()):
        self.binary, self.database, self.extra = binary, database, list(extra)
        self.p, self.url = None, None
        self.start()

    def start(self):
        self.p = subprocess.Popen([self.binary, "serve", "--port", "0", "--db", self.database, "--token", TOKEN,
                                   "--log-level", "error", *self.extra], stdout=subprocess.PIPE, text=True)
        port = listening_port(self.p.stdout.readline())
        if port is None:
            sys.exit(f"events-crash-test: keeptrack serve --db {self.database} did not start")
        self.url = f"http://127.0.0.1:{port}"

    def kill(self):
        self.p.send_signal(signal.SIGKILL)
        self.p.wait()
        self.url = None

    def stop(self):
        if self.p and self.p.poll() is None:
            self.p.terminate()
            try:
                self.p.wait(30)
            except subprocess.TimeoutExpired:
                self.p.kill()
                self.p.wait()


def all_events(url):
    events, cursor = [], None
    while True:
        path = "/v1/events?limit=1000" + (f"&cursor={cursor}" if cursor else "")
        _, body = request(url + path)
        page = json.loads(body)
        events += page["events"]
        cursor = page["next"]
        if not cursor:
            return events


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--devices", type=int, default=20)
    ap.add_argument("--seconds", type=int, default=600, help="device time each vehicle uploads")
    ap.add_argument("--kills", type=int, default=6)
    ap.add_argument("--seed", type=int, default=7)
    ap.add_argument("--wait", type=float, default=300, help="seconds to wait for the deliveries at most")
    ap.add_argument("--offline-after", type=int, default=30, help="the instances' --offline-after, in seconds")
    ap.add_argument("--keeptrack", default=os.path.join(ROOT, ".build", "debug", "keeptrack"))
    args = ap.parse_args()
    rng = random.Random(args.seed)
    vehicles = [Vehicle(f"van-{i}", random.Random(args.seed * 1000 + i), 1_715_670_000) for i in range(args.devices)]
    batches = []  # (device index, body), each device's in order
    for _ in range(args.seconds // 10):
        for i, v in enumerate(vehicles):
            batches.append((i, v.batch(10)))
    cluster = pgcluster.Cluster()
    scratch = tempfile.mkdtemp(prefix="keeptrack-events-crash-")
    receiver = subprocess.Popen([sys.executable, os.path.join(ROOT, "tools", "webhook-receiver.py"), SECRET],
                                stdout=subprocess.PIPE, text=True)
    posts = []
    port = int(receiver.stdout.readline())
    hook = json.dumps({"type": "webhook", "url": f"http://127.0.0.1:{port}/hook/third", "secret": SECRET})

    def read_posts():
        for line in receiver.stdout:
            posts.append(json.loads(line))

    threading.Thread(target=read_posts, daemon=True).start()
    instances = []
    reference = None
    try:
        database = cluster.create_database("events")
        instances = [Serve(args.keeptrack, database, ["--allow-private-hooks", "--offline-after",
                                                      f"{args.offline_after}s"]) for _ in range(2)]
        request(instances[0].url + "/v1/geofences", "PUT", geofences())
        request(instances[0].url + "/v1/hooks/receiver", "PUT", hook)
        # The upload: each device's batches in order, to either instance; kills in turn.
        queues = collections.defaultdict(list)
        for i, body in batches:
            queues[i].append(body)
        lock = threading.Lock()
        sent = [0]
        kills = [0]
        stop = threading.Event()

        def uploader(index):
            r = random.Random(args.seed + index)
            for body in queues[index]:
                while True:
                    with lock:
                        live = [s.url for s in instances if s.url]
                    if not live:
                        time.sleep(0.05)
                        continue
                    try:
                        status, _ = request(r.choice(live) + "/v1/locations", "POST", body)
                        if status == 200:
                            break
                    except (urllib.error.URLError, ConnectionError, OSError):
                        time.sleep(0.05)
                with lock:
                    sent[0] += 1

        def killer():
            every = max(1, len(batches) // (args.kills + 1))
            for k in range(args.kills):
                while sent[0] < every * (k + 1) and not stop.is_set():
                    time.sleep(0.01)
                if stop.is_set():
                    return
                victim = instances[k % 2]
                with lock:
                    victim.url = None
                victim.kill()
                kills[0] += 1
                victim.start()

        threads = [threading.Thread(target=uploader, args=(i,)) for i in range(args.devices)]
        killing = threading.Thread(target=killer)
        killing.start()
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        stop.set()
        killing.join()
        # The reference: the same batches, in order, on SQLite, nobody killed.
        reference = Serve(args.keeptrack, os.path.join(scratch, "reference.sqlite"))
        request(reference.url + "/v1/geofences", "PUT", geofences())
        for _, body in batches:
            request(reference.url + "/v1/locations", "POST", body)
        expected = {e["id"]: e for e in all_events(reference.url) if e["kind"] not in PRESENCE}
        # Every event delivered: as many processed as the database holds, every device offline, or
        # the wait is over.
        deadline = time.monotonic() + args.wait
        while True:
            stored = {e["id"]: e for e in all_events(instances[0].url)}
            processed = {p["id"] for p in posts if p["first"]}
            presence = collections.Counter((e["device"], e["kind"]) for e in stored.values() if e["kind"] in PRESENCE)
            offline = all(presence[(v.id, "offline")] > presence[(v.id, "online")] for v in vehicles)
            if (len(stored) >= len(expected) and offline and processed >= set(stored)) or time.monotonic() > deadline:
                break
            time.sleep(1)
        time.sleep(2)  # a straggling duplicate post, if any, is counted too
        problems = []
        missing = set(expected) - set(stored)
        extra = {i for i, e in stored.items() if e["kind"] not in PRESENCE} - set(expected)
        unpaired = [v.id for v in vehicles if presence[(v.id, "offline")] != presence[(v.id, "online")] + 1]
        if unpaired:
            problems.append(f"{len(unpaired)} devices without exactly one offline more than online, e.g. "
                            f"{[(d, presence[(d, 'offline')], presence[(d, 'online')]) for d in unpaired[:5]]}")
        if missing:
            problems.append(f"{len(missing)} events the reference has are not stored, e.g. "
                            f"{[expected[i]['kind'] for i in sorted(missing)[:5]]}")
        if extra:
            problems.append(f"{len(extra)} events stored the reference does not have, e.g. "
                            f"{[stored[i]['kind'] for i in sorted(extra)[:5]]}")
        firsts = collections.Counter(p["id"] for p in posts if p["first"])
        twice = [i for i, n in firsts.items() if n > 1]
        if twice:
            problems.append(f"{len(twice)} event ids processed twice")
        undelivered = set(stored) - set(firsts)
        if undelivered:
            problems.append(f"{len(undelivered)} stored events never processed by the receiver")
        unknown = set(firsts) - set(stored)
        if unknown:
            problems.append(f"{len(unknown)} processed ids the database does not hold")
        # A post an instance was killed in the middle of arrives cut short: not a signature to check.
        cut = [p for p in posts if not p.get("complete", True)]
        invalid = [p for p in posts if not p["valid"] and p.get("complete", True)]
        if invalid:
            problems.append(f"{len(invalid)} posts with an invalid signature")
        kinds = collections.Counter(e["kind"] for e in stored.values())
        failed = sum(1 for p in posts if p["status"] == 500)
        print(f"events-crash-test: {args.devices} devices, {len(batches) * 10} records, {kills[0]} SIGKILLs of "
              f"the instances; {len(stored)} events stored {dict(sorted(kinds.items()))}; "
              f"{len(posts)} posts, {failed} answered 500, {len(cut)} cut short by a SIGKILL, {len(firsts)} processed")
        if problems:
            for p in problems:
                print("FAIL: " + p)
            sys.exit(1)
        print("OK: every event stored as the reference finds it, each delivered, signed, and processed once")
    finally:
        for s in instances + ([reference] if reference else []):
            s.stop()
        receiver.kill()  # nothing to flush: every post was read from its output
        receiver.wait()
        cluster.remove()
        subprocess.run(["rm", "-rf", scratch])


if __name__ == "__main__":
    main()
