// The dashboard's page: routes #/page?params to a view of views.js, refreshes it every refreshSeconds while the
// view asks for it (and the page is shown), and reports failures as text.
"use strict";

const state = {timer: null, paused: false, refreshSeconds: 5, seq: 0};

function route() {
  const hash = location.hash.replace(/^#\/?/, "") || "cluster";
  const [page, query] = hash.split("?", 2);
  return {page: views[page] ? page : "cluster", params: new URLSearchParams(query || "")};
}

async function render(initial) {
  const hash = location.hash;
  const {page, params} = route();
  const seq = ++state.seq;
  clearTimeout(state.timer);
  for (const a of document.querySelectorAll("#nav a")) {
    const owner = {topic: "topics", group: "groups", message: "messages"}[page] || page;
    a.classList.toggle("active", a.dataset.page === owner);
  }
  const main = document.getElementById("main");
  let result;
  try {
    result = await views[page](params);
  } catch (e) {
    result = {node: h("div", {}, h("h1", {}, page[0].toUpperCase() + page.slice(1)), ui.failure(e)), refresh: true};
  }
  if (seq !== state.seq) return;  // another view was asked for meanwhile
  const y = window.scrollY;
  const focused = document.activeElement && document.activeElement.name;
  clear(main).appendChild(result.node);
  if (!initial) window.scrollTo(0, y);
  if (focused) { const el = main.querySelector(`[name="${CSS.escape(focused)}"]`); if (el) el.focus(); }
  document.getElementById("updated").textContent = `updated ${fmt.time(Date.now()).slice(11, 19)}`;
  document.body.dataset.page = page;
  document.body.dataset.hash = hash;  // which link the view shows (tests wait for it: tests/support/browser.py)
  document.body.dataset.ready = String(seq);
  if (result.refresh && !state.paused && state.refreshSeconds > 0) {
    state.timer = setTimeout(() => { if (!document.hidden) render(false); else schedule(); }, state.refreshSeconds * 1000);
  }
}

function schedule() {
  clearTimeout(state.timer);
  state.timer = setTimeout(() => render(false), state.refreshSeconds * 1000);
}

async function start() {
  try {
    const info = await api("info");
    state.refreshSeconds = info.refreshSeconds;
    document.getElementById("footer").textContent =
      `sievemq ${info.version} · name servers ${info.namesrv.join(", ")} · read-only` +
      (info.refreshSeconds ? ` · refresh every ${info.refreshSeconds} s` : "");
  } catch (e) {
    document.getElementById("footer").textContent = `dashboard: ${e.message}`;
  }
  const pause = document.getElementById("pause");
  pause.addEventListener("click", () => {
    state.paused = !state.paused;
    pause.textContent = state.paused ? "Resume" : "Pause";
    if (!state.paused) render(false); else clearTimeout(state.timer);
  });
  window.addEventListener("hashchange", () => render(true));
  render(true);
}

start();
