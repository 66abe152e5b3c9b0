// Kiln console: the fleet, a node, enrollment — all through /v1, as the CLI.
// Data from the API is only ever put into the page as text (textContent),
// never as markup.
"use strict";

const MICROVERSION = "1.95";
const PAGE = 200;
const FIELDS = ["uuid", "name", "provision_state", "target_provision_state", "power_state", "maintenance", "fault",
  "driver", "conductor", "last_error", "clean_step", "deploy_step", "service_step"];

const $ = (id) => document.getElementById(id);
const el = (tag, attrs = {}, ...kids) => {
  const e = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs)) {
    if (k === "text") e.textContent = v;
    else if (k === "class") e.className = v;
    // Through the CSSOM: the page's CSP refuses inline style attributes.
    else if (k === "style") e.style.cssText = v;
    else if (k.startsWith("on")) e.addEventListener(k.slice(2), v);
    else e.setAttribute(k, v);
  }
  for (const k of kids) e.append(k);
  return e;
};

// api calls /v1 with the browser's credentials; Ironic's error body becomes
// the Error's message.
async function api(method, path, body) {
  const opts = { method, headers: { "X-OpenStack-Ironic-API-Version": MICROVERSION } };
  if (body !== undefined) {
    opts.headers["Content-Type"] = "application/json";
    opts.body = JSON.stringify(body);
  }
  const r = await fetch(path, opts);
  const text = await r.text();
  let doc = null;
  try { doc = text ? JSON.parse(text) : null; } catch (_) { /* not JSON */ }
  if (!r.ok) {
    let msg = `${r.status} ${r.statusText}`;
    if (doc && doc.error_message) {
      try { msg = JSON.parse(doc.error_message).faultstring || msg; } catch (_) { msg = doc.error_message; }
    }
    throw new Error(msg);
  }
  return doc;
}

const state = {
  nodes: new Map(),      // uuid → node summary
  sortKey: "name", sortDir: 1,
  filter: "", page: 0,
  selected: new Set(),
  actions: null, session: null,
  dirty: false,
};

function stepOf(n) {
  const s = n.deploy_step || n.clean_step || n.service_step;
  return s && s.step ? `${s.interface}.${s.step}` : (n.step || "");
}

async function loadAll() {
  let path = `/v1/nodes?limit=1000&fields=${FIELDS.join(",")}`;
  const seen = new Set();
  while (path) {
    const doc = await api("GET", path);
    for (const n of doc.nodes) {
      n.step = stepOf(n);
      const old = state.nodes.get(n.uuid);
      if (old && old.progress) n.progress = old.progress;
      state.nodes.set(n.uuid, n);
      seen.add(n.uuid);
    }
    path = doc.next ? new URL(doc.next).pathname + new URL(doc.next).search : null;
  }
  for (const uuid of [...state.nodes.keys()]) if (!seen.has(uuid)) state.nodes.delete(uuid);
  schedule();
}

// schedule redraws once per frame however many events arrived.
function schedule() {
  if (state.dirty) return;
  state.dirty = true;
  requestAnimationFrame(() => { state.dirty = false; render(); });
}

function applyEvent(ev) {
  if (ev.deleted) { state.nodes.delete(ev.uuid); state.selected.delete(ev.uuid); schedule(); return; }
  const n = state.nodes.get(ev.uuid);
  if (!n) {
    api("GET", `/v1/nodes/${ev.uuid}?fields=${FIELDS.join(",")}`).then((doc) => {
      doc.step = stepOf(doc); state.nodes.set(doc.uuid, doc); schedule();
    }).catch(() => {});
    return;
  }
  Object.assign(n, {
    name: ev.name, provision_state: ev.provision_state, target_provision_state: ev.target_provision_state,
    power_state: ev.power_state, last_error: ev.last_error, maintenance: ev.maintenance,
    step: ev.step || "", progress: ev.progress || null,
  });
  schedule();
  if (location.hash === `#/node/${ev.uuid}`) showNode(ev.uuid, true);
}

function connectEvents() {
  const es = new EventSource("/v1/events");
  es.addEventListener("open", () => { $("live").textContent = "live"; });
  es.addEventListener("error", () => { $("live").textContent = "reconnecting…"; });
  es.addEventListener("node", (e) => applyEvent(JSON.parse(e.data)));
  // The server dropped events for us: the table may be stale, read it again.
  es.addEventListener("lost", () => loadAll().catch(showError));
}

// matches applies the search box: key=value terms (the CLI's filters) must
// all hold; other words must appear in the name or UUID.
function matches(n, terms) {
  for (const t of terms) {
    const i = t.indexOf("=");
    if (i > 0) {
      const k = t.slice(0, i), v = t.slice(i + 1);
      if (String(n[k] ?? "") !== v) return false;
    } else if (!(n.name || "").includes(t) && !n.uuid.includes(t)) {
      return false;
    }
  }
  return true;
}

function visible() {
  const terms = state.filter.split(/\s+/).filter(Boolean);
  const out = [...state.nodes.values()].filter((n) => matches(n, terms));
  const k = state.sortKey, d = state.sortDir;
  out.sort((a, b) => String(a[k] ?? "").localeCompare(String(b[k] ?? "")) * d || a.uuid.localeCompare(b.uuid));
  return out;
}

function cls(s) {
  if (!s) return "";
  if (s.endsWith("failed") || s === "error") return "failed";
  if (s.endsWith("ing") || s.endsWith("wait") || s === "wait call-back") return "busy";
  return "";
}

function render() {
  const counts = new Map();
  for (const n of state.nodes.values()) counts.set(n.provision_state, (counts.get(n.provision_state) || 0) + 1);
  const bar = $("counts");
  bar.replaceChildren(...[...counts.entries()].sort().map(([s, c]) =>
    el("button", { class: cls(s), title: `show ${s}`, onclick: () => { $("search").value = `provision_state=${s}`; setFilter(); } }, `${s} ${c}`)));

  const rows = visible();
  const pages = Math.max(1, Math.ceil(rows.length / PAGE));
  state.page = Math.min(state.page, pages - 1);
  const shown = rows.slice(state.page * PAGE, (state.page + 1) * PAGE);
  $("shown").textContent = `${rows.length} of ${state.nodes.size} nodes`;
  $("page").textContent = `page ${state.page + 1} of ${pages}`;
  const body = $("fleet").tBodies[0];
  body.replaceChildren(...shown.map((n) => {
    const box = el("input", { type: "checkbox", "aria-label": `select ${n.name || n.uuid}` });
    box.checked = state.selected.has(n.uuid);
    box.addEventListener("click", (e) => { e.stopPropagation(); toggle(n.uuid, box.checked); });
    const target = n.target_provision_state ? ` → ${n.target_provision_state}` : "";
    const maint = [n.maintenance ? "maintenance" : "", n.fault || ""].filter(Boolean).join(" / ");
    let step = n.step || "";
    if (n.progress && n.progress.bytes_written) step += ` ${(n.progress.bytes_written / 1048576).toFixed(0)} MiB`;
    const tr = el("tr", { tabindex: "0", "data-uuid": n.uuid },
      el("td", { class: "act" }, box),
      el("td", { text: n.name || n.uuid }),
      el("td", { class: cls(n.provision_state), text: n.provision_state + target }),
      el("td", { text: n.power_state || "" }),
      el("td", { class: maint ? "failed" : "", text: maint }),
      el("td", { text: n.driver || "" }),
      el("td", { text: n.conductor || "" }),
      el("td", { text: step }),
      el("td", { class: "error", text: n.last_error || "", title: n.last_error || "" }));
    tr.addEventListener("click", () => { location.hash = `#/node/${n.uuid}`; });
    tr.addEventListener("keydown", (e) => { if (e.key === "Enter") location.hash = `#/node/${n.uuid}`; });
    return tr;
  }));
  for (const th of $("fleet").tHead.rows[0].cells) {
    if (!th.dataset.key) continue;
    th.setAttribute("aria-sort", th.dataset.key === state.sortKey ? (state.sortDir > 0 ? "ascending" : "descending") : "none");
  }
  $("bulk-go").textContent = `apply to ${state.selected.size} selected`;
  $("bulk-go").disabled = state.selected.size === 0 || !$("bulk-action").value;
}

function toggle(uuid, on) { on ? state.selected.add(uuid) : state.selected.delete(uuid); schedule(); }
function setFilter() { state.filter = $("search").value.trim(); state.page = 0; schedule(); }

// confirm asks before acting on machines, naming what will happen to how
// many; extra inputs (a deploy's image) come back with the answer.
function confirmAction(text, extra = []) {
  return new Promise((resolve) => {
    $("confirm-text").textContent = text;
    $("confirm-extra").replaceChildren(...extra);
    const d = $("confirm");
    d.addEventListener("close", () => resolve(d.returnValue === "ok"), { once: true });
    d.showModal();
  });
}

// act performs one action on one node.
async function act(uuid, action, image) {
  switch (action) {
    case "power on": case "power off": case "reboot":
      return api("PUT", `/v1/nodes/${uuid}/states/power`, { target: action === "reboot" ? "rebooting" : action });
    case "maintenance on":
      return api("PUT", `/v1/nodes/${uuid}/maintenance`, { reason: "set from the console" });
    case "maintenance off":
      return api("DELETE", `/v1/nodes/${uuid}/maintenance`);
    case "deploy":
      await api("PATCH", `/v1/nodes/${uuid}`, [
        { op: "add", path: "/instance_info/image_source", value: image.url },
        { op: "add", path: "/instance_info/image_checksum", value: image.checksum }]);
      return api("PUT", `/v1/nodes/${uuid}/states/provision`, { target: "deploy" });
    default:
      return api("PUT", `/v1/nodes/${uuid}/states/provision`, { target: action });
  }
}

async function bulk() {
  const action = $("bulk-action").value;
  const uuids = [...state.selected];
  const names = uuids.map((u) => (state.nodes.get(u) || {}).name || u);
  const extra = [];
  let url, sum;
  if (action === "deploy") {
    url = el("input", { id: "deploy-url", placeholder: "http://…/image.qcow2", size: "50" });
    sum = el("input", { id: "deploy-checksum", placeholder: "sha256 of the image, or a checksum file URL", size: "50" });
    extra.push(el("label", {}, "image URL", url), el("label", {}, "checksum", sum));
  }
  const more = names.length > 5 ? ` and ${names.length - 5} more` : "";
  const ok = await confirmAction(`${action} ${uuids.length} node${uuids.length === 1 ? "" : "s"}: ${names.slice(0, 5).join(", ")}${more}?`, extra);
  if (!ok) return;
  const image = url ? { url: url.value.trim(), checksum: sum.value.trim() } : null;
  const results = await Promise.allSettled(uuids.map((u) => act(u, action, image)));
  const failed = results.map((r, i) => [r, names[i]]).filter(([r]) => r.status === "rejected");
  if (failed.length) showError(new Error(failed.map(([r, n]) => `${n}: ${r.reason.message}`).join("\n")));
  state.selected.clear();
  schedule();
}

function showError(e) {
  const d = $("confirm");
  if (d.open) d.close();
  $("confirm-text").textContent = e.message;
  $("confirm-extra").replaceChildren();
  d.showModal();
}

async function showNode(uuid, refresh) {
  const n = await api("GET", `/v1/nodes/${uuid}`).catch(showError);
  if (!n) return;
  $("node-title").textContent = `${n.name || n.uuid} — ${n.provision_state}${n.target_provision_state ? " → " + n.target_provision_state : ""}`;
  const verbs = ((n.maintenance ? state.actions.maintenance : state.actions.normal)[n.provision_state]) || [];
  $("node-actions").replaceChildren(...verbs.map((v) => el("button", { "data-verb": v, onclick: async () => {
    if (await confirmAction(`${v} ${n.name || n.uuid}?`)) act(n.uuid, v).catch(showError);
  } }, v)));
  $("node-path").replaceChildren(...state.actions.states.filter((s) => !s.includes(" ") || s === n.provision_state).map((s) =>
    el("li", { class: s === n.provision_state ? "current " + cls(s) : "", text: s })));
  const live = state.nodes.get(uuid);
  const prog = $("node-progress");
  prog.replaceChildren();
  if (live && live.step) {
    prog.append(el("div", { text: `running ${live.step}` }));
    const p = live.progress;
    if (p && p.bytes_written) {
      const bar = el("progress", { max: String(p.total_bytes || p.bytes_written), value: String(p.bytes_written) });
      prog.append(bar, el("span", { text: ` ${(p.bytes_written / 1048576).toFixed(0)} MiB${p.rate_bytes_per_second ? `, ${(p.rate_bytes_per_second / 1048576).toFixed(1)} MiB/s` : ""}` }));
    }
  }
  $("node-fields").textContent = JSON.stringify(n, null, 2);
  if (refresh) return;
  const hist = await api("GET", `/v1/nodes/${uuid}/history?detail=true`).catch(() => ({ history: [] }));
  const events = hist.history || [];
  const times = events.map((h) => Date.parse(h.created_at));
  const spans = times.map((t, i) => (i + 1 < times.length ? times[i + 1] - t : 0));
  const longest = Math.max(1, ...spans);
  $("node-history").replaceChildren(...events.map((h, i) => el("li", { class: h.severity },
    el("span", { class: "bar", style: `width:${Math.round(150 * spans[i] / longest)}px` }),
    `${h.created_at.replace("T", " ").slice(0, 19)} ${h.event}`)));
  const ports = await api("GET", `/v1/nodes/${uuid}/ports/detail`).catch(() => ({ ports: [] }));
  $("node-ports").replaceChildren(...ports.ports.map((p) => el("li", { text: `${p.address}${p.pxe_enabled ? " (PXE)" : ""}` })));
  const inv = await api("GET", `/v1/nodes/${uuid}/inventory`).catch(() => null);
  const box = $("node-inventory");
  box.replaceChildren();
  if (inv && inv.inventory) {
    const i = inv.inventory;
    box.append(el("div", { text: `${i.cpu ? i.cpu.count : "?"} CPUs (${i.cpu ? i.cpu.architecture : "?"}), ${i.memory ? i.memory.physical_mb : "?"} MiB` }));
    for (const d of i.disks || []) box.append(el("div", { text: `disk ${d.name} ${(d.size / 1e9).toFixed(0)} GB ${d.model || ""} ${d.serial || ""}` }));
    for (const nic of i.interfaces || []) box.append(el("div", { text: `nic ${nic.name} ${nic.mac_address}` }));
  } else {
    box.append(el("div", { text: "no inventory (not inspected)" }));
  }
}

async function enrollOne(e) {
  e.preventDefault();
  const f = new FormData(e.target);
  const drv = f.get("driver");
  const info = {};
  const prefix = drv === "ipmi" ? "ipmi" : drv.includes("redfish") ? "redfish" : "";
  if (prefix && f.get("address")) info[`${prefix}_address`] = f.get("address");
  if (prefix && f.get("username")) info[`${prefix}_username`] = f.get("username");
  if (prefix && f.get("password")) info[`${prefix}_password`] = f.get("password");
  const node = { driver: drv, driver_info: info };
  if (f.get("name")) node.name = f.get("name");
  try {
    if (f.get("properties")) node.properties = JSON.parse(f.get("properties"));
  } catch (err) { showResults([{ name: node.name || "node", error: `properties: ${err.message}` }]); return; }
  node.ports = String(f.get("macs") || "").split(/[\s,]+/).filter(Boolean).map((a) => ({ address: a }));
  showResults([await enroll(node)]);
}

async function enroll(node) {
  const ports = node.ports || [];
  const body = Object.assign({}, node);
  delete body.ports;
  try {
    const n = await api("POST", "/v1/nodes", body);
    for (const p of ports) await api("POST", "/v1/ports", Object.assign({ node_uuid: n.uuid }, p));
    return { name: n.name || n.uuid, uuid: n.uuid };
  } catch (err) {
    return { name: node.name || "(unnamed)", error: err.message };
  }
}

async function enrollMany() {
  let list;
  try {
    list = JSON.parse($("enroll-many").value);
    if (!Array.isArray(list)) list = list.nodes;
    if (!Array.isArray(list)) throw new Error("expected a list of nodes (or {\"nodes\": [...]})");
  } catch (err) { showResults([{ name: "input", error: err.message }]); return; }
  const out = [];
  for (const n of list) out.push(await enroll(n));
  showResults(out);
}

function showResults(rs) {
  $("enroll-results").replaceChildren(...rs.map((r) => el("li", { class: r.error ? "error" : "",
    text: r.error ? `${r.name}: ${r.error}` : `${r.name}: enrolled (${r.uuid})` })));
}

const SVG = "http://www.w3.org/2000/svg";
const svgEl = (tag, attrs) => {
  const e = document.createElementNS(SVG, tag);
  for (const [k, v] of Object.entries(attrs)) e.setAttribute(k, String(v));
  return e;
};
const COLORS = ["#1565c0", "#2e7d32", "#b00020", "#ef6c00", "#6a1b9a", "#00838f", "#5d4037", "#9e9d24"];

function seconds(s) {
  if (s < 1) return `${(s * 1000).toFixed(0)} ms`;
  if (s < 120) return `${s.toFixed(1)} s`;
  return `${(s / 60).toFixed(1)} min`;
}

// showHealth draws the health page from /ui/api/health.
async function showHealth() {
  const h = await fetch("/ui/api/health").then((r) => r.json()).catch(() => null);
  if (!h) return;
  // Nodes by state: one line per state (the eight largest now).
  const svg = $("health-states");
  svg.replaceChildren();
  const W = 560, H = 220, pad = 30;
  const last = h.states[h.states.length - 1] || { counts: {} };
  const states = Object.keys(last.counts).sort((a, b) => last.counts[b] - last.counts[a]).slice(0, 8);
  const t0 = Date.parse(h.states[0].time), t1 = Date.parse(last.time);
  const max = Math.max(1, ...h.states.flatMap((s) => states.map((k) => s.counts[k] || 0)));
  const x = (t) => pad + (t1 > t0 ? (W - 2 * pad) * (t - t0) / (t1 - t0) : W - 2 * pad);
  const y = (v) => H - pad - (H - 2 * pad) * v / max;
  svg.append(svgEl("line", { x1: pad, y1: H - pad, x2: W - pad, y2: H - pad, stroke: "#999" }),
    svgEl("line", { x1: pad, y1: pad, x2: pad, y2: H - pad, stroke: "#999" }));
  const label = svgEl("text", { x: 2, y: pad, "font-size": 10 });
  label.textContent = String(max);
  svg.append(label);
  states.forEach((st, i) => {
    const pts = h.states.map((s) => `${x(Date.parse(s.time)).toFixed(1)},${y(s.counts[st] || 0).toFixed(1)}`).join(" ");
    const line = svgEl("polyline", { points: pts, fill: "none", stroke: COLORS[i % COLORS.length], "stroke-width": 2, "data-state": st });
    svg.append(line);
    if (h.states.length === 1) svg.append(svgEl("circle", { cx: x(t1), cy: y(last.counts[st]), r: 3, fill: COLORS[i % COLORS.length] }));
  });
  $("health-legend").replaceChildren(...states.map((st, i) => el("li", {},
    el("span", { style: `background:${COLORS[i % COLORS.length]}` }), `${st} ${last.counts[st]}`)));
  $("health-steps").tBodies[0].replaceChildren(...(h.steps.length ? h.steps.map((s) => el("tr", {},
    el("td", { text: s.step }), el("td", { text: String(s.count) }), el("td", { text: seconds(s.p50_seconds) }), el("td", { text: seconds(s.p99_seconds) })))
    : [el("tr", {}, el("td", { colspan: "4", text: "no step has run since the controller started" }))]));
  const hb = h.heartbeats;
  $("health-heartbeats").textContent = hb.agents ? `${hb.agents} running agents; last heartbeat median ${seconds(hb.median_seconds)} ago, oldest ${seconds(hb.max_seconds)}` : "no agent is running";
  $("health-bmc").tBodies[0].replaceChildren(...(h.bmc.length ? h.bmc.map((b) => el("tr", { class: b.errors > 0 ? "error" : "" },
    el("td", { text: b.driver }), el("td", { text: String(b.requests) }), el("td", { text: String(b.errors) }),
    el("td", { text: b.recent_error_rate < 0 ? "no requests" : `${(100 * b.recent_error_rate).toFixed(1)} %` })))
    : [el("tr", {}, el("td", { colspan: "4", text: "no BMC request since the controller started" }))]));
  document.getElementById("health-view").dataset.loaded = "true";
}

function route() {
  const h = location.hash;
  $("fleet-view").hidden = !(h === "" || h === "#/" || h === "#");
  $("node-view").hidden = !h.startsWith("#/node/");
  $("enroll-view").hidden = h !== "#/enroll";
  $("health-view").hidden = h !== "#/health";
  if (h.startsWith("#/node/")) showNode(h.slice(7));
  if (h === "#/health") showHealth();
}

async function main() {
  state.session = await fetch("/ui/api/session").then((r) => r.json());
  state.actions = await fetch("/ui/api/actions").then((r) => r.json());
  if (!state.session.can_act) document.body.classList.add("readonly");
  $("who").textContent = state.session.user ? `${state.session.user} (${state.session.role})` : "";
  $("search").addEventListener("input", setFilter);
  $("bulk-action").addEventListener("change", schedule);
  $("bulk-go").addEventListener("click", () => bulk().catch(showError));
  $("select-all").addEventListener("change", (e) => {
    const shown = visible().slice(state.page * PAGE, (state.page + 1) * PAGE);
    for (const n of shown) toggle(n.uuid, e.target.checked);
  });
  $("prev").addEventListener("click", () => { state.page = Math.max(0, state.page - 1); schedule(); });
  $("next").addEventListener("click", () => { state.page++; schedule(); });
  for (const th of $("fleet").tHead.rows[0].cells) {
    if (!th.dataset.key) continue;
    const sort = () => { state.sortDir = state.sortKey === th.dataset.key ? -state.sortDir : 1; state.sortKey = th.dataset.key; schedule(); };
    th.addEventListener("click", sort);
    th.addEventListener("keydown", (e) => { if (e.key === "Enter") sort(); });
  }
  $("enroll-one").addEventListener("submit", enrollOne);
  $("enroll-many-go").addEventListener("click", () => enrollMany().catch(showError));
  const drivers = await api("GET", "/v1/drivers").catch(() => ({ drivers: [] }));
  $("enroll-driver").replaceChildren(...drivers.drivers.map((d) => el("option", { value: d.name, text: d.name })));
  window.addEventListener("hashchange", route);
  route();
  connectEvents();
  await loadAll();
  // Draw now, not on the next animation frame: "ready" means the table
  // is on the page (a frame can come after a reader checked it).
  render();
  window.kilnReadyAt = performance.now();
  document.body.dataset.ready = "true";
}

main().catch(showError);
