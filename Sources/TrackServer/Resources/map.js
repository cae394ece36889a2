// The map page's script (/map/app.js), our own, on Leaflet (docs/live.md). It keeps no token in the
// page: ?token= is moved to sessionStorage and out of the address bar at once. The device list and
// the markers follow the live stream (/v1/stream); a chosen range's trail is read page by page from
// /v1/devices/{id}/trail and drawn on a canvas (Leaflet simplifies lines for the zoom level).
// window.keeptrack exposes the state for tests and tools. The page's settings (tiles, attribution, the
// offline delay) are the JSON of <script id="settings"> (map.html).
"use strict";
(function () {
  const settings = JSON.parse(document.getElementById("settings").textContent);
  const params = new URLSearchParams(location.search);
  if (params.has("token")) {
    sessionStorage.setItem("keeptrack.token", params.get("token"));
    params.delete("token");
    const rest = params.toString();
    history.replaceState(null, "", location.pathname + (rest ? "?" + rest : "") + location.hash);
  }
  const token = sessionStorage.getItem("keeptrack.token");
  const onlyDevice = params.get("device");
  const statusBox = document.getElementById("status");
  const list = document.getElementById("devices");
  const state = {
    devices: new Map(), markers: new Map(), selected: null, trail: null, trailLayer: null,
    trailRecords: [], regionMarkers: [], connected: false, frames: 0, tileErrors: 0
  };
  window.keeptrack = state;
  function say(text) { statusBox.textContent = text; }
  if (typeof L === "undefined") { say("Leaflet is missing on the server."); return; }
  L.Icon.Default.imagePath = "/map/leaflet/images/";
  const map = L.map("map", { preferCanvas: true, worldCopyJump: true }).setView([20, 0], 2);
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
  function fmtTime(iso) {
    if (!iso) { return ""; }
    const d = new Date(iso);
    return isNaN(d) ? "" : d.toLocaleString();
  }
  function isLive(d) {
    // The stream's offline and online events say it; until one came, the last receipt does.
    if (typeof d.live === "boolean") { return d.live; }
    const t = Date.parse(d.lastReceived || d.time);
    return !isNaN(t) && Date.now() - t < settings.offlineAfter * 1000;
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
    const live = isLive(d);
    li.dataset.live = String(live);
    li.querySelector(".state").textContent = (live ? "live" : "offline") + " · " + fmtTime(d.time);
    li.title = "last seen " + fmtTime(d.time);
    if (typeof d.lat === "number" && typeof d.lon === "number") {
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
    if (ll.length > 0 && !fitted) {
      fitted = true;
      map.fitBounds(L.latLngBounds(ll).pad(0.2), { maxZoom: 16 });
    }
  }
  // The live stream: a snapshot, then every record stored and the devices' offline and online events.
  let retry = 1000;
  function connect() {
    const proto = location.protocol === "https:" ? "wss:" : "ws:";
    const q = new URLSearchParams();
    if (token) { q.set("token", token); }
    if (onlyDevice) { q.set("device", onlyDevice); }
    const ws = new WebSocket(proto + "//" + location.host + "/v1/stream" + (q.toString() ? "?" + q : ""));
    state.socket = ws;
    ws.onopen = function () { retry = 1000; };
    ws.onmessage = function (event) {
      state.frames += 1;
      const msg = JSON.parse(event.data);
      if (msg.type === "snapshot") {
        state.connected = true;
        msg.devices.forEach(showDevice);
        say(msg.devices.length + (msg.devices.length === 1 ? " device" : " devices") + ", live.");
        fitAll();
      } else if (msg.type === "record") {
        onRecord(msg.device, msg.record);
      } else if (msg.type === "event") {
        onEvent(msg.device, msg.event);
      }
    };
    ws.onclose = function (event) {
      state.connected = false;
      if (event.code === 1008) {
        say("The live stream was refused: " + (event.reason || "policy") + ". Open /map?token=TOKEN.");
        return;
      }
      say("The live stream is disconnected; retrying.");
      setTimeout(connect, retry);
      retry = Math.min(retry * 2, 30000);
    };
  }
  function onEvent(device, e) {
    const known = state.devices.get(device) || { id: device };
    if (e.kind === "offline" || e.kind === "online") {
      showDevice(Object.assign({}, known, { live: e.kind === "online" }));
    }
  }
  function onRecord(device, r) {
    const known = Object.assign({}, state.devices.get(device) || { id: device }, { live: true });
    if (r.kind === "location" && r.valid !== false) {
      showDevice(Object.assign({}, known, { id: device, time: r.time, lat: r.lat, lon: r.lon,
                                            lastReceived: new Date().toISOString() }));
    } else {
      showDevice(Object.assign({}, known, { lastReceived: new Date().toISOString() }));
    }
    if (state.selected === device && state.trail && state.trail.live) {
      const t = Date.parse(r.time);
      if (t >= state.trail.from && t <= state.trail.to) { addToTrail([r]); }
    }
    fitAll();
  }
  // The trail of the chosen device and range.
  const controls = document.getElementById("trail-controls");
  const rangeSelect = document.getElementById("trail-range");
  const dateInput = document.getElementById("trail-date");
  const trailStatus = document.getElementById("trail-status");
  const follow = document.getElementById("follow");
  function select(id) {
    state.selected = id;
    list.querySelectorAll("li").forEach(function (li) {
      li.classList.toggle("selected", li.dataset.deviceId === id);
      li.setAttribute("aria-pressed", String(li.dataset.deviceId === id));
    });
    document.getElementById("trail-device").textContent = id;
    controls.disabled = false;
    const m = state.markers.get(id);
    if (m) { map.panTo(m.getLatLng()); }
    if (rangeSelect.value) { loadTrail(); }
  }
  function range() {
    const day = 86400000;
    const midnight = new Date();
    midnight.setHours(0, 0, 0, 0);
    switch (rangeSelect.value) {
      case "today": return { from: midnight.getTime(), to: midnight.getTime() + day - 1, live: true };
      case "yesterday": return { from: midnight.getTime() - day, to: midnight.getTime() - 1, live: false };
      case "date": {
        if (!dateInput.value) { return null; }
        const d = new Date(dateInput.value + "T00:00:00");
        return { from: d.getTime(), to: d.getTime() + day - 1, live: d.getTime() + day > Date.now() };
      }
      case "all": return { from: -8.64e15, to: 8.64e15, live: true };
      default: return null;
    }
  }
  function clearTrail() {
    if (state.trailLayer) { state.trailLayer.remove(); }
    state.regionMarkers.forEach(function (m) { m.remove(); });
    state.trailLayer = null;
    state.regionMarkers = [];
    state.trailRecords = [];
  }
  function addToTrail(records) {
    const points = [];
    records.forEach(function (r) {
      state.trailRecords.push(r);
      if (r.kind === "location") {
        points.push([r.lat, r.lon]);
      } else {
        const colour = r.kind === "enter" ? "#2e9e44" : r.kind === "exit" ? "#b23a8a" : "#777";
        const m = L.circleMarker([r.lat, r.lon], { renderer: renderer, radius: 6, color: colour, weight: 2,
                                                   fillOpacity: 0.7 });
        m.bindTooltip(r.kind + " " + (r.region || "") + " · " + fmtTime(r.time));
        m.addTo(map);
        state.regionMarkers.push(m);
      }
    });
    if (!state.trailLayer) {
      state.trailLayer = L.polyline(points, { renderer: renderer, color: "#d6452f", weight: 3,
                                              smoothFactor: 1.5 }).addTo(map);
    } else {
      // One redraw for the page (addLatLng redraws at each point).
      state.trailLayer.setLatLngs(state.trailLayer.getLatLngs().concat(points));
    }
    trailStatus.textContent = state.trailRecords.length + " records";
  }
  let loading = 0;
  async function loadTrail() {
    const id = state.selected;
    const r = range();
    clearTrail();
    state.trail = r;
    if (!id || !r) { trailStatus.textContent = ""; return; }
    const mine = ++loading;
    trailStatus.textContent = "loading…";
    const base = "/v1/devices/" + encodeURIComponent(id) + "/trail?format=json&limit=10000";
    const when = r.from > -8e15
      ? "&from=" + new Date(r.from).toISOString() + "&to=" + new Date(r.to).toISOString() : "";
    let cursor = null;
    let pages = 0;
    do {
      const res = await fetch(base + when + (cursor ? "&cursor=" + encodeURIComponent(cursor) : ""),
                              { headers: headers() });
      if (mine !== loading) { return; }
      if (!res.ok) { trailStatus.textContent = "the trail could not be read (" + res.status + ")"; return; }
      const page = await res.json();
      if (mine !== loading) { return; }
      addToTrail(page.records);
      cursor = page.next || null;
      pages += 1;
    } while (cursor);
    trailStatus.textContent = state.trailRecords.length + " records, " + pages
      + (pages === 1 ? " page" : " pages");
    controls.dataset.loaded = "true";
    fitTrail();
  }
  function fitTrail() {
    if (state.trailLayer && state.trailLayer.getLatLngs().length > 0) {
      map.fitBounds(state.trailLayer.getBounds().pad(0.1));
    }
  }
  rangeSelect.addEventListener("change", function () {
    dateInput.hidden = rangeSelect.value !== "date";
    delete controls.dataset.loaded;
    loadTrail();
  });
  dateInput.addEventListener("change", function () { delete controls.dataset.loaded; loadTrail(); });
  document.getElementById("fit").addEventListener("click", fitTrail);
  follow.addEventListener("change", function () {
    state.following = follow.checked;
    const m = state.selected && state.markers.get(state.selected);
    if (m && follow.checked) { map.panTo(m.getLatLng()); }
  });
  state.select = select;
  connect();
})();
