// The abi console's page script: draws the view the address names from the
// console's JSON API, and keeps it live from the event stream (/api/events).
// No framework, no build step: a small element helper and one function per view.
"use strict";

const meta = (name) => (document.querySelector(`meta[name="${name}"]`) || {}).content || "";
const ACTIONS = meta("abi-actions") === "on";
const RUN_STATUSES = meta("abi-run-statuses").split(",").filter(Boolean);
const OPEN_STATUSES = meta("abi-open-statuses").split(",").filter(Boolean);

// ---- small helpers -------------------------------------------------------

function h(tag, attrs, ...children) {
  const el = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (v === undefined || v === null || v === false) continue;
    if (k.startsWith("on")) el.addEventListener(k.slice(2), v);
    else if (k === "dataset") Object.assign(el.dataset, v);
    else el.setAttribute(k, v === true ? "" : v);
  }
  for (const child of children.flat(Infinity)) {
    if (child === undefined || child === null || child === false) continue;
    el.append(child instanceof Node ? child : document.createTextNode(String(child)));
  }
  return el;
}
const status = (s) => h("span", { class: `status ${s}` }, s || "—");
const link = (href, text) => h("a", { href }, text);
const dash = (v) => (v === undefined || v === null || v === "" ? "—" : v);
function secs(n) {
  if (n === undefined || n === null) return "—";
  if (n < 1) return `${Math.round(n * 1000)} ms`;
  if (n < 120) return `${n.toFixed(1)} s`;
  if (n < 7200) return `${Math.round(n / 60)} min`;
  return `${(n / 3600).toFixed(1)} h`;
}
function when(iso) {
  if (!iso) return "—";
  const d = new Date(iso);
  return isNaN(d) ? iso : d.toLocaleString();
}
async function api(path, options) {
  const response = await fetch(path, options);
  const body = await response.json().catch(() => ({}));
  if (!response.ok) throw new Error(`${body.code || response.status}: ${body.message || response.statusText}`);
  return body;
}
const main = () => document.getElementById("main");
function show(...children) {
  main().replaceChildren(...children.flat(Infinity).filter((c) => c !== null && c !== undefined && c !== false));
}
function table(headings, rows, attrs) {
  return h("table", attrs || {}, h("thead", {}, h("tr", {}, headings.map((t) => h("th", {}, t)))), h("tbody", {}, rows));
}
function failure(err) {
  return h("p", { class: "error" }, String(err.message || err));
}

// ---- state kept live ----------------------------------------------------------

const state = { modules: null, receivedAt: 0, chats: [] };
const listeners = { modules: [], runs: [], agents: [], chats: [] };
function on(kind, fn) {
  listeners[kind].push(fn);
}

function connect() {
  const live = document.getElementById("live");
  const source = new EventSource("/api/events");
  source.onopen = () => {
    live.dataset.state = "open";
    live.textContent = "live";
  };
  source.onerror = () => {
    live.dataset.state = "closed";
    live.textContent = "reconnecting";
  };
  source.addEventListener("modules", (e) => {
    state.modules = JSON.parse(e.data);
    state.receivedAt = Date.now() / 1000;
    listeners.modules.forEach((fn) => fn(state.modules));
  });
  for (const kind of ["runs", "agents", "chats"]) {
    source.addEventListener(kind, (e) => listeners[kind].forEach((fn) => fn(JSON.parse(e.data))));
  }
  source.addEventListener("lagged", () => route());
}

// ---- views -------------------------------------------------------------------

// Seconds left on a lease, counted down from when the view arrived.
function leaseLeft(instance) {
  return instance.lease_left_secs - (Date.now() / 1000 - state.receivedAt);
}

function graph(view) {
  // Dependencies to the left, dependents to the right: a module's column is
  // the length of its longest chain of dependencies.
  const nodes = new Map(view.modules.map((m) => [m.module_id, { id: m.module_id, status: m.best_status }]));
  for (const e of view.edges) if (!nodes.has(e.to)) nodes.set(e.to, { id: e.to, status: "MISSING" });
  const deps = new Map([...nodes.keys()].map((id) => [id, view.edges.filter((e) => e.from === id).map((e) => e.to)]));
  const depth = new Map();
  const visit = (id, seen) => {
    if (depth.has(id)) return depth.get(id);
    if (seen.has(id)) return 0;
    seen.add(id);
    const d = Math.max(-1, ...deps.get(id).map((t) => visit(t, seen))) + 1;
    depth.set(id, d);
    return d;
  };
  for (const id of nodes.keys()) visit(id, new Set());
  const columns = [];
  for (const [id, d] of depth) (columns[d] = columns[d] || []).push(id);
  const W = 190, H = 44, GX = 70, GY = 16;
  const pos = new Map();
  columns.forEach((ids, c) => ids.sort().forEach((id, r) => pos.set(id, { x: 10 + c * (W + GX), y: 10 + r * (H + GY) })));
  const width = 20 + columns.length * (W + GX);
  const height = 20 + Math.max(1, ...columns.map((c) => c.length)) * (H + GY);
  const ns = "http://www.w3.org/2000/svg";
  const s = (tag, attrs, text) => {
    const el = document.createElementNS(ns, tag);
    for (const [k, v] of Object.entries(attrs)) el.setAttribute(k, v);
    if (text !== undefined) el.textContent = text;
    return el;
  };
  const svg = s("svg", { class: "graph", width, height, viewBox: `0 0 ${width} ${height}`, id: "graph" });
  const defs = s("defs", {});
  const marker = s("marker", { id: "arrow", viewBox: "0 0 10 10", refX: 10, refY: 5, markerWidth: 6, markerHeight: 6, orient: "auto" });
  marker.append(s("path", { d: "M0,0 L10,5 L0,10 z", fill: "#777" }));
  defs.append(marker);
  svg.append(defs);
  const color = (st) => getComputedStyle(document.documentElement).getPropertyValue(
    { READY: "--ready", DEGRADED: "--degraded", STAGED: "--staged", STARTING: "--starting", MISSING: "--failed", INCOMPATIBLE: "--failed" }[st] || "--draining").trim();
  for (const e of view.edges) {
    const a = pos.get(e.from), b = pos.get(e.to);
    const bad = e.state === "MISSING" || e.state === "INCOMPATIBLE";
    const path = s("path", {
      d: `M${a.x},${a.y + H / 2} C${a.x - GX / 2},${a.y + H / 2} ${b.x + W + GX / 2},${b.y + H / 2} ${b.x + W},${b.y + H / 2}`,
      fill: "none", stroke: bad ? color("MISSING") : "#999", "stroke-width": 1.5,
      "stroke-dasharray": bad ? "5,4" : "", "marker-end": "url(#arrow)", "data-edge": `${e.from}->${e.to}`, "data-state": e.state,
    });
    path.append(s("title", {}, `${e.from} needs ${e.to}@${e.contract_major}: ${e.state}`));
    svg.append(path);
  }
  for (const [id, n] of nodes) {
    const p = pos.get(id);
    const g = s("g", { "data-node": id, "data-status": n.status });
    g.append(s("rect", { x: p.x, y: p.y, width: W, height: H, rx: 6, fill: "#fff", stroke: color(n.status), "stroke-width": 2,
      "stroke-dasharray": n.status === "MISSING" ? "5,4" : "" }));
    g.append(s("text", { x: p.x + 10, y: p.y + 18 }, id.length > 26 ? id.slice(0, 25) + "…" : id));
    g.append(s("text", { x: p.x + 10, y: p.y + 35, fill: color(n.status) }, n.status));
    const a = document.createElementNS(ns, "a");
    a.setAttribute("href", `/modules/${encodeURIComponent(id)}`);
    a.append(g);
    svg.append(a);
  }
  return svg;
}

function instanceRows(module) {
  return module.instances.map((i) => {
    const why = [];
    if (i.status === "DEGRADED" || (i.initialized && i.unmet.length)) {
      for (const u of i.unmet) why.push(`needs ${u.module_id}@${u.contract_major}: ${u.state}`);
    }
    if (i.status === "STAGED") {
      const w = module.waiting.find((w) => w.rollout_id === i.rollout_id);
      if (w) why.push(w.waits_for.length ? `rollout waits for ${w.waits_for.join(", ")}` : "cutting over");
    }
    if (i.status === "STARTING") why.push("not initialized yet");
    const evict = ACTIONS
      ? h("button", { class: "danger", "data-evict": i.instance_id, onclick: () => act(`/api/instances/${encodeURIComponent(i.instance_id)}/evict`, `evict ${i.instance_id}`) }, "evict")
      : null;
    return h("tr", { id: i.instance_id, dataset: { instance: i.instance_id, status: i.status, generation: i.generation }, class: location.hash === `#${i.instance_id}` ? "highlight" : "" },
      h("td", {}, h("code", {}, i.instance_id)),
      h("td", {}, status(i.status), why.length ? h("div", { class: "why" }, why.join("; ")) : null),
      h("td", {}, h("span", { class: `gen ${i.generation}` }, i.generation)),
      h("td", {}, i.rollout_id),
      h("td", {}, dash(i.package_version)),
      h("td", {}, i.contract_major),
      h("td", { "data-lease": "" }, secs(Math.max(0, leaseLeft(i)))),
      h("td", {}, secs(i.up_secs)),
      h("td", {}, evict));
  });
}

function moduleCard(m) {
  const gens = [
    ["serving", m.serving], ["staged", m.staged], ["draining", m.draining],
  ].filter(([, v]) => v.length).map(([k, v]) => h("span", { class: `gen ${k}` }, `${k}: ${v.join(", ")}`));
  const waits = m.waiting.map((w) => h("div", { class: "why", "data-waiting": w.rollout_id },
    `rollout ${w.rollout_id} ${w.waits_for.length ? "waits for " + w.waits_for.join(", ") : "is cutting over"}`));
  const declared = Object.entries(m.declares).filter(([, v]) => v.length).map(([k, v]) => `${k}: ${v.join(", ")}`).join(" · ");
  return h("section", { class: "card", dataset: { module: m.module_id } },
    h("div", { class: "row" }, h("h2", { style: "margin:0" }, link(`/modules/${encodeURIComponent(m.module_id)}`, m.module_id)), status(m.best_status),
      h("span", { class: "muted" }, `majors ${m.majors.join(", ")}`), ...gens),
    waits, declared ? h("div", { class: "muted" }, declared) : null,
    table(["INSTANCE", "STATUS", "GENERATION", "ROLLOUT", "VERSION", "MAJOR", "LEASE LEFT", "UP", ""], instanceRows(m)));
}

function modulesView(only) {
  const draw = (view) => {
    if (!view) return show(h("p", { class: "muted" }, "Waiting for the registry…"));
    const modules = only ? view.modules.filter((m) => m.module_id === only) : view.modules;
    const counts = {};
    for (const m of view.modules) for (const i of m.instances) counts[i.status] = (counts[i.status] || 0) + 1;
    const summary = h("div", { class: "summary" },
      h("div", { class: "card" }, h("div", { class: "n", id: "instance-count" }, view.instance_count), "instances"),
      Object.entries(counts).map(([s, n]) => h("div", { class: "card" }, h("div", { class: "n" }, n), status(s))));
    const edges = only ? view.edges.filter((e) => e.from === only || e.to === only) : view.edges;
    show(
      h("h1", {}, only ? `Module ${only}` : "Modules", h("span", { class: "muted", style: "font-size:12px;margin-left:8px" }, `registry revision ${view.revision}`)),
      only ? null : summary,
      view.modules.length ? graph({ modules: only ? view.modules.filter((m) => m.module_id === only || edges.some((e) => e.to === m.module_id || e.from === m.module_id)) : view.modules, edges }) : null,
      modules.length ? modules.map(moduleCard) : h("p", { class: "muted", id: "empty" }, only ? `${only} has no live instance.` : "No module is registered."),
    );
    paint();
  };
  on("modules", draw);
  draw(state.modules);
  // Leases count down between registry writes.
  return setInterval(() => {
    for (const td of document.querySelectorAll("td[data-lease]")) {
      const row = td.closest("tr");
      const m = state.modules && state.modules.modules.flatMap((m) => m.instances).find((i) => i.instance_id === row.dataset.instance);
      if (m) td.textContent = secs(Math.max(0, leaseLeft(m)));
    }
  }, 1000);
}

function triggerText(t) {
  const next = t.next.length ? h("div", { class: "muted" }, "next: ", t.next.map(when).join(", ")) : null;
  const note = t.note ? h("div", { class: "why" }, t.note) : null;
  return h("div", {}, h("code", {}, `${t.kind} ${t.spec}${t.time_zone ? " (" + t.time_zone + ")" : ""}`), next, note);
}

async function jobsView() {
  const draw = async () => {
    try {
      const { jobs } = await api("/api/jobs");
      show(h("h1", {}, "Jobs and workflows"),
        jobs.length ? table(["MODULE", "JOB", "KIND", "TRIGGERS", "RUNNING", "RETRYING", "INSTANCES"], jobs.map((j) =>
          h("tr", { dataset: { job: `${j.module_id}/${j.name}` } },
            h("td", {}, link(`/modules/${encodeURIComponent(j.module_id)}`, j.module_id)),
            h("td", {}, link(`/jobs/${encodeURIComponent(j.module_id)}/${encodeURIComponent(j.name)}`, j.name)),
            h("td", {}, j.kind),
            h("td", {}, j.triggers.length ? j.triggers.map(triggerText) : "manual only"),
            h("td", { "data-running": "" }, j.running),
            h("td", {}, j.retrying),
            h("td", {}, j.instances)))) : h("p", { class: "muted" }, "No live instance declares a job."));
      paint();
    } catch (err) {
      show(h("h1", {}, "Jobs"), failure(err));
    }
  };
  on("runs", debounce(draw, 300));
  on("modules", debounce(draw, 300));
  await draw();
}

function debounce(fn, ms) {
  let timer = null;
  return (...args) => {
    clearTimeout(timer);
    timer = setTimeout(() => fn(...args), ms);
  };
}

function runRows(module, runs) {
  return runs.map((r) => h("tr", { class: r.failed ? "failed" : "", dataset: { run: r.run_id, status: r.status } },
    h("td", {}, link(`/runs/${encodeURIComponent(module)}/${encodeURIComponent(r.run_id)}`, r.run_id)),
    h("td", {}, status(r.status)),
    h("td", {}, `${r.attempt}${r.max_attempts ? " / " + r.max_attempts : ""}`),
    h("td", {}, dash(r.trigger)),
    h("td", {}, when(r.started_at)),
    h("td", {}, secs(r.duration_secs)),
    h("td", {}, h("code", {}, dash(r.instance))),
    h("td", { class: "error" }, r.error)));
}

async function jobView(module, job) {
  const filter = new URLSearchParams(location.search).get("status") || "";
  const runsBox = h("div", { id: "runs" });
  const cancelBox = h("div", { id: "cancel-many" });
  const header = h("div", { id: "job-header" });
  const trigger = ACTIONS ? h("section", { class: "card" }, h("h2", {}, "Trigger a run"),
    h("textarea", { id: "payload", rows: 3, placeholder: "{}" }),
    h("div", { class: "row" }, h("button", { id: "trigger", onclick: async (e) => {
      e.target.disabled = true;
      try {
        const out = await api(`/api/jobs/${encodeURIComponent(module)}/${encodeURIComponent(job)}/trigger`, { method: "POST", body: document.getElementById("payload").value });
        document.getElementById("trigger-result").replaceChildren("queued ", link(`/runs/${encodeURIComponent(module)}/${encodeURIComponent(out.run_id)}`, out.run_id));
        loadRuns();
      } catch (err) {
        document.getElementById("trigger-result").replaceChildren(failure(err));
      } finally {
        e.target.disabled = false;
      }
    } }, "Trigger"), h("span", { id: "trigger-result" }))) : null;
  const filters = h("div", { class: "filters card" }, "status: ",
    RUN_STATUSES.map((s) => h("label", {}, h("input", { type: "checkbox", value: s, checked: filter.split(",").includes(s), onchange: () => {
      const chosen = [...document.querySelectorAll(".filters input:checked")].map((i) => i.value).join(",");
      history.replaceState(null, "", chosen ? `?status=${chosen}` : location.pathname);
      loadRuns();
    } }), " ", s)));
  show(h("h1", {}, link(`/modules/${encodeURIComponent(module)}`, module), " · ", job), header, trigger, filters, cancelBox, runsBox);
  let polling = null;
  const loadRuns = async () => {
    const chosen = new URLSearchParams(location.search).get("status") || "";
    try {
      const { runs } = await api(`/api/jobs/${encodeURIComponent(module)}/${encodeURIComponent(job)}/runs?status=${encodeURIComponent(chosen)}&limit=50`);
      runsBox.replaceChildren(runs.length
        ? table(["RUN", "STATUS", "ATTEMPT", "TRIGGER", "STARTED", "DURATION", "INSTANCE", "ERROR"], runRows(module, runs), { id: "runs-table" })
        : h("p", { class: "muted", id: "no-runs" }, "No run recorded yet."));
      // Runs still going change without a notice (a start, a retry): look again.
      clearTimeout(polling);
      if (runs.some((r) => !r.ended)) polling = setTimeout(loadRuns, 2000);
      drawCancelMany(chosen, runs);
      paint();
    } catch (err) {
      runsBox.replaceChildren(failure(err));
    }
  };
  const drawCancelMany = (chosen, runs) => {
    const open = chosen && chosen.split(",").every((s) => OPEN_STATUSES.includes(s));
    if (!ACTIONS || !open || !runs.length) return cancelBox.replaceChildren();
    const phrase = `cancel ${runs.length}`;
    cancelBox.replaceChildren(h("section", { class: "card" },
      h("div", {}, `Cancel the ${runs.length} ${chosen} run(s) shown: type `, h("code", {}, phrase)),
      h("div", { class: "row" }, h("input", { id: "confirm", autocomplete: "off" }),
        h("button", { class: "danger", id: "cancel-selected", onclick: async () => {
          try {
            const out = await api(`/api/jobs/${encodeURIComponent(module)}/${encodeURIComponent(job)}/cancel`, {
              method: "POST", headers: { "content-type": "application/json" },
              body: JSON.stringify({ status: chosen, confirm: document.getElementById("confirm").value }) });
            cancelBox.replaceChildren(h("p", {}, `cancel sent to ${out.sent.length} run(s)`));
            loadRuns();
          } catch (err) {
            cancelBox.append(failure(err));
          }
        } }, "Cancel runs"))));
  };
  try {
    const { jobs } = await api("/api/jobs");
    const j = jobs.find((j) => j.module_id === module && j.name === job);
    header.replaceChildren(j ? h("section", { class: "card" },
      h("div", { class: "row" }, h("strong", {}, j.kind), j.description ? h("span", { class: "muted" }, j.description) : null),
      h("div", {}, `concurrency ${j.max_concurrency} · attempts ${j.max_attempts} · timeout ${j.timeout_seconds ? j.timeout_seconds + " s" : "none"} · ${j.instances} instance(s) · running `, h("strong", { id: "running" }, j.running)),
      j.triggers.length ? h("div", {}, j.triggers.map(triggerText)) : h("div", { class: "muted" }, "manual triggers only"))
      : h("p", { class: "muted" }, "No live instance declares this job; its runs are still readable."));
  } catch (err) {
    header.replaceChildren(failure(err));
  }
  on("runs", (changed) => {
    if (changed.some((c) => c.module_id === module && c.job === job)) loadRuns();
  });
  await loadRuns();
}

function stepRows(module, steps) {
  const starts = steps.map((s) => Date.parse(s.started_at)).filter((t) => !isNaN(t));
  const t0 = Math.min(...starts), t1 = Math.max(...steps.map((s) => Date.parse(s.finished_at || s.started_at)).filter((t) => !isNaN(t)), t0 + 1);
  return steps.map((s) => {
    const start = Date.parse(s.started_at);
    const width = Math.max(2, ((s.duration_ms || 0) / (t1 - t0)) * 100);
    const left = isNaN(start) ? 0 : ((start - t0) / (t1 - t0)) * 100;
    const child = s.child && s.child.run_id ? link(`/runs/${encodeURIComponent(s.child.module_id)}/${encodeURIComponent(s.child.run_id)}`, `${s.child.module_id} ${s.child.run_id}`) : "—";
    return h("tr", { class: s.status === "FAILED" ? "failed" : "", dataset: { step: s.key, status: s.status } },
      h("td", {}, h("code", {}, s.key)), h("td", {}, dash(s.kind)), h("td", {}, status(s.status)), h("td", {}, dash(s.attempt)),
      h("td", {}, s.duration_ms === undefined ? "—" : `${s.duration_ms} ms`),
      h("td", {}, h("div", { class: "timeline" }, h("span", { class: s.status, style: `left:${left}%;width:${Math.min(width, 100 - left)}%` }))),
      h("td", {}, child), h("td", { class: "error" }, dash(s.error)));
  });
}

async function runView(module, runId) {
  let timer = null;
  const draw = async () => {
    try {
      const { record, row, steps } = await api(`/api/runs/${encodeURIComponent(module)}/${encodeURIComponent(runId)}`);
      const cancel = ACTIONS && !row.ended
        ? h("button", { class: "danger", id: "cancel-run", onclick: () => act(`/api/runs/${encodeURIComponent(module)}/${encodeURIComponent(runId)}/cancel`, `cancel ${runId}`) }, "Cancel")
        : null;
      const json = (v) => h("pre", {}, JSON.stringify(v, null, 2));
      show(h("h1", {}, link(`/modules/${encodeURIComponent(module)}`, module), " · ", link(`/jobs/${encodeURIComponent(module)}/${encodeURIComponent(record.job || runId.split(":")[0])}`, record.job || "job"), " · ", runId),
        h("section", { class: "card", id: "run", dataset: { status: row.status } },
          h("div", { class: "row" }, status(row.status), h("span", {}, `attempt ${row.attempt}${row.max_attempts ? " of " + row.max_attempts : ""}`),
            h("span", {}, `trigger ${dash(row.trigger)}`), h("span", {}, "instance ", h("code", {}, dash(row.instance))), cancel),
          h("div", {}, `started ${when(row.started_at)} · finished ${when(row.finished_at)} · took ${secs(row.duration_secs)}`),
          record.error ? h("pre", { class: "error" }, record.error) : null),
        steps.length ? [h("h2", {}, "Steps"), table(["KEY", "KIND", "STATUS", "ATTEMPT", "DURATION", "TIMELINE", "CHILD RUN", "ERROR"], stepRows(module, steps), { id: "steps" })] : null,
        h("h2", {}, "Payload"), json(record.payload === undefined ? null : record.payload),
        h("h2", {}, "Result"), json(record.result === undefined ? null : record.result),
        record.logs && record.logs.length ? [h("h2", {}, "Logs"), h("pre", {}, record.logs.join("\n"))] : null,
        h("h2", {}, "Record"), json(record));
      clearTimeout(timer);
      if (!row.ended) timer = setTimeout(draw, 1000);
      paint();
    } catch (err) {
      show(h("h1", {}, runId), failure(err));
    }
  };
  on("runs", (changed) => {
    if (changed.some((c) => c.module_id === module && c.job === runId.split(":")[0])) draw();
  });
  await draw();
}

async function agentsView() {
  const runsBox = h("div", { id: "agent-runs" });
  const chatsBox = h("div", { id: "chats" });
  const drawChats = (chats) => chatsBox.replaceChildren(chats.length
    ? table(["MODEL", "MODULE", "REPLICA", "LAST MINUTE", "LAST 15 MIN", "SINCE START"], chats.map((c) =>
      h("tr", { dataset: { chat: `${c.instance_id}/${c.model}` } }, h("td", {}, c.model), h("td", {}, dash(c.module_id)), h("td", {}, h("code", {}, c.instance_id)),
        h("td", {}, c.last_minute), h("td", {}, c.last_15_minutes), h("td", {}, c.total))))
    : h("p", { class: "muted" }, "No chat seen since the console started."));
  const loadRuns = async (modules) => {
    const lists = await Promise.all(modules.map((m) => api(`/api/agents/${encodeURIComponent(m)}/runs?limit=25`).catch(() => ({ module_id: m, runs: [] }))));
    const rows = lists.flatMap((l) => l.runs.map((r) => h("tr", { class: r.failed ? "failed" : "", dataset: { invocation: r.invocation_id, status: r.status } },
      h("td", {}, l.module_id), h("td", {}, r.agent),
      h("td", {}, link(`/agents/${encodeURIComponent(l.module_id)}/${encodeURIComponent(r.invocation_id)}`, r.invocation_id)),
      h("td", {}, status(r.status)), h("td", {}, r.caller), h("td", {}, h("code", {}, dash(r.owner))),
      h("td", {}, when(r.submitted_at)), h("td", {}, when(r.finished_at)), h("td", { class: "error" }, r.error_code))));
    runsBox.replaceChildren(rows.length ? table(["MODULE", "AGENT", "INVOCATION", "STATUS", "CALLER", "OWNER", "SUBMITTED", "FINISHED", "ERROR"], rows)
      : h("p", { class: "muted" }, "No agent run recorded."));
    return lists;
  };
  try {
    const { agents, models, chats } = await api("/api/agents");
    const modules = [...new Set(agents.map((a) => a.module_id))];
    const instances = (list) => list.map((i) => h("div", {}, h("code", {}, i.instance_id), " ", status(i.status)));
    show(h("h1", {}, "Agents and chat models"),
      h("h2", {}, "Agents"), agents.length ? table(["MODULE", "AGENT", "DESCRIPTION", "INSTANCES"], agents.map((a) =>
        h("tr", {}, h("td", {}, a.module_id), h("td", {}, a.name), h("td", {}, dash(a.description)), h("td", {}, instances(a.instances))))) : h("p", { class: "muted" }, "No agent declared."),
      h("h2", {}, "Recent agent runs"), runsBox,
      h("h2", {}, "Chat models"), models.length ? table(["MODULE", "MODEL", "INSTANCES"], models.map((m) =>
        h("tr", {}, h("td", {}, m.module_id), h("td", {}, m.name), h("td", {}, instances(m.instances))))) : h("p", { class: "muted" }, "No chat model declared."),
      h("h2", {}, "Chats per model and replica"), chatsBox);
    drawChats(chats);
    on("chats", drawChats);
    on("agents", debounce(() => loadRuns(modules), 300));
    await loadRuns(modules);
    paint();
  } catch (err) {
    show(h("h1", {}, "Agents"), failure(err));
  }
}

async function agentRunView(module, invocation) {
  let timer = null;
  const draw = async () => {
    try {
      const { record, row } = await api(`/api/agents/${encodeURIComponent(module)}/runs/${encodeURIComponent(invocation)}`);
      const events = Array.isArray(record.events) ? record.events : [];
      show(h("h1", {}, module, " · ", row.agent, " · ", invocation),
        h("section", { class: "card", id: "agent-run", dataset: { status: row.status } },
          h("div", { class: "row" }, status(row.status), h("span", {}, `caller ${row.caller}`), h("span", {}, "owner ", h("code", {}, dash(row.owner))), h("span", {}, `last event ${row.last_sequence}`)),
          h("div", {}, `submitted ${when(row.submitted_at)} · finished ${when(row.finished_at)}`),
          row.error_code ? h("div", { class: "error" }, `${row.error_code}: ${record.error_message || ""}`) : null),
        h("h2", {}, "Events"), events.length ? table(["#", "EVENT", "DATA"], events.map((e, n) =>
          h("tr", { dataset: { event: n } }, h("td", {}, e.sequence || n + 1), h("td", {}, e.event || "—"), h("td", {}, h("code", {}, typeof e.data === "string" ? e.data : JSON.stringify(e.data)))))) : h("p", { class: "muted" }, "No event yet."),
        h("h2", {}, "Result"), h("pre", {}, JSON.stringify(record.result === undefined ? null : record.result, null, 2)),
        h("h2", {}, "Record"), h("pre", {}, JSON.stringify(record, null, 2)));
      clearTimeout(timer);
      if (!row.ended) timer = setTimeout(draw, 1000);
      paint();
    } catch (err) {
      show(h("h1", {}, invocation), failure(err));
    }
  };
  await draw();
}

async function searchView() {
  const q = new URLSearchParams(location.search).get("q") || "";
  document.querySelector("#search input").value = q;
  try {
    const { hits } = await api(`/api/search?q=${encodeURIComponent(q)}`);
    show(h("h1", {}, `Search: ${q}`), hits.length
      ? table(["KIND", "WHAT"], hits.map((hit) => h("tr", { dataset: { hit: hit.href } }, h("td", {}, hit.kind), h("td", {}, link(hit.href, hit.label)))), { id: "hits" })
      : h("p", { class: "muted", id: "no-hits" }, "Nothing matches."));
    paint();
  } catch (err) {
    show(h("h1", {}, "Search"), failure(err));
  }
}

async function act(path, what) {
  if (!confirm(`${what}?`)) return;
  try {
    await api(path, { method: "POST" });
  } catch (err) {
    alert(String(err.message || err));
  }
}

// The first time a view shows data: for the browser test's first-paint figure.
function paint() {
  if (!document.body.dataset.painted) {
    document.body.dataset.painted = String(Math.round(performance.now()));
  }
}

// ---- routing -----------------------------------------------------------------

let ticker = null;
function route() {
  for (const kind of Object.keys(listeners)) listeners[kind] = [];
  clearInterval(ticker);
  const parts = location.pathname.split("/").filter(Boolean).map(decodeURIComponent);
  for (const a of document.querySelectorAll("[data-nav]")) a.classList.toggle("current", a.dataset.nav === (parts[0] || "modules"));
  const [view, a, b] = parts;
  if (!view || view === "modules") ticker = modulesView(a);
  else if (view === "jobs" && a && b) jobView(a, b);
  else if (view === "jobs") jobsView();
  else if (view === "runs" && a && b) runView(a, b);
  else if (view === "agents" && a && b) agentRunView(a, b);
  else if (view === "agents") agentsView();
  else if (view === "search") searchView();
  else show(h("h1", {}, "Not found"), h("p", {}, link("/", "Modules")));
}

document.addEventListener("click", (e) => {
  const a = e.target.closest("a");
  if (!a || a.origin !== location.origin || e.ctrlKey || e.metaKey || e.shiftKey || a.target) return;
  e.preventDefault();
  history.pushState(null, "", a.pathname + a.search + a.hash);
  route();
  window.scrollTo(0, 0);
});
window.addEventListener("popstate", route);
document.getElementById("search").addEventListener("submit", (e) => {
  e.preventDefault();
  const q = new FormData(e.target).get("q");
  history.pushState(null, "", `/search?q=${encodeURIComponent(q)}`);
  route();
});
document.getElementById("actions-badge").textContent = ACTIONS ? "actions on" : "read only";
connect();
route();
