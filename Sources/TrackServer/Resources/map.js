// The map page's script (/map/app.js), our own, on Leaflet (docs/live.md). It keeps no token in the
// page: ?token= is moved to sessionStorage and out of the address bar at once. The device list and
// the markers follow the live stream (/v1/stream). A chosen device's day (?device=ID&date=YYYY-MM-DD,
// in the viewer's time zone) is read from /v1/devices/{id}/trail (page by page), /stops and /trips:
// the trail on a canvas, the trips in colours, the visits as discs, the timeline beside the map, a
// replay with a time slider and a speed chart (dygraphs, when the server has it), and the month as a
// strip of days (/stats, hidden where the server has no such route). Opened as /s/TOKEN or
// /map?share=TOKEN the page is a share link's: that one device, read-only, no device list.
// window.keeptrack exposes the state for tests and tools. The page's settings (tiles, attribution, the
// offline delay, whether the chart library is there) are the JSON of <script id="settings"> (map.html).
"use strict";
(function () {
  const settings = JSON.parse(document.getElementById("settings").textContent);
  const params = new URLSearchParams(location.search);
  const sharePath = /^\/s\/([A-Za-z0-9_-]+)$/.exec(location.pathname);
  const share = sharePath ? sharePath[1] : params.get("share");
  if (params.has("token")) {
    if (!share) { sessionStorage.setItem("keeptrack.token", params.get("token")); }
    params.delete("token");
    const rest = params.toString();
    history.replaceState(null, "", location.pathname + (rest ? "?" + rest : "") + location.hash);
  }
  const token = share ? null : sessionStorage.getItem("keeptrack.token");
  const statusBox = document.getElementById("status");
  const list = document.getElementById("devices");
  const shareNote = document.getElementById("share-note");
  const DAY = 86400000;
  const state = {
    devices: new Map(), markers: new Map(), selected: null, trail: null, trailLayer: null,
    trailRecords: [], regionMarkers: [], connected: false, frames: 0, tileErrors: 0,
    share: share ? { token: share, state: "checking" } : null,
    day: null, timeline: [], dayLayers: [], times: null, lats: null, lons: null, speeds: null,
    replay: { t: 0, playing: false, speed: 1, frames: 0 }, chart: null, month: null, loadedAt: null,
    recent: new Map(), marked: new Map(), withheld: new Map(), outlierEvents: 0
  };
  window.keeptrack = state;
  function say(text) { statusBox.textContent = text; }
  if (typeof L === "undefined") { say("Leaflet is missing on the server."); return; }
  L.Icon.Default.imagePath = "/map/leaflet/images/";
  // A zoom bound of its own: without tiles (--tiles none) Leaflet has none, and fitting a single point
  // would zoom to infinity (NaN coordinates).
  const map = L.map("map", { preferCanvas: true, worldCopyJump: true, maxZoom: 19 }).setView([20, 0], 2);
  state.map = map;
  if (settings.tiles) {
    const tiles = L.tileLayer(settings.tiles, { maxZoom: 19, attribution: settings.attribution });
    tiles.on("tileerror", function () {
      state.tileErrors += 1;
      if (state.tileErrors === 1) { say("Map tiles are unreachable: positions are drawn without them."); }
    });
    tiles.addTo(map);
  }
  const renderer = L.canvas({ padding: 0.5 });
  function headers() { return token ? { Authorization: "Bearer " + token } : {}; }
  // An API path with its query: a share link's token goes in every request's query.
  function api(path, query) {
    const q = new URLSearchParams(query || {});
    if (share) { q.set("share", share); }
    const s = q.toString();
    return path + (s ? "?" + s : "");
  }
  function devicePath(id, what) { return "/v1/devices/" + encodeURIComponent(id) + "/" + what; }
  async function get(path, query) {
    // A share link's page sends no credential of the browser's: a 401 (no such share) then asks for
    // none (no Basic prompt), it says the link is not valid.
    const res = await fetch(api(path, query), share ? { credentials: "omit" } : { headers: headers() });
    if (res.status === 410 && share) { shareEnded(res); }
    return res;
  }

  // Times, in the viewer's zone.
  function pad(n) { return (n < 10 ? "0" : "") + n; }
  function fmtTime(iso) {
    if (!iso) { return ""; }
    const d = new Date(iso);
    return isNaN(d) ? "" : d.toLocaleString();
  }
  // A short time for the device list: the time today, the date and time this year, the date before.
  function shortWhen(iso) {
    const d = new Date(iso || "");
    if (isNaN(d)) { return ""; }
    const now = new Date();
    const hm = pad(d.getHours()) + ":" + pad(d.getMinutes());
    if (dayKey(d) === dayKey(now)) { return hm; }
    const options = { day: "numeric", month: "short" };
    if (d.getFullYear() !== now.getFullYear()) { return d.toLocaleDateString(undefined, Object.assign(options, { year: "numeric" })); }
    return d.toLocaleDateString(undefined, options) + " " + hm;
  }
  function dayKey(d) { return d.getFullYear() + "-" + pad(d.getMonth() + 1) + "-" + pad(d.getDate()); }
  function dayStart(key) {
    const m = /^(\d{4})-(\d{2})-(\d{2})$/.exec(key || "");
    if (!m) { return null; }
    const d = new Date(+m[1], +m[2] - 1, +m[3]);
    return isNaN(d) || dayKey(d) !== key ? null : d;
  }
  function addDays(key, n) {
    const d = dayStart(key);
    return dayKey(new Date(d.getFullYear(), d.getMonth(), d.getDate() + n));
  }
  function clock(ms, seconds) {
    const d = new Date(ms);
    const text = pad(d.getHours()) + ":" + pad(d.getMinutes()) + (seconds ? ":" + pad(d.getSeconds()) : "");
    if (state.day && dayKey(d) !== state.day.key) {
      return d.toLocaleDateString(undefined, { day: "numeric", month: "short" }) + " " + text;
    }
    return text;
  }
  function span(seconds) {
    const m = Math.round(seconds / 60);
    if (m < 60) { return m + " min"; }
    return Math.floor(m / 60) + " h " + pad(m % 60) + " min";
  }
  function km(metres) { return metres >= 10000 ? Math.round(metres / 1000) + " km" : (metres / 1000).toFixed(2) + " km"; }
  function kmh(mps) { return typeof mps === "number" ? (mps * 3.6).toFixed(1) + " km/h" : "–"; }

  // The device list: live means a record recent by its own time, received lately (issue 36, item 5).
  function liveState(d) {
    // The stream's offline and online events say whether records come; until one came, the last receipt does.
    const receiving = typeof d.live === "boolean" ? d.live
      : Date.now() - Date.parse(d.lastReceived || d.time) < settings.offlineAfter * 1000;
    const t = Date.parse(d.time);
    const recent = !isNaN(t) && Date.now() - t < settings.offlineAfter * 1000;
    if (receiving && recent) { return "live"; }
    return receiving && !isNaN(t) ? "late" : "offline";
  }
  function row(id) {
    let li = list.querySelector('li[data-device-id="' + CSS.escape(id) + '"]');
    if (!li) {
      li = document.createElement("li");
      li.dataset.deviceId = id;
      li.tabIndex = 0;
      li.setAttribute("role", "button");
      const name = document.createElement("span");
      name.className = "name";
      name.textContent = id;
      name.title = id;
      const st = document.createElement("span");
      st.className = "state";
      li.append(name, st);
      li.addEventListener("click", function () { select(id); });
      li.addEventListener("keydown", function (e) { if (e.key === "Enter") { select(id); } });
      const after = Array.from(list.children).find(function (o) { return o.dataset.deviceId > id; });
      list.insertBefore(li, after || null);
    }
    return li;
  }
  function showDevice(d) {
    state.devices.set(d.id, d);
    const li = row(d.id);
    const st = liveState(d);
    li.dataset.live = String(st === "live");
    li.dataset.state = st;
    li.querySelector(".state").textContent = (st === "live" ? "live · " + clock(Date.parse(d.time), true)
      : st === "late" ? "sending old records · " + shortWhen(d.time) : "offline · " + shortWhen(d.time));
    li.title = "last record " + fmtTime(d.time) + (d.lastReceived ? ", received " + fmtTime(d.lastReceived) : "");
    if (typeof d.lat === "number" && typeof d.lon === "number" && !noPosition(d)) {
      let m = state.markers.get(d.id);
      if (!m) {
        m = L.marker([d.lat, d.lon], { title: d.id, alt: d.id, keyboard: true });
        m.on("click", function () { select(d.id); });
        m.addTo(map);
        state.markers.set(d.id, m);
      } else {
        m.setLatLng([d.lat, d.lon]);
      }
      if (state.following && state.selected === d.id) { map.panTo([d.lat, d.lon]); }
    }
  }
  function refreshStates() { state.devices.forEach(function (d) { showDevice(d); }); }
  setInterval(refreshStates, 30000);
  let fitted = false;
  function fitAll() {
    const ll = Array.from(state.markers.values()).map(function (m) { return m.getLatLng(); });
    if (ll.length > 0 && !fitted && !state.day) {
      fitted = true;
      map.fitBounds(L.latLngBounds(ll).pad(0.2), { maxZoom: 16 });
    }
  }

  // The live stream: a snapshot, then every record stored and the devices' offline and online events.
  let retry = 1000;
  function connect() {
    if (state.share && state.share.state === "ended") { return; }
    const proto = location.protocol === "https:" ? "wss:" : "ws:";
    const q = new URLSearchParams();
    if (token) { q.set("token", token); }
    if (share) { q.set("share", share); }
    const ws = new WebSocket(proto + "//" + location.host + "/v1/stream" + (q.toString() ? "?" + q : ""));
    state.socket = ws;
    ws.onopen = function () { retry = 1000; };
    ws.onmessage = function (event) {
      state.frames += 1;
      const msg = JSON.parse(event.data);
      if (msg.type === "snapshot") {
        state.connected = true;
        msg.devices.forEach(function (d) {
          if (typeof d.lat === "number" && !noPosition(d)) { rememberPosition(d.id, d); }
          showDevice(d);
        });
        if (!share) {
          say(msg.devices.length + (msg.devices.length === 1 ? " device" : " devices") + ", live.");
        }
        fitAll();
        if (wanted && !state.selected && (state.devices.has(wanted) || share)) {
          select(wanted);
        } else if (wanted && !state.selected && !share) {
          say("No device '" + wanted + "' here: choose one from the list.");
        }
      } else if (msg.type === "record") {
        onRecord(msg.device, msg.record);
      } else if (msg.type === "event") {
        onEvent(msg.device, msg.event);
      }
    };
    ws.onclose = function (event) {
      state.connected = false;
      if (event.code === 1008) {
        say("The live stream was refused: " + (event.reason || "policy") + (share ? "." : ". Open /map?token=TOKEN."));
        if (share) { checkShare(); }
        return;
      }
      if (share) { checkShare(); }
      say("The live stream is disconnected; retrying.");
      setTimeout(connect, retry);
      retry = Math.min(retry * 2, 30000);
    };
  }
  function onEvent(device, e) {
    const known = state.devices.get(device) || { id: device };
    if (e.kind === "offline" || e.kind === "online") {
      showDevice(Object.assign({}, known, { live: e.kind === "online" }));
    } else if ((e.kind === "stop" || e.kind === "trip") && state.selected === device && state.day && state.day.live) {
      loadTimeline(state.day);
    } else if (e.kind === "outliers") {
      onOutliers(device, e);
    }
  }
  function onRecord(device, r) {
    const known = Object.assign({}, state.devices.get(device) || { id: device }, { live: true });
    const located = r.kind === "location" && r.valid !== false;
    // A fix the server marks at once (no position, inaccurate), or one whose mark came first: never
    // drawn, never the device's position.
    const outlier = located && (plainOutlier(r) || isMarked(device, r));
    if (located && !outlier) {
      rememberPosition(device, r);
      showDevice(Object.assign({}, known, { id: device, time: r.time, lat: r.lat, lon: r.lon,
                                            lastReceived: new Date().toISOString() }));
    } else {
      showDevice(Object.assign({}, known, { lastReceived: new Date().toISOString() }));
    }
    if (outlier) {
      withhold(r);
    } else if (state.selected === device && state.trail && state.trail.live) {
      const t = Date.parse(r.time);
      if (t >= state.trail.from && t <= state.trail.to) { addToTrail([r]); }
    }
    fitAll();
  }

  // Outliers (docs/visits.md): the server marks a 0,0 fix, an inaccurate one, a jump, and holds a
  // point that came too fast as `pending`; its stream's `outliers` events say so after the record.
  // A live line drops what they mark and takes back what they clear; the marker goes back to the
  // device's last good location.
  function pointKey(time, lat, lon) {
    return Date.parse(time) + " " + Number(lat).toFixed(7) + " " + Number(lon).toFixed(7);
  }
  function noPosition(p) {
    return !(isFinite(p.lat) && isFinite(p.lon)) || (p.lat === 0 && p.lon === 0) || Math.abs(p.lat) > 90 ||
      Math.abs(p.lon) > 180;
  }
  function plainOutlier(r) {
    return noPosition(r) || (typeof r.hAcc === "number" && typeof settings.maxAccuracy === "number" &&
      r.hAcc > settings.maxAccuracy);
  }
  function isMarked(device, r) {
    const marks = state.marked.get(device);
    return Boolean(marks && marks.has(pointKey(r.time, r.lat, r.lon)));
  }
  // The device's latest good locations seen, by time (a bounded few): where its marker goes back to.
  function rememberPosition(device, r) {
    const recent = state.recent.get(device) || [];
    state.recent.set(device, recent);
    const p = { time: r.time, t: Date.parse(r.time), lat: r.lat, lon: r.lon };
    if (isNaN(p.t) || recent.some(function (o) { return pointKey(o.time, o.lat, o.lon) === pointKey(p.time, p.lat, p.lon); })) {
      return;
    }
    let i = recent.length;
    while (i > 0 && recent[i - 1].t > p.t) { i -= 1; }
    recent.splice(i, 0, p);
    if (recent.length > 200) { recent.shift(); }
  }
  // A location left out of the line, kept (a bounded few) for the event that clears it.
  function withhold(r) {
    state.withheld.set(pointKey(r.time, r.lat, r.lon), r);
    if (state.withheld.size > 1000) { state.withheld.delete(state.withheld.keys().next().value); }
  }
  function onOutliers(device, e) {
    state.outlierEvents += 1;
    const marks = state.marked.get(device) || new Map();
    state.marked.set(device, marks);
    const marked = e.marked || [], cleared = e.cleared || [];
    marked.forEach(function (p) { marks.set(pointKey(p.time, p.lat, p.lon), p.outlier); });
    cleared.forEach(function (p) { marks.delete(pointKey(p.time, p.lat, p.lon)); });
    while (marks.size > 1000) { marks.delete(marks.keys().next().value); }
    const recent = (state.recent.get(device) || []).filter(function (p) {
      return !marks.has(pointKey(p.time, p.lat, p.lon));
    });
    state.recent.set(device, recent);
    cleared.forEach(function (p) { if (!noPosition(p)) { rememberPosition(device, p); } });
    // The marker: back to the last good location when the one shown was marked, on to a cleared one
    // later than it.
    const d = state.devices.get(device);
    if (d) {
      const shown = typeof d.lat === "number" ? pointKey(d.time, d.lat, d.lon) : null;
      const last = recent[recent.length - 1];
      const shownMarked = shown !== null && marks.has(shown);
      if (last && (shownMarked || last.t > Date.parse(d.time))) {
        showDevice(Object.assign({}, d, { time: last.time, lat: last.lat, lon: last.lon }));
      } else if (shownMarked) {
        // No good location of it seen: no marker rather than one where it was not.
        const m = state.markers.get(device);
        if (m) { m.remove(); state.markers.delete(device); }
        const rest = Object.assign({}, d);
        delete rest.lat;
        delete rest.lon;
        state.devices.set(device, rest);
      }
    }
    if (state.selected === device && state.trail) { reshapeTrail(marks, cleared); }
  }
  // The trail without the marked locations, with the cleared ones back in time order.
  function reshapeTrail(marks, cleared) {
    const kept = state.trailRecords.filter(function (r) {
      if (r.kind !== "location" || !marks.has(pointKey(r.time, r.lat, r.lon))) { return true; }
      withhold(r);
      return false;
    });
    cleared.forEach(function (p) {
      const t = Date.parse(p.time);
      const key = pointKey(p.time, p.lat, p.lon);
      if (!(t >= state.trail.from && t <= state.trail.to) || noPosition(p)) { return; }
      if (kept.some(function (r) { return r.kind === "location" && pointKey(r.time, r.lat, r.lon) === key; })) { return; }
      const r = state.withheld.get(key) || { kind: "location", time: p.time, lat: p.lat, lon: p.lon };
      state.withheld.delete(key);
      let i = kept.length;
      while (i > 0 && Date.parse(kept[i - 1].time) > t) { i -= 1; }
      kept.splice(i, 0, r);
    });
    if (kept.length === state.trailRecords.length && cleared.length === 0) { return; }
    state.trailRecords = kept;
    const points = kept.filter(function (r) { return r.kind === "location"; }).map(function (r) {
      return [r.lat, r.lon];
    });
    if (state.trailLayer) {
      state.trailLayer.setLatLngs(points);
    } else if (points.length > 0) {
      state.trailLayer = L.polyline(points, { renderer: renderer, color: "#d6452f", weight: 3, opacity: 0.8,
                                              smoothFactor: 1.5 }).addTo(map);
    }
    trailStatus.textContent = state.trailRecords.length + " records";
  }

  // The trail of the chosen device: a day, or all of it.
  const controls = document.getElementById("trail-controls");
  const dateInput = document.getElementById("trail-date");
  const allButton = document.getElementById("trail-all");
  const trailStatus = document.getElementById("trail-status");
  const follow = document.getElementById("follow");
  const daySection = document.getElementById("day");
  const timelineList = document.getElementById("timeline");
  const wanted = params.get("device");
  let wantedShown = false;
  function select(id, key) {
    state.selected = id;
    // The address's date, for the device it names (a share link's, whichever), the first time.
    const asked = !wantedShown && (id === wanted || share) && dayStart(params.get("date"));
    if (!wantedShown && (id === wanted || share) && params.get("date") && !asked) {
      say("The address's date '" + params.get("date") + "' is no day (YYYY-MM-DD): showing the last day of " + id + ".");
    }
    wantedShown = wantedShown || id === wanted || Boolean(share);
    list.querySelectorAll("li").forEach(function (li) {
      li.classList.toggle("selected", li.dataset.deviceId === id);
      li.setAttribute("aria-pressed", String(li.dataset.deviceId === id));
    });
    document.getElementById("trail-device").textContent = id;
    controls.disabled = false;
    const m = state.markers.get(id);
    if (m) { map.panTo(m.getLatLng()); }
    const d = state.devices.get(id);
    const last = d && Date.parse(d.time);
    allButton.setAttribute("aria-pressed", "false");
    showDay(key || (asked ? params.get("date")
      : last && !isNaN(last) ? dayKey(new Date(last)) : dayKey(new Date())));
  }
  function remember() {
    const q = new URLSearchParams(location.search);
    q.delete("token");
    if (state.selected) { q.set("device", state.selected); }
    if (state.day) { q.set("date", state.day.key); } else { q.delete("date"); }
    history.replaceState(null, "", location.pathname + "?" + q + location.hash);
  }
  function clearTrail() {
    if (state.trailLayer) { state.trailLayer.remove(); }
    state.regionMarkers.forEach(function (m) { m.remove(); });
    state.dayLayers.forEach(function (l) { l.remove(); });
    state.trailLayer = null;
    state.regionMarkers = [];
    state.dayLayers = [];
    state.trailRecords = [];
    state.timeline = [];
    timelineList.replaceChildren();
    delete controls.dataset.loaded;
    delete daySection.dataset.loaded;
    stopReplay();
    if (state.replay.marker) { state.replay.marker.remove(); state.replay.marker = null; }
    state.times = null;
    if (!replayBox.hidden) { replayBox.hidden = true; map.invalidateSize(); }
  }
  function addToTrail(records) {
    const points = [];
    records.forEach(function (r) {
      state.trailRecords.push(r);
      if (r.kind === "location") {
        points.push([r.lat, r.lon]);
      } else if (typeof r.lat === "number") {
        const colour = r.kind === "enter" ? "#2e9e44" : r.kind === "exit" ? "#b23a8a" : "#777";
        const m = L.circleMarker([r.lat, r.lon], { renderer: renderer, radius: 6, color: colour, weight: 2,
                                                   fillOpacity: 0.7 });
        m.bindTooltip(r.kind + " " + (r.region || "") + " · " + fmtTime(r.time));
        m.addTo(map);
        state.regionMarkers.push(m);
      }
    });
    if (!state.trailLayer) {
      state.trailLayer = L.polyline(points, { renderer: renderer, color: "#d6452f", weight: 3, opacity: 0.8,
                                              smoothFactor: 1.5 }).addTo(map);
    } else {
      // One redraw for the page (addLatLng redraws at each point).
      state.trailLayer.setLatLngs(state.trailLayer.getLatLngs().concat(points));
    }
    trailStatus.textContent = state.trailRecords.length + " records";
  }
  // Every page of the trail over [from, to], each handed to `page` as it comes; false when it failed.
  async function readTrail(id, from, to, format, page, isCurrent) {
    let limit = 50000;
    let cursor = null;
    const query = { format: format, limit: 0 };
    if (from !== null) { query.from = new Date(from).toISOString(); query.to = new Date(to).toISOString(); }
    for (;;) {
      query.limit = limit;
      if (cursor) { query.cursor = cursor; } else { delete query.cursor; }
      const res = await get(devicePath(id, "trail"), query);
      if (!isCurrent()) { return false; }
      // A server whose largest page is smaller (--max-page-size): smaller pages.
      if (res.status === 400 && !cursor && limit > 100) { limit = Math.floor(limit / 10); continue; }
      if (!res.ok) { trailStatus.textContent = "the trail could not be read (" + res.status + ")"; return false; }
      const body = format === "gpx" ? await res.text() : await res.json();
      if (!isCurrent()) { return false; }
      page(body);
      if (format === "gpx") {
        const link = /<[^>]*[?&]cursor=([^&>]+)[^>]*>;\s*rel="next"/.exec(res.headers.get("Link") || "");
        cursor = link ? decodeURIComponent(link[1]) : null;
      } else {
        cursor = body.next || null;
      }
      if (!cursor) { return true; }
    }
  }
  let loading = 0;
  async function loadTrail(r) {
    const id = state.selected;
    clearTrail();
    state.trail = r;
    if (!id || !r) { trailStatus.textContent = ""; return; }
    const mine = ++loading;
    trailStatus.textContent = "loading…";
    const started = performance.now();
    let pages = 0;
    const timeline = r.day ? loadTimeline(r) : null;
    const ok = await readTrail(id, r.from > -8e15 ? r.from : null, r.to, "json", function (page) {
      addToTrail(page.records);
      pages += 1;
    }, function () { return mine === loading; });
    if (!ok) { return; }
    trailStatus.textContent = state.trailRecords.length + " records, " + pages + (pages === 1 ? " page" : " pages");
    controls.dataset.loaded = "true";
    if (r.day) {
      indexTrail();
      await timeline;
      if (mine !== loading) { return; }
      drawDay();
      setUpReplay();
      daySection.dataset.loaded = "true";
    }
    fitTrail();
    state.loadedAt = performance.now() - started;
  }
  function fitTrail() {
    const b = L.latLngBounds([]);
    if (state.trailLayer && state.trailLayer.getLatLngs().length > 0) { b.extend(state.trailLayer.getBounds()); }
    state.dayLayers.forEach(function (l) { if (l.getBounds) { b.extend(l.getBounds()); } });
    if (b.isValid()) { map.fitBounds(b.pad(0.1), { maxZoom: 18 }); }
  }
  document.getElementById("fit").addEventListener("click", fitTrail);
  follow.addEventListener("change", function () {
    state.following = follow.checked;
    const m = state.selected && state.markers.get(state.selected);
    if (m && follow.checked) { map.panTo(m.getLatLng()); }
  });

  // The day: its bounds in the viewer's zone (a day of 23 or 25 hours where the clocks change).
  function showDay(key) {
    const start = dayStart(key);
    if (!start) { return; }
    const end = new Date(start.getFullYear(), start.getMonth(), start.getDate() + 1).getTime();
    state.day = { key: key, from: start.getTime(), to: end - 1, end: end, live: end > Date.now(), day: true };
    dateInput.value = key;
    allButton.setAttribute("aria-pressed", "false");
    document.getElementById("day-title").textContent =
      start.toLocaleDateString(undefined, { weekday: "long", day: "numeric", month: "long", year: "numeric" });
    daySection.hidden = false;
    remember();
    loadTrail(state.day);
    loadMonth(state.selected, key);
  }
  function showAll() {
    state.day = null;
    daySection.hidden = true;
    monthNav.hidden = true;
    map.invalidateSize();
    allButton.setAttribute("aria-pressed", "true");
    remember();
    loadTrail({ from: -8.64e15, to: 8.64e15, live: true, day: false });
  }
  dateInput.addEventListener("change", function () { if (dayStart(dateInput.value)) { showDay(dateInput.value); } });
  document.getElementById("day-prev").addEventListener("click", function () {
    showDay(addDays(state.day ? state.day.key : dayKey(new Date()), -1));
  });
  document.getElementById("day-next").addEventListener("click", function () {
    showDay(addDays(state.day ? state.day.key : dayKey(new Date()), 1));
  });
  document.getElementById("day-today").addEventListener("click", function () { showDay(dayKey(new Date())); });
  allButton.addEventListener("click", showAll);

  // The timeline: the day's visits (stops) and trips, from /stops and /trips, by time. Asked from the
  // day's start without an end (then filtered to the day): the visit the day ends in is closed where
  // the device left it, not at midnight, and "still there" is the API's answer at the device's last point.
  async function loadTimeline(day) {
    const id = state.selected;
    const q = { from: new Date(day.from).toISOString() };
    const answers = await Promise.all([get(devicePath(id, "stops"), q), get(devicePath(id, "trips"), q)]);
    if (state.day !== day || state.selected !== id) { return; }
    if (!answers[0].ok || !answers[1].ok) {
      document.getElementById("day-summary").textContent =
        "The visits and trips could not be read (" + answers[0].status + ", " + answers[1].status + ").";
      state.timeline = [];
      return;
    }
    const stops = (await answers[0].json()).stops;
    const trips = (await answers[1].json()).trips;
    let entries = [];
    stops.forEach(function (s) {
      entries.push({ kind: "visit", start: Date.parse(s.start), end: s.end ? Date.parse(s.end) : null, stop: s,
                     place: s.place || null });
    });
    trips.forEach(function (t) {
      entries.push({ kind: "trip", start: Date.parse(t.start), end: Date.parse(t.end), trip: t,
                     place: t.endPlace || null });
    });
    entries.sort(function (a, b) { return a.start - b.start; });
    entries = entries.filter(function (e) { return e.start <= day.to && (e.end === null || e.end >= day.from); });
    let n = 0;
    entries.forEach(function (e) { if (e.kind === "trip") { e.number = ++n; e.colour = tripColours[(n - 1) % tripColours.length]; } });
    state.timeline = entries;
    if (daySection.dataset.loaded) {
      // A stop or trip event while the day is shown: draw it again.
      drawDay();
    }
  }
  const tripColours = ["#1f6fd1", "#2e9e44", "#8e44ad", "#e67e22", "#16a2b8", "#8c564b"];
  function entryText(e) {
    if (e.kind === "visit") {
      return { what: e.place ? e.place : "Visit",
               when: e.end === null ? "from " + clock(e.start) + ", still there"
                 : clock(e.start) + "–" + clock(e.end) + " · " + span((e.end - e.start) / 1000),
               figures: e.stop.radius ? "within " + Math.round(e.stop.radius) + " m" : "" };
    }
    const t = e.trip;
    return { what: "Trip " + e.number + ": " + km(t.distance) + (e.place ? " to " + e.place : ""),
             when: clock(e.start) + "–" + clock(e.end) + " · " + span(t.duration),
             figures: "average " + kmh(t.avgSpeed) + ", maximum " + kmh(t.maxSpeed) };
  }
  function drawDay() {
    state.dayLayers.forEach(function (l) { l.remove(); });
    state.dayLayers = [];
    timelineList.replaceChildren();
    let distance = 0, moving = 0, visits = 0;
    state.timeline.forEach(function (e, i) {
      let layer;
      if (e.kind === "trip") {
        distance += e.trip.distance;
        moving += e.trip.duration;
        const along = slice(e.start, e.end);
        if (along.length < 2) {
          along.push([e.trip.startLat, e.trip.startLon], [e.trip.endLat, e.trip.endLon]);
        }
        layer = L.polyline(along, { renderer: renderer, color: e.colour, weight: 5, opacity: 0.9, smoothFactor: 1.5 });
      } else {
        visits += 1;
        layer = L.circle([e.stop.lat, e.stop.lon], { renderer: renderer, radius: Math.max(e.stop.radius || 0, 25),
                                                     color: "#333", weight: 2, fillColor: "#333", fillOpacity: 0.25 });
      }
      const text = entryText(e);
      layer.bindTooltip(text.what + " · " + text.when);
      layer.on("click", function () { focusEntry(i); });
      layer.addTo(map);
      state.dayLayers.push(layer);
      e.layer = layer;
      const li = document.createElement("li");
      li.dataset.kind = e.kind;
      li.dataset.start = new Date(e.start).toISOString();
      if (e.end !== null) { li.dataset.end = new Date(e.end).toISOString(); }
      if (e.kind === "trip") {
        li.dataset.distance = String(e.trip.distance);
        li.style.borderLeftColor = e.colour;
      } else if (e.end === null) {
        li.dataset.open = "true";
      }
      const button = document.createElement("button");
      button.type = "button";
      button.className = "fit";
      const what = document.createElement("span");
      what.className = "what";
      what.textContent = text.what;
      const when = document.createElement("span");
      when.className = "when";
      when.textContent = text.when;
      if (e.end === null) {
        when.textContent = "from " + clock(e.start) + ", ";
        const open = document.createElement("span");
        open.className = "open";
        open.textContent = "still there";
        when.append(open);
      }
      button.append(what, when);
      if (text.figures) {
        const figures = document.createElement("span");
        figures.className = "figures";
        figures.textContent = text.figures;
        button.append(figures);
      }
      button.addEventListener("click", function () { focusEntry(i); });
      li.append(button);
      if (e.kind === "trip") { li.append(exportButtons("Export trip " + e.number, e.start, e.end)); }
      timelineList.append(li);
    });
    document.getElementById("day-summary").textContent = state.timeline.length === 0
      ? (state.trailRecords.length === 0 ? "Nothing recorded this day." : "No visit or trip found this day.")
      : visits + (visits === 1 ? " visit, " : " visits, ") + state.timeline.filter(isTrip).length
        + (state.timeline.filter(isTrip).length === 1 ? " trip" : " trips") + " · " + km(distance)
        + " in " + span(moving);
  }
  function isTrip(e) { return e.kind === "trip"; }
  function focusEntry(i) {
    const e = state.timeline[i];
    if (!e || !e.layer) { return; }
    timelineList.querySelectorAll("li").forEach(function (li, k) {
      if (k === i) { li.setAttribute("aria-current", "true"); } else { li.removeAttribute("aria-current"); }
    });
    const bounds = e.layer.getBounds();
    map.fitBounds(bounds.pad(0.15), { maxZoom: 18 });
    state.focused = i;
    if (state.times && state.times.length > 0) { seek(Math.max(e.start, state.times[0])); }
  }

  // The day's locations as arrays, by time: what the replay, the chart and the trips' lines read.
  function indexTrail() {
    const locations = state.trailRecords.filter(function (r) { return r.kind === "location"; });
    const n = locations.length;
    const times = new Float64Array(n), lats = new Float64Array(n), lons = new Float64Array(n);
    const speeds = new Float32Array(n);
    for (let i = 0; i < n; i++) {
      const r = locations[i];
      times[i] = Date.parse(r.time);
      lats[i] = r.lat;
      lons[i] = r.lon;
      speeds[i] = NaN;
      if (typeof r.speed === "number") { speeds[i] = r.speed; }
    }
    for (let i = 0; i < n; i++) {
      if (!isNaN(speeds[i])) { continue; }
      // No speed in the record: the distance to its neighbour over the time between them.
      const a = i > 0 ? i - 1 : i, b = i > 0 ? i : Math.min(i + 1, n - 1);
      const dt = (times[b] - times[a]) / 1000;
      speeds[i] = dt > 0 ? map.distance([lats[a], lons[a]], [lats[b], lons[b]]) / dt : 0;
    }
    state.times = times;
    state.lats = lats;
    state.lons = lons;
    state.speeds = speeds;
  }
  // The first index whose time is at or after t.
  function lowerBound(t) {
    const times = state.times;
    let lo = 0, hi = times.length;
    while (lo < hi) {
      const mid = (lo + hi) >> 1;
      if (times[mid] < t) { lo = mid + 1; } else { hi = mid; }
    }
    return lo;
  }
  function slice(from, to) {
    const out = [];
    if (!state.times) { return out; }
    for (let i = lowerBound(from); i < state.times.length && state.times[i] <= to; i++) {
      out.push([state.lats[i], state.lons[i]]);
    }
    return out;
  }
  // Where the device was at t: between the two locations around it, in proportion.
  function positionAt(t) {
    const times = state.times;
    const i = lowerBound(t);
    if (i <= 0) { return { lat: state.lats[0], lon: state.lons[0], speed: state.speeds[0], i: 0 }; }
    if (i >= times.length) {
      const k = times.length - 1;
      return { lat: state.lats[k], lon: state.lons[k], speed: state.speeds[k], i: k };
    }
    const f = (t - times[i - 1]) / (times[i] - times[i - 1] || 1);
    return { lat: state.lats[i - 1] + f * (state.lats[i] - state.lats[i - 1]),
             lon: state.lons[i - 1] + f * (state.lons[i] - state.lons[i - 1]),
             speed: state.speeds[i - 1] + f * (state.speeds[i] - state.speeds[i - 1]), i: i };
  }

  // The replay: a slider over the day's locations, played at x1, x10 or x60 by animation frames.
  const replayBox = document.getElementById("replay");
  const slider = document.getElementById("replay-slider");
  const playButton = document.getElementById("replay-play");
  const timeOut = document.getElementById("replay-time");
  const speedOut = document.getElementById("replay-speed-now");
  const cursor = document.getElementById("chart-cursor");
  function setUpReplay() {
    if (state.replay.marker) { state.replay.marker.remove(); state.replay.marker = null; }
    if (!state.times || state.times.length === 0) { replayBox.hidden = true; map.invalidateSize(); return; }
    replayBox.hidden = false;
    map.invalidateSize();
    const first = state.times[0], last = state.times[state.times.length - 1];
    slider.min = "0";
    slider.max = String(Math.round((last - first) / 1000));
    state.replay.first = first;
    state.replay.last = last;
    state.replay.marker = L.marker([state.lats[0], state.lons[0]], {
      icon: L.divIcon({ className: "replay-marker", iconSize: [16, 16] }), interactive: false, keyboard: false,
      zIndexOffset: 1000 }).addTo(map);
    drawChart();
    seek(first);
  }
  function seek(t) {
    const r = state.replay;
    if (!state.times || state.times.length === 0) { return; }
    r.t = Math.min(Math.max(t, r.first), r.last);
    const p = positionAt(r.t);
    r.marker.setLatLng([p.lat, p.lon]);
    r.position = p;
    slider.value = String(Math.round((r.t - r.first) / 1000));
    timeOut.textContent = clock(r.t, true);
    speedOut.textContent = kmh(p.speed);
    if (state.chart) {
      const x = state.chart.toDomXCoord(r.t);
      cursor.hidden = !(x >= 0);
      cursor.style.left = x + "px";
    }
    const k = state.timeline.findIndex(function (e) { return e.start <= r.t && (e.end === null || r.t <= e.end); });
    if (k !== r.entry) {
      r.entry = k;
      timelineList.querySelectorAll("li").forEach(function (li, n) { li.classList.toggle("current", n === k); });
    }
  }
  function frame(now) {
    const r = state.replay;
    if (!r.playing) { return; }
    r.frames += 1;
    const dt = r.lastFrame === undefined ? 0 : now - r.lastFrame;
    r.lastFrame = now;
    seek(r.t + dt * r.speed);
    if (r.t >= r.last) { stopReplay(); return; }
    requestAnimationFrame(frame);
  }
  function play() {
    const r = state.replay;
    if (!state.times || state.times.length === 0) { return; }
    if (r.t >= r.last) { seek(r.first); }
    r.playing = true;
    r.lastFrame = undefined;
    playButton.textContent = "Pause";
    playButton.setAttribute("aria-pressed", "true");
    requestAnimationFrame(frame);
  }
  function stopReplay() {
    state.replay.playing = false;
    playButton.textContent = "Play";
    playButton.setAttribute("aria-pressed", "false");
  }
  playButton.addEventListener("click", function () { if (state.replay.playing) { stopReplay(); } else { play(); } });
  slider.addEventListener("input", function () { seek(state.replay.first + Number(slider.value) * 1000); });
  document.querySelectorAll("#replay-speeds button").forEach(function (b) {
    b.addEventListener("click", function () {
      state.replay.speed = Number(b.dataset.speed);
      document.querySelectorAll("#replay-speeds button").forEach(function (o) {
        o.setAttribute("aria-pressed", String(o === b));
      });
    });
  });
  state.seek = seek;
  state.play = play;
  state.pause = stopReplay;

  // The speed chart (dygraphs, Debian's libjs-dygraphs): km/h over the day, the fastest of each of
  // at most 2,000 columns; a click on it moves the replay there; a line marks the replay's time.
  function drawChart() {
    const note = document.getElementById("chart-note");
    if (state.chart) { state.chart.destroy(); state.chart = null; }
    cursor.hidden = true;
    if (!settings.chart || typeof Dygraph === "undefined") {
      note.hidden = false;
      note.textContent = "The speed chart needs dygraphs on the server (Debian's libjs-dygraphs).";
      document.getElementById("chart-box").hidden = true;
      return;
    }
    note.hidden = true;
    document.getElementById("chart-box").hidden = false;
    const times = state.times, speeds = state.speeds, n = times.length;
    const columns = Math.min(2000, n);
    const first = times[0], width = (times[n - 1] - first) / columns || 1;
    const data = [];
    let i = 0;
    for (let c = 0; c < columns && i < n; c++) {
      const end = first + (c + 1) * width;
      let best = -1, at = times[i];
      for (; i < n && (times[i] <= end || c === columns - 1); i++) {
        if (speeds[i] > best) { best = speeds[i]; at = times[i]; }
      }
      if (best >= 0) { data.push([new Date(at), Math.round(best * 36) / 10]); }
    }
    if (data.length === 0) { return; }
    state.chart = new Dygraph(document.getElementById("chart"), data, {
      labels: ["time", "km/h"], ylabel: "km/h", colors: ["#1f6fd1"], fillGraph: true, strokeWidth: 1,
      legend: "never", animatedZooms: false, interactionModel: {},
      axes: { x: { axisLabelFormatter: function (d) { return clock(d.getTime()); } } }
    });
    state.chart.ready(function () { seek(state.replay.t); });
    const box = document.getElementById("chart");
    box.addEventListener("mousedown", function (e) {
      // Drag along the chart to scrub.
      const move = function (ev) {
        const rect = box.getBoundingClientRect();
        seek(state.chart.toDataXCoord(ev.clientX - rect.left));
      };
      move(e);
      window.addEventListener("mousemove", move);
      window.addEventListener("mouseup", function up() {
        window.removeEventListener("mousemove", move);
        window.removeEventListener("mouseup", up);
      });
    });
  }

  // Exports: the day, or a trip, as GPX or GeoJSON, from the trail route (every page of it, joined).
  function exportButtons(label, from, to) {
    const box = document.createElement("div");
    box.className = "export";
    box.setAttribute("role", "group");
    box.setAttribute("aria-label", label);
    box.append("Export: ");
    [["gpx", "GPX"], ["geojson", "GeoJSON"]].forEach(function (f) {
      const b = document.createElement("button");
      b.type = "button";
      b.dataset.format = f[0];
      b.textContent = f[1];
      b.addEventListener("click", function () { exportTrail(f[0], from, to); });
      box.append(b);
    });
    return box;
  }
  document.querySelectorAll("#day-export button").forEach(function (b) {
    b.addEventListener("click", function () { if (state.day) { exportTrail(b.dataset.format, state.day.from, state.day.to); } });
  });
  async function exportTrail(format, from, to) {
    const id = state.selected;
    let joined = null;
    const ok = await readTrail(id, from, to, format, function (page) {
      if (format === "gpx") {
        const doc = new DOMParser().parseFromString(page, "application/xml");
        if (!joined) { joined = doc; return; }
        const segments = joined.getElementsByTagName("trkseg");
        const into = segments[segments.length - 1];
        Array.from(doc.getElementsByTagName("trkpt")).forEach(function (p) { into.append(joined.importNode(p, true)); });
      } else {
        delete page.next;
        if (!joined) { joined = page; return; }
        const a = joined.features[0], b = page.features[0];
        if (!b || !b.geometry) { return; }
        const points = function (g) { return !g ? [] : g.type === "Point" ? [g.coordinates] : g.coordinates; };
        const all = points(a.geometry).concat(points(b.geometry));
        a.geometry = all.length === 1 ? { type: "Point", coordinates: all[0] } : { type: "LineString", coordinates: all };
        a.properties.times = a.properties.times.concat(b.properties.times);
        a.properties.points = all.length;
        if (b.properties.to) { a.properties.to = b.properties.to; }
        a.properties.from = a.properties.from || b.properties.from;
      }
    }, function () { return state.selected === id; });
    if (!ok || !joined) { return; }
    const text = format === "gpx" ? new XMLSerializer().serializeToString(joined) : JSON.stringify(joined);
    const blob = new Blob([text], { type: format === "gpx" ? "application/gpx+xml" : "application/geo+json" });
    const a = document.createElement("a");
    const stamp = new Date(from);
    a.href = URL.createObjectURL(blob);
    a.download = id + "-" + dayKey(stamp) + (to - from < DAY - 1 ? "-" + pad(stamp.getHours()) + pad(stamp.getMinutes()) : "")
      + (format === "gpx" ? ".gpx" : ".geojson");
    document.body.append(a);
    a.click();
    a.remove();
    setTimeout(function () { URL.revokeObjectURL(a.href); }, 60000);
  }

  // The month as a strip of days with their distance, from /stats (hidden where the server has none).
  const monthNav = document.getElementById("month");
  async function loadMonth(id, key) {
    const start = dayStart(key);
    const first = new Date(start.getFullYear(), start.getMonth(), 1);
    const next = new Date(start.getFullYear(), start.getMonth() + 1, 1);
    const month = first.getFullYear() + "-" + pad(first.getMonth() + 1);
    if (state.month && state.month.id === id && state.month.month === month && state.month.ready) {
      markToday(key);
      return;
    }
    state.month = { id: id, month: month, ready: false };
    const mine = state.month;
    const tz = Intl.DateTimeFormat().resolvedOptions().timeZone || "UTC";
    const res = await get(devicePath(id, "stats"), { from: first.toISOString(), to: next.toISOString(), by: "day", tz: tz });
    if (state.month !== mine) { return; }
    if (!res.ok) {
      // 404: no statistics on this server (or no such device); anything else: not shown either.
      monthNav.hidden = true;
      mine.status = res.status;
      return;
    }
    const stats = await res.json();
    if (state.month !== mine) { return; }
    const byDay = new Map();
    stats.periods.forEach(function (p) { byDay.set(dayKey(new Date(Date.parse(p.start))), p); });
    let most = 0;
    byDay.forEach(function (p) { most = Math.max(most, p.distance || 0); });
    const days = document.getElementById("month-days");
    days.replaceChildren();
    for (let d = new Date(first); d < next; d = new Date(d.getFullYear(), d.getMonth(), d.getDate() + 1)) {
      const k = dayKey(d);
      const p = byDay.get(k);
      const distance = p ? p.distance || 0 : 0;
      const li = document.createElement("li");
      const a = document.createElement("a");
      const q = new URLSearchParams(location.search);
      q.set("device", id);
      q.set("date", k);
      a.href = location.pathname + "?" + q;
      a.dataset.date = k;
      a.dataset.distance = String(distance);
      a.title = d.toLocaleDateString(undefined, { weekday: "short", day: "numeric", month: "short" }) + ": " + km(distance)
        + (p ? ", " + p.trips + (p.trips === 1 ? " trip" : " trips") : "");
      const bar = document.createElement("span");
      bar.className = "bar";
      bar.style.height = (most > 0 ? Math.max(distance > 0 ? 2 : 0, Math.round(30 * distance / most)) : 0) + "px";
      const label = document.createElement("span");
      label.textContent = String(d.getDate());
      a.append(bar, label);
      a.addEventListener("click", function (e) { e.preventDefault(); showDay(k); });
      li.append(a);
      days.append(li);
    }
    document.getElementById("month-title").textContent =
      first.toLocaleDateString(undefined, { month: "long", year: "numeric" });
    document.getElementById("month-total").textContent = km(stats.totals ? stats.totals.distance || 0 : 0)
      + (stats.totals ? " · " + stats.totals.trips + (stats.totals.trips === 1 ? " trip" : " trips") : "");
    monthNav.hidden = false;
    mine.ready = true;
    markToday(key);
    map.invalidateSize();
  }
  function markToday(key) {
    document.querySelectorAll("#month-days a").forEach(function (a) {
      if (a.dataset.date === key) { a.setAttribute("aria-current", "date"); } else { a.removeAttribute("aria-current"); }
    });
  }

  // A share link: one device, read-only, until it expires (410).
  function shareEnded(res) {
    if (state.share.state === "ended") { return; }
    state.share.state = "ended";
    shareNote.hidden = false;
    shareNote.dataset.state = "ended";
    shareNote.textContent = "This link has expired or was revoked: ask its owner for a new one.";
    res.json().then(function (body) {
      if (body && body.error && body.error.message) { shareNote.title = body.error.message; }
    }, function () {});
    if (state.socket) { state.socket.onclose = null; state.socket.close(); }
    loading += 1;  // a trail still loading is dropped
    daySection.hidden = true;
    monthNav.hidden = true;
    controls.hidden = true;
    state.markers.forEach(function (m) { m.remove(); });
    state.markers.clear();
    say("");
    clearTrail();
  }
  async function checkShare() {
    const res = await get("/v1/devices/latest");
    if (res.status === 401) {
      state.share.state = "invalid";
      shareNote.hidden = false;
      shareNote.dataset.state = "ended";
      shareNote.textContent = "This link is not valid.";
      controls.hidden = true;
      return null;
    }
    if (!res.ok) { return null; }
    state.share.state = "active";
    const body = await res.json();
    if (!body.devices || body.devices.length === 0) { return null; }
    showDevice(body.devices[0]);
    return body.devices[0].id;
  }
  // The share itself (GET /v1/shares answers a share link with itself alone): its device and window.
  async function shareItself() {
    const res = await get("/v1/shares");
    if (!res.ok) { return null; }
    const body = await res.json().catch(function () { return null; });
    return (body && body.shares && body.shares[0]) || null;
  }
  async function startShare() {
    document.body.dataset.share = "true";
    list.hidden = true;
    allButton.hidden = true;
    document.getElementById("day-export").hidden = false;
    const id = await checkShare();
    if (state.share.state !== "active") { return; }
    const grant = await shareItself();
    state.share.grant = grant;
    const device = (grant && grant.device) || wanted || id;
    const from = grant && grant.from ? Date.parse(grant.from) : null;
    const to = grant && grant.to ? Date.parse(grant.to) : null;
    const now = Date.now();
    // A window that has ended or not begun: no live stream, and its own day rather than today.
    const ended = to !== null && to <= now, ahead = from !== null && from > now;
    let text = device ? "A shared view of " + device : "A shared view";
    if (from !== null || to !== null) {
      text += (from !== null ? " from " + fmtTime(grant.from) : "") + (to !== null ? " to " + fmtTime(grant.to) : "");
    }
    text += ", read-only." + (ended ? " Its time is over: the page shows what it held." : "")
      + (ahead ? " Its time has not begun: open it again then." : "");
    shareNote.hidden = false;
    shareNote.dataset.state = "active";
    shareNote.textContent = text;
    if (device) {
      const known = state.devices.get(device);
      if (!known) { state.devices.set(device, { id: device }); }
      // The device's last record in the window names the day; without one, the window's end (or start).
      const lastKnown = known && known.time;
      const windowDay = lastKnown || dayStart(params.get("date")) ? null
        : ended ? dayKey(new Date(to - 1)) : ahead ? dayKey(new Date(from)) : null;
      select(device, windowDay);
    }
    if (!ended && !ahead) { connect(); }
  }
  state.select = select;
  state.showDay = showDay;
  if (share) {
    startShare();
  } else {
    connect();
  }
})();
