// The message trace view (docs/traces.md §7): a message id's timeline (sent, delivered, consumed, retried,
// dead-lettered, its transaction) and every consumer group's filter verdict with its reason, from /api/trace
// (AdminClient.message_trace).
"use strict";

const VERDICT_KIND = {DELIVERED: "ok", FILTERED: "bad"};
const STATE_KIND = {CONSUMED: "ok", DEAD_LETTERED: "bad", FILTERED: "muted", NOT_TRACED: "muted"};

function traceForm(p) {
  const form = h("form", {class: "search wide", "data-key": "trace"}, h("h3", {}, "Trace a message"),
    h("div", {class: "row"},
      field("Message id", input("id", p, "msgId or offsetMsgId", {required: true})),
      field("Topic (optional)", input("topic", p, "the topic its traces name")),
      field("Trace topic (optional)", input("traceTopic", p, "RMQ_SYS_TRACE_TOPIC")),
      field("Group (optional)", input("group", p, "every group of its topic"))),
    h("button", {type: "submit"}, "Trace"));
  form.addEventListener("submit", (ev) => {
    ev.preventDefault();
    const q = {};
    for (const el of form.querySelectorAll("input")) if (el.value) q[el.name] = el.value.trim();
    location.hash = `#/trace?${new URLSearchParams(q)}`;
  });
  return form;
}

function subscriptionOf(f) {
  const s = f && f.subscription;
  return s ? h("code", {}, `${s.expressionType} ${s.expression}`) : "–";
}

views.trace = async (p) => {
  const node = h("div", {}, h("h1", {}, "Message trace"), traceForm(p));
  if (!p.get("id")) return {node, refresh: false};
  const out = h("div", {"data-key": "trace-result"});
  node.appendChild(out);
  let t;
  try {
    t = await api("trace", {id: p.get("id"), topic: p.get("topic"), traceTopic: p.get("traceTopic"), group: p.get("group")});
  } catch (e) {
    append(out, ui.failure(e));
    return {node, refresh: false};
  }
  const m = t.message;
  append(out,
    ui.section("Message", m ? ui.kv([
      ["Message id", h("code", {}, t.msgId)],
      ["Topic", link("topic", {topic: m.topic}, m.topic)],
      ["Queue", `${m.brokerName} #${m.queueId}, offset ${m.queueOffset}`],
      ["Offset message id", link("message", {id: m.offsetMsgId}, m.offsetMsgId)],
      ["Tags", m.tags || "–"],
      ["Keys", (m.keys || []).join(" ") || "–"],
      ["Born", `${fmt.time(m.bornTimestamp)} on ${m.bornHost}`],
      ["Stored", fmt.time(m.storeTimestamp)],
      ["Trace records", `${fmt.num(t.traceRecords)} in ${t.traceTopic}`]])
      : h("p", {class: "muted"}, `not found in its topic${t.errors.message ? ": " + t.errors.message : ""}; ${fmt.num(t.traceRecords)} trace record(s) in ${t.traceTopic}`)),
    t.contentHidden ? h("p", {class: "hidden-content"}, "The property values behind each verdict are hidden: this user may not read message property values.") : null,
    ui.section("Sent", ui.table(["Time", "Producer group", "From", "To", "Queue", "Cost", "Status", "Type"],
      t.sent.map((s) => [fmt.time(s.timestamp), s.producerGroup, s.clientHost, s.storeHost,
        s.queueId === undefined ? "–" : `${s.brokerName} #${s.queueId} @ ${s.queueOffset}`, `${s.costMs} ms`,
        ui.badge(s.status, s.status === "success" ? "ok" : "bad"), s.msgType]),
      {empty: "no send traced (the producer did not trace, or its traces are elsewhere)"})),
    t.transaction.length ? ui.section("Transaction", ui.table(["Time", "Producer group", "State", "Check-back"],
      t.transaction.map((x) => [fmt.time(x.timestamp), x.producerGroup, x.state, x.fromTransactionCheck ? "yes" : "no"]))) : null,
    ui.section("Timeline", ui.table(["Time", "Event", "Group", "Host", "Detail"],
      t.events.map((e) => [fmt.time(e.timestamp), ui.badge(e.event, /FAILED|DEAD|RETRY/.test(e.event) ? "warn" : "ok"),
        e.group ? link("group", {group: e.group}, e.group) : "–", e.host || "–", e.detail || "–"]),
      {empty: "no event traced"})),
    ui.section("Consumer groups", ui.table(["Group", "State", "Deliveries", "Retries", "Subscription", "Verdict", "Stage", "Why"],
      t.groups.map((g) => {
        const f = g.filter;
        return {cls: null, cells: [link("group", {group: g.group}, g.group), ui.badge(g.state, STATE_KIND[g.state] || "warn"),
          fmt.num(g.deliveries.length), fmt.num(g.retries), subscriptionOf(f),
          f ? ui.badge(f.verdict, VERDICT_KIND[f.verdict] || "warn") : "–", f ? f.stage : "–",
          h("div", {class: "why"}, f ? f.reason || "–" : g.error || "no verdict asked")]};
      }), {numeric: ["Deliveries", "Retries"], empty: "no consumer group of its topic is known"})),
    Object.keys(t.errors).filter((k) => k !== "message" || m).length
      ? h("div", {class: "alert warn"}, h("strong", {}, "Not everything could be asked: "),
        Object.entries(t.errors).map(([k, e]) => h("div", {}, h("code", {}, k), " ", e))) : null);
  return {node, refresh: false};
};
