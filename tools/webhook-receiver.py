#!/usr/bin/env python3
"""A webhook receiver for KeepTrack's hooks, idempotent as docs/events.md asks receivers to be.

    tools/webhook-receiver.py SECRET [--port N] [--seed N]

Listens on 127.0.0.1 (a free port unless --port), prints the port on the first line of standard
output, then one JSON line per POST it received:

    {"path": "/hook/ok", "id": "...", "kind": "...", "device": "...", "valid": true,
     "first": true, "status": 200, "complete": true}

`valid` is the X-KeepTrack-Signature check (HMAC-SHA256 of the body with SECRET, compared in
constant time: the ten lines docs/events.md shows); `first` is whether this event id was processed
for the first time (an idempotent receiver processes each id once, whatever the retries);
`complete` is whether the whole body (Content-Length bytes) arrived: a sender killed mid-post leaves
a body cut short, whose signature cannot match. The answer depends on the path's mode:

    /hook/ok            200
    /hook/fail          500
    /hook/flaky         500 to about a third of the posts (random, --seed), else 200
    /hook/third         500 to every third post (the 3rd, 6th, ...), else 200
    /hook/retry-after   503 with Retry-After: 7
    /hook/hold          said at once with status 0, answered 200 once POST /control/release came
    /hook/redirect?to=URL   302 to URL
    /api/webhook/ID     200 (Home Assistant's webhook trigger answers so)

A post whose signature is wrong is answered 401 and not processed. GET /control/count answers how
many posts were processed once (distinct valid ids).
"""
import hashlib
import hmac
import http.server
import json
import random
import signal
import sys
import threading
import urllib.parse


def verify(secret: bytes, body: bytes, header: str) -> bool:
    expected = "sha256=" + hmac.new(secret, body, hashlib.sha256).hexdigest()
    return hmac.compare_digest(expected, header or "")


def main():
    # A test process's children inherit its SIGTERM blocked (FACTS.md): take it back, so that a
    # terminate() ends this receiver instead of leaving it running after the test.
    signal.pthread_sigmask(signal.SIG_UNBLOCK, [signal.SIGTERM])
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    args = sys.argv[1:]
    if not args:
        print(__doc__, file=sys.stderr)
        sys.exit(64)
    secret = args[0].encode()
    port = int(args[args.index("--port") + 1]) if "--port" in args else 0
    rng = random.Random(int(args[args.index("--seed") + 1]) if "--seed" in args else 1)
    lock = threading.Lock()
    released = threading.Event()
    seen = set()
    posts = [0]

    class Handler(http.server.BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def answer(self, status, headers=(), body=b""):
            self.send_response(status)
            for k, v in headers:
                self.send_header(k, v)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def do_GET(self):
            if self.path == "/control/count":
                with lock:
                    n = len(seen)
                self.answer(200, [("Content-Type", "application/json")], json.dumps({"processed": n}).encode())
            else:
                self.answer(404)

        def do_POST(self):
            length = int(self.headers.get("Content-Length", "0"))
            body = self.rfile.read(length)
            url = urllib.parse.urlsplit(self.path)
            if url.path == "/control/release":
                released.set()
                self.answer(200)
                return
            valid = verify(secret, body, self.headers.get("X-KeepTrack-Signature"))
            event_id = self.headers.get("X-KeepTrack-Event-Id", "")
            mode = url.path.rsplit("/", 1)[-1] if url.path.startswith("/hook/") else "ok"
            if mode == "hold" and not released.is_set():
                # Said at once (status 0), answered once released.
                with lock:
                    print(json.dumps({"path": url.path, "id": event_id, "kind": "", "device": "", "bodyId": "",
                                      "valid": valid, "first": False, "status": 0}), flush=True)
                released.wait()
            status, headers = 200, []
            if not valid:
                status = 401
            elif mode == "fail":
                status = 500
            elif mode == "flaky":
                with lock:
                    status = 500 if rng.random() < 1 / 3 else 200
            elif mode == "third":
                with lock:
                    posts[0] += 1
                    status = 500 if posts[0] % 3 == 0 else 200
            elif mode == "retry-after":
                status, headers = 503, [("Retry-After", "7")]
            elif mode == "redirect":
                to = urllib.parse.parse_qs(url.query).get("to", ["http://169.254.169.254/"])[0]
                status, headers = 302, [("Location", to)]
            first = False
            if status == 200:
                with lock:
                    first = event_id not in seen
                    seen.add(event_id)
            try:
                event = json.loads(body)
            except ValueError:
                event = {}
            line = {"path": url.path, "id": event_id, "kind": self.headers.get("X-KeepTrack-Event", ""),
                    "device": event.get("device", ""), "bodyId": event.get("id", ""), "valid": valid,
                    "first": first, "status": status, "complete": len(body) == length}
            with lock:
                print(json.dumps(line), flush=True)
            self.answer(status, headers)

        def log_message(self, *a):
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", port), Handler)
    server.daemon_threads = True
    print(server.server_address[1], flush=True)
    server.serve_forever()


if __name__ == "__main__":
    main()
