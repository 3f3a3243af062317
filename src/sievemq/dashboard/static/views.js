// The dashboard's pages: each one asks the JSON API and builds its part of the page with dom.js's helpers (text
// only). Each view returns {node, refresh}: refresh tells whether the page refreshes it by itself.
"use strict";

// Rates from two samples of a counter: the previous sample of each key is kept between refreshes.
const samples = new Map();
function rate(key, value) {
  const now = Date.now();
  const prev = samples.get(key);
  samples.set(key, {t: now, v: value});
  if (!prev || now - prev.t < 500 || value < prev.v) return prev && prev.r !== undefined ? prev.r : null;
  const r = (value - prev.v) / ((now - prev.t) / 1000);
  samples.get(key).r = r;
  return r;
}

function lagBadge(lag) {
  return ui.badge(fmt.num(lag), lag === 0 ? "ok" : lag < 1000 ? "warn" : "bad");
}

function consistencyBadge(c) {
  const state = (c && c.state) || "unknown";
  const kind = {"consistent": "ok", "inconsistent": "bad", "no clients": "muted"}[state] || "warn";
  return ui.badge(state, kind);
}

const views = {};

// ------------------------------------------------------------------------------------------------- cluster
views.cluster = async () => {
  const c = await api("cluster");
  const masters = c.brokers.filter((b) => b.brokerId === 0);
  const node = h("div", {},
    h("h1", {}, "Cluster"),
    ui.cards(
      ui.card("Clusters", fmt.num(Object.keys(c.clusters).length)),
      ui.card("Broker sets", fmt.num(masters.length || new Set(c.brokers.map((b) => b.brokerName)).size)),
      ui.card("Brokers", fmt.num(c.brokers.length)),
      ui.card("Name servers", c.namesrv.join(", "))),
    ui.section("Brokers", ui.table(
      ["Cluster", "Broker", "Id", "Address", "Role", "Version", "State", "Put/s", "Got/s", "Commit log", "Disk", "Replication"],
      c.brokers.map((b) => {
        const key = `${b.brokerName}#${b.brokerId}`;
        const disk = b.disk || {};
        const used = disk.usedRatio;
        let repl = b.role === "SLAVE"
          ? `behind ${fmt.bytes(b.lagBytes)} / ${Number(b.lagSeconds || 0).toFixed(1)} s from ${b.master || "?"}`
          : b.error ? "–" : `${fmt.num(b.slaves)} slave(s), acked ${fmt.num(b.slaveAckOffset)}`;
        if (b.epoch !== undefined) {  // automatic failover: the set's epoch, this broker's id, the in-sync set
          repl += ` · epoch ${b.epoch} · brokerId ${b.replicaId}`;
          if (b.role !== "SLAVE") repl += ` · SyncStateSet [${(b.syncStateSet || []).join(", ")}]`;
        }
        return [b.cluster, h("strong", {}, b.brokerName), b.brokerId, h("code", {}, b.addr), b.role, b.version || "–",
          b.error ? h("span", {title: b.error}, ui.badge(b.state, "bad"))
            : ui.badge(b.state, b.state === "serving" || b.state === "following" ? "ok" : "warn"),
          fmt.rate(rate(`put:${key}`, b.putTotal)), fmt.rate(rate(`get:${key}`, b.getTotal)),
          fmt.bytes(b.commitLogMaxOffset),
          used === undefined ? "–" : h("div", {class: "disk", title: `${fmt.bytes(disk.freeBytes)} free of ${fmt.bytes(disk.totalBytes)}`},
            ui.bar(used), `${Math.round(used * 100)}% · ${disk.state || ""}`),
          repl];
      }), {numeric: ["Id", "Put/s", "Got/s", "Commit log"], empty: "no brokers registered"})));
  return {node, refresh: true};
};

// ------------------------------------------------------------------------------------------------- topics
// A list's pages: PAGE rows each (every row costs the dashboard a few requests to each broker, at every refresh).
const PAGE = 100;

function pager(page, system, after, list) {
  const base = system ? {system: "true"} : {};
  const links = [];
  if (after) links.push(link(page, base, "first page"));
  if (list.next) links.push(link(page, {...base, after: list.next}, "next page"));
  return links.length ? h("p", {class: "muted"}, `${fmt.num(list.total)} in all. `,
    ...links.flatMap((l, i) => (i ? [" · ", l] : [l]))) : null;
}

views.topics = async (p) => {
  const system = p.get("system") === "true";
  const after = p.get("after");
  const t = await api("topics", {system, after, limit: PAGE});
  const rows = t.topics.map((x) => [
    link("topic", {topic: x.topic}, x.topic),
    x.brokers.map((b) => `${b.brokerName}: ${b.writeQueueNums}`).join(", ") || "–",
    fmt.num(x.messages),
    fmt.rate(rate(`in:${x.topic}`, x.putTotal)),
    fmt.rate(rate(`out:${x.topic}`, x.consumedTotal)),
    x.groups.length ? x.groups.map((g, i) => [i ? ", " : "", link("group", {group: g}, g)]) : "–",
    fmt.time(x.lastStoreTimestamp)]);
  const node = h("div", {},
    h("div", {class: "title-row"}, h("h1", {}, "Topics"),
      link("topics", system ? {} : {system: "true"}, system ? "hide system topics" : "show system topics")),
    ui.section(`${t.topics.length} topic(s)`, ui.table(
      ["Topic", "Queues per broker", "Messages", "In", "Out", "Consumer groups", "Newest message"], rows,
      {numeric: ["Messages", "In", "Out"], empty: "no topics yet: send a message, or create one"})),
    Object.keys(t.errors).length ? ui.errors(t.errors) : null,
    pager("topics", system, after, t));
  return {node, refresh: true};
};

views.topic = async (p) => {
  const name = p.get("topic");
  const t = await api("topic", {topic: name});
  const maxMessages = Math.max(1, ...t.queueStats.map((q) => q.messages));
  const node = h("div", {},
    h("div", {class: "crumbs"}, link("topics", {}, "Topics"), " / "),
    h("h1", {}, t.topic),
    ui.cards(
      ui.card("Messages stored", fmt.num(t.messages)),
      ui.card("Queues", fmt.num(t.queues)),
      ui.card("In", fmt.rate(rate(`in:${t.topic}`, t.putTotal)), `${fmt.num(t.putTotal)} written in all`),
      ui.card("Out", fmt.rate(rate(`out:${t.topic}`, t.consumedTotal)), `${fmt.num(t.consumedTotal)} consumed by all groups`),
      ui.card("Newest message", fmt.ago(t.lastStoreTimestamp), fmt.time(t.lastStoreTimestamp))),
    ui.errors(t.errors),
    ui.section("Route", ui.table(["Broker", "Read queues", "Write queues", "Permission", "Addresses", "Messages"],
      t.brokers.map((b) => [b.brokerName, b.readQueueNums, b.writeQueueNums,
        ((b.perm & 4) ? "R" : "-") + ((b.perm & 2) ? "W" : "-"),
        Object.entries(b.addrs).map(([id, a]) => `${id === "0" ? "master" : "slave " + id} ${a}`).join(", "),
        fmt.num(b.messages)]), {numeric: ["Read queues", "Write queues", "Messages"]})),
    ui.section("Queues", ui.table(["Broker", "Queue", "Min offset", "Max offset", "Messages", "", "Newest message"],
      t.queueStats.map((q) => [q.brokerName, q.queueId, fmt.num(q.minOffset), fmt.num(q.maxOffset),
        fmt.num(q.messages), ui.bar(q.messages / maxMessages), fmt.time(q.lastStoreTimestamp)]),
      {numeric: ["Queue", "Min offset", "Max offset", "Messages"]})),
    ui.section("Consumer groups", ui.table(["Group", "Consumed (committed offsets)"],
      Object.entries(t.consumers).map(([g, n]) => [link("group", {group: g}, g), fmt.num(n)]),
      {numeric: ["Consumed (committed offsets)"], empty: "no group consumes this topic"})),
    h("p", {}, link("messages", {mode: "time", topic: t.topic}, "Search its messages"), " · ",
      link("filters", {topic: t.topic}, "Explain a filter on it")));
  return {node, refresh: true};
};

// ------------------------------------------------------------------------------------------------- groups
function subscriptionText(subs) {
  const entries = Object.entries(subs || {});
  return entries.length ? entries.map(([t, e]) => h("div", {}, h("code", {}, t), " ", e)) : "–";
}

views.groups = async (p) => {
  const system = p.get("system") === "true";
  const after = p.get("after");
  const g = await api("groups", {system, after, limit: PAGE});
  const node = h("div", {},
    h("div", {class: "title-row"}, h("h1", {}, "Consumer groups"),
      link("groups", system ? {} : {system: "true"}, system ? "hide system groups" : "show system groups")),
    ui.section(`${g.groups.length} group(s)`, ui.table(
      ["Group", "Members", "Type", "Model", "Subscriptions", "Consistency", "Lag", "In flight", "Last consumed"],
      g.groups.map((x) => [link("group", {group: x.group}, x.group), x.members.length, fmt.type(x.consumeType),
        x.messageModel || "–", subscriptionText(x.subscriptions), consistencyBadge(x.consistency), lagBadge(x.lag),
        fmt.num(x.inflight), fmt.time(x.lastTimestamp)]),
      {numeric: ["Members", "Lag", "In flight"], empty: "no consumer groups yet"})),
    pager("groups", system, after, g));
  return {node, refresh: true};
};

views.group = async (p) => {
  const name = p.get("group");
  const g = await api("group", {group: name});
  const c = g.consistency;
  const perClient = new Map();
  for (const st of g.status) for (const cl of st.clients) perClient.set(cl.clientId, cl);
  const counts = [];
  for (const rep of g.filters) for (const f of rep.filters) counts.push([rep.broker, f]);
  const node = h("div", {},
    h("div", {class: "crumbs"}, link("groups", {}, "Groups"), " / "),
    h("div", {class: "title-row"}, h("h1", {}, g.group), consistencyBadge(c)),
    ui.cards(
      ui.card("Lag", fmt.num(g.totals.lag), `${fmt.num(g.totals.queues)} queue(s) of ${fmt.num(g.totals.topics)} topic(s)`),
      ui.card("In flight", fmt.num(g.totals.inflight), "POP: handed out, not acked"),
      ui.card("Members", fmt.num(g.members.length), g.members.length ? `${fmt.type(g.consumeType)} · ${g.messageModel}` : "offline"),
      ui.card("Last consumed", fmt.ago(g.totals.lastTimestamp), fmt.time(g.totals.lastTimestamp))),
    c.state === "inconsistent" ? h("div", {class: "alert error"}, h("strong", {}, "Inconsistent subscriptions: "),
      "these clients subscribe differently from the group and get no queues of those topics: ",
      Object.entries(c.inconsistentClients).map(([cid, subs]) => h("div", {}, h("code", {}, cid), " ",
        Object.entries(subs).map(([t, e]) => `${t}: ${e}`).join("; ")))) : null,
    ui.errors(g.errors),
    ui.section("Subscriptions", ui.table(["Topic", "Expression"],
      Object.entries(g.subscriptions).map(([t, e]) => [link("topic", {topic: t}, t), h("code", {}, e)]),
      {empty: "no client online: the group's subscriptions are its clients'"})),
    ui.section("Members", ui.table(["Client", "Address", "Language", "Version", "Subscriptions", "Consistent", "Heartbeat"],
      g.members.map((m) => {
        const st = perClient.get(m.clientId);
        const subs = st ? Object.entries(st.subscriptions).map(([t, s]) => h("div", {}, h("code", {}, t), " ", s.expression,
          s.consistent ? "" : " ≠ group")) : "–";
        return [h("code", {}, m.clientId), m.clientAddr, m.language, m.version, subs,
          st ? ui.badge(st.consistent ? "yes" : "no", st.consistent ? "ok" : "bad") : "–",
          st ? `${st.lastHeartbeatSecondsAgo} s ago` : "–"];
      }), {empty: "no member online"})),
    ui.section("Lag per queue", ui.table(
      ["Topic", "Broker", "Queue", "Broker offset", "Consumer offset", "Lag", "In flight", "Last consumed"],
      g.queues.map((q) => ({cls: q.lag ? "lagging" : null, cells: [link("topic", {topic: q.topic}, q.topic), q.brokerName,
        q.queueId, fmt.num(q.brokerOffset), fmt.num(q.consumerOffset), lagBadge(q.lag), fmt.num(q.inflight),
        fmt.time(q.lastTimestamp)]})),
      {numeric: ["Queue", "Broker offset", "Consumer offset", "Lag", "In flight"], empty: "no queues"})),
    g.queuesTotal > g.queues.length
      ? h("p", {class: "muted"}, `The ${fmt.num(g.queues.length)} most lagging of ${fmt.num(g.queuesTotal)} queues.`)
      : null,
    ui.section("Filter counts", filterCounts(counts)));
  return {node, refresh: true};
};

function filterCounts(counts) {
  return ui.table(["Broker", "Topic", "Expression", "Matched", "By tag hash", "By bitmap", "By evaluation", "Errors"],
    counts.map(([broker, f]) => [broker, f.topic, f.expression ? h("code", {}, `${f.expressionType || ""} ${f.expression}`) : "–",
      fmt.num(f.counts.matched), fmt.num(f.counts.filtered_by_tag), fmt.num(f.counts.filtered_by_bitmap),
      fmt.num(f.counts.filtered_by_evaluation), f.error ? ui.badge(f.error, "bad") : fmt.num(f.counts.evaluation_errors)]),
    {numeric: ["Matched", "By tag hash", "By bitmap", "By evaluation", "Errors"], empty: "no filter counts"});
}

// ------------------------------------------------------------------------------------------------- messages
function field(label, input) {
  return h("label", {class: "field"}, h("span", {}, label), input);
}

function searchForm(mode, p, title, fields, hint) {
  const form = h("form", {class: "search", "data-key": mode}, h("h3", {}, title), fields, h("button", {type: "submit"}, "Search"),
    hint ? h("p", {class: "muted small"}, hint) : null);
  form.addEventListener("submit", (ev) => {
    ev.preventDefault();
    const q = {mode};
    for (const el of form.querySelectorAll("input, select")) if (el.value) q[el.name] = el.value;
    location.hash = `#/messages?${new URLSearchParams(q)}`;
  });
  return form;
}

function input(name, p, placeholder, extra = {}) {
  return h("input", {name, value: p.get(name) || "", placeholder, spellcheck: "false", autocomplete: "off", ...extra});
}

// A time field's value as epoch milliseconds: the browser's local time (the server may be elsewhere). A date and
// time typed in the form is to the second: as the range's end (``end`` true) it takes in that whole second, so
// the messages shown as stored in it are found (docs/dashboard.md §7). Epoch milliseconds are taken as they are.
function toMs(value, fallback, end = false) {
  if (!value) return String(fallback.getTime());
  if (/^[0-9]+$/.test(value)) return value;
  const t = new Date(value).getTime();
  if (isNaN(t)) return value;
  return String(end && !/[.][0-9]+$/.test(value) ? t + 999 : t);
}

// A time parameter (epoch ms or a local date and time) as a Date, else ``fallback``.
function fromMs(value, fallback) {
  if (!value) return fallback;
  const d = /^[0-9]+$/.test(value) ? new Date(Number(value)) : new Date(value);
  return isNaN(d.getTime()) ? fallback : d;
}

// What a user who may not read message contents sees instead of them (docs/dashboard.md §5).
const HIDDEN = "hidden: this user may not read message bodies and property values";

function messageTable(messages) {
  return ui.table(["Stored", "Topic", "Broker", "Queue", "Offset", "Message id", "Tags", "Keys", "Body"],
    messages.map((m) => [fmt.time(m.storeTimestamp), m.topic, m.brokerName, m.queueId, m.queueOffset,
      link("message", {id: m.offsetMsgId}, m.msgId || m.offsetMsgId), m.tags || "–", (m.keys || []).join(" ") || "–",
      m.contentHidden ? h("span", {class: "hidden-content", title: HIDDEN}, `hidden (${fmt.bytes(m.bodySize)})`)
        : h("span", {class: "preview"}, m.bodyEncoding === "hex" ? `hex ${m.body}` : m.body)]),
    {numeric: ["Queue", "Offset"], empty: "no message found"});
}

views.messages = async (p) => {
  const mode = p.get("mode") || "";
  const now = new Date();
  const hourAgo = new Date(now.getTime() - 3600 * 1000);
  const local = (d) => new Date(d.getTime() - d.getTimezoneOffset() * 60000).toISOString().slice(0, 19);
  const forms = h("div", {class: "forms"},
    searchForm("id", p, "By message id", [field("Message id", input("id", p, "msgId or offsetMsgId", {required: true})),
      field("Topic (optional)", input("topic", mode === "id" ? p : new URLSearchParams(), "any topic"))]),
    searchForm("key", p, "By key", [field("Topic", input("topic", mode === "key" ? p : new URLSearchParams(), "topic", {required: true})),
      field("Key", input("key", p, "order-42", {required: true}))]),
    searchForm("time", p, "By time range", [field("Topic", input("topic", mode === "time" || !mode ? p : new URLSearchParams(), "topic", {required: true})),
      field("From", input("begin", new URLSearchParams({begin: local(fromMs(p.get("begin"), hourAgo))}), "", {type: "datetime-local", step: "1"})),
      field("To", input("end", new URLSearchParams({end: local(fromMs(p.get("end"), now))}), "", {type: "datetime-local", step: "1"})),
      field("At most", input("limit", p.get("limit") ? p : new URLSearchParams({limit: "100"}), "", {type: "number", min: "1", max: "500"}))],
      "Reads the stored messages without a consumer group: nothing is consumed."));
  const node = h("div", {}, h("h1", {}, "Messages"), forms);
  if (!["id", "key", "time"].includes(mode) || (mode === "time" && !p.get("topic"))) return {node, refresh: false};
  const results = h("div", {});
  node.appendChild(ui.section("Results", results));
  try {
    let r;
    if (mode === "id") r = await api("messages/by-id", {id: p.get("id"), topic: p.get("topic")});
    else if (mode === "key") r = await api("messages/by-key", {topic: p.get("topic"), key: p.get("key")});
    else r = await api("messages/by-time", {topic: p.get("topic"), begin: toMs(p.get("begin"), hourAgo), end: toMs(p.get("end"), now, true),
      limit: p.get("limit")});
    append(results, [h("p", {class: "muted"}, `${r.messages.length} message(s)`), (r.notes || []).map((n) => h("p", {class: "muted"}, n)),
      ui.errors(r.errors), messageTable(r.messages)]);
  } catch (e) {
    append(results, ui.failure(e));
  }
  return {node, refresh: false};
};

views.message = async (p) => {
  const r = await api("message", {id: p.get("id"), topic: p.get("topic")});
  const m = r.message;
  const props = Object.entries(m.properties || {});
  const node = h("div", {},
    h("div", {class: "crumbs"}, link("messages", {}, "Messages"), " / "),
    h("div", {class: "title-row"}, h("h1", {}, "Message ", h("code", {}, m.msgId || m.offsetMsgId)),
      link("trace", {id: m.msgId || m.offsetMsgId}, "Trace it")),
    ui.section("Where", ui.kv([
      ["Topic", link("topic", {topic: m.topic}, m.topic)],
      ["Queue", `${m.brokerName} #${m.queueId}, offset ${m.queueOffset}`],
      ["Message id", h("code", {}, m.msgId || "–")],
      ["Offset message id", h("code", {}, m.offsetMsgId)],
      ["Tags", m.tags || "–"],
      ["Keys", (m.keys || []).join(" ") || "–"],
      ["Born", `${fmt.time(m.bornTimestamp)} from ${m.bornHost}`],
      ["Stored", `${fmt.time(m.storeTimestamp)} on ${m.storeHost}`],
      ["Reconsume times", String(m.reconsumeTimes)],
      ["Body", m.contentHidden ? `${fmt.bytes(m.bodySize)} (hidden)`
        : `${fmt.bytes(m.bodySize)} (${m.bodyEncoding}${m.bodyTruncated ? ", preview" : ""})`]])),
    m.contentHidden ? ui.section("Properties and body", h("p", {class: "hidden-content"}, HIDDEN)) : [
      ui.section("Properties", ui.table(["Name", "Value"], props.map(([k, v]) => [h("code", {}, k), h("span", {class: "prop-value"}, v)]),
        {cls: "props"})),
      ui.section(`Body${m.bodyTruncated ? " (first " + fmt.bytes(m.body.length / (m.bodyEncoding === "hex" ? 2 : 1)) + ")" : ""}`,
        h("pre", {class: "body"}, m.body))],
    ui.section("Consumed by", ui.table(["Group", "State", "Online", "Committed offset", "Subscription"],
      r.consumption.map((t) => [link("group", {group: t.group}, t.group),
        ui.badge(t.state, t.state === "CONSUMED" ? "ok" : t.state === "NOT_CONSUME_YET" ? "warn" : "muted"),
        t.online ? "yes" : "no", t.consumerOffset === null ? "–" : fmt.num(t.consumerOffset), t.subscription || t.error || "–"]),
      {empty: "no group consumes its topic"})),
    r.records.length > 1 ? ui.section("Records with this id", messageTable(r.records)) : null);
  return {node, refresh: false};
};

// ------------------------------------------------------------------------------------------------- filters
views.filters = async (p) => {
  const type = p.get("type") || "SQL92";
  const select = h("select", {name: "type"}, ["SQL92", "TAG"].map((t) => h("option", {value: t, selected: t === type}, t)));
  const form = h("form", {class: "search wide"},
    h("h3", {}, "Explain a selector on stored messages"),
    h("div", {class: "row"}, field("Topic", input("topic", p, "topic", {required: true})), field("Type", select),
      field("Last messages per queue", input("last", p.get("last") ? p : new URLSearchParams({last: "1000"}), "", {type: "number", min: "1", max: "100000"}))),
    field("Expression", input("expression", p, "region = 'eu' AND amount > 100", {required: true})),
    h("button", {type: "submit"}, "Explain"));
  form.addEventListener("submit", (ev) => {
    ev.preventDefault();
    const q = {};
    for (const el of form.querySelectorAll("input, select")) if (el.value) q[el.name] = el.value;
    const g = p.get("group");
    if (g) q.group = g;
    location.hash = `#/filters?${new URLSearchParams(q)}`;
  });
  const gform = h("form", {class: "search"}, h("h3", {}, "A group's filter counts"),
    field("Group", input("group", p, "consumer group", {required: true})), h("button", {type: "submit"}, "Show"));
  gform.addEventListener("submit", (ev) => {
    ev.preventDefault();
    const q = Object.fromEntries([...p.entries()].filter(([k]) => k !== "group"));
    const v = gform.querySelector("input").value;
    if (v) q.group = v;
    location.hash = `#/filters?${new URLSearchParams(q)}`;
  });
  const node = h("div", {}, h("h1", {}, "Filters"), h("div", {class: "forms two"}, form, gform));
  if (p.get("topic") && p.get("expression")) {
    const out = h("div", {});
    node.appendChild(ui.section("Explain", out));
    try {
      const r = await api("explain", {topic: p.get("topic"), type, expression: p.get("expression"), last: p.get("last")});
      const t = r.totals;
      append(out, [
        ui.cards(ui.card("Scanned", fmt.num(t.scanned)), ui.card("Matched", fmt.num(t.matched)),
          ui.card("Not matched", fmt.num(t.notMatched)), ui.card("NULL", fmt.num(t.nullResults), "a property missing"),
          ui.card("Evaluation errors", fmt.num(t.evaluationErrors))),
        ui.table(["Broker", "Scanned", "Matched", "NULL", "Errors", "Missing properties", "Time"],
          r.reports.map((b) => [b.broker, fmt.num(b.scanned), fmt.num(b.matched), fmt.num(b.nullResults), fmt.num(b.evaluationErrors),
            Object.entries(b.messagesMissingProperty).map(([k, n]) => `${k}: ${n}`).join(", ") || "–",
            `${(b.seconds.total * 1000).toFixed(1)} ms`]), {numeric: ["Scanned", "Matched", "NULL", "Errors"]}),
        h("h3", {}, "Matching (sample)"), sampleTable(r.reports.flatMap((b) => b.sample.map((s) => [b.broker, s]))),
        h("h3", {}, "Not matching (sample)"), sampleTable(r.reports.flatMap((b) => b.notMatchedSample.map((s) => [b.broker, s])), true)]);
    } catch (e) {
      append(out, ui.failure(e));
    }
  }
  if (p.get("group")) {
    const out = h("div", {});
    node.appendChild(ui.section(`Filter counts of ${p.get("group")}`, out));
    try {
      const g = await api("group", {group: p.get("group")});
      const counts = [];
      for (const rep of g.filters) for (const f of rep.filters) counts.push([rep.broker, f]);
      append(out, filterCounts(counts));
    } catch (e) {
      append(out, ui.failure(e));
    }
  }
  return {node, refresh: false};
};

function sampleTable(rows, why) {
  const headers = ["Broker", "Queue", "Offset", "Tags", "Properties"].concat(why ? ["Why"] : []);
  return ui.table(headers, rows.map(([b, s]) => [b, s.queueId, s.queueOffset, s.tags || "–",
    Object.entries(s.properties).map(([k, v]) => h("div", {}, h("code", {}, k), " = ", v))].concat(why ? [s.why || "–"] : [])),
    {numeric: ["Queue", "Offset"], empty: "none"});
}
