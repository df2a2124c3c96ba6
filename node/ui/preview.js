// Turnstone preview pane: content `open_preview` stored for a workstream, shown beside the
// conversation. app.js forwards each `preview` event of a workstream stream as a
// `turnstone:preview` window event ({ws_id, current, preview_id, kind, title, url}); the pane
// opens for the workstream on screen and remembers the latest preview of the others.
//
// Everything shown is untrusted: web pages load in an `<iframe sandbox>` (no scripts, an
// opaque origin) and the server adds `Content-Security-Policy: sandbox` with nothing remote
// allowed; the "Remote content" toggle reloads the page with `&remote=1` (remote images and
// styles, still no scripts). Text, markdown and tables are fetched and rendered as text
// nodes (markdown through the escaping renderer of markdown.js), never as HTML.

(function () {
  "use strict";

  const $ = (id) => document.getElementById(id);
  const latest = new Map(); // ws_id → last preview event
  let shown = null;

  const { el } = window.TurnstoneDom;

  // Only same-origin preview URLs of this node are ever loaded.
  function safeUrl(url) {
    return typeof url === "string" && url.startsWith("/v1/api/previews/") ? url : null;
  }

  // ------------------------------------------------------------------ tables

  // CSV/TSV with quoted fields ("a ""b""", embedded separators and newlines).
  function parseDelimited(text, sep) {
    const rows = [];
    let row = [];
    let field = "";
    let quoted = false;
    for (let i = 0; i < text.length; i++) {
      const c = text[i];
      if (quoted) {
        if (c === '"' && text[i + 1] === '"') { field += '"'; i++; }
        else if (c === '"') quoted = false;
        else field += c;
      } else if (c === '"' && field === "") quoted = true;
      else if (c === sep) { row.push(field); field = ""; }
      else if (c === "\n" || c === "\r") {
        if (c === "\r" && text[i + 1] === "\n") i++;
        row.push(field); field = "";
        rows.push(row); row = [];
      } else field += c;
    }
    if (field !== "" || row.length) { row.push(field); rows.push(row); }
    return rows.filter((r) => !(r.length === 1 && r[0] === ""));
  }

  // JSON as rows: an array of objects (columns = union of keys), an array of arrays, an
  // object (key/value), or one value.
  function jsonRows(value) {
    const cell = (v) => (v !== null && typeof v === "object" ? JSON.stringify(v) : String(v ?? ""));
    if (Array.isArray(value)) {
      if (value.length && value.every((r) => r && typeof r === "object" && !Array.isArray(r))) {
        const cols = [];
        for (const r of value) for (const k of Object.keys(r)) if (!cols.includes(k)) cols.push(k);
        return [cols, ...value.map((r) => cols.map((k) => cell(r[k])))];
      }
      if (value.every(Array.isArray)) return value.map((r) => r.map(cell));
      return [["value"], ...value.map((v) => [cell(v)])];
    }
    if (value && typeof value === "object") {
      return [["key", "value"], ...Object.entries(value).map(([k, v]) => [k, cell(v)])];
    }
    return [["value"], [cell(value)]];
  }

  function table(rows) {
    if (!rows.length) return el("p", { class: "preview-note", text: "(empty table)" });
    const [head, ...body] = rows;
    let sortCol = -1;
    let asc = true;
    const tbody = el("tbody");
    const fill = () => {
      tbody.replaceChildren(...body.map((r) => el("tr", {}, ...head.map((_, i) => el("td", { text: r[i] ?? "" })))));
    };
    const sortBy = (i) => {
      asc = sortCol === i ? !asc : true;
      sortCol = i;
      const num = (s) => (s.trim() !== "" && !isNaN(Number(s)) ? Number(s) : null);
      body.sort((a, b) => {
        const x = a[i] ?? "", y = b[i] ?? "";
        const nx = num(x), ny = num(y);
        const d = nx !== null && ny !== null ? nx - ny : x.localeCompare(y);
        return asc ? d : -d;
      });
      fill();
    };
    const thead = el("thead", {}, el("tr", {}, ...head.map((h, i) =>
      el("th", { title: "Sort", onclick: () => sortBy(i) }, h))));
    fill();
    return el("div", { class: "preview-table-wrap" }, el("table", { class: "preview-table" }, thead, tbody));
  }

  // ------------------------------------------------------------------ rendering

  async function fetchText(url) {
    const resp = await fetch(url, { credentials: "same-origin" });
    if (!resp.ok) throw new Error("HTTP " + resp.status);
    return resp.text();
  }

  async function body(p, remote) {
    const url = safeUrl(p.url);
    if (!url) return el("p", { class: "preview-note", text: "This preview has no address." });
    switch (p.kind) {
      case "web":
        return el("iframe", {
          class: "preview-frame",
          sandbox: "",
          referrerpolicy: "no-referrer",
          title: p.title || "Preview",
          src: remote ? url + "&remote=1" : url,
        });
      case "pdf":
        return el("div", { class: "preview-pdf" },
          el("iframe", { class: "preview-frame", title: p.title || "PDF", src: url }),
          el("a", { href: url, target: "_blank", rel: "noopener noreferrer", text: "Open the PDF in a new tab" }));
      case "image":
        return el("div", { class: "preview-image" }, el("img", { src: url, alt: p.title || "" }));
      case "table": {
        const text = await fetchText(url);
        if (/^\s*[[{]/.test(text)) {
          try {
            return table(jsonRows(JSON.parse(text)));
          } catch (_) {
            return el("pre", { class: "preview-text", text });
          }
        }
        const sep = text.split("\n", 1)[0].includes("\t") ? "\t" : ",";
        return table(parseDelimited(text, sep));
      }
      case "markdown": {
        const text = await fetchText(url);
        const md = window.TurnstoneMarkdown;
        const node = el("div", { class: "preview-markdown markdown" });
        if (md) node.innerHTML = md.render(text); // escapes everything it renders
        else node.textContent = text;
        return node;
      }
      default:
        return el("pre", { class: "preview-text", text: await fetchText(url) });
    }
  }

  async function show(p) {
    const pane = $("preview-pane");
    if (!pane) return;
    shown = p;
    const remote = p.kind === "web" && Boolean(p.remote);
    $("preview-title").textContent = p.title || "Preview";
    $("preview-kind").textContent = p.kind || "";
    const toggle = $("preview-remote");
    toggle.hidden = p.kind !== "web";
    toggle.textContent = remote ? "Remote content: on" : "Remote content: off";
    toggle.setAttribute("aria-pressed", String(remote));
    const open = $("preview-open");
    const url = safeUrl(p.url);
    open.hidden = !url;
    if (url) open.href = url;
    pane.hidden = false;
    $("app").classList.add("with-preview");
    const content = $("preview-body");
    content.replaceChildren(el("p", { class: "preview-note", text: "Loading…" }));
    try {
      const node = await body(p, remote);
      if (shown === p) content.replaceChildren(node);
    } catch (e) {
      if (shown === p) content.replaceChildren(el("p", { class: "preview-note error", text: "Could not load the preview: " + e.message }));
    }
  }

  function close() {
    shown = null;
    const pane = $("preview-pane");
    if (pane) pane.hidden = true;
    $("app").classList.remove("with-preview");
    $("preview-body").replaceChildren();
  }

  window.addEventListener("turnstone:preview", (e) => {
    const p = e.detail || {};
    if (!p.ws_id) return;
    latest.set(p.ws_id, p);
    if (p.current) show(p);
  });

  document.addEventListener("DOMContentLoaded", () => {
    $("preview-close").addEventListener("click", close);
    $("preview-remote").addEventListener("click", () => {
      if (shown && shown.kind === "web") show(Object.assign({}, shown, { remote: !shown.remote }));
    });
  });

  window.TurnstonePreview = {
    // Shows the latest preview of a workstream (e.g. when it comes on screen), if any.
    showFor(wsId) {
      const p = latest.get(wsId);
      if (p) show(p);
    },
    close,
    parseDelimited,
    jsonRows,
  };
})();
