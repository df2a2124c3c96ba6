// turnstone console dashboard. Vanilla JS, no build step.
//
// State: a local copy of the cluster seeded from the SSE `snapshot` frame (or
// GET /v1/api/cluster/snapshot), patched by the incremental events and re-rendered once per
// animation frame. Node health (drift, zombies, capacity) is refreshed from the snapshot
// endpoint every 10 s and whenever a node joins or is lost. The stream reconnects with
// backoff (1 s doubling to 30 s); before each retry it probes the API, and a 401 shows the
// sign-in form.
(() => {
  "use strict";

  const $ = (id) => document.getElementById(id);
  const STATES = ["running", "thinking", "attention", "error", "idle"];
  const STATE_LABEL = { running: "run", thinking: "think", attention: "attn", error: "err", idle: "idle" };
  const PER_PAGE = 50;
  const THEME_KEY = "turnstone-console-theme";

  const state = {
    nodes: new Map(), // node_id -> node (snapshot shape, workstreams as a Map)
    overview: {},
    filters: { state: "", node: "", search: "", sort: "state", page: 1 },
    nodeSort: "activity",
    connected: false,
    events: [], // last 200 event types (diagnostics and tests)
  };

  // ------------------------------------------------------------ helpers

  function el(tag, attrs, ...children) {
    const e = document.createElement(tag);
    for (const [k, v] of Object.entries(attrs || {})) {
      if (v === undefined || v === null || v === false) continue;
      if (k === "class") e.className = v;
      else if (k === "dataset") Object.assign(e.dataset, v);
      else if (k === "text") e.textContent = v;
      else if (k === "style") Object.assign(e.style, v); // CSSOM: allowed by the CSP
      else if (k.startsWith("on")) e.addEventListener(k.slice(2), v);
      else e.setAttribute(k, v === true ? "" : v);
    }
    for (const c of children.flat()) {
      if (c === null || c === undefined || c === false) continue;
      e.append(c instanceof Node ? c : document.createTextNode(String(c)));
    }
    return e;
  }

  function fmtNum(n) {
    n = Number(n) || 0;
    if (n >= 1e6) return (n / 1e6).toFixed(1) + "M";
    if (n >= 1e3) return (n / 1e3).toFixed(1) + "k";
    return String(n);
  }

  function ago(epoch) {
    if (!epoch) return "never";
    const s = Math.max(0, Date.now() / 1000 - epoch);
    if (s < 5) return "just now";
    if (s < 60) return Math.round(s) + "s ago";
    if (s < 3600) return Math.round(s / 60) + "m ago";
    return Math.round(s / 3600) + "h ago";
  }

  function toast(text, kind) {
    const t = el("div", { class: "toast " + (kind || "") , role: "status" }, text);
    $("toasts").append(t);
    setTimeout(() => t.remove(), 5000);
  }

  async function api(path, body, method) {
    const opts = { credentials: "same-origin", cache: "no-store", headers: {} };
    if (method) opts.method = method;
    if (body !== undefined) {
      opts.method = method || "POST";
      opts.headers["Content-Type"] = "application/json";
      opts.body = JSON.stringify(body);
    }
    let resp;
    try {
      resp = await fetch(path, opts);
    } catch (e) {
      const err = new Error("The console is not reachable");
      err.status = 0;
      throw err;
    }
    let data = null;
    try { data = await resp.json(); } catch (e) { data = null; }
    if (resp.status === 401) {
      showLogin();
      const err = new Error("Sign-in required");
      err.status = 401;
      throw err;
    }
    if (!resp.ok) {
      const err = new Error((data && data.error) || resp.status + " " + resp.statusText);
      err.status = resp.status;
      throw err;
    }
    return data;
  }

  // ------------------------------------------------------------ state updates

  function loadSnapshot(snap) {
    const nodes = new Map();
    for (const n of snap.nodes || []) {
      const ws = new Map();
      for (const w of n.workstreams || []) ws.set(w.id, w);
      nodes.set(n.node_id, Object.assign({}, n, { workstreams: ws }));
    }
    state.nodes = nodes;
    state.overview = snap.overview || {};
    schedule();
  }

  let refreshTimer = null;
  function refreshSoon(delay) {
    clearTimeout(refreshTimer);
    refreshTimer = setTimeout(refreshSnapshot, delay === undefined ? 300 : delay);
  }

  async function refreshSnapshot() {
    try {
      loadSnapshot(await api("/v1/api/cluster/snapshot"));
    } catch (e) {
      if (e.status && e.status !== 401) toast(e.message, "error");
    }
  }

  function findWs(wsId) {
    for (const n of state.nodes.values()) {
      if (n.workstreams.has(wsId)) return n.workstreams.get(wsId);
    }
    return null;
  }

  function applyEvent(ev) {
    state.events.push(ev.type);
    if (state.events.length > 200) state.events.shift();
    switch (ev.type) {
      case "snapshot":
        loadSnapshot(ev);
        return;
      case "node_joined":
        refreshSoon(200);
        toast("Node " + ev.node_id + " joined", "ok");
        break;
      case "node_lost":
        state.nodes.delete(ev.node_id);
        toast("Node " + ev.node_id + " lost", "error");
        refreshSoon(200);
        break;
      case "ws_created": {
        const n = state.nodes.get(ev.node_id);
        if (n && ev.ws_id && !n.workstreams.has(ev.ws_id)) {
          n.workstreams.set(ev.ws_id, {
            id: ev.ws_id, name: ev.name || "", state: "idle", node: ev.node_id, title: ev.title || "",
            tokens: 0, context_ratio: 0, activity: "", activity_state: "", tool_calls: 0,
          });
        }
        break;
      }
      case "ws_closed":
        for (const n of state.nodes.values()) n.workstreams.delete(ev.ws_id);
        if (ev.reason === "evicted") toast("Workstream " + ev.ws_id.slice(0, 8) + " was evicted");
        break;
      case "ws_rename": {
        const w = findWs(ev.ws_id);
        if (w) w.name = ev.name || "";
        break;
      }
      case "cluster_state": {
        const w = findWs(ev.ws_id);
        if (w) {
          if (ev.state) w.state = ev.state;
          for (const k of ["tokens", "context_ratio", "activity", "activity_state"]) {
            if (k in ev) w[k] = ev[k];
          }
        }
        break;
      }
      default:
        return;
    }
    schedule();
  }

  // ------------------------------------------------------------ live stream

  const stream = { es: null, delay: 1000, timer: null, state: "connecting" };

  function setConn(s) {
    stream.state = s;
    const c = $("conn");
    c.dataset.state = s;
    c.querySelector(".label").textContent = s === "open" ? "live" : s;
  }

  function startStream() {
    clearTimeout(stream.timer);
    if (stream.es) stream.es.close();
    setConn(stream.state === "open" ? "reconnecting" : stream.state);
    const es = new EventSource("/v1/api/cluster/events", { withCredentials: true });
    stream.es = es;
    es.onmessage = (m) => {
      let ev;
      try { ev = JSON.parse(m.data); } catch (e) { return; }
      if (ev.type === "snapshot") {
        stream.delay = 1000;
        setConn("open");
      }
      applyEvent(ev);
    };
    es.onerror = () => {
      es.close();
      if (stream.es !== es) return;
      stream.es = null;
      setConn("reconnecting");
      const wait = stream.delay;
      stream.delay = Math.min(stream.delay * 2, 30000);
      stream.timer = setTimeout(async () => {
        try {
          await api("/v1/api/cluster/overview");
        } catch (e) {
          if (e.status === 401) return; // the login form restarts the stream
        }
        startStream();
      }, wait);
    };
  }

  // ------------------------------------------------------------ auth

  function showLogin() {
    if (stream.es) { stream.es.close(); stream.es = null; }
    clearTimeout(stream.timer);
    setConn("signed out");
    $("login-overlay").hidden = false;
    $("login-error").textContent = "";
    setTimeout(() => $("login-username").focus(), 0);
  }

  async function login(token, username, password) {
    const credentials = username ? { username, password } : { token };
    const resp = await fetch("/v1/api/auth/login", {
      method: "POST",
      headers: { "Content-Type": "application/json" },
      body: JSON.stringify(credentials),
      credentials: "same-origin",
    });
    let body = null;
    try { body = await resp.json(); } catch (e) { body = null; }
    if (!resp.ok) throw new Error((body && body.error) || "Invalid token");
  }

  // ------------------------------------------------------------ derived data

  function allWorkstreams() {
    const out = [];
    for (const n of state.nodes.values()) for (const w of n.workstreams.values()) out.push(w);
    return out;
  }

  function nodeCounts(n) {
    const c = { total: 0, running: 0, thinking: 0, attention: 0, error: 0, idle: 0, tokens: 0 };
    for (const w of n.workstreams.values()) {
      c.total++;
      c[w.state] = (c[w.state] || 0) + 1;
      c.tokens += Number(w.tokens) || 0;
    }
    const agg = Number((n.aggregate || {}).total_tokens) || 0;
    if (agg > 0) c.tokens = agg;
    return c;
  }

  function sortedNodes() {
    const list = [...state.nodes.values()].map((n) => ({ n, c: nodeCounts(n) }));
    const byId = (a, b) => a.n.node_id.localeCompare(b.n.node_id, undefined, { numeric: true });
    const sorts = {
      activity: (a, b) => (b.c.running + b.c.attention) - (a.c.running + a.c.attention) || byId(a, b),
      name: byId,
      tokens: (a, b) => b.c.tokens - a.c.tokens || byId(a, b),
      load: (a, b) => (b.c.total / (b.n.max_ws || 10)) - (a.c.total / (a.n.max_ws || 10)) || byId(a, b),
    };
    return list.sort(sorts[state.nodeSort] || byId);
  }

  function filteredWorkstreams() {
    const f = state.filters;
    const q = f.search.trim().toLowerCase();
    let rows = allWorkstreams().filter((w) =>
      (!f.state || w.state === f.state) &&
      (!f.node || w.node === f.node) &&
      (!q || [w.name, w.title, w.node].some((v) => String(v || "").toLowerCase().includes(q))));
    const order = (s) => { const i = STATES.indexOf(s); return i < 0 ? STATES.length : i; };
    if (f.sort === "state") rows.sort((a, b) => order(a.state) - order(b.state) || String(a.name).localeCompare(String(b.name)));
    else if (f.sort === "tokens") rows.sort((a, b) => (Number(b.tokens) || 0) - (Number(a.tokens) || 0));
    else rows.sort((a, b) => String(a.name).localeCompare(String(b.name)));
    return rows;
  }

  // ------------------------------------------------------------ rendering

  let frame = 0;
  function schedule() {
    if (frame) return;
    frame = requestAnimationFrame(() => { frame = 0; render(); });
  }

  function render() {
    renderNodes();
    renderWorkstreams();
    renderStatus();
  }

  function statusCell(n) {
    const status = n.status || (n.reachable ? "ok" : "unreachable");
    const cell = el("td", {}, el("span", { class: "badge", dataset: { status }, text: status }));
    if (n.untrusted_reason) cell.append(el("span", { class: "reason", text: n.untrusted_reason + ": no credentials are sent to it" }));
    else if (n.zombie_reason) cell.append(el("span", { class: "reason", text: n.zombie_reason }));
    else if (n.auth_failed) cell.append(el("span", { class: "reason", text: "the node refused the console's credentials" }));
    const circuit = ((n.health || {}).backend || {}).circuit_state;
    if (status === "degraded" && circuit) cell.append(el("span", { class: "reason", text: "backend circuit " + circuit }));
    return cell;
  }

  // A node's MCP servers from its health (`mcp.servers`, with resources and prompts).
  function mcpCell(n) {
    const m = (n.health && n.health.mcp) || null;
    if (!m) return el("td", { class: "num muted mcp", text: "—" });
    return el("td", { class: "num mcp", title: (m.servers || 0) + " MCP servers · " + (m.resources || 0) + " resources · " + (m.prompts || 0) + " prompts",
      text: String(m.servers || 0) });
  }

  function renderNodes() {
    const body = $("nodes-body");
    const rows = sortedNodes().map(({ n, c }) => {
      const status = n.status || (n.reachable ? "ok" : "unreachable");
      const max = n.max_ws || 10;
      const pct = Math.min(100, Math.round((c.total / max) * 100));
      const level = pct >= 90 ? "high" : pct >= 70 ? "mid" : "low";
      const version = el("td", { class: "mono" }, n.version || "—");
      if (n.version_drift) version.append(el("span", { class: "badge drift", title: "differs from the cluster majority " + (state.overview.majority_version || ""), text: "drift" }));
      return el("tr", {
        dataset: { nodeId: n.node_id, status, drift: n.version_drift ? "1" : "0" },
        onclick: (e) => {
          if (e.target.closest("a")) return;
          setFilter("node", state.filters.node === n.node_id ? "" : n.node_id);
        },
      },
      el("td", {}, el("span", { class: "dot", dataset: { status } }), el("strong", { text: n.node_id })),
      statusCell(n),
      version,
      el("td", { class: "num", text: c.total }),
      el("td", { class: "num", text: c.running }),
      el("td", { class: "num", text: c.attention }),
      mcpCell(n),
      el("td", { class: "num", text: fmtNum(c.tokens) }),
      el("td", {}, el("span", { class: "load", title: c.total + " of " + max + " workstreams" },
        el("span", { class: "bar" }, el("span", { class: "fill", dataset: { level }, style: { width: pct + "%" } })),
        el("span", { class: "muted small", text: c.total + "/" + max }))),
      el("td", { class: "muted small", text: ago(n.last_seen) }),
      el("td", {}, el("a", { class: "open-link", href: "/node/" + encodeURIComponent(n.node_id) + "/", text: "Open UI ↗" })));
    });
    body.replaceChildren(...rows);
    $("nodes-empty").hidden = rows.length > 0;
    $("node-count").textContent = rows.length;

    // The node filter offers every known node.
    const sel = $("ws-node");
    const current = state.filters.node;
    const ids = [...state.nodes.keys()].sort((a, b) => a.localeCompare(b, undefined, { numeric: true }));
    if (current && !ids.includes(current)) ids.push(current);
    const want = ["", ...ids].join("\n");
    if (sel.dataset.ids !== want) {
      sel.replaceChildren(el("option", { value: "", text: "all nodes" }), ...ids.map((id) => el("option", { value: id, text: id })));
      sel.dataset.ids = want;
    }
    sel.value = current;
  }

  function renderWorkstreams() {
    const rows = filteredWorkstreams();
    const pages = Math.max(1, Math.ceil(rows.length / PER_PAGE));
    if (state.filters.page > pages) state.filters.page = pages;
    const page = state.filters.page;
    const slice = rows.slice((page - 1) * PER_PAGE, page * PER_PAGE);
    $("ws-body").replaceChildren(...slice.map((w) => el("tr", {
      dataset: { wsId: w.id, node: w.node, state: w.state || "idle" },
      title: "Open in " + w.node + "'s UI",
      onclick: () => { location.href = "/node/" + encodeURIComponent(w.node) + "/?ws_id=" + encodeURIComponent(w.id); },
    },
    el("td", {}, el("span", { class: "state", dataset: { state: w.state || "idle" }, text: w.state || "idle" })),
    el("td", {}, el("strong", { text: w.name || w.id.slice(0, 8) })),
    el("td", { class: "mono", text: w.node }),
    el("td", { class: "task", title: w.title || "", text: w.title || "" }),
    el("td", { class: "num", text: fmtNum(w.tokens) }),
    el("td", { class: "num", text: Math.round((Number(w.context_ratio) || 0) * 100) + "%" }),
    el("td", { class: "activity", title: w.activity || "", text: w.activity || "" }))));
    $("ws-empty").hidden = slice.length > 0;
    $("ws-count").textContent = rows.length;
    $("page-info").textContent = "page " + page + " of " + pages;
    $("page-prev").disabled = page <= 1;
    $("page-next").disabled = page >= pages;
    const f = state.filters;
    $("ws-clear").hidden = !(f.state || f.node || f.search);
    $("ws-state").value = f.state;
    $("ws-sort").value = f.sort;
  }

  function renderStatus() {
    const all = allWorkstreams();
    const counts = {};
    for (const s of STATES) counts[s] = 0;
    for (const w of all) counts[w.state || "idle"] = (counts[w.state || "idle"] || 0) + 1;
    $("state-pills").replaceChildren(...STATES.map((s) => el("button", {
      type: "button",
      class: "pill" + (state.filters.state === s ? " active" : ""),
      dataset: { state: s },
      title: "Show " + s + " workstreams",
      onclick: () => setFilter("state", state.filters.state === s ? "" : s),
    }, STATE_LABEL[s], el("span", { class: "n", text: counts[s] }))));

    const nodes = [...state.nodes.values()];
    const reachable = nodes.filter((n) => n.reachable).length;
    const zombies = nodes.filter((n) => n.zombie).length;
    const maxWs = nodes.reduce((a, n) => a + (n.max_ws || 0), 0);
    const tokens = nodes.reduce((a, n) => a + nodeCounts(n).tokens, 0);
    const setMetric = (id, label, value, cls) => {
      const m = $(id);
      m.className = "metric" + (cls ? " " + cls : "");
      m.replaceChildren(label + " ", el("strong", { text: value }));
    };
    setMetric("m-nodes", "nodes", reachable + "/" + nodes.length + (zombies ? " · " + zombies + " zombie" : ""), zombies ? "zombie" : "");
    setMetric("m-ws", "ws", all.length);
    setMetric("m-cap", "free", Math.max(0, maxWs - all.length) + "/" + maxWs);
    setMetric("m-tokens", "tokens", fmtNum(tokens));
    const o = state.overview;
    const mcp = $("m-mcp");
    if (o.mcp_servers) {
      mcp.hidden = false;
      setMetric("m-mcp", "mcp", o.mcp_servers + " · rsrc " + (o.mcp_resources || 0) + " · pmpt " + (o.mcp_prompts || 0));
    } else mcp.hidden = true;
    const versions = o.versions || [];
    const drifted = nodes.filter((n) => n.version_drift).map((n) => n.node_id);
    if (o.version_drift) setMetric("m-version", "DRIFT", versions.join(" / "), "drift");
    else setMetric("m-version", "ver", versions[0] || "—");
    const banner = $("drift-banner");
    if (drifted.length) {
      banner.hidden = false;
      banner.replaceChildren(el("strong", { text: "Version drift: " }),
        drifted.join(", ") + (drifted.length === 1 ? " runs" : " run") + " a version other than the cluster's " +
        (o.majority_version || "") + ". Automatic placement skips " + (drifted.length === 1 ? "it" : "them") + ".");
    } else banner.hidden = true;
    $("summary").textContent = nodes.length
      ? nodes.length + " node" + (nodes.length === 1 ? "" : "s") + " · " + all.length + " workstream" + (all.length === 1 ? "" : "s") +
        " · " + counts.running + " running · " + counts.attention + " need attention"
      : "No nodes yet";
  }

  function setFilter(key, value) {
    state.filters[key] = value;
    state.filters.page = 1;
    schedule();
  }

  // ------------------------------------------------------------ new workstream dialog

  function openNewWs() {
    const sel = $("new-ws-node");
    const opts = [el("option", { value: "", text: "Auto (best node by capacity)" }), el("option", { value: "pool", text: "General pool (any bridge)" })];
    for (const { n, c } of sortedNodes()) {
      const usable = n.placeable !== false && n.reachable;
      opts.push(el("option", { value: n.node_id, disabled: !n.reachable, text: n.node_id + " (" + c.total + "/" + (n.max_ws || 10) + " ws)" + (usable ? "" : n.version_drift ? " — drift" : n.zombie ? " — zombie" : " — unreachable") }));
    }
    sel.replaceChildren(...opts);
    $("new-ws-error").textContent = "";
    $("new-ws-overlay").hidden = false;
    fillPickers();
    setTimeout(() => $("new-ws-name").focus(), 0);
  }

  // The cluster's model aliases and skills (the console's store); without storage only the
  // defaults are offered.
  async function fillPickers() {
    const pick = async (path, key, id, none, label) => {
      const opts = [el("option", { value: "", text: none })];
      try {
        const r = await api(path);
        for (const item of r[key] || []) opts.push(el("option", { value: item.alias || item.name, text: label(item) }));
      } catch (err) { /* 503 without storage: the default only */ }
      $(id).replaceChildren(...opts);
    };
    await Promise.all([
      pick("/v1/api/models", "models", "new-ws-model", "Node default", (m) => m.alias + " (" + m.model + ")"),
      pick("/v1/api/skills", "skills", "new-ws-skill", "None", (s) => s.name + (s.description ? " — " + s.description : "")),
    ]);
  }

  function closeNewWs() {
    $("new-ws-overlay").hidden = true;
    $("new-ws-form").reset();
  }

  async function submitNewWs(e) {
    e.preventDefault();
    const body = { node_id: $("new-ws-node").value, name: $("new-ws-name").value.trim(), initial_message: $("new-ws-message").value,
      model: $("new-ws-model").value, skill: $("new-ws-skill").value };
    $("new-ws-submit").disabled = true;
    try {
      const r = await api("/v1/api/cluster/workstreams/new", body);
      closeNewWs();
      toast("Workstream queued on " + r.target_node, "ok");
    } catch (err) {
      $("new-ws-error").textContent = err.message;
    } finally {
      $("new-ws-submit").disabled = false;
    }
  }

  // ------------------------------------------------------------ admin area

  const admin = { tab: "users" };

  function toggleAdmin(open) {
    const panel = $("admin-panel");
    panel.hidden = open === undefined ? !panel.hidden : !open;
    $("admin-btn").setAttribute("aria-expanded", String(!panel.hidden));
    if (!panel.hidden) showTab(admin.tab);
  }

  function showTab(tab) {
    admin.tab = tab;
    for (const t of ADMIN_TABS) {
      const selected = t === tab;
      $("tab-" + t).setAttribute("aria-selected", String(selected));
      $("tab-" + t).tabIndex = selected ? 0 : -1;
      $("admin-" + t).hidden = !selected;
    }
    ({ users: loadUsers, schedules: loadSchedules, settings: loadSettings, models: loadModels, tokens: loadTokens,
      policies: loadPolicies, skills: loadSkills, memories: loadMemories, roles: loadRoles, usage: loadUsage })[tab]();
  }

  const ADMIN_TABS = ["users", "schedules", "settings", "models", "tokens", "policies", "skills", "memories", "roles", "usage"];

  // A node-by-node summary of a change's reload: "node-a ok, node-b: unreachable".
  function reloadSummary(reload) {
    if (!reload) return "";
    const parts = [];
    for (const [id, r] of Object.entries(reload.results || {})) {
      const refused = Object.keys((r && r.refused) || {});
      parts.push(id + " " + ((r && r.status) || "ok") + (refused.length ? " (refused " + refused.join(", ") + ")" : ""));
    }
    for (const [id, e] of Object.entries(reload.errors || {})) parts.push(id + ": " + e);
    return parts.length ? "Nodes: " + parts.join("; ") : "No nodes to reload.";
  }

  function settingInput(spec, value) {
    const id = "setting-" + spec.key.replace(/\./g, "-");
    const label = "Value of " + spec.key;
    if (spec.type === "bool") {
      return el("select", { id, "aria-label": label },
        el("option", { value: "", text: "(node default)" }),
        el("option", { value: "true", text: "true", selected: value === true }),
        el("option", { value: "false", text: "false", selected: value === false }));
    }
    if (spec.type === "choice") {
      return el("select", { id, "aria-label": label }, el("option", { value: "", text: "(node default)" }),
        ...spec.choices.map((c) => el("option", { value: c, text: c, selected: value === c })));
    }
    const attrs = { id, "aria-label": label, value: value === undefined ? "" : (Array.isArray(value) ? value.join(", ") : String(value)) };
    if (spec.type === "int" || spec.type === "float") {
      Object.assign(attrs, { type: "number", min: spec.min, max: spec.max, step: spec.type === "int" ? "1" : "any" });
    } else attrs.type = "text";
    if (spec.type === "aliases") attrs.placeholder = "alias, alias";
    return el("input", attrs);
  }

  function settingValue(spec, raw) {
    if (spec.type === "bool") return raw === "true";
    if (spec.type === "int" || spec.type === "float") return Number(raw);
    if (spec.type === "aliases") return raw.split(",").map((a) => a.trim()).filter(Boolean);
    return raw;
  }

  async function loadSettings() {
    try {
      const r = await api("/v1/api/admin/settings");
      const global = {};
      for (const row of r.settings || []) if (!row.node_id) global[row.key] = row.value;
      const rows = (r.registry || []).map((spec) => {
        const input = settingInput(spec, global[spec.key]);
        const isSet = spec.key in global;
        return el("tr", { dataset: { key: spec.key } },
          el("td", { class: "setting-key" }, el("code", {}, spec.key), el("div", { class: "muted small" }, spec.description)),
          el("td", {}, input),
          el("td", { class: "muted" }, spec.applies === "restart" ? "at node restart" : spec.applies === "models" ? "model reload" : "live"),
          el("td", {},
            el("button", { type: "button", class: "btn", "aria-label": "Save " + spec.key,
              onclick: () => saveSetting(spec, input.value) }, "Save"),
            isSet ? el("button", { type: "button", class: "link-btn", "aria-label": "Reset " + spec.key,
              onclick: () => resetSetting(spec) }, "Reset") : null));
      });
      // The error line stays: it says why the last save was refused.
      $("settings-body").replaceChildren(...rows);
    } catch (err) { adminError("settings-error", err); }
  }

  // The table is drawn again before the outcome is shown, so what is on screen (and what a
  // keyboard or test acts on next) is the state after the change.
  async function saveSetting(spec, raw) {
    if (raw === "") return resetSetting(spec);
    let message = "", error = "";
    try {
      const r = await api("/v1/api/admin/settings/" + encodeURIComponent(spec.key), { value: settingValue(spec, raw) }, "PUT");
      message = spec.key + " saved. " + reloadSummary(r.reload);
      toast(spec.key + " saved", "ok");
    } catch (err) { error = err.status === 503 ? "The console has no storage." : err.message; }
    await loadSettings();
    $("settings-error").textContent = error;
    if (message) $("settings-result").textContent = message;
  }

  async function resetSetting(spec) {
    let message = "", error = "";
    try {
      const r = await api("/v1/api/admin/settings/" + encodeURIComponent(spec.key), undefined, "DELETE");
      message = spec.key + " reset. " + reloadSummary(r.reload);
    } catch (err) { if (err.status !== 404) error = err.message; }
    await loadSettings();
    $("settings-error").textContent = error;
    if (message) $("settings-result").textContent = message;
  }

  const isReranker = (d) => !!(d.capabilities && d.capabilities.supports_rerank === true);

  async function loadModels() {
    try {
      const r = await api("/v1/api/admin/models");
      const rows = (r.definitions || []).map((d) => el("tr", { dataset: { alias: d.alias } },
        el("td", {}, d.alias, isReranker(d) ? el("span", { class: "muted small" }, " (reranker)") : null),
        el("td", {}, d.model), el("td", {}, d.provider),
        el("td", { class: "muted" }, d.base_url || "(default)"),
        el("td", {}, d.has_api_key ? "set" : "—"),
        el("td", {}, el("input", { type: "checkbox", checked: d.enabled, "aria-label": "Enabled: " + d.alias,
          onchange: (ev) => updateModel(d, { enabled: ev.target.checked }) })),
        el("td", {}, el("button", { type: "button", class: "link-btn", "aria-label": "Delete model " + d.alias,
          onclick: () => deleteModel(d) }, "Delete"))));
      $("models-body").replaceChildren(...rows);
      $("models-empty").hidden = rows.length > 0;
      $("model-error").textContent = "";
      await loadModelRoles(r.definitions || []);
    } catch (err) { adminError("model-error", err); }
  }

  // Models → Roles → Reranker: the stored `model.reranker` setting; only enabled definitions
  // with supports_rerank are offered (the console refuses any other with a 400).
  async function loadModelRoles(definitions) {
    const select = $("role-reranker");
    let current = "";
    try {
      const r = await api("/v1/api/admin/settings");
      const row = (r.settings || []).find((s) => s.key === "model.reranker" && !s.node_id);
      current = row && typeof row.value === "string" ? row.value : "";
      $("model-role-error").textContent = "";
    } catch (err) { adminError("model-role-error", err); }
    const options = definitions.filter((d) => isReranker(d) && (d.enabled || d.alias === current))
      .map((d) => el("option", { value: d.alias, selected: d.alias === current, disabled: !d.enabled },
        d.alias + " (" + d.model + ")" + (d.enabled ? "" : " — disabled")));
    select.replaceChildren(el("option", { value: "", selected: current === "" }, "None"), ...options);
    select.value = current;
  }

  async function saveReranker() {
    const alias = $("role-reranker").value;
    const path = "/v1/api/admin/settings/model.reranker";
    let message = "", error = "";
    try {
      const r = alias ? await api(path, { value: alias }, "PUT") : await api(path, undefined, "DELETE");
      message = (alias ? "Reranker: " + alias + ". " : "No reranker. ") + reloadSummary(r.reload);
      toast(alias ? "Reranker " + alias + " selected" : "Reranker cleared", "ok");
    } catch (err) { if (alias || err.status !== 404) error = err.status === 503 ? "The console has no storage." : err.message; }
    await loadModels();
    $("model-role-error").textContent = error;
    $("role-result").textContent = message;
  }

  async function updateModel(d, change) {
    try { const r = await api("/v1/api/admin/models/" + encodeURIComponent(d.definition_id), change, "PUT"); toast(d.alias + " updated. " + reloadSummary(r.reload), "ok"); }
    catch (err) { toast(err.message, "error"); }
    loadModels();
  }

  async function deleteModel(d) {
    if (!confirm("Delete model alias " + d.alias + "?")) return;
    try { await api("/v1/api/admin/models/" + encodeURIComponent(d.definition_id), undefined, "DELETE"); toast("Model " + d.alias + " deleted", "ok"); }
    catch (err) { toast(err.message, "error"); }
    loadModels();
  }

  async function submitModel(e) {
    e.preventDefault();
    $("model-submit").disabled = true;
    const body = { alias: $("model-alias").value.trim(), model: $("model-name").value.trim(), provider: $("model-provider").value,
      base_url: $("model-base-url").value.trim(), context_window: Number($("model-context").value) };
    if ($("model-api-key").value) body.api_key = $("model-api-key").value;
    if ($("model-rerank").checked) body.capabilities = { supports_rerank: true };
    try {
      const r = await api("/v1/api/admin/models", body);
      $("model-form").reset();
      toast("Model " + body.alias + " added. " + reloadSummary(r.reload), "ok");
      loadModels();
    } catch (err) { adminError("model-error", err); }
    finally { $("model-submit").disabled = false; }
  }

  function adminError(target, err) {
    $(target).textContent = err.status === 503 ? "The console has no storage." : err.message;
  }

  // The roles a user may be given (the built-in names first); refreshed with the users.
  let roleOptions = [["viewer", "viewer"], ["operator", "operator"], ["admin", "admin"]];

  async function loadUsers() {
    try {
      const [r, roles] = await Promise.all([api("/v1/api/admin/users"), api("/v1/api/admin/roles").catch(() => null)]);
      if (roles) {
        roleOptions = (roles.roles || []).map((x) => [x.role_id, x.builtin ? x.name : x.display_name || x.name]);
      }
      const rows = (r.users || []).map((u) => el("tr", { dataset: { username: u.username } },
        el("td", {}, u.username), el("td", {}, u.display_name),
        el("td", {}, roleSelect(u)),
        el("td", { class: "muted" }, (u.created || "").slice(0, 16).replace("T", " ")),
        el("td", {}, el("button", { type: "button", class: "link-btn", "aria-label": "Delete user " + u.username,
          onclick: () => deleteUser(u) }, "Delete"))));
      $("users-body").replaceChildren(...rows);
      $("users-empty").hidden = rows.length > 0;
      $("user-error").textContent = "";
    } catch (err) { adminError("user-error", err); }
  }

  // A select that assigns the user's (one) role; a change is saved at once.
  function roleSelect(u) {
    const current = (u.roles || [])[0] || "";
    const options = roleOptions.map(([id, name]) => el("option", { value: id, selected: id === current || id === "builtin-" + current }, name));
    if (current && !roleOptions.some(([id]) => id === current || id === "builtin-" + current)) {
      options.push(el("option", { value: current, selected: true }, current));
    }
    return el("select", { "aria-label": "Role of " + u.username, class: "role-select",
      onchange: (ev) => setRole(u, ev.target.value) }, options);
  }

  async function setRole(u, role) {
    try { await api("/v1/api/admin/users/" + encodeURIComponent(u.user_id) + "/roles", { roles: [role] }, "PUT"); toast("Role of " + u.username + " changed", "ok"); }
    catch (err) { toast(err.message, "error"); }
    loadUsers();
  }

  async function deleteUser(u) {
    if (!confirm("Delete user " + u.username + "?")) return;
    try { await api("/v1/api/admin/users/" + encodeURIComponent(u.user_id), undefined, "DELETE"); toast("User " + u.username + " deleted", "ok"); }
    catch (err) { toast(err.message, "error"); }
    loadUsers();
  }

  async function submitUser(e) {
    e.preventDefault();
    $("user-submit").disabled = true;
    try {
      await api("/v1/api/admin/users", { username: $("user-username").value.trim(), display_name: $("user-display").value.trim(),
        password: $("user-password").value, role: $("user-role").value });
      $("user-form").reset();
      toast("User created", "ok");
      loadUsers();
    } catch (err) { adminError("user-error", err); }
    finally { $("user-submit").disabled = false; }
  }

  function fmtTime(iso) {
    if (!iso) return "—";
    const d = new Date(iso);
    return isNaN(d) ? iso : d.toLocaleString();
  }

  async function loadSchedules() {
    const targets = [el("option", { value: "auto", text: "Auto (best node)" }), el("option", { value: "pool", text: "General pool" }),
      el("option", { value: "all", text: "Every node" })];
    for (const { n } of sortedNodes()) targets.push(el("option", { value: n.node_id, text: n.node_id }));
    const keep = $("schedule-target").value;
    $("schedule-target").replaceChildren(...targets);
    if (keep) $("schedule-target").value = keep;
    try {
      const r = await api("/v1/api/admin/schedules");
      const rows = (r.tasks || []).map((t) => el("tr", { dataset: { name: t.name } },
        el("td", {}, t.name),
        el("td", {}, el("code", {}, t.schedule_type === "cron" ? t.cron_expr : "at " + fmtTime(t.at_time))),
        el("td", {}, t.target_mode),
        el("td", { class: "next-run" }, t.enabled ? fmtTime(t.next_run) : "—"),
        el("td", { class: "last-result" }, t.last_status ? t.last_status + (t.last_error ? ": " + t.last_error : "") : "never run"),
        el("td", {}, el("input", { type: "checkbox", checked: t.enabled, "aria-label": "Enabled: " + t.name,
          onchange: (ev) => setEnabled(t, ev.target.checked) })),
        el("td", {}, el("button", { type: "button", class: "link-btn", "aria-label": "Delete task " + t.name,
          onclick: () => deleteSchedule(t) }, "Delete"))));
      $("schedules-body").replaceChildren(...rows);
      $("schedules-empty").hidden = rows.length > 0;
      $("schedule-error").textContent = "";
    } catch (err) { adminError("schedule-error", err); }
  }

  async function setEnabled(t, enabled) {
    try { await api("/v1/api/admin/schedules/" + encodeURIComponent(t.task_id), { enabled }, "PUT"); }
    catch (err) { toast(err.message, "error"); }
    loadSchedules();
  }

  async function deleteSchedule(t) {
    if (!confirm("Delete task " + t.name + "?")) return;
    try { await api("/v1/api/admin/schedules/" + encodeURIComponent(t.task_id), undefined, "DELETE"); toast("Task deleted", "ok"); }
    catch (err) { toast(err.message, "error"); }
    loadSchedules();
  }

  function scheduleKind() {
    const at = $("schedule-type").value === "at";
    for (const id of ["schedule-at", "schedule-at-label"]) $(id).hidden = !at;
    for (const id of ["schedule-cron", "schedule-cron-label"]) $(id).hidden = at;
  }

  async function submitSchedule(e) {
    e.preventDefault();
    const kind = $("schedule-type").value;
    const body = { name: $("schedule-name").value.trim(), schedule_type: kind, target_mode: $("schedule-target").value,
      initial_message: $("schedule-message").value };
    if (kind === "cron") body.cron_expr = $("schedule-cron").value.trim();
    else {
      const local = $("schedule-at").value;
      const d = local ? new Date(local) : null;
      body.at_time = d && !isNaN(d) ? d.toISOString() : local;
    }
    $("schedule-submit").disabled = true;
    try {
      await api("/v1/api/admin/schedules", body);
      $("schedule-form").reset();
      scheduleKind();
      toast("Task scheduled", "ok");
      loadSchedules();
    } catch (err) { adminError("schedule-error", err); }
    finally { $("schedule-submit").disabled = false; }
  }

  async function loadTokens() {
    try {
      const [r, users] = await Promise.all([api("/v1/api/admin/tokens"), api("/v1/api/admin/users")]);
      const names = new Map((users.users || []).map((u) => [u.user_id, u.username]));
      const keep = $("token-user").value;
      $("token-user").replaceChildren(...(users.users || []).map((u) => el("option", { value: u.user_id }, u.username)));
      if (keep) $("token-user").value = keep;
      const rows = (r.tokens || []).map((t) => el("tr", { dataset: { name: t.name } },
        el("td", {}, t.name), el("td", {}, names.get(t.user_id) || t.user_id),
        el("td", {}, el("code", {}, t.token_prefix)), el("td", {}, t.scopes),
        el("td", { class: "muted" }, t.expires ? fmtTime(t.expires) : "never"),
        el("td", {}, el("button", { type: "button", class: "link-btn", "aria-label": "Revoke token " + t.name,
          onclick: () => revokeToken(t) }, "Revoke"))));
      $("tokens-body").replaceChildren(...rows);
      $("tokens-empty").hidden = rows.length > 0;
      $("token-error").textContent = "";
    } catch (err) { adminError("token-error", err); }
  }

  async function revokeToken(t) {
    if (!confirm("Revoke token " + t.name + "?")) return;
    try { await api("/v1/api/admin/tokens/" + encodeURIComponent(t.token_id), undefined, "DELETE"); toast("Token " + t.name + " revoked", "ok"); }
    catch (err) { toast(err.message, "error"); }
    loadTokens();
  }

  async function submitToken(e) {
    e.preventDefault();
    $("token-submit").disabled = true;
    const body = { user_id: $("token-user").value, name: $("token-name").value.trim(), scopes: $("token-scopes").value };
    if ($("token-days").value) body.expires_days = Number($("token-days").value);
    try {
      const r = await api("/v1/api/admin/tokens", body);
      $("token-form").reset();
      // The raw token, once: shown for copying, never stored by the page.
      $("token-secret-value").value = r.token || "";
      $("token-secret").hidden = false;
      $("token-secret-value").focus();
      $("token-secret-value").select();
      loadTokens();
    } catch (err) { adminError("token-error", err); }
    finally { $("token-submit").disabled = false; }
  }

  async function loadPolicies() {
    try {
      const r = await api("/v1/api/admin/policies");
      const rows = (r.policies || []).map((p) => el("tr", { dataset: { name: p.name } },
        el("td", {}, p.name), el("td", {}, el("code", {}, p.tool_pattern)),
        el("td", {}, el("select", { "aria-label": "Action of " + p.name, onchange: (ev) => updatePolicy(p, { action: ev.target.value }) },
          ["deny", "ask", "allow"].map((a) => el("option", { value: a, selected: a === p.action }, a)))),
        el("td", {}, String(p.priority)),
        el("td", {}, el("input", { type: "checkbox", checked: p.enabled, "aria-label": "Enabled: " + p.name,
          onchange: (ev) => updatePolicy(p, { enabled: ev.target.checked }) })),
        el("td", {}, el("button", { type: "button", class: "link-btn", "aria-label": "Delete policy " + p.name,
          onclick: () => deletePolicy(p) }, "Delete"))));
      $("policies-body").replaceChildren(...rows);
      $("policies-empty").hidden = rows.length > 0;
      $("policy-error").textContent = "";
    } catch (err) { adminError("policy-error", err); }
  }

  async function updatePolicy(p, change) {
    try { const r = await api("/v1/api/admin/policies/" + encodeURIComponent(p.policy_id), change, "PUT"); toast(p.name + " updated. " + reloadSummary(r.reload), "ok"); }
    catch (err) { toast(err.message, "error"); }
    loadPolicies();
  }

  async function deletePolicy(p) {
    if (!confirm("Delete policy " + p.name + "?")) return;
    try { const r = await api("/v1/api/admin/policies/" + encodeURIComponent(p.policy_id), undefined, "DELETE"); toast("Policy " + p.name + " deleted. " + reloadSummary(r.reload), "ok"); }
    catch (err) { toast(err.message, "error"); }
    loadPolicies();
  }

  async function submitPolicy(e) {
    e.preventDefault();
    $("policy-submit").disabled = true;
    const body = { name: $("policy-name").value.trim(), tool_pattern: $("policy-pattern").value.trim(),
      action: $("policy-action").value, priority: Number($("policy-priority").value) || 0 };
    try {
      const r = await api("/v1/api/admin/policies", body);
      $("policy-form").reset();
      toast("Policy " + body.name + " added. " + reloadSummary(r.reload), "ok");
      loadPolicies();
    } catch (err) { adminError("policy-error", err); }
    finally { $("policy-submit").disabled = false; }
  }

  async function loadSkills() {
    try {
      const r = await api("/v1/api/admin/skills");
      const rows = (r.skills || []).map((k) => el("tr", { dataset: { name: k.name } },
        el("td", {}, k.name), el("td", { class: "muted" }, k.description || ""), el("td", {}, k.origin),
        el("td", {}, el("input", { type: "checkbox", checked: k.enabled, disabled: k.readonly, "aria-label": "Enabled: " + k.name,
          onchange: (ev) => updateSkill(k, { enabled: ev.target.checked }) })),
        el("td", {}, k.readonly ? el("span", { class: "muted" }, "read-only") : el("button", { type: "button", class: "link-btn",
          "aria-label": "Delete skill " + k.name, onclick: () => deleteSkill(k) }, "Delete"))));
      $("skills-body").replaceChildren(...rows);
      $("skills-empty").hidden = rows.length > 0;
      $("skill-error").textContent = "";
    } catch (err) { adminError("skill-error", err); }
  }

  async function updateSkill(k, change) {
    try { const r = await api("/v1/api/admin/skills/" + encodeURIComponent(k.name), change, "PUT"); toast(k.name + " updated. " + reloadSummary(r.reload), "ok"); }
    catch (err) { toast(err.message, "error"); }
    loadSkills();
  }

  async function deleteSkill(k) {
    if (!confirm("Delete skill " + k.name + "?")) return;
    try { const r = await api("/v1/api/admin/skills/" + encodeURIComponent(k.name), undefined, "DELETE"); toast("Skill " + k.name + " deleted. " + reloadSummary(r.reload), "ok"); }
    catch (err) { toast(err.message, "error"); }
    loadSkills();
  }

  async function submitSkill(e) {
    e.preventDefault();
    $("skill-submit").disabled = true;
    const body = { name: $("skill-name").value.trim(), description: $("skill-description").value.trim(), content: $("skill-content").value };
    try {
      const r = await api("/v1/api/admin/skills", body);
      $("skill-form").reset();
      toast("Skill " + body.name + " added. " + reloadSummary(r.reload), "ok");
      loadSkills();
    } catch (err) { adminError("skill-error", err); }
    finally { $("skill-submit").disabled = false; }
  }

  async function loadMemories() {
    try {
      const r = await api("/v1/api/admin/memories");
      const rows = (r.memories || []).map((m) => el("tr", { dataset: { name: m.name } },
        el("td", {}, m.name), el("td", {}, m.type), el("td", {}, m.scope + (m.scope_id ? ":" + m.scope_id : "")),
        el("td", { class: "muted" }, (m.content || "").slice(0, 120)),
        el("td", {}, (m.nodes || [m.node_id]).join(", ")),
        el("td", {}, el("button", { type: "button", class: "link-btn", "aria-label": "Delete memory " + m.name,
          onclick: () => deleteMemory(m) }, "Delete"))));
      $("memories-body").replaceChildren(...rows);
      $("memories-empty").hidden = rows.length > 0;
      const errors = Object.entries(r.errors || {}).map(([id, e]) => id + ": " + e);
      $("memory-error").textContent = errors.length ? "Not read from " + errors.join("; ") : "";
    } catch (err) { adminError("memory-error", err); }
  }

  async function deleteMemory(m) {
    if (!confirm("Delete memory " + m.name + "?")) return;
    const q = new URLSearchParams({ node_id: m.node_id, scope: m.scope });
    if (m.scope_id) q.set("scope_id", m.scope_id);
    try { await api("/v1/api/admin/memories/" + encodeURIComponent(m.name) + "?" + q, undefined, "DELETE"); toast("Memory " + m.name + " deleted", "ok"); }
    catch (err) { toast(err.message, "error"); }
    loadMemories();
  }

  async function loadRoles() {
    try {
      const r = await api("/v1/api/admin/roles");
      const rows = (r.roles || []).map((x) => el("tr", { dataset: { name: x.name } },
        el("td", {}, x.name), el("td", {}, x.display_name || ""),
        el("td", { class: "permission-list" }, (x.permissions || "").split(",").join(", ")),
        el("td", {}, x.builtin ? el("span", { class: "muted" }, "built-in") : el("button", { type: "button", class: "link-btn",
          "aria-label": "Delete role " + x.name, onclick: () => deleteRole(x) }, "Delete"))));
      $("roles-body").replaceChildren(...rows);
      // The permission checkboxes, built once from the service's vocabulary.
      const set = $("role-permissions");
      if (!set.querySelector("input")) {
        for (const p of r.permissions || []) {
          const id = "role-perm-" + p.replace(/\./g, "-");
          set.append(el("label", { for: id }, el("input", { type: "checkbox", id, value: p }), p));
        }
      }
      $("role-error").textContent = "";
    } catch (err) { adminError("role-error", err); }
  }

  async function deleteRole(x) {
    if (!confirm("Delete role " + x.name + "?")) return;
    try { await api("/v1/api/admin/roles/" + encodeURIComponent(x.role_id), undefined, "DELETE"); toast("Role " + x.name + " deleted", "ok"); }
    catch (err) { toast(err.message, "error"); }
    loadRoles();
  }

  async function submitRole(e) {
    e.preventDefault();
    const permissions = [...$("role-permissions").querySelectorAll("input:checked")].map((i) => i.value);
    if (!permissions.length) {
      $("role-error").textContent = "Choose at least one permission.";
      return;
    }
    $("role-submit").disabled = true;
    const body = { name: $("role-name").value.trim(), display_name: $("role-display").value.trim(), permissions: permissions.join(",") };
    try {
      await api("/v1/api/admin/roles", body);
      $("role-form").reset();
      toast("Role " + body.name + " created", "ok");
      loadRoles();
    } catch (err) { adminError("role-error", err); }
    finally { $("role-submit").disabled = false; }
  }

  const USAGE_KEYS = { day: "Day", user: "User", model: "Model", node: "Node", ws: "Workstream" };

  function fmtInt(n) {
    return (Number(n) || 0).toLocaleString("en-US");
  }

  async function loadUsage() {
    const group = $("usage-group").value || "day";
    const q = new URLSearchParams({ group_by: group });
    if ($("usage-since").value) q.set("since", $("usage-since").value);
    if ($("usage-until").value) q.set("until", $("usage-until").value);
    try {
      const r = await api("/v1/api/admin/usage?" + q);
      const counts = (c) => [c.prompt_tokens, c.completion_tokens, c.tool_calls, c.calls].map((n) => el("td", {}, fmtInt(n)));
      const rows = (r.rows || []).map((x) => el("tr", { dataset: { key: x.key } },
        el("th", { scope: "row" }, x.key ? (group === "ws" ? el("code", {}, x.key) : x.key) : el("span", { class: "muted" }, "(none)")),
        counts(x)));
      $("usage-key-head").textContent = USAGE_KEYS[group] || group;
      const range = (q.get("since") ? " from " + q.get("since") : "") + (q.get("until") ? " to " + q.get("until") : "");
      $("usage-caption").textContent = "Model usage by " + (USAGE_KEYS[group] || group).toLowerCase() + range;
      $("usage-body").replaceChildren(...rows);
      $("usage-totals").replaceChildren(el("th", { scope: "row" }, "Total"), ...counts(r.totals || {}));
      $("usage-empty").hidden = rows.length > 0;
      $("usage-error").textContent = "";
    } catch (err) { adminError("usage-error", err); }
  }

  function bindAdmin() {
    $("admin-btn").addEventListener("click", () => toggleAdmin());
    ADMIN_TABS.forEach((t, i) => {
      $("tab-" + t).addEventListener("click", () => showTab(t));
      $("tab-" + t).addEventListener("keydown", (e) => {
        const step = e.key === "ArrowRight" ? 1 : e.key === "ArrowLeft" ? -1 : 0;
        if (!step) return;
        const other = ADMIN_TABS[(i + step + ADMIN_TABS.length) % ADMIN_TABS.length];
        showTab(other);
        $("tab-" + other).focus();
      });
    });
    $("user-form").addEventListener("submit", submitUser);
    $("model-form").addEventListener("submit", submitModel);
    $("role-reranker").addEventListener("change", saveReranker);
    $("schedule-form").addEventListener("submit", submitSchedule);
    $("token-form").addEventListener("submit", submitToken);
    $("policy-form").addEventListener("submit", submitPolicy);
    $("skill-form").addEventListener("submit", submitSkill);
    $("role-form").addEventListener("submit", submitRole);
    $("usage-form").addEventListener("submit", (e) => { e.preventDefault(); loadUsage(); });
    $("usage-group").addEventListener("change", loadUsage);
    $("schedule-type").addEventListener("change", scheduleKind);
  }

  // ------------------------------------------------------------ wiring

  function applyTheme(theme) {
    const t = theme || localStorage.getItem(THEME_KEY) || (matchMedia("(prefers-color-scheme: dark)").matches ? "dark" : "light");
    document.documentElement.dataset.theme = t;
  }

  function bind() {
    $("theme-toggle").addEventListener("click", () => {
      const next = document.documentElement.dataset.theme === "dark" ? "light" : "dark";
      localStorage.setItem(THEME_KEY, next);
      applyTheme(next);
    });
    $("login-form").addEventListener("submit", async (e) => {
      e.preventDefault();
      $("login-submit").disabled = true;
      try {
        await login($("login-token").value.trim(), $("login-username").value.trim(), $("login-password").value);
        $("login-overlay").hidden = true;
        $("login-token").value = "";
        $("login-password").value = "";
        $("logout-btn").hidden = false;
        const next = new URL(location.href).searchParams.get("next");
        if (next && next.startsWith("/node/")) { location.href = next; return; }
        startStream();
      } catch (err) {
        $("login-error").textContent = err.message;
      } finally {
        $("login-submit").disabled = false;
      }
    });
    $("logout-btn").addEventListener("click", async () => {
      try { await fetch("/v1/api/auth/logout", { method: "POST", credentials: "same-origin" }); } catch (e) { /* local sign-out is enough */ }
      showLogin();
    });
    $("new-ws-btn").addEventListener("click", openNewWs);
    $("new-ws-cancel").addEventListener("click", closeNewWs);
    $("new-ws-form").addEventListener("submit", submitNewWs);
    $("new-ws-overlay").addEventListener("click", (e) => { if (e.target === $("new-ws-overlay")) closeNewWs(); });
    document.addEventListener("keydown", (e) => { if (e.key === "Escape" && !$("new-ws-overlay").hidden) closeNewWs(); });
    $("ws-search").addEventListener("input", (e) => setFilter("search", e.target.value));
    $("ws-state").addEventListener("change", (e) => setFilter("state", e.target.value));
    $("ws-node").addEventListener("change", (e) => setFilter("node", e.target.value));
    $("ws-sort").addEventListener("change", (e) => setFilter("sort", e.target.value));
    $("ws-clear").addEventListener("click", () => {
      Object.assign(state.filters, { state: "", node: "", search: "", page: 1 });
      $("ws-search").value = "";
      schedule();
    });
    $("node-sort").addEventListener("change", (e) => { state.nodeSort = e.target.value; schedule(); });
    $("page-prev").addEventListener("click", () => { state.filters.page = Math.max(1, state.filters.page - 1); schedule(); });
    $("page-next").addEventListener("click", () => { state.filters.page += 1; schedule(); });
    setInterval(() => { if (stream.state === "open") refreshSnapshot(); }, 10000);
  }

  async function start() {
    try {
      const status = await fetch("/v1/api/auth/status", { cache: "no-store" }).then((r) => r.json());
      $("logout-btn").hidden = !(status && status.auth_enabled);
    } catch (e) { /* unknown: a 401 later shows the form */ }
    try {
      loadSnapshot(await api("/v1/api/cluster/snapshot"));
    } catch (e) {
      if (e.status !== 401) toast(e.message, "error");
      return;
    }
    startStream();
  }

  // Diagnostics (also used by the browser test).
  window.turnstoneConsole = {
    nodes: () => [...state.nodes.values()].map((n) => ({ node_id: n.node_id, ws: n.workstreams.size, status: n.status, drift: !!n.version_drift })),
    events: () => state.events.slice(),
    stream: () => ({ state: stream.state, delay: stream.delay }),
    dropStream: () => { if (stream.es) stream.es.onerror(); },
  };

  applyTheme();
  bind();
  bindAdmin();
  render();
  start();
})();
