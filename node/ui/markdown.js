// Turnstone's small Markdown renderer for streamed assistant text.
//
// Input is untrusted model output: every piece of text is HTML-escaped before any markup is
// produced, and links only keep http(s), mailto, relative and fragment targets. It renders
// partial text too (an unclosed ``` fence becomes an open code block), so the caller can
// re-render the whole message on every streamed delta.
//
// Supported: ATX headings, fenced code blocks, paragraphs, unordered and ordered lists
// (one nesting level by indentation), block quotes, horizontal rules, inline code, bold,
// italic, strikethrough, links and bare URLs.

(function (global) {
  "use strict";

  const ESCAPES = { "&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;", "'": "&#39;" };

  function escapeHtml(text) {
    return String(text).replace(/[&<>"']/g, (c) => ESCAPES[c]);
  }

  // Allowed link targets, checked on the *escaped* URL text.
  function safeHref(url) {
    const u = url.trim();
    if (/^(https?:\/\/|mailto:)/i.test(u)) return u;
    if (/^(\/(?!\/)|#|\.\.?\/)/.test(u)) return u;
    return null;
  }

  // Inline markup of one escaped line of text.
  function inline(escaped) {
    const slots = [];
    const keep = (html) => {
      slots.push(html);
      return "\u0000" + (slots.length - 1) + "\u0000";
    };
    let s = escaped;
    // Code spans first: nothing inside them is markup.
    s = s.replace(/(`+)([^`]|[^`][\s\S]*?[^`])\1(?!`)/g, (_, _ticks, code) =>
      keep("<code>" + code.trim() + "</code>"));
    // [text](url)
    s = s.replace(/\[([^\]]+)\]\(([^)\s]+)\)/g, (whole, text, url) => {
      const href = safeHref(url);
      if (!href) return whole;
      return keep('<a href="' + href + '" target="_blank" rel="noopener noreferrer">' +
        inlineEmphasis(text) + "</a>");
    });
    // Bare URLs.
    s = s.replace(/\bhttps?:\/\/[^\s<]*[^\s<.,;:!?)\]'"&]/g, (url) =>
      keep('<a href="' + url + '" target="_blank" rel="noopener noreferrer">' + url + "</a>"));
    s = inlineEmphasis(s);
    return s.replace(/\u0000(\d+)\u0000/g, (_, i) => slots[Number(i)]);
  }

  function inlineEmphasis(s) {
    return s
      .replace(/\*\*(?=\S)([\s\S]*?\S)\*\*/g, "<strong>$1</strong>")
      .replace(/__(?=\S)([\s\S]*?\S)__/g, "<strong>$1</strong>")
      .replace(/~~(?=\S)([\s\S]*?\S)~~/g, "<del>$1</del>")
      .replace(/(^|[^*\w])\*(?=[^\s*])([^*]*?[^\s*])\*(?!\*)/g, "$1<em>$2</em>")
      .replace(/(^|[^_\w])_(?=[^\s_])([^_]*?[^\s_])_(?![_\w])/g, "$1<em>$2</em>");
  }

  const FENCE = /^ {0,3}(`{3,}|~{3,})\s*([\w+#.-]*)\s*$/;
  const HEADING = /^ {0,3}(#{1,6})\s+(.*?)\s*#*\s*$/;
  const RULE = /^ {0,3}([-*_])(\s*\1){2,}\s*$/;
  const BULLET = /^(\s*)([-*+])\s+(.*)$/;
  const ORDERED = /^(\s*)(\d{1,9})[.)]\s+(.*)$/;
  const QUOTE = /^ {0,3}>\s?(.*)$/;

  function render(markdown) {
    const lines = String(markdown).replace(/\r\n?/g, "\n").split("\n");
    const out = [];
    let i = 0;
    let para = [];
    const flushPara = () => {
      if (para.length) {
        out.push("<p>" + para.map((l) => inline(escapeHtml(l))).join("<br>") + "</p>");
        para = [];
      }
    };
    while (i < lines.length) {
      const line = lines[i];
      let m;
      if ((m = FENCE.exec(line))) {
        flushPara();
        const marker = m[1];
        const lang = m[2];
        const body = [];
        i++;
        let closed = false;
        while (i < lines.length) {
          const close = lines[i].trim();
          if (close.startsWith(marker[0].repeat(marker.length)) && /^(`+|~+)$/.test(close)) {
            closed = true;
            i++;
            break;
          }
          body.push(lines[i]);
          i++;
        }
        out.push(
          '<pre class="code' + (closed ? "" : " open") + '"' +
          (lang ? ' data-lang="' + escapeHtml(lang) + '"' : "") + "><code>" +
          escapeHtml(body.join("\n")) + "</code></pre>");
        continue;
      }
      if (line.trim() === "") {
        flushPara();
        i++;
        continue;
      }
      if ((m = HEADING.exec(line))) {
        flushPara();
        const level = m[1].length;
        out.push("<h" + level + ">" + inline(escapeHtml(m[2])) + "</h" + level + ">");
        i++;
        continue;
      }
      if (RULE.test(line)) {
        flushPara();
        out.push("<hr>");
        i++;
        continue;
      }
      if (QUOTE.test(line)) {
        flushPara();
        const quoted = [];
        while (i < lines.length && (m = QUOTE.exec(lines[i]))) {
          quoted.push(m[1]);
          i++;
        }
        out.push("<blockquote>" + render(quoted.join("\n")) + "</blockquote>");
        continue;
      }
      if (BULLET.test(line) || ORDERED.test(line)) {
        flushPara();
        const [html, next] = list(lines, i);
        out.push(html);
        i = next;
        continue;
      }
      para.push(line);
      i++;
    }
    flushPara();
    return out.join("\n");
  }

  // A list starting at lines[start]; returns [html, index after it].
  function list(lines, start) {
    const first = BULLET.exec(lines[start]) || ORDERED.exec(lines[start]);
    const indent = first[1].length;
    const ordered = !BULLET.test(lines[start]);
    const items = [];
    let i = start;
    while (i < lines.length) {
      const line = lines[i];
      const m = (ordered ? ORDERED : BULLET).exec(line);
      if (m && m[1].length === indent) {
        items.push({ text: [m[3]], children: [], start: ordered ? Number(m[2]) : null });
        i++;
        continue;
      }
      const deeper = BULLET.exec(line) || ORDERED.exec(line);
      if (deeper && deeper[1].length > indent && items.length) {
        const [html, next] = list(lines, i);
        items[items.length - 1].children.push(html);
        i = next;
        continue;
      }
      // A lazy continuation line belongs to the previous item.
      if (line.trim() !== "" && /^\s+\S/.test(line) && items.length && !FENCE.test(line)) {
        items[items.length - 1].text.push(line.trim());
        i++;
        continue;
      }
      break;
    }
    const tag = ordered ? "ol" : "ul";
    const startAttr = ordered && items[0].start !== 1 ? ' start="' + items[0].start + '"' : "";
    return [
      "<" + tag + startAttr + ">" +
        items.map((it) => "<li>" + it.text.map((t) => inline(escapeHtml(t))).join("<br>") +
          it.children.join("") + "</li>").join("") +
        "</" + tag + ">",
      i,
    ];
  }

  global.TurnstoneMarkdown = { render, escapeHtml, inline: (t) => inline(escapeHtml(t)) };
})(typeof window !== "undefined" ? window : globalThis);
