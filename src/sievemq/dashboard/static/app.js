// The dashboard's page: routes #/page?params to a view of views.js, refreshes it every refreshSeconds while the
// view asks for it (and the page is shown), reports failures as text, and shows login.js's form when the API asks
// for a login.
"use strict";

const state = {timer: null, paused: false, refreshSeconds: 5, seq: 0, user: null};

function route() {
  const hash = location.hash.replace(/^#\/?/, "") || "cluster";
  const [page, query] = hash.split("?", 2);
  return {page: views[page] ? page : "cluster", params: new URLSearchParams(query || "")};
}

// Mark the page as showing ``page`` for the link it has (tests wait for it: tests/support/browser.py).
function shown(page, seq) {
  document.body.dataset.page = page;
  document.body.dataset.hash = location.hash;
  document.body.dataset.ready = String(seq);
}

async function render(initial) {
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
  if (seq !== state.seq) return;  // another view (or the login form) was asked for meanwhile
  const y = window.scrollY;
  const focused = document.activeElement && document.activeElement.name;
  clear(main).appendChild(result.node);
  if (!initial) window.scrollTo(0, y);
  if (focused) { const el = main.querySelector(`[name="${CSS.escape(focused)}"]`); if (el) el.focus(); }
  document.getElementById("updated").textContent = `updated ${fmt.time(Date.now()).slice(11, 19)}`;
  shown(page, seq);
  if (result.refresh && !state.paused && state.refreshSeconds > 0) {
    state.timer = setTimeout(() => { if (!document.hidden) render(false); else schedule(); }, state.refreshSeconds * 1000);
  }
}

function schedule() {
  clearTimeout(state.timer);
  state.timer = setTimeout(() => render(false), state.refreshSeconds * 1000);
}

// The API asks for a login (login.js's auth.refused, or start): the form replaces the view; the link stays, so
// the view it names is shown once logged in.
function showLogin(failure) {
  const seq = ++state.seq;
  clearTimeout(state.timer);
  state.user = null;
  account();
  const main = document.getElementById("main");
  clear(main).appendChild(loginForm(failure, () => start()));
  const field = main.querySelector("input[name=token]");
  if (field) field.focus();
  shown("login", seq);
}

// The header's account part: who is logged in, and Log out.
function account() {
  const who = document.getElementById("account");
  const out = document.getElementById("logout");
  const u = state.user;
  who.textContent = u ? `${u.name} (${u.role}${u.role === "viewer" && !u.readBodies ? ", no bodies" : ""})` : "";
  out.hidden = !u;
}

async function start() {
  let info;
  try {
    info = await api("info");
  } catch (e) {
    if (e.status === 429) auth.clear();  // the token is not looked at meanwhile: typed anew once allowed
    if (e.status === 401 || e.status === 429) { showLogin(e); return; }
    document.getElementById("footer").textContent = `dashboard: ${e.message}`;
    render(true);
    return;
  }
  state.refreshSeconds = info.refreshSeconds;
  state.user = (info.auth && info.auth.user) || null;
  account();
  document.getElementById("footer").textContent =
    `sievemq ${info.version} · name servers ${info.namesrv.join(", ")}` +
    (info.refreshSeconds ? ` · refresh every ${info.refreshSeconds} s` : "");
  render(true);
}

function setup() {
  const pause = document.getElementById("pause");
  pause.addEventListener("click", () => {
    state.paused = !state.paused;
    pause.textContent = state.paused ? "Resume" : "Pause";
    if (!state.paused) render(false); else clearTimeout(state.timer);
  });
  document.getElementById("logout").addEventListener("click", () => {
    auth.clear();
    showLogin(null);
  });
  window.addEventListener("hashchange", () => render(true));
  start();
}

setup();
