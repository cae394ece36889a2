// The live stream's delivery latency and fan-out, and its memory under clients that never read
// (issue 28, "Done when"). Run by tools/bench-stream; node 20 with --experimental-websocket.
//
//   node --experimental-websocket tools/bench-stream.mjs BINARY [--clients N] [--rate P] [--seconds S]
//        [--idle N] [--idle-points M]
//
// Phase 1: `keeptrack serve` (its own temporary SQLite store) with N stream clients reading (one
// device each of 10, and one admin client that sees everything), P points/s POSTed as JSON batches
// of P/10 every 100 ms for S seconds. The latency of a record is from just before its batch is
// POSTed to its frame at a client; p50/p99 over every (record, client) delivery; the server's CPU
// from /proc. The check before reporting: every client got every record of its device, in order.
// Phase 2 (with --idle N): N clients upgrade and never read while M points are ingested; the
// server's resident memory before and after, how many were closed (1008), and that a reading
// client still got every record.
import { spawn } from "node:child_process";
import fs from "node:fs";
import net from "node:net";
import os from "node:os";
import path from "node:path";

const args = process.argv.slice(2);
const binary = args[0];
const option = (name, value) => {
  const i = args.indexOf(name);
  return i >= 0 ? Number(args[i + 1]) : value;
};
const clients = option("--clients", 1000);
const rate = option("--rate", 1000);
const seconds = option("--seconds", 10);
const idle = option("--idle", 0);
const idlePoints = option("--idle-points", 100000);
const devices = 10;
const token = "bench";
const ticks = os.constants ? 100 : 100; // USER_HZ on Linux

function stat(pid) {
  const fields = fs.readFileSync(`/proc/${pid}/stat`, "utf8").split(") ")[1].split(" ");
  const status = fs.readFileSync(`/proc/${pid}/status`, "utf8");
  const rss = Number(/VmRSS:\s+(\d+)/.exec(status)[1]) * 1024;
  return { cpu: (Number(fields[11]) + Number(fields[12])) / ticks, rss };
}

function percentile(sorted, p) {
  return sorted.length ? sorted[Math.min(sorted.length - 1, Math.floor((sorted.length * p) / 100))] : NaN;
}

const work = fs.mkdtempSync(path.join(os.tmpdir(), "keeptrack-bench-stream."));
const server = spawn(binary, ["serve", "--db", path.join(work, "s.sqlite"), "--port", "0", "--token", token,
                              "--max-streams", String(clients + idle + 10), "--max-connections", "512"],
                     { stdio: ["ignore", "pipe", "inherit"] });
const url = await new Promise((resolve, reject) => {
  let text = "";
  server.stdout.on("data", (d) => {
    text += d;
    const line = text.split("\n")[0];
    if (text.includes("\n")) resolve(JSON.parse(line).url);
  });
  server.on("exit", () => reject(new Error("keeptrack serve exited")));
});
const { hostname, port } = new URL(url);
const wsURL = url.replace("http", "ws") + "/v1/stream?token=" + token;

let seq = 0;
const sent = new Map(); // seq -> time the batch left
async function post(device, count) {
  const records = [];
  const now = Date.now();
  for (let i = 0; i < count; i++) {
    seq += 1;
    sent.set(seq, performance.now());
    records.push({ seq, kind: "location", time: new Date(now).toISOString(), lat: 48.1 + (seq % 1000) * 1e-5,
                   lon: 11.5 });
  }
  const res = await fetch(url + "/v1/locations", {
    method: "POST", headers: { "Content-Type": "application/json", Authorization: "Bearer " + token },
    body: JSON.stringify({ device, records }),
  });
  if (!res.ok) throw new Error("POST " + res.status);
}

// Phase 2's reading client connects first: a WebSocket of node's may go over a connection fetch
// kept alive, and an upgrade there is answered with a redirect to a new connection.
const reader = { seqs: [] };
if (idle > 0) {
  await new Promise((resolve, reject) => {
    const ws = new WebSocket(wsURL + "&device=idle-check");
    ws.onerror = () => reject(new Error("the reading client failed to connect"));
    ws.onclose = (e) => console.error(`bench-stream: the reading client was closed (${e.code} ${e.reason})`);
    ws.onmessage = (e) => {
      const m = JSON.parse(e.data);
      if (m.type === "snapshot") resolve();
      else reader.seqs.push(m.record.seq);
    };
    reader.ws = ws;
  });
}

// Phase 1.
const latencies = [];
const perClient = [];
let opened = 0;
// In waves of 100: connections not yet upgraded count against the server's connection cap.
for (let wave = 0; wave < clients; wave += 100) {
 await new Promise((resolve, reject) => {
  let waiting = Math.min(100, clients - wave);
  for (let c = wave; c < Math.min(clients, wave + 100); c++) {
    const device = c === 0 ? null : "d" + (c % devices);
    const state = { device, seqs: [], inOrder: true };
    perClient.push(state);
    const ws = new WebSocket(wsURL + (device ? "&device=" + device : ""));
    ws.onmessage = (e) => {
      const m = JSON.parse(e.data);
      if (m.type === "snapshot") {
        opened += 1;
        if (--waiting === 0) resolve();
        return;
      }
      const s = m.record.seq;
      const t = sent.get(s);
      if (t !== undefined) latencies.push(performance.now() - t);
      if (state.seqs.length && state.seqs[state.seqs.length - 1] > s) state.inOrder = false;
      state.seqs.push(s);
    };
    ws.onerror = () => reject(new Error("a stream client failed to connect"));
    state.ws = ws;
  }
 });
}
console.error(`bench-stream: ${opened} clients connected`);
const before = stat(server.pid);
const started = performance.now();
const perTick = Math.max(1, Math.round(rate / 10));
const expected = new Map(); // device -> seqs
for (let tick = 0; tick < seconds * 10; tick++) {
  const device = "d" + (tick % devices);
  const first = seq + 1;
  await post(device, perTick);
  const list = expected.get(device) || [];
  for (let s = first; s <= seq; s++) list.push(s);
  expected.set(device, list);
  const wait = started + (tick + 1) * 100 - performance.now();
  if (wait > 0) await new Promise((r) => setTimeout(r, wait));
}
// Let the last frames arrive (a bound, not a measurement: the check below says whether they did).
const total = [...expected.values()].reduce((a, l) => a + l.length, 0);
const deadline = performance.now() + 30000;
while (performance.now() < deadline) {
  const missing = perClient.some((c) => c.seqs.length < (c.device ? (expected.get(c.device) || []).length : total));
  if (!missing) break;
  await new Promise((r) => setTimeout(r, 50));
}
const after = stat(server.pid);
const elapsed = (performance.now() - started) / 1000;
let complete = true;
for (const c of perClient) {
  const want = c.device ? expected.get(c.device) || [] : [...expected.values()].flat().sort((a, b) => a - b);
  if (c.seqs.length !== want.length || !c.inOrder) complete = false;
}
latencies.sort((a, b) => a - b);
for (const c of perClient) c.ws.close();
if (!complete) {
  console.error("bench-stream: a client missed records or got them out of order: no figure reported");
  server.kill("SIGTERM");
  process.exit(1);
}
console.log(`stream fan-out: ${clients} clients, ${rate} points/s for ${seconds} s, ${total} records, ` +
            `${latencies.length} deliveries checked complete and in order`);
console.log(`  delivery latency p50 ${percentile(latencies, 50).toFixed(1)} ms, p99 ${percentile(latencies, 99).toFixed(1)} ms, ` +
            `max ${latencies[latencies.length - 1].toFixed(1)} ms`);
console.log(`  server CPU ${(after.cpu - before.cpu).toFixed(2)} s over ${elapsed.toFixed(1)} s ` +
            `(${(((after.cpu - before.cpu) / elapsed) * 100).toFixed(0)}% of a core), RSS ${(after.rss / 1048576).toFixed(0)} MiB`);

// Phase 2: clients that never read.
if (idle > 0) {
  const sockets = [];
  for (let i = 0; i < idle; i++) {
    const s = net.connect(Number(port), hostname);
    s.on("error", () => {});
    s.write(`GET /v1/stream?token=${token} HTTP/1.1\r\nHost: ${hostname}\r\nUpgrade: websocket\r\n` +
            `Connection: Upgrade\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n\r\n`);
    s.pause();
    sockets.push(s);
  }
  await new Promise((r) => setTimeout(r, 1000));
  const idleBefore = stat(server.pid);
  const checkSeqs = [];
  for (let n = 0; n < idlePoints; n += 1000) {
    await post("idle-bulk", 990);
    const first = seq + 1;
    await post("idle-check", 10);
    for (let s = first; s <= seq; s++) checkSeqs.push(s);
  }
  const until = performance.now() + 30000;
  while (reader.seqs.length < checkSeqs.length && performance.now() < until) await new Promise((r) => setTimeout(r, 50));
  const idleAfter = stat(server.pid);
  const metrics = await (await fetch(url + "/metrics")).text();
  const overflows = Number(/keeptrack_serve_stream_overflow_closes_total (\d+)/.exec(metrics)?.[1] ?? -1);
  const served = reader.seqs.length === checkSeqs.length && reader.seqs.every((s, i) => s === checkSeqs[i]);
  if (!served) {
    console.error(`bench-stream: the reading client got ${reader.seqs.length} of ${checkSeqs.length}: no figure reported`);
    server.kill("SIGTERM");
    process.exit(1);
  }
  console.log(`idle clients: ${idle} never read while ${seq - (total)} points were ingested; ` +
              `the reading client got all ${checkSeqs.length} of its records in order`);
  console.log(`  server RSS ${(idleBefore.rss / 1048576).toFixed(0)} MiB before, ${(idleAfter.rss / 1048576).toFixed(0)} MiB after; ` +
              `${overflows} closed for overflowing (1008)`);
  for (const s of sockets) s.destroy();
  reader.ws.close();
}
server.kill("SIGTERM");
await new Promise((r) => server.on("exit", r));
fs.rmSync(work, { recursive: true, force: true });
