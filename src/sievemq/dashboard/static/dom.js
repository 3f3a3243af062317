// DOM helpers of the sievemq dashboard. Every piece of data reaches the page as text (textContent, text nodes,
// attribute values through setAttribute): nothing is ever parsed as HTML (docs/dashboard.md §5).
"use strict";

const ALLOWED_ATTRS = new Set(["class", "id", "title", "type", "name", "value", "placeholder", "for", "colspan",
  "min", "max", "step", "required", "autocomplete", "spellcheck", "role", "aria-label", "data-page", "data-key",
  "selected", "rows", "size", "list", "style-width"]);

// h("a", {href: "#/topic?...", class: "x"}, "text", child...): an element; strings and numbers become text nodes.
function h(tag, props, ...children) {
  const el = document.createElement(tag);
  for (const [k, v] of Object.entries(props || {})) {
    if (v === null || v === undefined || v === false) continue;
    if (k === "href") {
      const href = String(v);
      if (!href.startsWith("#")) throw new Error("only in-page links");  // never javascript: or another site
      el.setAttribute("href", href);
    } else if (k === "onclick" || k === "onsubmit" || k === "onchange" || k === "oninput") {
      el.addEventListener(k.slice(2), v);
    } else if (k === "style-width") {
      el.style.width = `${Math.max(0, Math.min(100, Number(v) || 0))}%`;
    } else if (ALLOWED_ATTRS.has(k)) {
      el.setAttribute(k, v === true ? "" : String(v));
    } else {
      throw new Error(`attribute ${k} not allowed`);
    }
  }
  append(el, children);
  return el;
}

// Append children (nodes, strings, numbers, arrays of them; null and false are skipped) as nodes and text.
function append(el, ...children) {
  for (const c of children.flat(Infinity)) {
    if (c === null || c === undefined || c === false) continue;
    el.appendChild(c instanceof Node ? c : document.createTextNode(String(c)));
  }
  return el;
}

function clear(el) {
  while (el.firstChild) el.removeChild(el.firstChild);
  return el;
}

// An in-page link to a view: link("topic", {topic: name}, text).
function link(page, params, text) {
  const q = new URLSearchParams(params || {}).toString();
  return h("a", {href: `#/${page}${q ? "?" + q : ""}`}, text);
}

const fmt = {
  num(n) {
    return n === null || n === undefined ? "–" : Number(n).toLocaleString("en-US");
  },
  rate(r) {
    if (r === null || r === undefined || !isFinite(r)) return "–";
    return r >= 100 ? `${Math.round(r).toLocaleString("en-US")}/s` : `${r.toFixed(1)}/s`;
  },
  time(ms) {
    if (!ms || ms <= 0) return "–";
    const d = new Date(ms);
    const pad = (x, n = 2) => String(x).padStart(n, "0");
    return `${d.getFullYear()}-${pad(d.getMonth() + 1)}-${pad(d.getDate())} ` +
      `${pad(d.getHours())}:${pad(d.getMinutes())}:${pad(d.getSeconds())}.${pad(d.getMilliseconds(), 3)}`;
  },
  ago(ms) {
    if (!ms || ms <= 0) return "never";
    const s = Math.max(0, (Date.now() - ms) / 1000);
    if (s < 60) return `${Math.round(s)} s ago`;
    if (s < 3600) return `${Math.round(s / 60)} min ago`;
    if (s < 86400) return `${Math.round(s / 3600)} h ago`;
    return `${Math.round(s / 86400)} d ago`;
  },
  bytes(n) {
    if (n === null || n === undefined) return "–";
    const units = ["B", "KiB", "MiB", "GiB", "TiB"];
    let i = 0;
    let v = Number(n);
    while (v >= 1024 && i < units.length - 1) { v /= 1024; i++; }
    return `${v.toFixed(i ? 1 : 0)} ${units[i]}`;
  },
  type(t) {
    return {CONSUME_PASSIVELY: "push", CONSUME_ACTIVELY: "pull", CONSUME_POP: "pop"}[t] || (t || "–");
  },
};

// A refusal of the API: its HTTP status, stable reason and message.
class ApiFailure extends Error {
  constructor(status, reason, message) {
    super(message);
    this.status = status;
    this.reason = reason;
  }
}

async function api(path, params) {
  const q = new URLSearchParams();
  for (const [k, v] of Object.entries(params || {})) if (v !== null && v !== undefined && v !== "") q.set(k, v);
  const url = `api/${path}${q.toString() ? "?" + q : ""}`;
  const headers = {Accept: "application/json"};
  const token = auth.token();
  if (token) headers.Authorization = `Bearer ${token}`;
  let resp;
  try {
    resp = await fetch(url, {headers, cache: "no-store"});
  } catch (e) {
    throw new ApiFailure(0, "DASHBOARD_UNREACHABLE", "the dashboard does not answer (stopped?)");
  }
  let body = null;
  try { body = await resp.json(); } catch (e) { body = null; }
  if (!resp.ok) {
    const err = (body && body.error) || {};
    const failure = new ApiFailure(resp.status, err.reason || "HTTP_" + resp.status, err.message || resp.statusText);
    if (resp.status === 401) auth.refused(failure);  // login.js: the form instead of the view
    throw failure;
  }
  return body;
}

// A write (the Access page's, docs/dashboard.md §9): a JSON object POSTed to api/<path>, with the tab's token;
// the answer's JSON, or an ApiFailure as api() throws it.
async function apiPost(path, body) {
  const headers = {Accept: "application/json", "Content-Type": "application/json"};
  const token = auth.token();
  if (token) headers.Authorization = `Bearer ${token}`;
  let resp;
  try {
    resp = await fetch(`api/${path}`, {method: "POST", headers, body: JSON.stringify(body), cache: "no-store"});
  } catch (e) {
    throw new ApiFailure(0, "DASHBOARD_UNREACHABLE", "the dashboard does not answer (stopped?)");
  }
  let answer = null;
  try { answer = await resp.json(); } catch (e) { answer = null; }
  if (!resp.ok) {
    const err = (answer && answer.error) || {};
    const failure = new ApiFailure(resp.status, err.reason || "HTTP_" + resp.status, err.message || resp.statusText);
    if (resp.status === 401) auth.refused(failure);
    throw failure;
  }
  return answer;
}

// Small building blocks of the views.
const ui = {
  table(headers, rows, opts = {}) {
    const numeric = new Set(opts.numeric || []);
    const head = h("tr", {}, headers.map((c) => h("th", {class: numeric.has(c) ? "num" : null}, c)));
    const body = rows.length ? rows.map((r) => h("tr", {class: r.cls || null},
      (r.cells || r).map((c, i) => h("td", {class: numeric.has(headers[i]) ? "num" : null}, c))))
      : [h("tr", {}, h("td", {colspan: headers.length, class: "empty"}, opts.empty || "nothing to show"))];
    return h("div", {class: "table-wrap"}, h("table", {class: opts.cls || null}, h("thead", {}, head), h("tbody", {}, body)));
  },
  card(label, value, note) {
    return h("div", {class: "card"}, h("div", {class: "card-label"}, label), h("div", {class: "card-value"}, value),
      note ? h("div", {class: "card-note muted"}, note) : null);
  },
  cards(...cards) { return h("div", {class: "cards"}, cards); },
  badge(text, kind) { return h("span", {class: `badge ${kind || ""}`}, text); },
  section(title, ...content) { return h("section", {class: "panel"}, h("h2", {}, title), content); },
  errors(errors) {
    const entries = Object.entries(errors || {});
    if (!entries.length) return null;
    return h("div", {class: "alert warn"}, h("strong", {}, "Some brokers did not answer: "),
      entries.map(([b, e]) => h("div", {}, h("code", {}, b), " ", e)));
  },
  failure(e) {
    return h("div", {class: "alert error", role: "alert"}, h("strong", {}, e.reason || "ERROR"), " ",
      e.message || String(e));
  },
  bar(fraction) {
    return h("div", {class: "bar"}, h("div", {class: "bar-fill", "style-width": Math.round(fraction * 100)}));
  },
  kv(pairs) {
    return h("dl", {class: "kv"}, pairs.filter((p) => p).map(([k, v]) => [h("dt", {}, k), h("dd", {}, v)]));
  },
};
