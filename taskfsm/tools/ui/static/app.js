// taskfsm ui: draws the pages from the server's JSON (docs/ui.md).
//
// Every string from the cluster is put into the page as text (textContent, attribute values),
// never parsed as HTML; the only markup parsed is the server's own SVG charts.
"use strict";

const NS_SVG = "http://www.w3.org/2000/svg";
let META = null;

function el(tag, attrs, ...children) {
  const node = document.createElement(tag);
  for (const [key, value] of Object.entries(attrs || {})) {
    if (value !== undefined && value !== null) node.setAttribute(key, String(value));
  }
  for (const child of children) {
    if (child === null || child === undefined) continue;
    node.append(child instanceof Node ? child : document.createTextNode(String(child)));
  }
  return node;
}

function link(href, text) {
  return el("a", { href }, text);
}

function taskHref(namespace, name) {
  return `/task/${encodeURIComponent(namespace)}/${encodeURIComponent(name)}`;
}

function workflowHref(namespace, name) {
  return `/workflow/${encodeURIComponent(namespace)}/${encodeURIComponent(name)}`;
}

async function getJSON(url) {
  const response = await fetch(url, { headers: { Accept: "application/json" } });
  const body = await response.json();
  if (!response.ok) throw new Error(body.error || `${url}: ${response.status}`);
  return body;
}

function titleOf(group) {
  const title = group.querySelector(":scope > title");
  return title ? title.textContent : "";
}

// -- charts ----------------------------------------------------------------------------------

async function loadChart(container, chart, view) {
  const text = await (await fetch(`/charts/${chart}-${view}.svg`)).text();
  const parsed = new DOMParser().parseFromString(text, "image/svg+xml");
  const svg = document.importNode(parsed.documentElement, true);
  svg.removeAttribute("width");
  svg.removeAttribute("height");
  svg.classList.add("chart");
  container.replaceChildren(svg);
  const states = new Set(META.charts[chart].views[view].states);
  for (const group of svg.querySelectorAll("g.node")) {
    const state = titleOf(group);
    if (!states.has(state)) continue;
    group.dataset.state = state;
    const box = group.getBBox();
    const count = document.createElementNS(NS_SVG, "text");
    count.setAttribute("class", "count");
    count.setAttribute("x", String(box.x + box.width - 4));
    count.setAttribute("y", String(box.y + 12));
    count.setAttribute("text-anchor", "end");
    count.textContent = "";
    group.append(count);
  }
  for (const group of svg.querySelectorAll("g.edge")) group.dataset.edge = titleOf(group);
  return svg;
}

function setCounts(svg, counts) {
  for (const group of svg.querySelectorAll("g.node[data-state]")) {
    const n = counts[group.dataset.state] || 0;
    group.querySelector("text.count").textContent = String(n);
    group.classList.toggle("occupied", n > 0);
  }
}

function setRecent(svg, recent) {
  for (const group of svg.querySelectorAll("g.edge[data-edge]")) {
    const n = recent[group.dataset.edge] || 0;
    group.classList.toggle("recent", n > 0);
    group.classList.toggle("recent-many", n >= 5);
    group.dataset.moves = String(n);
  }
}

function markPath(svg, states, edges, current) {
  const visited = new Set(states);
  for (const group of svg.querySelectorAll("g.node[data-state]")) {
    group.classList.toggle("visited", visited.has(group.dataset.state));
    group.classList.toggle("current", group.dataset.state === current);
  }
  const taken = new Set(edges);
  for (const group of svg.querySelectorAll("g.edge[data-edge]")) {
    group.classList.toggle("taken", taken.has(group.dataset.edge));
  }
}

function clickable(svg, chart, view) {
  for (const group of svg.querySelectorAll("g.node[data-state]")) {
    group.classList.add("link");
    group.addEventListener("click", () => {
      location.href = `/state/${chart}/${view}/${encodeURIComponent(group.dataset.state)}`;
    });
  }
}

function viewToggle(current, onChange) {
  const other = current === "phases" ? "lifecycle" : "phases";
  const button = el(
    "button",
    { id: "toggle-view", type: "button" },
    other === "lifecycle" ? "Show the full chart" : "Show the user view",
  );
  button.addEventListener("click", () => onChange(other));
  return button;
}

function live(onSnapshot) {
  const badge = document.getElementById("live");
  const source = new EventSource("/api/events");
  source.addEventListener("snapshot", (event) => {
    const snapshot = JSON.parse(event.data);
    badge.textContent = snapshot.synced ? "live" : "listing";
    badge.className = snapshot.synced ? "live-on" : "live-off";
    document.body.dataset.version = String(snapshot.version);
    document.body.dataset.synced = String(snapshot.synced);
    onSnapshot(snapshot);
  });
  source.addEventListener("error", () => {
    badge.textContent = "reconnecting";
    badge.className = "live-off";
  });
  return source;
}

// -- tables ----------------------------------------------------------------------------------

function table(id, headers, rows) {
  const head = el("tr", {}, ...headers.map((h) => el("th", {}, h)));
  const body = el("tbody", {});
  for (const cells of rows) {
    body.append(el("tr", {}, ...cells.map((c) => el("td", {}, c))));
  }
  return el("table", { id }, el("thead", {}, head), body);
}

function taskRows(rows) {
  return rows.map((r) => [
    link(taskHref(r.namespace, r.name), r.name),
    r.namespace,
    r.humanName,
    r.phase || "New",
    r.reason,
    r.workflow ? link(workflowHref(r.namespace, r.workflow), r.workflow) : "",
    r.mpe,
    r.age,
  ]);
}

const TASK_HEADERS = ["Name", "Namespace", "Human name", "Phase", "Reason", "Workflow", "MPE", "Age"];

function definitions(id, entries) {
  const list = el("dl", { id });
  for (const [key, value] of entries) list.append(el("dt", {}, key), el("dd", {}, value));
  return list;
}

// -- pages -----------------------------------------------------------------------------------

async function overview(main) {
  let view = new URLSearchParams(location.search).get("view") || "phases";
  const charts = {};
  let snapshot = null;
  const heading = el("h1", {}, "Lifecycles");
  const controls = el("div", { class: "controls" });
  const sections = {};
  for (const chart of ["task", "workflow"]) {
    sections[chart] = el("div", { id: `chart-${chart}`, class: "chart-box" });
  }
  const moves = el("ol", { id: "moves" });
  main.append(
    heading,
    controls,
    el("h2", {}, "Tasks"),
    sections.task,
    el("h2", {}, "Workflows"),
    sections.workflow,
    el("h2", {}, "Recent moves"),
    moves,
  );

  async function draw() {
    controls.replaceChildren(
      viewToggle(view, (next) => {
        view = next;
        history.replaceState(null, "", `/?view=${view}`);
        draw();
      }),
    );
    for (const chart of ["task", "workflow"]) {
      charts[chart] = await loadChart(sections[chart], chart, view);
      clickable(charts[chart], chart, view);
    }
    document.body.dataset.view = view;
    if (snapshot) apply(snapshot);
  }

  function apply(snap) {
    snapshot = snap;
    for (const chart of ["task", "workflow"]) {
      if (!charts[chart]) continue;
      setCounts(charts[chart], snap.counts[chart][view] || {});
      setRecent(charts[chart], snap.recent[chart][view] || {});
    }
    moves.replaceChildren(
      ...snap.moves
        .slice()
        .reverse()
        .map((m) =>
          el(
            "li",
            {},
            new Date(m.at * 1000).toLocaleTimeString(),
            " ",
            m.chart === "task" ? link(taskHref(m.namespace, m.name), m.name) : link(workflowHref(m.namespace, m.name), m.name),
            ` (${m.chart}, ${m.namespace}): ${m.from} → ${m.to}`,
          ),
        ),
    );
  }

  await draw();
  live(apply);
}

async function statePage(main, chart, view, state) {
  const params = new URLSearchParams(location.search);
  const filter = el("input", {
    id: "filter",
    type: "search",
    placeholder: "filter: name, namespace, Workflow, MPE, reason",
    value: params.get("q") || "",
  });
  const count = el("p", { id: "count" });
  const box = el("div", {});
  const kind = chart === "task" ? "Tasks" : "Workflows";
  main.append(el("h1", {}, `${kind} in ${state}`), filter, count, box);
  let rows = [];

  function render() {
    const needle = filter.value.trim().toLowerCase();
    const shown = rows.filter((r) =>
      !needle ||
      [r.name, r.namespace, r.workflow, r.mpe, r.reason, r.humanName].some((v) => (v || "").toLowerCase().includes(needle)),
    );
    count.textContent = `${shown.length} of ${rows.length}`;
    box.replaceChildren(table("rows", TASK_HEADERS, taskRows(shown)));
  }

  async function refresh() {
    const data = await getJSON(`/api/state/${chart}/${view}/${encodeURIComponent(state)}`);
    rows = data.rows;
    render();
  }

  filter.addEventListener("input", render);
  await refresh();
  let version = null;
  let pending = null;
  live((snap) => {
    if (version !== null && snap.version !== version && !pending) {
      pending = setTimeout(() => {
        pending = null;
        refresh();
      }, 500);
    }
    version = snap.version;
  });
}

function readAt() {
  const badge = document.getElementById("live");
  badge.textContent = `as of ${new Date().toLocaleTimeString()} (reload for news)`;
  badge.className = "live-on";
}

async function taskPage(main, namespace, name) {
  readAt();
  let facts;
  try {
    facts = await getJSON(`/api/task/${encodeURIComponent(namespace)}/${encodeURIComponent(name)}`);
  } catch (err) {
    main.append(el("h1", {}, `Task ${namespace}/${name}`), el("p", { class: "error" }, String(err.message)));
    return;
  }
  let view = "phases";
  const chartBox = el("div", { id: "chart-task", class: "chart-box" });
  const controls = el("div", { class: "controls" });
  const job = facts.job;
  main.append(
    el("h1", {}, `Task ${namespace}/${name}`),
    facts.humanReadable.name ? el("p", { id: "human-name" }, facts.humanReadable.name) : "",
    el("h2", {}, "Path"),
    el("p", { id: "path" }, facts.path.join(" → ")),
    controls,
    chartBox,
    el("h2", {}, "Status"),
    definitions("status", [
      ...Object.entries(facts.status),
      ["Reason", facts.task.reason],
      ["Workflow", facts.task.workflow ? link(workflowHref(namespace, facts.task.workflow), facts.task.workflow) : ""],
      ...Object.entries(facts.refs),
    ]),
    el("h2", {}, "Labels"),
    table("labels", ["Key", "Value"], Object.entries(facts.labels)),
    el("h2", {}, "Conditions"),
    table(
      "conditions",
      ["Type", "Status", "Since", "Reason", "Message"],
      facts.conditions.map((c) => [c.type, c.status, c.lastTransitionTime || "", c.reason || "", c.message || ""]),
    ),
    el("h2", {}, "Events"),
    facts.eventsError ? el("p", { class: "error" }, `could not read them: ${facts.eventsError}`) : "",
    table("events", ["Time", "Type", "Reason", "Note"], facts.events),
    el("h2", {}, "Job"),
    definitions("job", [
      ["Name", job.name ? `${job.namespace}/${job.name}` : "(none)"],
      ["Where", job.where || ""],
      ["Pods", job.counts ? `active ${job.counts.active}, succeeded ${job.counts.succeeded}, failed ${job.counts.failed}` : ""],
      ["Conditions", (job.conditions || []).join(", ")],
      ["Note", job.note || ""],
    ]),
    table(
      "pods",
      ["Pod", "Phase", "Node", "Containers"],
      (job.pods || []).map((p) => [
        p.name,
        p.phase,
        p.node,
        p.containers.map((c) => `${c.name}: ${c.state}${c.exitCode !== null && c.exitCode !== undefined ? ` (exit ${c.exitCode})` : ""}${c.reason ? ` ${c.reason}` : ""}`).join("; "),
      ]),
    ),
    el("h2", {}, "Log tail"),
    ...(job.logs || []).map((l) => el("div", { class: "log" }, el("h3", {}, `${l.pod}/${l.container}`), el("pre", { class: "log-text" }, l.text))),
    el("h2", {}, "Explain"),
    el("pre", { id: "explain" }, facts.explain.join("\n")),
  );

  async function draw() {
    controls.replaceChildren(viewToggle(view, (next) => { view = next; draw(); }));
    const svg = await loadChart(chartBox, "task", view);
    markPath(svg, facts.pathStates[view], facts.pathEdges[view], facts.current[view]);
    document.body.dataset.view = view;
    document.body.dataset.ready = "true";
  }
  await draw();
}

async function workflowPage(main, namespace, name) {
  readAt();
  let facts;
  try {
    facts = await getJSON(`/api/workflow/${encodeURIComponent(namespace)}/${encodeURIComponent(name)}`);
  } catch (err) {
    main.append(el("h1", {}, `Workflow ${namespace}/${name}`), el("p", { class: "error" }, String(err.message)));
    return;
  }
  const wfBox = el("div", { id: "chart-workflow", class: "chart-box" });
  const taskBox = el("div", { id: "chart-task", class: "chart-box" });
  main.append(
    el("h1", {}, `Workflow ${namespace}/${name}`),
    facts.workflow.humanName ? el("p", { id: "human-name" }, facts.workflow.humanName) : "",
    definitions("status", Object.entries(facts.status).map(([k, v]) => [k, String(v)])),
    el("h2", {}, "Its lifecycle"),
    wfBox,
    el("h2", {}, "Its Tasks by state"),
    taskBox,
    table("rows", TASK_HEADERS, taskRows(facts.tasks)),
    el("h2", {}, "Explain"),
    el("pre", { id: "explain" }, facts.explain.join("\n")),
  );
  const wf = await loadChart(wfBox, "workflow", "phases");
  markPath(wf, [facts.current.phases], [], facts.current.phases);
  const tasks = await loadChart(taskBox, "task", "phases");
  setCounts(tasks, facts.taskCounts.phases);
  document.body.dataset.ready = "true";
}

async function start() {
  META = await getJSON("/api/meta");
  document.getElementById("scope").textContent = META.namespace
    ? `namespace ${META.namespace}`
    : "all namespaces";
  const main = document.getElementById("main");
  const parts = location.pathname.split("/").filter(Boolean).map(decodeURIComponent);
  if (parts[0] === "state" && parts.length === 4) return statePage(main, parts[1], parts[2], parts[3]);
  if (parts[0] === "task" && parts.length === 3) return taskPage(main, parts[1], parts[2]);
  if (parts[0] === "workflow" && parts.length === 3) return workflowPage(main, parts[1], parts[2]);
  return overview(main);
}

start().catch((err) => {
  document.getElementById("main").append(el("p", { class: "error" }, String(err)));
});
