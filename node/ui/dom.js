// Small DOM helpers shared by the page's scripts (app.js and preview.js; loaded before them).

(function (global) {
  "use strict";

  // An element with attributes and children: `class`, `text` and `dataset` are set as such,
  // `on<event>` adds a listener, `true` is an empty attribute, and undefined, null or false
  // attributes and children are left out. A child that is not a node is shown as text.
  function el(tag, attrs, ...children) {
    const node = document.createElement(tag);
    for (const [k, v] of Object.entries(attrs || {})) {
      if (v === undefined || v === null || v === false) continue;
      if (k === "class") node.className = v;
      else if (k === "text") node.textContent = v;
      else if (k === "dataset") Object.assign(node.dataset, v);
      else if (k.startsWith("on")) node.addEventListener(k.slice(2), v);
      else node.setAttribute(k, v === true ? "" : v);
    }
    for (const c of children) {
      if (c === null || c === undefined) continue;
      node.append(c instanceof Node ? c : String(c));
    }
    return node;
  }

  global.TurnstoneDom = { el };
})(window);
