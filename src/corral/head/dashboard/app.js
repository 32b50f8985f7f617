// Corral dashboard: a small single-page app over the head's JSON API (no libraries, no CDN).
// The token comes from `corral dashboard` (a URL whose #token=... fragment never reaches the
// server) or from the sign-in form, and is kept in this browser's localStorage.

const TOKEN_KEY = "corral.token";
const ASKED_S = Number(new URLSearchParams(location.search).get("refresh")); // ?refresh=SECONDS, 1 to 3600
const REFRESH_MS = 1000 * (ASKED_S > 0 ? Math.min(3600, Math.max(1, ASKED_S)) : 5); // never faster than once a second
const view = document.getElementById("view");
const COLORS = ["#1f6feb", "#2da44e", "#bf8700", "#cf222e", "#8250df", "#1b7c83", "#e16f24", "#6e7781"];
let timer = null;
let generation = 0; // bumped on every navigation, so a slow answer for an old page is dropped

const esc = (v) => String(v ?? "").replace(/[&<>"']/g, (c) => ({ "&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;", "'": "&#39;" })[c]);
const token = () => localStorage.getItem(TOKEN_KEY) || "";
const decode = (text) => { try { return decodeURIComponent(text); } catch (e) { return text; } }; // "%" alone is not an escape: keep it

function takeTokenFromUrl() {
  const match = location.hash.match(/token=([^&]+)/);
  if (match) {
    localStorage.setItem(TOKEN_KEY, decode(match[1]));
    history.replaceState(null, "", location.pathname + "#/");
  }
}

class SignedOut extends Error {}

async function api(path, asText = false) {
  const response = await fetch(path, { headers: { Authorization: "Bearer " + token() } });
  if (response.status === 401) throw new SignedOut("sign in again");
  if (!response.ok) {
    let detail = response.statusText;
    try { detail = JSON.stringify((await response.json()).detail); } catch (e) { /* not JSON */ }
    throw new Error(`${path}: ${response.status} ${detail}`);
  }
  return asText ? response.text() : response.json();
}

function ago(iso) {
  if (!iso) return "-";
  const s = Math.max(0, (Date.now() - Date.parse(iso)) / 1000);
  if (s < 60) return `${s.toFixed(0)}s ago`;
  if (s < 3600) return `${Math.floor(s / 60)}m ago`;
  if (s < 86400) return `${Math.floor(s / 3600)}h${String(Math.floor((s % 3600) / 60)).padStart(2, "0")}m ago`;
  return `${Math.floor(s / 86400)}d ago`;
}

const gpuCount = (j) => (j.gpus_per_node || 0) * (j.nodes || 1);
const gpusText = (j) => (j.gpus_per_node ? `${j.nodes > 1 ? j.nodes + "×" : ""}${j.gpus_per_node}${j.gpu_types.length ? "×" + j.gpu_types.join("|") : ""}` : "-");
const state = (s) => `<span class="state ${esc(s)}">${esc(s)}</span>`;
const jobLink = (id) => `<a href="#/jobs/${encodeURIComponent(id)}">${esc(id)}</a>`;
const card = (value, label, id = "") => `<div class="card"${id ? ` id="${id}"` : ""}><b>${esc(value)}</b><span>${esc(label)}</span></div>`;

// ---- cluster overview: nodes × GPUs, coloured by state and utilization ----
function gpuCell(node, gpu) {
  let cls = "gpu";
  if (!gpu.healthy) cls += " bad";
  else if (node.state === "NOT_READY") cls += " down";
  else if (gpu.allocated_to) cls += ` job u${Math.min(4, Math.floor((gpu.utilization ?? 0) / 20))}`;
  // A node that is not ready has no current reading: its last one may be long past.
  const util = node.state === "NOT_READY" ? "node not ready" : gpu.utilization == null ? "no reading" : `${gpu.utilization.toFixed(0)}%`;
  const title = `${node.name} GPU ${gpu.index} (${gpu.type}): ${gpu.allocated_to ? gpu.allocated_to + ", " : "free, "}${util}${gpu.problem ? ", " + gpu.problem : ""}`;
  return `<span class="${cls}" title="${esc(title)}"${gpu.allocated_to ? ` data-job="${esc(gpu.allocated_to)}"` : ""}></span>`;
}

async function overview(my) {
  const [status, nodes] = await Promise.all([api("/v1/status"), api("/v1/nodes")]);
  if (my !== generation) return;
  const jobs = status.jobs_by_state;
  const blocks = nodes.map((n) => `<div class="node ${esc(n.state)}" title="${esc(n.name + ": " + n.state + (n.reason ? " — " + n.reason : ""))}"><div class="name">${esc(n.name)}</div><div class="gpus">${n.gpus.map((g) => gpuCell(n, g)).join("")}</div></div>`);
  view.innerHTML = `<h1>Cluster</h1>
    <div class="cards">${card(`${status.nodes_ready} / ${status.nodes_total}`, "nodes ready", "nodes-card")}${card(`${status.gpus_free} / ${status.gpus_total}`, "GPUs free")}${card(jobs.RUNNING ?? 0, "jobs running")}${card(jobs.PENDING ?? 0, "jobs pending")}</div>
    <div class="legend"><span><span class="gpu"></span>free</span><span><span class="gpu u0"></span>allocated, idle</span><span><span class="gpu u2"></span>~50%</span><span><span class="gpu u4"></span>busy</span><span><span class="gpu bad"></span>unhealthy</span><span><span class="gpu down"></span>node not ready</span><span><span class="node DRAINED swatch"></span>node drained</span></div>
    <div class="grid" id="grid">${blocks.join("")}</div>`;
}

// ---- queue: running and pending jobs with their reasons ----
async function queue(my) {
  const jobs = await api("/v1/jobs?state=RUNNING&state=PENDING");
  if (my !== generation) return;
  jobs.sort((a, b) => (a.state !== b.state ? (a.state === "RUNNING" ? -1 : 1) : b.priority - a.priority || a.submitted_at.localeCompare(b.submitted_at)));
  const rows = jobs.map((j) => `<tr><td>${jobLink(j.id)}</td><td>${esc(j.name)}</td><td>${state(j.state)}</td><td>${esc(j.user)}</td><td>${esc(j.team)}</td><td>${esc(gpusText(j))}</td><td class="num">${j.priority}</td><td>${ago(j.submitted_at)}</td><td class="reason">${esc(j.state === "RUNNING" ? j.allocation.map((a) => `${a.node}[${a.gpus.join(",")}]`).join(" ") + (j.reason.includes("; idle: ") ? " — " + j.reason.split("; idle: ")[1] : "") : j.reason)}</td></tr>`);
  view.innerHTML = `<h1>Queue</h1><table id="queue"><thead><tr><th>Job</th><th>Name</th><th>State</th><th>User</th><th>Team</th><th>GPUs</th><th class="num">Prio</th><th>Submitted</th><th>Where / why</th></tr></thead>
    <tbody>${rows.join("") || '<tr><td colspan="9" class="reason">nothing running or waiting</td></tr>'}</tbody></table>`;
}

// ---- job page: fields, usage, GPU utilization, live logs ----
const logState = { job: null, offset: 0, text: "" };

function sparkline(points, width = 320, height = 48) {
  if (points.length < 2) return `<svg width="${width}" height="${height}"><text x="4" y="${height / 2}">waiting for readings</text></svg>`;
  const t0 = Date.parse(points[0][0]), t1 = Date.parse(points[points.length - 1][0]) || t0 + 1;
  const xy = points.map(([t, u]) => `${(((Date.parse(t) - t0) / (t1 - t0 || 1)) * (width - 2) + 1).toFixed(1)},${(height - 2 - (u / 100) * (height - 4)).toFixed(1)}`);
  return `<svg width="${width}" height="${height}" role="img"><rect width="${width}" height="${height}" fill="#f6f8fa"/><polyline fill="none" stroke="#2da44e" stroke-width="1.5" points="${xy.join(" ")}"/></svg>`;
}

async function jobPage(my, id) {
  const [job, gpus] = await Promise.all([api(`/v1/jobs/${encodeURIComponent(id)}`), api(`/v1/jobs/${encodeURIComponent(id)}/gpus`)]);
  if (logState.job !== id) Object.assign(logState, { job: id, offset: 0, text: "" });
  if (job.tasks.length) {
    const chunk = await api(`/v1/jobs/${encodeURIComponent(id)}/logs?offset=${logState.offset}`, true).catch(() => "");
    logState.text = (logState.text + chunk).slice(-200000);
    logState.offset += new TextEncoder().encode(chunk).length;
  }
  if (my !== generation) return;
  const u = job.usage || { gpu_seconds: 0, cost: 0, energy_kwh: 0 };
  const fields = [["state", state(job.state)], ["reason", esc(job.reason)], ["user / team", esc(`${job.user} / ${job.team}`)], ["GPUs", esc(gpusText(job))],
    ["allocation", esc(job.allocation.map((a) => `${a.node}[${a.gpus.join(",")}]`).join(" ") || "-")], ["command", esc(Array.isArray(job.command) ? job.command.join(" ") : job.command)],
    ["submitted", ago(job.submitted_at)], ["started", ago(job.started_at)], ["finished", ago(job.finished_at)], ["restarts", job.restarts],
    ["usage", `<span id="usage">${(u.gpu_seconds / 3600).toFixed(2)} GPU-hours · cost ${u.cost.toFixed(2)} · ${u.energy_kwh.toFixed(3)} kWh</span>`]];
  const lines = gpus.gpus.map((g) => { const last = g.points[g.points.length - 1]; return `<tr><td>${esc(g.node)}</td><td>${g.index}</td><td class="num">${last ? last[1].toFixed(0) + "%" : "-"}</td><td class="num">${last ? last[2].toFixed(0) + " W" : "-"}</td><td>${sparkline(g.points)}</td></tr>`; });
  view.innerHTML = `<h1>Job ${esc(job.id)} <small class="reason">${esc(job.name)}</small></h1>
    <dl class="kv">${fields.map(([k, v]) => `<dt>${esc(k)}</dt><dd>${v}</dd>`).join("")}</dl>
    <h2>GPU utilization</h2>
    <table id="job-gpus"><thead><tr><th>Node</th><th>GPU</th><th class="num">Util</th><th class="num">Power</th><th>Last readings</th></tr></thead><tbody>${lines.join("") || '<tr><td colspan="5" class="reason">holds no GPU now</td></tr>'}</tbody></table>
    <h2>Logs (rank 0, live)</h2><pre class="logs" id="logs">${esc(logState.text || "(no output yet)")}</pre>`;
  const pre = document.getElementById("logs");
  pre.scrollTop = pre.scrollHeight;
}

// ---- teams: GPUs in use now against their quota, waiting, and recent usage ----
const quotaText = (quotas) => Object.entries(quotas).map(([type, q]) => `${type}: ${q.nominal}${q.borrowing_limit == null ? "" : ` (+${q.borrowing_limit} borrowable)`}`).join(", ");

async function teams(my) {
  const since = new Date(Date.now() - 7 * 86400 * 1000).toISOString();
  const [jobs, status, usage, config] = await Promise.all([api("/v1/jobs?state=RUNNING&state=PENDING"), api("/v1/status"), api(`/v1/usage?by=team&since=${encodeURIComponent(since)}`), api("/v1/config").catch(() => null)]);
  if (my !== generation) return;
  const byTeam = {};
  const row = (t) => (byTeam[t] ??= { running: 0, pending: 0, week: null, quotas: {} });
  for (const [team, cfg] of Object.entries(config?.config?.teams ?? {})) if (Object.keys(cfg.quotas ?? {}).length) row(team).quotas = cfg.quotas;
  for (const j of jobs) row(j.team)[j.state === "RUNNING" ? "running" : "pending"] += gpuCount(j);
  for (const u of usage.rows) row(u.key).week = u;
  const total = status.gpus_total || 1;
  const rows = Object.entries(byTeam).sort((a, b) => b[1].running - a[1].running || a[0].localeCompare(b[0])).map(([team, r]) => {
    const nominal = Object.values(r.quotas).reduce((s, q) => s + q.nominal, 0);
    const of = nominal > 0 ? nominal : total;
    const title = nominal > 0 ? `${r.running} of ${nominal} GPUs of its quota` : `${r.running} of the cluster's ${total} GPUs`;
    const over = r.running > of ? " over" : "";
    return `<tr><td>${esc(team)}</td><td class="num">${r.running}</td><td><div class="bar${over}" title="${esc(title)}"><div style="width:${Math.min(100, (100 * r.running) / of).toFixed(1)}%"></div></div></td><td class="num">${r.pending}</td><td class="${nominal > 0 ? "" : "reason"}">${esc(nominal > 0 ? quotaText(r.quotas) : "no quota set")}</td><td class="num">${r.week ? r.week.gpu_hours.toFixed(2) : "0.00"}</td><td class="num">${r.week ? r.week.cost.toFixed(2) : "0.00"}</td></tr>`;
  });
  view.innerHTML = `<h1>Teams</h1><table id="teams"><thead><tr><th>Team</th><th class="num">GPUs in use</th><th>Against quota (or the cluster)</th><th class="num">GPUs waiting</th><th>Quota</th><th class="num">GPU-hours (7 d)</th><th class="num">Cost (7 d)</th></tr></thead>
    <tbody>${rows.join("") || '<tr><td colspan="7" class="reason">no team uses GPUs</td></tr>'}</tbody></table>`;
}

// ---- usage and cost over time: stacked bars per team, drawn as inline SVG ----
const RANGES = { "24h": [86400, 3600], "7d": [7 * 86400, 6 * 3600], "30d": [30 * 86400, 86400] };
let range = "7d";

function stackedBars(series, field, label, digits) {
  const width = 900, height = 220, left = 56, bottom = 24;
  const colour = Object.fromEntries(series.keys.map((k, i) => [k, COLORS[i % COLORS.length]]));
  const scale = field === "gpu_seconds" ? 1 / 3600 : 1;
  const totals = series.buckets.map((b) => Object.values(b.usage).reduce((s, u) => s + u[field] * scale, 0));
  const top = Math.max(...totals, 1e-9);
  const w = (width - left - 8) / Math.max(1, series.buckets.length);
  let bars = "";
  series.buckets.forEach((b, i) => {
    let y = height - bottom;
    for (const key of series.keys) {
      const v = (b.usage[key]?.[field] ?? 0) * scale;
      if (!v) continue;
      const h = (v / top) * (height - bottom - 10);
      y -= h;
      bars += `<rect x="${(left + i * w + 1).toFixed(1)}" y="${y.toFixed(1)}" width="${Math.max(1, w - 2).toFixed(1)}" height="${h.toFixed(1)}" fill="${colour[key]}"><title>${esc(key)}: ${v.toFixed(digits)} ${label} (${esc(b.start)})</title></rect>`;
    }
  });
  const ticks = [0, 0.5, 1].map((f) => `<text x="${left - 6}" y="${(height - bottom - f * (height - bottom - 10) + 3).toFixed(1)}" text-anchor="end">${(f * top).toFixed(digits)}</text>`);
  const first = series.buckets[0]?.start ?? "", last = series.buckets[series.buckets.length - 1]?.start ?? "";
  return `<svg class="chart" viewBox="0 0 ${width} ${height}" width="100%" role="img" aria-label="${esc(label)} per bucket">${ticks.join("")}
    <line x1="${left}" y1="${height - bottom}" x2="${width - 8}" y2="${height - bottom}" stroke="#d0d7de"/>${bars}
    <text x="${left}" y="${height - 6}">${esc(first.slice(0, 16).replace("T", " "))}</text><text x="${width - 8}" y="${height - 6}" text-anchor="end">${esc(last.slice(0, 16).replace("T", " "))}</text></svg>`;
}

async function usagePage(my) {
  const [span, step] = RANGES[range];
  const since = new Date(Math.floor(Date.now() / 1000 / step) * step * 1000 - span * 1000 + step * 1000).toISOString();
  const [series, report] = await Promise.all([api(`/v1/usage/series?by=team&step=${step}&since=${encodeURIComponent(since)}`), api(`/v1/usage?by=team&since=${encodeURIComponent(since)}`)]);
  if (my !== generation) return;
  const colour = Object.fromEntries(series.keys.map((k, i) => [k, COLORS[i % COLORS.length]]));
  const rows = report.rows.map((r) => `<tr><td><span class="swatch" style="background:${colour[r.key] ?? "#6e7781"}"></span>${esc(r.key)}</td><td class="num">${r.jobs}</td><td class="num">${r.gpu_hours.toFixed(2)}</td><td class="num">${r.cost.toFixed(2)}</td><td class="num">${r.energy_kwh.toFixed(3)}</td></tr>`);
  view.innerHTML = `<h1>Usage and cost</h1>
    <div class="tools">${Object.keys(RANGES).map((r) => `<button type="button" data-range="${r}"${r === range ? ' disabled' : ""}>last ${r}</button>`).join("")}</div>
    <h2>GPU-hours per team</h2><div id="chart-hours">${stackedBars(series, "gpu_seconds", "GPU-hours", 1)}</div>
    <h2>Cost per team</h2><div id="chart-cost">${stackedBars(series, "cost", "cost", 2)}</div>
    <h2>Totals</h2><table id="usage-totals"><thead><tr><th>Team</th><th class="num">Jobs</th><th class="num">GPU-hours</th><th class="num">Cost</th><th class="num">Energy (kWh)</th></tr></thead>
    <tbody>${rows.join("") || '<tr><td colspan="5" class="reason">no usage in this period</td></tr>'}</tbody></table>`;
}

// ---- sign-in and routing ----
function signIn(message = "") {
  view.innerHTML = `<form class="login" id="login"><h1>Sign in</h1>
    <p>Paste a Corral token (<code>corral config</code> shows yours), or open the link <code>corral dashboard</code> prints.</p>
    <input id="token" type="password" autocomplete="off" placeholder="cu_…" aria-label="token"><button type="submit">Sign in</button>
    <p class="reason">${esc(message)}</p></form>`;
  document.getElementById("login").addEventListener("submit", (event) => {
    event.preventDefault();
    localStorage.setItem(TOKEN_KEY, document.getElementById("token").value.trim());
    location.hash = "#/";
    route();
  });
}

const PAGES = { "": overview, queue, teams, usage: usagePage };

async function show(page, arg, my, drawn = false) {
  const started = performance.now();
  try {
    await page(my, arg);
    if (my !== generation) return;
    drawn = true;
    const updated = document.getElementById("updated");
    updated.dataset.ms = (performance.now() - started).toFixed(0); // load and draw, for people and tests
    updated.dataset.count = String(Number(updated.dataset.count || 0) + 1);
    updated.textContent = `updated ${new Date().toLocaleTimeString()} (${updated.dataset.ms} ms)`;
    document.getElementById("problem").textContent = "";
  } catch (error) {
    if (my !== generation) return;
    if (error instanceof SignedOut) { localStorage.removeItem(TOKEN_KEY); signIn("That token was not accepted."); return; }
    document.getElementById("problem").textContent = String(error.message || error);
    // Nothing of this page was drawn yet: say so, rather than leave the last page's content (another job's).
    if (!drawn) view.innerHTML = `<h1>${esc(arg ? arg : "Not available")}</h1><p class="reason">${esc(String(error.message || error))}</p>`;
  }
  if (my === generation) timer = setTimeout(() => show(page, arg, my, drawn), REFRESH_MS);
}

function route() {
  clearTimeout(timer);
  const my = ++generation;
  takeTokenFromUrl();
  document.getElementById("logout").hidden = !token();
  document.getElementById("problem").textContent = ""; // the last page's problem is not this one's
  if (!token()) { signIn(); return; }
  const [name, arg] = location.hash.replace(/^#\/?/, "").split("/");
  document.querySelectorAll("header nav a").forEach((a) => a.classList.toggle("active", (a.dataset.page === "overview" ? "" : a.dataset.page) === name));
  const page = name === "jobs" && arg ? jobPage : PAGES[name] ?? overview;
  show(page, decode(arg ?? ""), my);
}

view.addEventListener("click", (event) => {
  const gpu = event.target.closest("[data-job]");
  if (gpu) location.hash = `#/jobs/${encodeURIComponent(gpu.dataset.job)}`;
  const button = event.target.closest("[data-range]");
  if (button) { range = button.dataset.range; route(); }
});
document.getElementById("logout").addEventListener("click", () => { localStorage.removeItem(TOKEN_KEY); route(); });
window.addEventListener("hashchange", route);
route();
