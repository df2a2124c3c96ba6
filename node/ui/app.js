// Turnstone web UI: a dashboard of workstreams fed by the global event stream, tabs of open
// workstreams, and one conversation pane per workstream fed by its own event stream.
//
// Streams are EventSources that this file reconnects itself (1 s doubling to 30 s, with a
// visible banner). A per-workstream stream resumes with `?last_event_id=<last id seen>`, so
// nothing is shown twice or lost; without an id it re-attaches and the `history` event
// rebuilds the pane. Auth: a token is exchanged at `/v1/api/auth/login` for a cookie; when
// that endpoint does not exist the token is kept for this tab and sent as a Bearer header
// (and as the `turnstone_auth` cookie, which EventSource needs since it cannot set headers).

(function () {
  "use strict";

  const md = window.TurnstoneMarkdown;
  const $ = (id) => document.getElementById(id);
  const TOKEN_KEY = "turnstone_token";
  const TABS_KEY = "turnstone_tabs";
  const THEME_KEY = "turnstone_theme";
  const RETRY_MIN_MS = 1000;
  const RETRY_MAX_MS = 30000;
  const STATE_LABELS = {
    idle: "Idle",
    thinking: "Thinking",
    running: "Running",
    attention: "Needs attention",
    error: "Error",
  };

  // ---------------------------------------------------------------- small DOM helpers

  // What each effect receipt means (the badge's tooltip).
  const EFFECT_HINTS = {
    none: "It never started: nothing happened.",
    unknown: "It was running when it was stopped; check before repeating it.",
    partial: "It was stopped while running, after printing output; part of its work may be done.",
    rolled_back: "The tool undid its effect.",
    completed: "It finished before the batch was stopped.",
  };
  const { el } = window.TurnstoneDom;

  const stripAnsi = (s) => String(s ?? "").replace(/\u001b\[[0-9;?]*[A-Za-z]/g, "");

  function toast(message, kind) {
    const t = el("div", { class: "toast " + (kind || "info"), role: "status" }, message);
    $("toasts").append(t);
    setTimeout(() => t.classList.add("leaving"), 4500);
    setTimeout(() => t.remove(), 5000);
  }

  function formatTokens(n) {
    if (!n) return "0";
    if (n >= 1e6) return (n / 1e6).toFixed(1) + "M";
    if (n >= 1e3) return (n / 1e3).toFixed(1) + "k";
    return String(n);
  }

  // ---------------------------------------------------------------- API and auth

  const auth = {
    token: sessionStorage.getItem(TOKEN_KEY) || "",
    required: Boolean(sessionStorage.getItem(TOKEN_KEY)),
    waiting: [], // streams to restart after a login
    hasUsers: false, // the node has stored users: offer username and password first
    setupRequired: false, // no user yet: offer the first-user setup (needs the setup code)
    mode: "token", // which sign-in form is shown: "token" or "password"
  };

  class ApiError extends Error {
    constructor(status, message, body) {
      super(message);
      this.status = status;
      this.body = body;
    }
  }

  async function api(path, body, method) {
    const headers = {};
    if (body !== undefined) headers["Content-Type"] = "application/json";
    if (auth.token) headers.Authorization = "Bearer " + auth.token;
    let resp;
    try {
      resp = await fetch(path, {
        method: method || (body === undefined ? "GET" : "POST"),
        headers,
        body: body === undefined ? undefined : JSON.stringify(body),
        credentials: "same-origin",
        cache: "no-store",
      });
    } catch (e) {
      throw new ApiError(0, "The node is not reachable");
    }
    const data = await jsonOrNull(resp);
    if (resp.status === 401) {
      showLogin();
      throw new ApiError(401, "Sign-in required", data);
    }
    if (!resp.ok) {
      const msg = (data && (data.error || data.detail)) || resp.status + " " + resp.statusText;
      throw new ApiError(resp.status, msg, data);
    }
    return data;
  }

  // A response's JSON body, or null when it has none.
  async function jsonOrNull(resp) {
    try {
      return await resp.json();
    } catch (e) {
      return null;
    }
  }

  function setBearer(token) {
    auth.token = token;
    if (token) {
      sessionStorage.setItem(TOKEN_KEY, token);
      // EventSource cannot send headers: the same token as the auth cookie.
      if (/^[A-Za-z0-9._~+/=-]+$/.test(token)) {
        document.cookie = "turnstone_auth=" + token + "; path=/; SameSite=Strict";
      }
    } else {
      sessionStorage.removeItem(TOKEN_KEY);
    }
  }

  function clearCookie() {
    document.cookie = "turnstone_auth=; path=/; Max-Age=0; SameSite=Strict";
  }

  function showLogin() {
    auth.required = true;
    const overlay = $("login-overlay");
    if (!overlay.hidden) return;
    overlay.hidden = false;
    $("login-error").textContent = "";
    setLoginMode(auth.setupRequired ? "setup" : auth.hasUsers ? "password" : "token");
  }

  // Token, username/password, or first-user setup: one form, three sets of fields.
  function setLoginMode(mode) {
    auth.mode = mode;
    const password = mode === "password";
    const setup = mode === "setup";
    $("login-token-fields").hidden = password || setup;
    $("login-password-fields").hidden = !password;
    $("login-setup-fields").hidden = !setup;
    $("login-hint").textContent = setup
      ? "Create the first admin user. Paste the setup code the node printed at start, or its full-access token."
      : password
        ? "Sign in with your username and password."
        : "This node requires an API token.";
    $("login-submit").textContent = setup ? "Create admin" : "Sign in";
    $("login-mode").textContent = password || setup
      ? "Sign in with a token instead"
      : "Sign in with a username and password";
    // At once, not on a timer: a focus deferred past the first keystrokes would move what
    // is typed next out of the field being typed in (a password into the username field).
    $(setup ? "setup-code" : password ? "login-username" : "login-token").focus();
  }

  // First-user setup with the bootstrap credential: the setup code (body) or a full-access
  // token (bearer); the node sets the session cookie.
  async function setupFirstUser(code, user) {
    const resp = await fetch("/v1/api/auth/setup", {
      method: "POST",
      headers: { "Content-Type": "application/json", Authorization: "Bearer " + code },
      body: JSON.stringify({ ...user, setup_code: code }),
      credentials: "same-origin",
    });
    const body = await jsonOrNull(resp);
    if (!resp.ok) {
      if (resp.status === 401) throw new Error("That setup code or token is not right");
      throw new Error((body && body.error) || "Setup failed");
    }
    auth.setupRequired = false;
    auth.hasUsers = true;
    setBearer("");
  }

  // `credentials` is `{token}` or `{username, password}`.
  async function login(credentials) {
    const token = credentials.token || "";
    const resp = await fetch("/v1/api/auth/login", {
      method: "POST",
      headers: { "Content-Type": "application/json" },
      body: JSON.stringify(credentials),
      credentials: "same-origin",
    });
    if (token && (resp.status === 404 || resp.status === 405)) {
      // No login endpoint on this node: keep the token and send it ourselves.
      setBearer(token);
      const check = await fetch("/v1/api/dashboard", {
        headers: { Authorization: "Bearer " + token },
        cache: "no-store",
      });
      if (check.status === 401 || check.status === 403) {
        setBearer("");
        clearCookie();
        throw new Error("Invalid token");
      }
      return;
    }
    const body = await jsonOrNull(resp);
    if (!resp.ok) {
      if (resp.status === 429) throw new Error("Too many login attempts — try again later");
      if (resp.status === 401) {
        throw new Error(token ? "Invalid token" : "Wrong username or password");
      }
      throw new Error((body && body.error) || "Sign-in failed");
    }
    // The server set its own cookie.
    setBearer("");
  }

  async function logout() {
    try {
      await fetch("/v1/api/auth/logout", { method: "POST", credentials: "same-origin" });
    } catch (e) {
      // Signing out locally is enough.
    }
    setBearer("");
    clearCookie();
    for (const s of allStreams()) s.stop();
    showLogin();
  }

  // ---------------------------------------------------------------- reconnecting streams

  // One EventSource with manual reconnects: exponential backoff and a probe before each
  // retry (so a closed workstream or an expired sign-in is told apart from a network drop).
  class Stream {
    constructor(opts) {
      this.url = opts.url;
      this.onEvent = opts.onEvent;
      this.probe = opts.probe;
      this.onState = opts.onState || (() => {});
      this.es = null;
      this.active = false;
      this.delay = RETRY_MIN_MS;
      this.timer = null;
      this.retryAt = 0;
      this.state = "idle";
      this.opens = 0;
    }

    setState(state) {
      this.state = state;
      this.onState(state);
    }

    start() {
      this.active = true;
      this.open();
    }

    stop() {
      this.active = false;
      clearTimeout(this.timer);
      this.timer = null;
      if (this.es) this.es.close();
      this.es = null;
      this.setState("idle");
    }

    open() {
      clearTimeout(this.timer);
      this.timer = null;
      if (this.es) this.es.close();
      const es = new EventSource(this.url(), { withCredentials: true });
      this.es = es;
      this.setState(this.opens ? "reconnecting" : "connecting");
      es.onopen = () => {
        if (es !== this.es) return;
        this.opens++;
        this.delay = RETRY_MIN_MS;
        this.setState("open");
      };
      es.onmessage = (e) => {
        if (es !== this.es) return;
        let data;
        try {
          data = JSON.parse(e.data);
        } catch (err) {
          return;
        }
        this.onEvent(data, e.lastEventId);
      };
      es.onerror = () => {
        if (es !== this.es) return;
        this.lost();
      };
    }

    // The connection is gone: close it (no native retry) and schedule ours.
    lost() {
      if (this.es) this.es.close();
      this.es = null;
      if (!this.active) return;
      const delay = this.delay;
      this.delay = Math.min(this.delay * 2, RETRY_MAX_MS);
      this.retryAt = Date.now() + delay;
      clearTimeout(this.timer);
      this.timer = setTimeout(() => this.retry(), delay);
      this.setState("retrying");
    }

    async retry() {
      this.timer = null;
      if (!this.active) return;
      const verdict = await this.probe();
      if (!this.active) return;
      if (verdict === "auth") {
        this.setState("auth");
        if (!auth.waiting.includes(this)) auth.waiting.push(this);
        return;
      }
      if (verdict === "gone") {
        this.stop();
        return;
      }
      if (verdict === "down") {
        this.lost();
        return;
      }
      this.open();
    }

    retryNow() {
      if (!this.active) return;
      if (this.state === "retrying" || this.state === "auth") {
        clearTimeout(this.timer);
        this.retry();
      }
    }

    // Test and debugging aid: behave as if the network dropped the connection.
    drop() {
      if (this.es) {
        this.es.close();
        this.lost();
      }
    }
  }

  async function probeApi() {
    try {
      await api("/v1/api/workstreams");
      return "ok";
    } catch (e) {
      if (e.status === 401) return "auth";
      return "down";
    }
  }

  // ---------------------------------------------------------------- workstream model

  const wsMap = new Map(); // id -> {id, name, state, activity, activity_state, tokens, ...}
  const views = new Map(); // id -> View
  let openTabs = [];
  let current = null;
  let aggregate = null;
  let globalStream = null;
  let nodeModel = "";

  try {
    openTabs = JSON.parse(sessionStorage.getItem(TABS_KEY) || "[]").filter((x) => typeof x === "string");
  } catch (e) {
    openTabs = [];
  }

  function saveTabs() {
    sessionStorage.setItem(TABS_KEY, JSON.stringify(openTabs));
  }

  function allStreams() {
    const out = [];
    if (globalStream) out.push(globalStream);
    for (const v of views.values()) out.push(v.stream);
    return out;
  }

  function upsertWs(row) {
    const prev = wsMap.get(row.id) || { id: row.id, name: row.id, state: "idle", activity: "", activity_state: "" };
    const next = Object.assign({}, prev);
    for (const k of ["name", "state", "activity", "activity_state", "tokens", "context_ratio", "model", "model_alias"]) {
      if (row[k] !== undefined && row[k] !== null) next[k] = row[k];
    }
    wsMap.set(row.id, next);
    return next;
  }

  function removeWs(id, why) {
    const known = wsMap.get(id);
    wsMap.delete(id);
    const view = views.get(id);
    if (view) {
      view.stream.stop();
      view.el.remove();
      views.delete(id);
    }
    const wasOpen = openTabs.includes(id);
    openTabs = openTabs.filter((t) => t !== id);
    saveTabs();
    if (known && why) toast("Workstream “" + known.name + "” " + why, "info");
    if (current === id) {
      current = null;
      const next = openTabs[0] || (wsMap.size ? wsMap.keys().next().value : null);
      if (next) select(next, { replace: true });
      else renderAll();
    } else if (wasOpen || known) {
      renderAll();
    }
  }

  let dashTimer = null;
  function scheduleDashboard() {
    if (dashTimer) return;
    dashTimer = setTimeout(() => {
      dashTimer = null;
      refreshDashboard().catch(() => {});
    }, 300);
  }

  async function refreshDashboard() {
    const data = await api("/v1/api/dashboard");
    const seen = new Set();
    for (const row of data.workstreams || []) {
      upsertWs(row);
      seen.add(row.id);
      if (row.model && !nodeModel) nodeModel = row.model_alias || row.model;
    }
    // Rebuild in the server's (creation) order.
    const ordered = new Map();
    for (const row of data.workstreams || []) ordered.set(row.id, wsMap.get(row.id));
    for (const id of wsMap.keys()) {
      if (!seen.has(id)) {
        const view = views.get(id);
        if (view) {
          view.stream.stop();
          view.el.remove();
          views.delete(id);
        }
      }
    }
    wsMap.clear();
    for (const [id, row] of ordered) wsMap.set(id, row);
    openTabs = openTabs.filter((t) => wsMap.has(t));
    saveTabs();
    aggregate = data.aggregate || null;
    if (current && !wsMap.has(current)) {
      current = null;
      const next = openTabs[0] || (wsMap.size ? wsMap.keys().next().value : null);
      if (next) select(next, { replace: true });
    }
    renderAll();
  }

  function onGlobalEvent(ev) {
    switch (ev.type) {
      case "ws_state":
        if (!wsMap.has(ev.ws_id)) {
          scheduleDashboard();
          return;
        }
        upsertWs({ id: ev.ws_id, state: ev.state, activity: ev.activity, activity_state: ev.activity_state, tokens: ev.tokens, context_ratio: ev.context_ratio });
        break;
      case "ws_activity":
        if (!wsMap.has(ev.ws_id)) return;
        upsertWs({ id: ev.ws_id, activity: ev.activity, activity_state: ev.activity_state });
        break;
      case "ws_rename":
        if (!wsMap.has(ev.ws_id)) return;
        upsertWs({ id: ev.ws_id, name: ev.name });
        break;
      case "ws_closed":
        removeWs(ev.ws_id, ev.reason === "evicted" ? "was evicted" : "was closed");
        return;
      default:
        return;
    }
    renderAll();
  }

  function startGlobal() {
    if (globalStream) {
      globalStream.retryNow();
      return;
    }
    globalStream = new Stream({
      url: () => "/v1/api/events/global",
      onEvent: onGlobalEvent,
      probe: probeApi,
      onState: (state) => {
        if (state === "open") scheduleDashboard();
        renderGlobalConn();
      },
    });
    globalStream.start();
    // Workstreams created elsewhere are announced only by their first state change; a slow
    // poll keeps the list complete.
    setInterval(() => {
      if (globalStream.state === "open" && !document.hidden) scheduleDashboard();
    }, 20000);
  }

  // ---------------------------------------------------------------- one conversation pane

  class View {
    constructor(id) {
      this.id = id;
      this.el = el("div", { class: "pane", dataset: { wsId: id }, hidden: true });
      this.lastId = null; // last per-workstream event id seen
      this.fresh = true; // the current connection started without an id
      this.status = null;
      this.model = "";
      this.resetTurnState();
      this.stream = new Stream({
        url: () => {
          this.fresh = this.lastId === null;
          let u = "/v1/api/events?ws_id=" + encodeURIComponent(this.id);
          if (this.lastId !== null) u += "&last_event_id=" + this.lastId;
          return u;
        },
        onEvent: (ev, lastEventId) => {
          if (lastEventId !== "" && lastEventId !== undefined) {
            const n = Number(lastEventId);
            if (Number.isSafeInteger(n)) this.lastId = n;
          }
          this.handle(ev);
        },
        probe: async () => {
          try {
            const data = await api("/v1/api/workstreams");
            if (!(data.workstreams || []).some((w) => w.id === this.id)) {
              removeWs(this.id, "was closed");
              return "gone";
            }
            return "ok";
          } catch (e) {
            return e.status === 401 ? "auth" : "down";
          }
        },
        onState: () => {
          if (current === this.id) renderBanner();
        },
      });
    }

    resetTurnState() {
      this.assistant = null;
      this.reasoning = null;
      this.thinkingEl = null;
      this.tools = new Map();
      this.approvals = new Map(); // cycle_id (or request_id) -> approval block
      this.plans = new Map(); // request_id -> pending plan review block
    }

    clear() {
      this.el.replaceChildren();
      this.resetTurnState();
    }

    activate() {
      this.el.hidden = false;
      if (!this.stream.active) this.stream.start();
    }

    deactivate() {
      this.el.hidden = true;
      this.stream.stop();
    }

    // -- rendering primitives

    add(node) {
      const stick = isStuck();
      if (this.thinkingEl && this.thinkingEl.parentNode === this.el) this.el.insertBefore(node, this.thinkingEl);
      else this.el.append(node);
      if (stick) scrollToEnd();
      return node;
    }

    userMessage(text) {
      return this.add(el("div", { class: "msg user" }, el("div", { class: "bubble", text })));
    }

    line(kind, text) {
      const icon = kind === "error" ? "⚠" : "ℹ";
      return this.add(el("div", { class: "line " + kind }, el("span", { class: "line-icon", text: icon }), el("span", { text: stripAnsi(text) })));
    }

    setThinking(on) {
      if (on && !this.thinkingEl) {
        this.thinkingEl = el("div", { class: "thinking", "aria-label": "Thinking" }, el("span"), el("span"), el("span"));
        const stick = isStuck();
        this.el.append(this.thinkingEl);
        if (stick) scrollToEnd();
      } else if (!on && this.thinkingEl) {
        this.thinkingEl.remove();
        this.thinkingEl = null;
      }
    }

    ensureAssistant() {
      if (!this.assistant) {
        const body = el("div", { class: "md" });
        const node = el("div", { class: "msg assistant streaming" }, el("div", { class: "avatar", "aria-hidden": "true", text: "T" }), body);
        this.add(node);
        this.assistant = { node, body, text: "", dirty: false };
      }
      return this.assistant;
    }

    appendContent(text) {
      if (!text) return;
      const a = this.ensureAssistant();
      a.text += text;
      if (this.reasoning) this.reasoning.node.open = false;
      this.scheduleRender(a);
    }

    scheduleRender(a) {
      if (a.dirty) return;
      a.dirty = true;
      requestAnimationFrame(() => this.renderAssistant(a));
    }

    renderAssistant(a) {
      a.dirty = false;
      const stick = isStuck();
      a.body.innerHTML = md.render(a.text);
      if (stick) scrollToEnd();
    }

    appendReasoning(text) {
      if (!text) return;
      if (!this.reasoning) {
        const body = el("div", { class: "reasoning-body" });
        const node = el("details", { class: "reasoning", open: true }, el("summary", { text: "Reasoning" }), body);
        this.add(node);
        this.reasoning = { node, body };
      }
      this.reasoning.body.textContent += text;
      if (isStuck()) scrollToEnd();
    }

    endSegment() {
      if (this.assistant) {
        this.renderAssistant(this.assistant);
        this.assistant.node.classList.remove("streaming");
        this.assistant.node.dataset.final = "1";
      }
      if (this.reasoning) this.reasoning.node.open = false;
      this.assistant = null;
      this.reasoning = null;
    }

    // -- tools

    toolBlock(item, status) {
      const existing = this.tools.get(item.call_id);
      if (existing && !existing.done) {
        if (status) existing.setStatus(status);
        return existing;
      }
      const title = stripAnsi(item.header || item.func_name || "tool").replace(/^\s*⚙\s*/, "");
      const badge = el("span", { class: "badge" });
      // The effect receipt of a call whose batch was interrupted (turn_complete.receipts).
      const effect = el("span", { class: "badge effect", hidden: true });
      const output = el("pre", { class: "tool-output", hidden: true });
      const previewText = stripAnsi(item.preview || "").trim();
      // The header usually repeats a one-line preview already.
      const preview = previewText && !title.includes(previewText) ? el("pre", { class: "tool-preview", text: previewText }) : null;
      const node = el("div", { class: "tool", dataset: { callId: item.call_id || "" } },
        el("div", { class: "tool-head" }, el("span", { class: "tool-icon", "aria-hidden": "true", text: "⚙" }), el("span", { class: "tool-title", text: title }), badge, effect),
        preview, output);
      const block = {
        node, output, done: false, text: "",
        setStatus(s) {
          node.dataset.status = s;
          badge.textContent = { auto: "auto-approved", pending: "awaiting approval", running: "running", done: "done", error: "error", denied: "denied", blocked: "blocked", stopped: "stopped" }[s] || s;
        },
        setEffect(status) {
          if (!status) return;
          node.dataset.effect = status;
          effect.hidden = false;
          effect.textContent = "effect: " + String(status).replace("_", " ");
          effect.title = EFFECT_HINTS[status] || "";
        },
      };
      block.setStatus(status || "running");
      if (item.error) {
        block.setStatus("blocked");
        node.classList.add("is-error");
        output.hidden = false;
        output.textContent = stripAnsi(item.error);
        block.done = true;
      }
      this.add(node);
      if (item.call_id) this.tools.set(item.call_id, block);
      return block;
    }

    toolChunk(callId, chunk) {
      const block = this.tools.get(callId) || this.toolBlock({ call_id: callId, header: "tool" }, "running");
      block.setStatus("running");
      block.output.hidden = false;
      block.text += chunk;
      block.output.textContent = stripAnsi(block.text);
      if (isStuck()) scrollToEnd();
    }

    toolResult(ev) {
      let block = this.tools.get(ev.call_id);
      if (!block || block.done) block = this.toolBlock({ call_id: ev.call_id, header: ev.name }, "running");
      block.output.hidden = false;
      block.output.textContent = stripAnsi(ev.output || "") || "(no output)";
      block.done = true;
      block.setStatus(ev.is_error ? "error" : "done");
      block.node.classList.toggle("is-error", Boolean(ev.is_error));
      if (isStuck()) scrollToEnd();
    }

    // The receipts of a turn's interrupted batches: a badge on each call's block; a call
    // stopped before its result arrived is marked stopped.
    receipts(list) {
      for (const r of list || []) {
        const block = this.tools.get(r.call_id);
        if (!block) continue;
        if (!block.done && r.status !== "completed") {
          block.setStatus("stopped");
          block.done = true;
        }
        block.setEffect(r.status);
      }
    }

    // -- approvals and plans

    // One block per approval round: several may be pending at once (sub-agents asking
    // through this workstream), each keyed by its cycle_id and approving only its round.
    // A sub-agent's items have call ids `<agent>/<call_id>`: their progress shows in the
    // sub-agent's own tool block, so they get no tool block of their own.
    approval(ev) {
      const subAgentCall = (id) => String(id || "").includes("/");
      for (const item of ev.items || []) {
        if (!subAgentCall(item.call_id)) this.toolBlock(item, item.needs_approval ? "pending" : "auto");
      }
      const key = ev.cycle_id || ev.request_id || JSON.stringify((ev.items || []).map((i) => i.call_id));
      if (this.approvals.has(key)) return;
      const needing = (ev.items || []).filter((i) => i.needs_approval);
      const labels = [...new Set(needing.map((i) => i.approval_label || i.func_name))].filter(Boolean);
      const agents = [...new Set(needing.filter((i) => subAgentCall(i.call_id)).map((i) => i.call_id.split("/")[0]))];
      const feedback = el("input", { class: "feedback", type: "text", placeholder: "Feedback for the model (optional)", "aria-label": "Feedback" });
      const outcome = el("div", { class: "outcome", hidden: true });
      const buttons = [
        el("button", { type: "button", class: "btn success", dataset: { action: "approve" }, text: "Approve" }),
        el("button", { type: "button", class: "btn", dataset: { action: "always" }, title: "Approve now and from now on for " + (labels.join(", ") || "these tools"), text: "Always allow" }),
        el("button", { type: "button", class: "btn danger", dataset: { action: "deny" }, text: "Deny" }),
      ];
      const risk = (i) => i.verdict && i.verdict.risk_level
        ? el("span", { class: "risk", dataset: { risk: i.verdict.risk_level }, title: i.verdict.reasoning || "", text: i.verdict.risk_level + " risk" })
        : "";
      // One row per item awaiting the decision; an LLM verdict (`intent_verdict`) joins its row.
      const rows = new Map();
      const list = el("ul", { class: "approval-items" }, ...needing.map((i) => {
        const li = el("li", { dataset: { callId: i.call_id || "" } }, el("code", { text: stripAnsi(i.header || i.func_name).replace(/^\s*⚙\s*/, "") }), " ", risk(i));
        rows.set(i.call_id, li);
        return li;
      }));
      const icon = el("span", { class: "approval-icon", "aria-hidden": "true", text: "!" });
      const judging = el("span", { class: "judging", hidden: !ev.judge_pending, text: "judge reviewing…" });
      const node = el("div", { class: "approval", role: "group", "aria-label": "Approval", dataset: { cycleId: ev.cycle_id || "" } },
        el("div", { class: "approval-title" }, icon, "Approval needed" + (labels.length ? " — " + labels.join(", ") : "") + (agents.length ? " (sub-agent " + agents.join(", ") + ")" : ""), " ", judging),
        list, feedback, el("div", { class: "actions" }, ...buttons), outcome);
      const block = {
        node, decided: false, rows, judging, judged: new Set(),
        resolve: (approved, text) => {
          block.decided = true;
          judging.hidden = true;
          for (const b of buttons) b.disabled = true;
          feedback.disabled = true;
          node.classList.add(approved ? "approved" : "denied");
          icon.textContent = approved ? "✓" : "✕";
          outcome.hidden = false;
          outcome.textContent = (approved ? "✓ Approved" : "✕ Denied") + (text ? " — " + text : "");
          for (const item of needing) {
            const t = this.tools.get(item.call_id);
            if (t && !t.done) {
              if (approved) t.setStatus("running");
              else {
                t.setStatus("denied");
                t.done = true;
              }
            }
          }
        },
      };
      const decide = async (action) => {
        if (block.decided) return;
        for (const b of buttons) b.disabled = true;
        feedback.disabled = true;
        const body = { ws_id: this.id, approved: action !== "deny", always: action === "always" };
        // This block's round exactly (a node without rounds: its request, else the oldest).
        if (ev.cycle_id) body.cycle_id = ev.cycle_id;
        else if (ev.request_id) body.request_id = ev.request_id;
        if (feedback.value.trim()) body.feedback = feedback.value.trim();
        try {
          await api("/v1/api/approve", body);
        } catch (e) {
          if (e.status === 409 && e.body && e.body.verdict) {
            block.resolve(e.body.verdict.approved, e.body.verdict.feedback);
            return;
          }
          for (const b of buttons) b.disabled = false;
          feedback.disabled = false;
          toast("Approval failed: " + e.message, "error");
        }
      };
      for (const b of buttons) b.addEventListener("click", () => decide(b.dataset.action));
      feedback.addEventListener("keydown", (e) => {
        if (e.key === "Enter") {
          e.preventDefault();
          decide(feedback.value.trim() ? "deny" : "approve");
        }
      });
      this.add(node);
      this.approvals.set(key, block);
    }

    // An LLM judge verdict on one call of an approval (possibly after the decision).
    intentVerdict(ev) {
      const block = [...this.approvals.values()].find((b) => b.rows && b.rows.has(ev.call_id));
      if (!block) return;
      const li = block.rows.get(ev.call_id);
      const old = li.querySelector(".risk.llm");
      if (old) old.remove();
      const pct = typeof ev.confidence === "number" ? " " + Math.round(ev.confidence * 100) + "%" : "";
      li.append(" ", el("span", {
        class: "risk llm",
        dataset: { risk: ev.risk_level || "" },
        title: [ev.intent_summary, ev.reasoning].filter(Boolean).join(" — "),
        text: "judge: " + (ev.risk_level || "?") + " risk, " + (ev.recommendation || "?") + pct,
      }));
      block.judged.add(ev.call_id);
      if (block.judged.size >= block.rows.size) block.judging.hidden = true;
    }

    // The output guard flagged a tool result: a note on the call's block.
    outputWarning(ev) {
      const block = this.tools.get(ev.call_id) || this.toolBlock({ call_id: ev.call_id, header: ev.func_name }, "running");
      const flags = (ev.flags || []).join(", ") || "flagged";
      const note = el("div", {
        class: "guard-warning",
        dataset: { risk: ev.risk_level || "" },
        title: (ev.annotations || []).join("\n"),
        text: "⚠ output guard: " + flags + (ev.redacted ? " — secrets redacted" : ""),
      });
      block.node.insertBefore(note, block.output);
    }

    // The round `approval_resolved` names (a node without rounds: the oldest undecided).
    resolveApproval(ev) {
      const block = (ev.cycle_id && this.approvals.get(ev.cycle_id))
        || [...this.approvals.values()].find((b) => !b.decided);
      if (block && !block.decided) block.resolve(ev.approved, ev.feedback);
    }

    // A plan from plan_agent awaiting review: Accept, Refine (with the feedback text) or
    // Reject. Replayed on attach (the node re-sends the pending plan_review), keyed by its
    // request_id so a replay never shows it twice; removed when `plan_resolved` arrives.
    planReview(ev) {
      const key = ev.request_id || ev.content || "";
      if (this.plans.has(key)) return;
      const feedback = el("textarea", { class: "feedback", rows: "2", placeholder: "What should change? (for Refine)", "aria-label": "Plan feedback" });
      const outcome = el("div", { class: "outcome", hidden: true });
      const buttons = [
        el("button", { type: "button", class: "btn success", dataset: { action: "accept" }, text: "Accept" }),
        el("button", { type: "button", class: "btn", dataset: { action: "refine" }, title: "Revise the plan with your feedback", text: "Refine" }),
        el("button", { type: "button", class: "btn danger", dataset: { action: "reject" }, text: "Reject" }),
      ];
      const body = el("div", { class: "md" });
      body.innerHTML = md.render(ev.content || "");
      const node = el("div", { class: "approval plan", role: "group", "aria-label": "Plan review", dataset: { requestId: ev.request_id || "" } },
        el("div", { class: "approval-title" }, el("span", { class: "approval-icon plan-icon", "aria-hidden": "true", text: "✓" }), "Plan review"),
        body, feedback, el("div", { class: "actions" }, ...buttons), outcome);
      const block = { node, key };
      const enable = (on) => {
        for (const b of buttons) b.disabled = !on;
        feedback.disabled = !on;
      };
      const decide = async (action) => {
        const text = feedback.value.trim();
        if (action === "refine" && !text) {
          feedback.focus();
          toast("Write what should change first", "info");
          return;
        }
        const sent = action === "accept" ? "" : action === "reject" ? "reject" : text;
        enable(false);
        const req = { ws_id: this.id, feedback: sent };
        if (ev.request_id) req.request_id = ev.request_id;
        try {
          await api("/v1/api/plan", req);
          outcome.hidden = false;
          outcome.textContent = "Sent…";
        } catch (e) {
          if (e.status === 409 && e.body && e.body.verdict) {
            // Decided elsewhere (another tab, the bridge): show how.
            this.resolvePlan(Object.assign({ request_id: ev.request_id }, e.body.verdict), key);
            return;
          }
          enable(true);
          toast("Plan reply failed: " + e.message, "error");
        }
      };
      for (const b of buttons) b.addEventListener("click", () => decide(b.dataset.action));
      this.add(node);
      this.plans.set(key, block);
    }

    resolvePlan(ev, key) {
      const k = key || ev.request_id || "";
      const block = this.plans.get(k);
      if (!block) return;
      this.plans.delete(k);
      block.node.remove();
      const label = { accept: "Plan accepted", reject: "Plan rejected", refine: "Plan changes requested" }[ev.decision] || "Plan review closed";
      const why = ev.decision === "refine" || (ev.decided_by && ev.decided_by !== "user") ? ev.feedback : "";
      const line = this.line("info", label + (why ? " — " + why : ""));
      line.classList.add("plan-outcome");
      line.dataset.decision = ev.decision || "";
    }

    // -- history (attach without an id)

    renderHistory(messages) {
      this.clear();
      let queue = [];
      for (const m of messages || []) {
        const content = typeof m.content === "string" ? m.content
          : Array.isArray(m.content) ? m.content.map((p) => (p && p.text) || "").join("") : "";
        if (m.role === "user") {
          this.userMessage(content);
        } else if (m.role === "assistant") {
          if (content) {
            const a = this.ensureAssistant();
            a.text = content;
            this.endSegment();
          }
          queue = [];
          for (const call of m.tool_calls || []) {
            let summary = call.arguments || "";
            try {
              const args = JSON.parse(call.arguments || "{}");
              summary = typeof args.command === "string" ? args.command : JSON.stringify(args);
            } catch (e) {
              // keep the raw text
            }
            if (summary.length > 160) summary = summary.slice(0, 157) + "…";
            const block = this.toolBlock({ call_id: call.id, header: call.name + (summary ? ": " + summary : "") }, m.pending ? "pending" : m.denied ? "denied" : "done");
            if (m.denied && !m.pending) block.done = true;
            queue.push(block);
          }
        } else if (m.role === "tool") {
          const block = queue.shift();
          if (block) {
            block.output.hidden = false;
            block.output.textContent = stripAnsi(content) || "(no output)";
            block.done = true;
            block.setStatus(m.denied ? "denied" : m.receipt ? "stopped" : m.is_error ? "error" : "done");
            block.node.classList.toggle("is-error", Boolean(m.is_error));
            block.setEffect(m.receipt);
          }
        }
      }
      scrollToEnd();
    }

    // -- the event switch

    handle(ev) {
      switch (ev.type) {
        case "connected":
          if (this.fresh) this.clear();
          this.model = ev.model_alias || ev.model || "";
          if (this.model) nodeModel = this.model;
          this.posture = ev.posture || "ask";
          renderHeader();
          break;
        case "history":
          this.renderHistory(ev.messages);
          break;
        case "clear_ui":
          this.clear();
          break;
        case "state_change":
        case "ws_state":
          upsertWs(Object.assign({ id: this.id }, ev.type === "ws_state" ? ev : { state: ev.state }));
          if (ev.state === "idle" || ev.state === "error") {
            this.endSegment();
            this.setThinking(false);
          }
          renderAll();
          break;
        case "thinking_start":
          this.setThinking(true);
          break;
        case "thinking_stop":
          this.setThinking(false);
          break;
        case "reasoning":
          this.appendReasoning(ev.text);
          break;
        case "content":
          this.appendContent(ev.text);
          break;
        case "stream_end":
          this.endSegment();
          break;
        case "tool_info":
          this.endSegment();
          for (const item of ev.items || []) this.toolBlock(item, item.error ? "blocked" : "auto");
          break;
        case "approve_request":
          this.endSegment();
          this.approval(ev);
          break;
        case "approval_resolved":
          this.resolveApproval(ev);
          break;
        case "intent_verdict":
          this.intentVerdict(ev);
          break;
        case "output_warning":
          this.outputWarning(ev);
          break;
        case "tool_output_chunk":
          this.toolChunk(ev.call_id, ev.chunk || "");
          break;
        case "tool_result":
          this.toolResult(ev);
          break;
        case "status":
          this.status = ev;
          renderHeader();
          break;
        case "plan_review":
          this.endSegment();
          this.planReview(ev);
          break;
        case "plan_resolved":
          this.resolvePlan(ev);
          break;
        case "info":
          this.line("info", ev.message);
          break;
        case "error":
        case "busy_error":
          this.line("error", ev.message);
          break;
        case "cancelled":
          this.setThinking(false);
          break;
        case "turn_complete":
          this.endSegment();
          this.receipts(ev.receipts);
          this.setThinking(false);
          if (current === this.id) refreshQueue();
          break;
        case "preview":
          // preview.js opens its pane (for the workstream on screen).
          window.dispatchEvent(new CustomEvent("turnstone:preview", {
            detail: Object.assign({}, ev, { ws_id: this.id, current: current === this.id }),
          }));
          break;
        case "events_truncated":
          // Too far behind to resume: attach afresh and let `history` rebuild the pane.
          this.lastId = null;
          this.stream.open();
          break;
        default:
          break;
      }
    }
  }

  function viewFor(id) {
    let v = views.get(id);
    if (!v) {
      v = new View(id);
      views.set(id, v);
      $("conversation").append(v.el);
    }
    return v;
  }

  // ---------------------------------------------------------------- scrolling

  function isStuck() {
    const c = $("conversation");
    return c.scrollHeight - c.scrollTop - c.clientHeight < 80;
  }

  function scrollToEnd() {
    const c = $("conversation");
    c.scrollTop = c.scrollHeight;
  }

  // ---------------------------------------------------------------- selection and URL

  function select(id, opts) {
    opts = opts || {};
    if (!wsMap.has(id)) return;
    if (!openTabs.includes(id)) {
      openTabs.push(id);
      saveTabs();
    }
    if (current !== id) {
      if (current && views.has(current)) views.get(current).deactivate();
      current = id;
      viewFor(id).activate();
      refreshQueue();
      if (window.TurnstonePreview) window.TurnstonePreview.showFor(id);
      scrollToEnd();
    }
    const url = new URL(window.location.href);
    if (url.searchParams.get("ws_id") !== id) {
      url.searchParams.set("ws_id", id);
      if (opts.replace || opts.fromHistory) {
        if (!opts.fromHistory) history.replaceState({ ws_id: id }, "", url);
      } else {
        history.pushState({ ws_id: id }, "", url);
      }
    }
    renderAll();
    if (!opts.fromHistory) $("input").focus();
  }

  function closeTab(id) {
    const idx = openTabs.indexOf(id);
    if (idx < 0) return;
    openTabs.splice(idx, 1);
    saveTabs();
    const view = views.get(id);
    if (view) {
      view.stream.stop();
      view.el.remove();
      views.delete(id);
    }
    if (current === id) {
      current = null;
      const next = openTabs[Math.min(idx, openTabs.length - 1)];
      if (next) select(next, { replace: true });
      else {
        const url = new URL(window.location.href);
        url.searchParams.delete("ws_id");
        history.replaceState({}, "", url);
      }
    }
    renderAll();
  }

  window.addEventListener("popstate", (e) => {
    const id = (e.state && e.state.ws_id) || new URL(window.location.href).searchParams.get("ws_id");
    if (id && wsMap.has(id)) select(id, { fromHistory: true });
  });

  // ---------------------------------------------------------------- rendering

  function stateDot(state) {
    return el("span", { class: "state-dot", dataset: { state: state || "idle" }, title: STATE_LABELS[state] || state });
  }

  function renderSidebar() {
    const list = $("ws-list");
    list.replaceChildren();
    for (const ws of wsMap.values()) {
      const activity = stripAnsi(ws.activity).replace(/^\s*\u23f3\s*/, "") || STATE_LABELS[ws.state] || ws.state;
      const li = el("li", {
        class: "ws-item" + (ws.id === current ? " active" : "") + (openTabs.includes(ws.id) ? " open" : ""),
        role: "option",
        "aria-selected": ws.id === current ? "true" : "false",
        tabindex: "0",
        dataset: { wsId: ws.id, state: ws.state },
        onclick: () => select(ws.id),
        onkeydown: (e) => {
          if (e.key === "Enter" || e.key === " ") {
            e.preventDefault();
            select(ws.id);
          }
        },
      },
      stateDot(ws.state),
      el("div", { class: "ws-text" },
        el("div", { class: "ws-name-row" }, el("span", { class: "ws-name", text: ws.name || ws.id }), el("span", { class: "ws-tokens", title: "Tokens used", text: ws.tokens ? formatTokens(ws.tokens) + " tok" : "" })),
        el("div", { class: "ws-activity", dataset: { activityState: ws.activity_state || "" }, text: activity })));
      list.append(li);
    }
    $("ws-count").textContent = String(wsMap.size);
    const agg = $("aggregate");
    agg.replaceChildren();
    if (aggregate) {
      const active = [...wsMap.values()].filter((w) => w.state !== "idle").length;
      agg.append(
        el("span", {}, el("b", { text: String(active) }), " active"),
        el("span", {}, el("b", { text: formatTokens([...wsMap.values()].reduce((n, w) => n + (w.tokens || 0), 0)) }), " tokens"));
    }
    $("node-model").textContent = nodeModel ? "model · " + nodeModel : "node";
  }

  function renderTabs() {
    const tabs = $("tabs");
    tabs.replaceChildren();
    for (const id of openTabs) {
      const ws = wsMap.get(id);
      if (!ws) continue;
      const tab = el("div", {
        class: "tab" + (id === current ? " active" : ""),
        role: "tab",
        "aria-selected": id === current ? "true" : "false",
        tabindex: "0",
        dataset: { wsId: id },
        onclick: () => select(id),
      },
      stateDot(ws.state),
      el("span", { class: "tab-name", text: ws.name || id }),
      el("button", {
        type: "button", class: "tab-close", title: "Close tab (the workstream keeps running)", "aria-label": "Close tab", text: "×",
        onclick: (e) => {
          e.stopPropagation();
          closeTab(id);
        },
      }));
      tabs.append(tab);
    }
    tabs.hidden = openTabs.length === 0;
  }

  function renderHeader() {
    const ws = current ? wsMap.get(current) : null;
    const view = current ? views.get(current) : null;
    $("ws-name").textContent = ws ? ws.name || ws.id : "No workstream";
    $("ws-state-dot").dataset.state = ws ? ws.state : "idle";
    $("ws-state-label").textContent = ws ? STATE_LABELS[ws.state] || ws.state : "";
    $("ws-state-label").dataset.state = ws ? ws.state : "idle";
    $("cancel-btn").disabled = !ws || ws.state === "idle";
    $("close-btn").disabled = !ws;
    $("posture-select").disabled = !ws;
    $("posture-select").value = (view && view.posture) || "ask";
    const planOn = Boolean(view && view.status && view.status.plan_mode);
    $("plan-btn").disabled = !ws;
    $("plan-btn").setAttribute("aria-pressed", planOn ? "true" : "false");
    $("plan-btn").textContent = planOn ? "Plan mode: on" : "Plan";
    $("input").disabled = !ws;
    $("send-btn").disabled = !ws;
    $("empty-state").hidden = Boolean(ws);
    const usage = $("ws-usage");
    if (view && view.status) {
      usage.textContent = formatTokens(view.status.total_tokens) + " tokens · " + view.status.pct + "% context";
      usage.title = view.status.prompt_tokens + " prompt + " + view.status.completion_tokens + " completion of " + view.status.context_window;
    } else if (ws && ws.tokens) {
      usage.textContent = formatTokens(ws.tokens) + " tokens";
      usage.title = "";
    } else {
      usage.textContent = "";
    }
    document.title = ws ? (ws.state === "attention" ? "⏳ " : "") + (ws.name || ws.id) + " · Turnstone" : "Turnstone";
  }

  let bannerTick = null;
  function renderBanner() {
    const banner = $("reconnect-banner");
    const view = current ? views.get(current) : null;
    const s = view ? view.stream : null;
    const down = s && (s.state === "retrying" || s.state === "reconnecting");
    banner.hidden = !down;
    banner.dataset.state = s ? s.state : "idle";
    if (down) {
      const secs = Math.max(0, Math.ceil((s.retryAt - Date.now()) / 1000));
      $("reconnect-text").textContent = s.state === "retrying" && secs > 0
        ? "Connection lost. Reconnecting in " + secs + " s…"
        : "Reconnecting…";
      if (!bannerTick) bannerTick = setInterval(renderBanner, 500);
    } else if (bannerTick) {
      clearInterval(bannerTick);
      bannerTick = null;
    }
  }

  function renderGlobalConn() {
    const box = $("global-conn");
    const s = globalStream ? globalStream.state : "connecting";
    const shown = s === "open" ? "open" : s === "retrying" || s === "reconnecting" ? "reconnecting" : s === "auth" ? "auth" : "connecting";
    box.dataset.state = shown;
    box.querySelector(".label").textContent = { open: "Live", reconnecting: "Reconnecting…", auth: "Signed out", connecting: "Connecting…" }[shown];
  }

  function renderAll() {
    renderSidebar();
    renderTabs();
    renderHeader();
    renderBanner();
    renderGlobalConn();
    $("logout").hidden = !auth.required;
  }

  // ---------------------------------------------------------------- actions

  async function createWorkstream() {
    const button = $("new-ws");
    button.disabled = true;
    try {
      const data = await api("/v1/api/workstreams/new", {});
      upsertWs({ id: data.ws_id, name: data.name, state: "idle" });
      select(data.ws_id);
    } catch (e) {
      if (e.status !== 401) toast("Could not create a workstream: " + e.message, "error");
    } finally {
      button.disabled = false;
    }
  }

  async function closeWorkstream() {
    if (!current) return;
    const id = current;
    try {
      await api("/v1/api/workstreams/close", { ws_id: id });
      removeWs(id, null);
    } catch (e) {
      if (e.status !== 401) toast(e.message, "error");
    }
  }

  // The posture applies from the workstream's next tool batch; `full` needs the approve scope.
  async function setPosture() {
    if (!current) return;
    const view = views.get(current);
    const select = $("posture-select");
    try {
      const reply = await api("/v1/api/workstreams/" + encodeURIComponent(current) + "/posture", { posture: select.value });
      if (view) view.posture = reply.posture;
    } catch (e) {
      if (e.status !== 401) toast("Posture not changed: " + e.message, "error");
    }
    renderHeader();
  }

  // Plan mode (read-only tools) is entered and left with the `/plan` command; the node
  // answers with an info line and a `status` event carrying `plan_mode`.
  async function togglePlan() {
    if (!current) return;
    const view = views.get(current);
    const on = Boolean(view && view.status && view.status.plan_mode);
    try {
      await api("/v1/api/command", { ws_id: current, command: on ? "/plan off" : "/plan on" });
    } catch (e) {
      if (e.status !== 401) toast("Plan mode not changed: " + e.message, "error");
    }
  }

  async function cancelTurn() {
    if (!current) return;
    try {
      await api("/v1/api/cancel", { ws_id: current });
    } catch (e) {
      if (e.status !== 401) toast("Cancel failed: " + e.message, "error");
    }
  }

  async function sendMessage() {
    const input = $("input");
    const text = input.value.trim();
    if (!text || !current) return;
    const id = current;
    const view = viewFor(id);
    input.value = "";
    autosize();
    scrollToEnd();
    if (text.startsWith("/")) {
      view.add(el("div", { class: "line command" }, el("span", { class: "line-icon", text: "›" }), el("code", { text })));
      try {
        await api("/v1/api/command", { ws_id: id, command: text });
      } catch (e) {
        if (e.status !== 401) view.line("error", e.message);
      }
      return;
    }
    const bubble = view.userMessage(text);
    try {
      // Opt in to the workstream's queue: a message sent while a turn runs waits for its
      // own turn instead of being refused.
      const data = await api("/v1/api/send", { ws_id: id, message: text, queue: true });
      if (data && data.status === "busy") {
        bubble.classList.add("failed");
        view.line("error", "Not sent: " + (data.reason || "the workstream is busy"));
      } else if (data && data.status === "queued") {
        bubble.classList.add("queued");
        view.line("info", "Queued (position " + data.position + "): it runs when the turns before it end.");
        if (current === id) refreshQueue();
      }
    } catch (e) {
      bubble.classList.add("failed");
      if (e.status !== 401) view.line("error", "Not sent: " + e.message);
    }
  }

  // ---------------------------------------------------------------- queue

  /** Lists the current workstream's queued messages above the composer, each removable. */
  async function refreshQueue() {
    const list = $("queue-list");
    if (!list) return;
    const id = current;
    if (!id) {
      list.hidden = true;
      return;
    }
    let data;
    try {
      data = await api("/v1/api/workstreams/" + encodeURIComponent(id) + "/queue");
    } catch (e) {
      return;
    }
    if (current !== id) return;
    const queued = (data && data.queued) || [];
    list.replaceChildren(...queued.map((m, i) => el("li", { class: "queued-item" },
      el("span", { class: "queued-pos", text: "#" + (i + 1) }),
      el("span", { class: "queued-text", text: m.message, title: m.queued_at }),
      el("button", {
        type: "button",
        class: "link-btn",
        text: "Remove",
        title: "Remove this message from the queue (it will not run)",
        onclick: async () => {
          try {
            await api("/v1/api/workstreams/" + encodeURIComponent(id) + "/queue/" +
              encodeURIComponent(m.correlation_id), undefined, "DELETE");
          } catch (e) {
            if (e.status !== 401 && views.has(id)) views.get(id).line("error", "Not removed: " + e.message);
          }
          refreshQueue();
        },
      }))));
    list.hidden = queued.length === 0;
  }

  function autosize() {
    const input = $("input");
    input.style.height = "auto";
    input.style.height = Math.min(input.scrollHeight, 240) + "px";
  }

  // ---------------------------------------------------------------- theme

  function applyTheme() {
    const saved = localStorage.getItem(THEME_KEY);
    if (saved === "light" || saved === "dark") document.documentElement.dataset.theme = saved;
    else delete document.documentElement.dataset.theme;
  }

  function toggleTheme() {
    const explicit = document.documentElement.dataset.theme;
    const dark = explicit ? explicit === "dark" : window.matchMedia("(prefers-color-scheme: dark)").matches;
    localStorage.setItem(THEME_KEY, dark ? "light" : "dark");
    applyTheme();
  }

  // ---------------------------------------------------------------- start-up

  function bindUi() {
    $("new-ws").addEventListener("click", createWorkstream);
    $("close-btn").addEventListener("click", closeWorkstream);
    $("cancel-btn").addEventListener("click", cancelTurn);
    $("posture-select").addEventListener("change", setPosture);
    $("plan-btn").addEventListener("click", togglePlan);
    $("theme-toggle").addEventListener("click", toggleTheme);
    $("logout").addEventListener("click", logout);
    $("reconnect-now").addEventListener("click", () => {
      const v = current && views.get(current);
      if (v) v.stream.retryNow();
    });
    $("composer").addEventListener("submit", (e) => {
      e.preventDefault();
      sendMessage();
    });
    const input = $("input");
    input.addEventListener("keydown", (e) => {
      if (e.key === "Enter" && !e.shiftKey && !e.isComposing) {
        e.preventDefault();
        sendMessage();
      }
    });
    input.addEventListener("input", autosize);
    $("login-form").addEventListener("submit", async (e) => {
      e.preventDefault();
      let credentials;
      if (auth.mode === "setup") {
        const code = $("setup-code").value.trim();
        const user = {
          username: $("setup-username").value.trim(),
          display_name: $("setup-display-name").value.trim(),
          password: $("setup-password").value,
        };
        if (!code || !user.username || !user.display_name || !user.password) {
          $("login-error").textContent = "Fill in the setup code, username, display name and password";
          return;
        }
        credentials = { setup: { code, user } };
      } else if (auth.mode === "password") {
        const username = $("login-username").value.trim();
        const password = $("login-password").value;
        if (!username || !password) {
          $("login-error").textContent = "Enter your username and password";
          return;
        }
        credentials = { username, password };
      } else {
        const token = $("login-token").value.trim();
        if (!token) {
          $("login-error").textContent = "Paste your token";
          return;
        }
        credentials = { token };
      }
      const submit = $("login-submit");
      submit.disabled = true;
      $("login-error").textContent = "";
      try {
        if (credentials.setup) {
          await setupFirstUser(credentials.setup.code, credentials.setup.user);
        } else {
          await login(credentials);
        }
        $("login-overlay").hidden = true;
        $("login-token").value = "";
        $("login-password").value = "";
        $("setup-code").value = "";
        $("setup-password").value = "";
        await afterLogin();
      } catch (err) {
        $("login-error").textContent = err.message || "Sign-in failed";
      } finally {
        submit.disabled = false;
      }
    });
    $("login-mode").addEventListener("click", () => {
      $("login-error").textContent = "";
      setLoginMode(auth.mode === "token" ? "password" : "token");
    });
    window.addEventListener("online", () => {
      for (const s of allStreams()) s.retryNow();
    });
  }

  async function afterLogin() {
    const waiting = auth.waiting;
    auth.waiting = [];
    await start();
    for (const s of waiting) s.retryNow();
    const v = current && views.get(current);
    if (v && !v.stream.active) v.stream.start();
  }

  // Whether this node wants credentials at all (decides if "Sign out" is offered).
  async function checkAuthStatus() {
    try {
      const resp = await fetch("/v1/api/auth/status", { credentials: "same-origin", cache: "no-store" });
      if (resp.ok) {
        const body = await resp.json();
        if (body && body.auth_enabled) auth.required = true;
        auth.hasUsers = Boolean(body && body.has_users);
        auth.setupRequired = Boolean(body && body.setup_required);
      }
    } catch (e) {
      // Unknown: a 401 later still shows the login form.
    }
  }

  async function start() {
    await checkAuthStatus();
    try {
      await refreshDashboard();
    } catch (e) {
      if (e.status !== 401) toast(e.message, "error");
      renderAll();
      return;
    }
    startGlobal();
    const wanted = new URL(window.location.href).searchParams.get("ws_id");
    const first = (wanted && wsMap.has(wanted) && wanted) || openTabs.find((t) => wsMap.has(t)) || (wsMap.size ? wsMap.keys().next().value : null);
    if (first && current !== first) select(first, { replace: true });
    else renderAll();
  }

  // Debugging aid (also used by the browser test): drop every live stream as a network
  // failure would, to exercise reconnect and resume.
  window.turnstone = {
    dropStreams() {
      for (const s of allStreams()) s.drop();
    },
    streamStates() {
      const out = { global: globalStream ? { state: globalStream.state, delay: globalStream.delay } : null };
      for (const [id, v] of views) out[id] = { state: v.stream.state, delay: v.stream.delay, lastId: v.lastId };
      return out;
    },
  };

  applyTheme();
  bindUi();
  renderAll();
  start();
})();
