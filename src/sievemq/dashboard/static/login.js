// The dashboard's login (docs/dashboard.md §5): when the API asks for one (401), the page shows a form for a
// user's token, keeps it in this tab's sessionStorage (no cookie: another site's page cannot make the browser
// send it) and sends it as "Authorization: Bearer <token>" with every API request (dom.js's api).
"use strict";

const auth = {
  key: "sievemq.dashboard.token",
  token() {
    try { return sessionStorage.getItem(auth.key) || ""; } catch (e) { return ""; }
  },
  set(token) {
    try { sessionStorage.setItem(auth.key, token); } catch (e) { /* storage off: this page only */ }
  },
  clear() {
    try { sessionStorage.removeItem(auth.key); } catch (e) { /* nothing kept */ }
  },
  // The API refused the token (401): forget it and show the form (app.js's showLogin), once per refusal.
  refused(failure) {
    if (failure.reason === "AUTH_FAILED") auth.clear();
    if (typeof showLogin === "function") showLogin(failure);
  },
};

// The login form; ``done`` is called once a token is typed in and kept. ``failure``: why it is shown (the
// first visit's AUTH_REQUIRED shows no alert).
function loginForm(failure, done) {
  const token = h("input", {name: "token", type: "password", placeholder: "token", autocomplete: "off",
    spellcheck: "false", required: true, "aria-label": "token"});
  const form = h("form", {class: "search login", "data-key": "login"},
    h("p", {class: "muted small"}, "This dashboard asks for a user's token (its users file; ",
      h("code", {}, "sievemq dashboard hash-token"), " makes one). It is kept in this tab only."),
    h("label", {class: "field"}, h("span", {}, "Token"), token),
    h("button", {type: "submit"}, "Log in"));
  form.addEventListener("submit", (ev) => {
    ev.preventDefault();
    const value = token.value.trim();
    if (!value) return;
    auth.set(value);
    done();
  });
  const alert = failure && failure.reason !== "AUTH_REQUIRED" ? ui.failure(failure) : null;
  return h("div", {}, h("h1", {}, "Log in"), alert, form);
}
