// The Access page (docs/dashboard.md §9): ACL 2.0's users (never their passwords) and policy entries of every
// master broker; a dashboard admin creates and deletes users and entries (POST api/access, sent to every master).
"use strict";

// What the last write did, shown once on the page it re-renders.
let accessNotice = null;

async function accessWrite(body, done) {
  try {
    const r = await apiPost("access", body);
    const failed = Object.entries(r.errors || {});
    accessNotice = {ok: failed.length === 0, text: `${done} on ${r.brokers.join(", ")}` +
      (failed.length ? `; refused by ${failed.map(([b, e]) => `${b} (${e.reason || "ERROR"}: ${e.message})`).join("; ")}` : "")};
  } catch (e) {
    accessNotice = {ok: false, text: `${e.reason || "ERROR"}: ${e.message}`};
  }
  render(false);
}

// A button that asks once more before it deletes: the first click turns it into "Confirm", the second does it.
function deleteButton(key, what, action) {
  const b = h("button", {type: "button", class: "danger", "data-key": key, title: `delete ${what}`}, "Delete");
  b.addEventListener("click", () => {
    if (b.dataset.armed) { b.textContent = "Deleting…"; action(); return; }
    b.dataset.armed = "1";
    b.textContent = "Confirm delete";
  });
  return b;
}

function select(name, options, chosen) {
  return h("select", {name}, options.map((o) => h("option", {value: o, selected: o === chosen}, o)));
}

function userForm() {
  const form = h("form", {class: "search", "data-key": "new-user"}, h("h3", {}, "New user"),
    field("Username", input("username", new URLSearchParams(), "alice", {required: true})),
    field("Password", input("password", new URLSearchParams(), "", {type: "password", required: true, autocomplete: "new-password"})),
    field("Type", select("userType", ["Normal", "Super"], "Normal")),
    h("button", {type: "submit"}, "Create user"));
  form.addEventListener("submit", (ev) => {
    ev.preventDefault();
    const v = (n) => form.querySelector(`[name="${n}"]`).value;
    accessWrite({action: "createUser", username: v("username"), password: v("password"), userType: v("userType")},
      `user ${v("username")} created`);
  });
  return form;
}

function policyForm(users) {
  const form = h("form", {class: "search wide", "data-key": "new-policy"}, h("h3", {}, "New policy entries"),
    h("div", {class: "row"},
      field("User", select("subject", users.map((u) => `User:${u.username}`), null)),
      field("Resources", input("resources", new URLSearchParams(), "Topic:orders, Group:billing, Topic:ord*", {required: true})),
      field("Actions", input("actions", new URLSearchParams(), "Pub, Sub", {required: true}))),
    h("div", {class: "row"},
      field("Source IPs (optional)", input("sourceIps", new URLSearchParams(), "10.0.0.0/8")),
      field("Decision", select("decision", ["Allow", "Deny"], "Allow")),
      field("Policy", select("policyType", ["Custom", "Default"], "Custom"))),
    h("button", {type: "submit"}, "Add entries"),
    h("p", {class: "muted small"}, "One entry per resource, each with the actions, addresses and decision given; an entry of a resource the policy has is replaced."));
  form.addEventListener("submit", (ev) => {
    ev.preventDefault();
    const v = (n) => form.querySelector(`[name="${n}"]`).value;
    accessWrite({action: "createPolicy", subject: v("subject"), resources: v("resources"), actions: v("actions"),
      sourceIps: v("sourceIps"), decision: v("decision"), policyType: v("policyType")}, `entries of ${v("subject")} added`);
  });
  return form;
}

views.access = async () => {
  const a = await api("access");
  const notice = accessNotice;
  accessNotice = null;
  const write = a.canWrite && a.enabled;
  const userRows = a.users.map((u) => [h("strong", {}, u.username), u.userType, ui.badge(u.userStatus, u.userStatus === "enable" ? "ok" : "bad"),
    u.brokers.join(", ") + (u.differs ? " (not the same on every broker)" : "")]
    .concat(write ? [deleteButton(`delete-user:${u.username}`, `user ${u.username}`,
      () => accessWrite({action: "deleteUser", username: u.username}, `user ${u.username} deleted`))] : []));
  const policyRows = a.policies.map((p) => [h("code", {}, p.subject), p.policyType, h("code", {}, p.resource), p.actions.join(", "),
    p.sourceIps.length ? p.sourceIps.join(", ") : "any", ui.badge(p.decision, p.decision === "Allow" ? "ok" : "bad"), p.brokers.join(", ")]
    .concat(write ? [deleteButton(`delete-policy:${p.subject}:${p.policyType}:${p.resource}`, `${p.resource} of ${p.subject}`,
      () => accessWrite({action: "deletePolicy", subject: p.subject, resource: p.resource, policyType: p.policyType},
        `${p.resource} of ${p.subject} deleted`))] : []));
  const errors = Object.entries(a.errors);
  const node = h("div", {},
    h("h1", {}, "Access"),
    notice ? h("div", {class: `alert ${notice.ok ? "done" : "error"}`, role: notice.ok ? "status" : "alert", "data-key": "notice"}, notice.text) : null,
    a.enabled ? null : h("div", {class: "alert warn"}, h("strong", {}, "ACL 2.0 is off: "),
      "the brokers run without authenticationEnabled and authorizationEnabled, so they have no users nor policies (docs/acl2.md)."),
    a.enabled && errors.length ? h("div", {class: "alert warn"}, h("strong", {}, "Some brokers did not answer: "),
      errors.map(([b, e]) => h("div", {}, h("code", {}, b), ` ${e.reason || "ERROR"}: ${e.message}`))) : null,
    ui.cards(ui.card("Users", fmt.num(a.users.length)), ui.card("Policy entries", fmt.num(a.policies.length)),
      ui.card("Brokers", fmt.num(a.brokers.length), a.brokers.join(", "))),
    ui.section("Users", ui.table(["Username", "Type", "Status", "Brokers"].concat(write ? [""] : []), userRows,
      {empty: "no users"})),
    ui.section("Policies", ui.table(["Subject", "Policy", "Resource", "Actions", "Source IPs", "Decision", "Brokers"].concat(write ? [""] : []),
      policyRows, {empty: "no policy entries"})),
    write ? h("div", {class: "forms two"}, userForm(), policyForm(a.users))
      : h("p", {class: "muted"}, a.enabled ? "Only a dashboard admin creates and deletes users and policies." : null));
  return {node, refresh: false};
};
