#!/usr/bin/env python3
"""Floods of connections against `keeptrack serve` (issue 25, item 2): is `GET /healthz`, and a real
upload, still answered while idle connections or a slowloris hold the server's connections?

    tools/flood.py [--keeptrack BIN] [--label NAME] [--floods idle:1100,idle:10000,slowloris:2000]
                [--hold 20] [--soft-limit 1024] [--hard-limit N] [--probe-timeout 2]

For each flood, a fresh `keeptrack serve` (its own database in a temporary directory) is started
as a shell with `ulimit -Sn 1024` would start it: soft RLIMIT_NOFILE --soft-limit, the hard limit
as the system sets it (or --hard-limit: `ulimit -n 1024` sets both). Then:
- idle:N opens N TCP connections as fast as it can and sends nothing on them;
- slowloris:N opens N connections and sends each a request head one byte a second, a head that
  never ends (a header line after another);
and holds them for --hold seconds. At 2 s, 10 s and 20 s from the flood's start, `GET /healthz` and
`POST /v1/locations` (one record), each on a new connection, must be answered within
--probe-timeout: each cell says the status and the time, or that no answer came. The last columns
say how many of the flood's connections the server had closed by the end, how many got a 503, and
the server's peak RSS. Each answer is checked (status 200 and its body) before it counts as one.

Without --keeptrack it builds the release binary of this checkout (.build-release).
"""
import argparse, json, os, resource, selectors, socket, subprocess, sys, tempfile, threading, time

import keeptrack_tools

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TOKEN = "flood"
PROBES = (2, 10, 20)


def proc_kb(pid, field):
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith(field + ":"):
                    return int(line.split()[1])
    except OSError:
        pass
    return 0


def exchange(port, request, timeout):
    """One request on a new connection: (status, body, seconds), status 0 when no answer came in time."""
    start = time.monotonic()
    deadline = start + timeout
    try:
        s = socket.create_connection(("127.0.0.1", port), timeout=timeout)
    except OSError:
        return 0, "", time.monotonic() - start
    try:
        s.sendall(request)
        data = b""
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                return 0, "", time.monotonic() - start
            s.settimeout(left)
            chunk = s.recv(65536)
            if not chunk:
                break
            data += chunk
            head, sep, body = data.partition(b"\r\n\r\n")
            if sep:
                length = 0
                for line in head.split(b"\r\n")[1:]:
                    name, _, value = line.partition(b":")
                    if name.strip().lower() == b"content-length":
                        length = int(value.strip())
                if len(body) >= length:
                    break
        head, _, body = data.partition(b"\r\n\r\n")
        parts = head.split(b" ", 2)
        status = int(parts[1]) if len(parts) >= 2 and parts[1].isdigit() else 0
        return status, body.decode("utf-8", "replace"), time.monotonic() - start
    except OSError:
        return 0, "", time.monotonic() - start
    finally:
        s.close()


def healthz(port, timeout):
    status, body, t = exchange(port, b"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n", timeout)
    ok = status == 200 and json.loads(body or "{}").get("status") == "ok"
    return status, ok, t


def upload(port, seq, timeout):
    batch = json.dumps({"device": "flood-probe", "records": [
        {"seq": seq, "kind": "location", "time": "2024-05-14T09:30:00Z", "lat": 48.1, "lon": 11.5}]}).encode()
    request = (b"POST /v1/locations HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer " + TOKEN.encode()
               + b"\r\nContent-Type: application/json\r\nConnection: close\r\nContent-Length: "
               + str(len(batch)).encode() + b"\r\n\r\n" + batch)
    status, body, t = exchange(port, request, timeout)
    ok = status == 200 and json.loads(body or "{}").get("accepted") == 1
    return status, ok, t


class Flood(threading.Thread):
    """N connections opened as fast as the kernel lets them, then held; slowloris ones drip a head."""

    def __init__(self, port, count, slow, hold):
        super().__init__(daemon=True)
        self.port, self.count, self.slow, self.hold = port, count, slow, hold
        self.connected = 0
        self.closed_by_server = 0
        self.answered_503 = 0
        self.stop = threading.Event()

    def run(self):
        sel = selectors.DefaultSelector()
        pending = self.count
        socks = {}
        drip = b"GET / HTTP/1.1\r\nHost: 127.0.0.1\r\n" + b"X-Slow: a\r\n" * 1000
        start = time.monotonic()
        next_drip = start + 1
        while not self.stop.is_set() and time.monotonic() - start < self.hold:
            # Open in bursts so that the probes and the drip keep their pace.
            for _ in range(min(pending, 200)):
                s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
                s.setblocking(False)
                try:
                    s.connect_ex(("127.0.0.1", self.port))
                except OSError:
                    s.close()
                    continue
                socks[s.fileno()] = [s, False, 0]
                sel.register(s, selectors.EVENT_WRITE | selectors.EVENT_READ)
                pending -= 1
            for key, events in sel.select(timeout=0.05):
                entry = socks.get(key.fd)
                if entry is None:
                    continue
                s = entry[0]
                if events & selectors.EVENT_WRITE and not entry[1]:
                    if s.getsockopt(socket.SOL_SOCKET, socket.SO_ERROR) == 0:
                        entry[1] = True
                        self.connected += 1
                        sel.modify(s, selectors.EVENT_READ)
                    else:
                        sel.unregister(s)
                        s.close()
                        del socks[key.fd]
                    continue
                if events & selectors.EVENT_READ:
                    try:
                        data = s.recv(4096)
                    except OSError:
                        data = b""
                    if data.startswith(b"HTTP/1.1 503"):
                        self.answered_503 += 1
                    if not data:
                        self.closed_by_server += 1
                        sel.unregister(s)
                        s.close()
                        del socks[key.fd]
            now = time.monotonic()
            if self.slow and now >= next_drip:
                next_drip += 1
                for entry in list(socks.values()):
                    if entry[1] and entry[2] < len(drip):
                        try:
                            entry[0].send(drip[entry[2]:entry[2] + 1])
                            entry[2] += 1
                        except OSError:
                            pass
        for entry in socks.values():
            entry[0].close()
        sel.close()


def run_flood(binary, kind, count, args):
    with tempfile.TemporaryDirectory(prefix="keeptrack-flood-") as tmp:
        def limit_fds():
            hard = args.hard_limit or resource.getrlimit(resource.RLIMIT_NOFILE)[1]
            resource.setrlimit(resource.RLIMIT_NOFILE, (min(args.soft_limit, hard), hard))
        server = subprocess.Popen([binary, "serve", "--port", "0", "--db", os.path.join(tmp, "endpoint.sqlite"),
                                   "--token", TOKEN, "--log-level", "warning"],
                                  stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True, preexec_fn=limit_fds)
        try:
            port = int(json.loads(server.stdout.readline())["url"].rsplit(":", 1)[1])
            # The server answers before the flood (a check of the probe itself).
            if not healthz(port, 30)[1] or not upload(port, 1, 30)[1]:
                sys.exit(f"flood: {binary} does not answer before the flood")
            flood = Flood(port, count, kind == "slowloris", args.hold)
            start = time.monotonic()
            flood.start()
            cells = []
            seq = 2
            for at in PROBES:
                if at > args.hold:
                    break
                time.sleep(max(0, start + at - time.monotonic()))
                h_status, h_ok, h_t = healthz(port, args.probe_timeout)
                u_status, u_ok, u_t = upload(port, seq, args.probe_timeout)
                seq += 1

                def cell(status, ok, t):
                    if ok:
                        return f"200 in {t * 1000:.0f} ms"
                    return f"{status}" if status else f"no answer in {args.probe_timeout:g} s"
                cells.append(f"{cell(h_status, h_ok, h_t)} / {cell(u_status, u_ok, u_t)}")
            flood.join()
            rss = proc_kb(server.pid, "VmHWM") / 1024
            return cells, flood, rss
        finally:
            keeptrack_tools.stop(server)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--keeptrack", help="the binary to flood (default: this checkout's release build)")
    ap.add_argument("--label", help="the binary's name in the table (default: its version line)")
    ap.add_argument("--floods", default="idle:1100,idle:10000,slowloris:2000")
    ap.add_argument("--hold", type=float, default=20)
    ap.add_argument("--soft-limit", type=int, default=1024)
    ap.add_argument("--hard-limit", type=int, help="default: the hard limit as the system sets it")
    ap.add_argument("--probe-timeout", type=float, default=2)
    args = ap.parse_args()
    binary = args.keeptrack or keeptrack_tools.build()
    label = args.label or subprocess.run([binary, "--version"], capture_output=True, text=True).stdout.strip()
    # The flood's own sockets: the tool's soft limit raised to its hard one.
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    server_hard = args.hard_limit or hard
    print(f"flood against keeptrack serve (soft RLIMIT_NOFILE {args.soft_limit}, hard {server_hard}): GET /healthz "
          f"/ POST /v1/locations, each on a new connection, answered within {args.probe_timeout:g} s?")
    print()
    print("| binary | flood | at 2 s | at 10 s | at 20 s | connected | closed by the server | got 503 | peak RSS |")
    print("|---|---|---|---|---|---:|---:|---:|---:|")
    for spec in args.floods.split(","):
        kind, _, n = spec.partition(":")
        if kind not in ("idle", "slowloris"):
            sys.exit(f"flood: unknown flood '{kind}' (idle:N or slowloris:N)")
        cells, flood, rss = run_flood(binary, kind, int(n), args)
        cells += ["-"] * (len(PROBES) - len(cells))
        print(f"| {label} | {int(n):,} {kind} | " + " | ".join(cells)
              + f" | {flood.connected:,} | {flood.closed_by_server:,} | {flood.answered_503:,} | {rss:.0f} MB |",
              flush=True)


if __name__ == "__main__":
    main()
