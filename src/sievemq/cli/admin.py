"""Administration commands of the ``sievemq`` CLI: topics, consumer groups, filters, explain."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Any

import click

from sievemq.acl.credentials import Credentials, credential_options, keys_of
from sievemq.cli.connect import namesrv_option
from sievemq.cli.selectors import selector_of, selector_options
from sievemq.cli.tls import tls_options
from sievemq.errors import SieveError
from sievemq.protocol.topic_attributes import MESSAGE_TYPES
from sievemq.remoting.tls import ClientTls

# ------------------------------------------------------------------------------------------------ topics


def _admin(
    namesrv_addr: str, fn: Callable[[Any], Awaitable[None]], credentials: Credentials | None, tls: ClientTls | None
) -> None:
    from sievemq.admin.api import AdminClient

    ak, sk = keys_of(credentials)

    async def go() -> None:
        async with AdminClient(namesrv_addr, access_key=ak, secret_key=sk, tls=tls) as admin:
            await fn(admin)

    try:
        asyncio.run(go())
    except SieveError as e:
        raise click.ClickException(str(e)) from None
    except (OSError, RuntimeError) as e:
        raise click.ClickException(str(e)) from None


@click.group()
def topic() -> None:
    """Create, list and delete topics."""


@topic.command("create")
@click.argument("name")
@namesrv_option
@credential_options
@tls_options
@click.option("--queues", "-q", default=8, show_default=True, help="read and write queues per broker")
@click.option("--perm", default=6, show_default=True, help="permission bits: 4 read, 2 write")
@click.option("--order", is_flag=True, help="mark the topic as ordered")
@click.option("--broker", "-b", default=None, help="create on this broker (host:port) only")
@click.option("--cluster", "-c", default=None, help="create on every master of this cluster (default: all)")
@click.option("--type", "message_type", type=click.Choice(MESSAGE_TYPES, case_sensitive=False), default=None,
              help="RocketMQ 5's message.type attribute (what 5.x clients may send to it)")
@click.option("--attributes", "-a", default="", help="RocketMQ 5's attribute changes, as mqadmin's: +key=value,-key")
def topic_create(
    name: str,
    namesrv: str,
    queues: int,
    perm: int,
    order: bool,
    broker: str | None,
    cluster: str | None,
    message_type: str | None,
    attributes: str,
    credentials: Credentials | None,
    tls: ClientTls | None,
) -> None:
    """Create (or update) topic NAME."""
    if message_type is not None:
        attributes = ",".join(a for a in (f"+message.type={message_type.upper()}", attributes) if a)

    async def go(admin: Any) -> None:
        targets = await admin.create_topic(name, queues, perm, order, broker=broker, cluster=cluster,
                                           attributes=attributes)  # fmt: skip
        click.echo(f"topic {name}: {queues} queues on {', '.join(targets)}")

    _admin(namesrv, go, credentials, tls)


@topic.command("list")
@namesrv_option
@credential_options
@tls_options
@click.option("--all", "show_all", is_flag=True, help="include system topics (retry, DLQ, TBW102, ...)")
@click.option("--json", "as_json", is_flag=True, help="JSON: per topic its broker sets, their replicas and lag")
def topic_list(
    namesrv: str, show_all: bool, as_json: bool, credentials: Credentials | None, tls: ClientTls | None
) -> None:
    """List topics with their queues and message counts."""
    import orjson

    async def go(admin: Any) -> None:
        topics = await admin.topic_summaries(show_all)
        if as_json:
            click.echo(orjson.dumps(topics, option=orjson.OPT_INDENT_2).decode())
            return
        if not topics:
            click.echo("no topics" + ("" if show_all else " (--all lists the system topics too)"))
        for t in topics:
            parts = " ".join(f"{b['brokerName']}:{b['writeQueueNums']}q" for b in t["brokers"])
            click.echo(f"{t['topic']:40} {parts:30} {t['messages']} messages")

    _admin(namesrv, go, credentials, tls)


@topic.command("delete")
@click.argument("name")
@namesrv_option
@credential_options
@tls_options
@click.option("--cluster", "-c", default=None, help="delete on this cluster's brokers only (default: all)")
def topic_delete(
    name: str, namesrv: str, cluster: str | None, credentials: Credentials | None, tls: ClientTls | None
) -> None:
    """Delete topic NAME, its queues, messages' index entries and consumer offsets."""

    async def go(admin: Any) -> None:
        from sievemq.admin.errors import TopicNotFound
        from sievemq.admin.topic_ops import topic_holders

        if cluster is not None:
            await admin.check_cluster(cluster)
        if not await topic_holders(admin, name, cluster):
            raise TopicNotFound(name)  # nothing was deleted
        targets = await admin.delete_topic(name, cluster)
        click.echo(f"topic {name} deleted on {', '.join(targets)}")

    _admin(namesrv, go, credentials, tls)


@click.group()
def group() -> None:
    """Inspect and configure consumer groups."""


@group.command("status")
@click.argument("name")
@namesrv_option
@credential_options
@tls_options
@click.option("--json", "as_json", is_flag=True, help="print the raw JSON of every broker")
def group_status(
    name: str, namesrv: str, as_json: bool, credentials: Credentials | None, tls: ClientTls | None
) -> None:
    """Show consumer group NAME: each client, its expressions, consistent or not, its queues, and the lag."""
    import orjson

    async def go(admin: Any) -> None:
        statuses = await admin.group_status(name)
        if not any(st["clients"] or st["topics"] for st in statuses):
            from sievemq.admin.errors import GroupNotFound
            from sievemq.admin.progress import known_groups

            if name not in await known_groups(admin):
                raise GroupNotFound(name)
        if as_json:
            click.echo(orjson.dumps(statuses, option=orjson.OPT_INDENT_2).decode())
            return
        for st in statuses:
            click.echo(f"group {st['group']} on broker {st['broker']} (subscriptionConsistency={st['mode']})")
            for topic, t in st["topics"].items():
                expr = t.get("expression", "-")
                click.echo(f"  topic {topic}: group expression '{expr}', lag {t['totalLag']}")
            if not st["clients"]:
                click.echo("  no live clients")
            for c in st["clients"]:
                state = "consistent" if c["consistent"] else "INCONSISTENT"
                click.echo(f"  client {c['clientId']} ({c['address']}, {c['language']}): {state}")
                for topic, sub in c["subscriptions"].items():
                    mark = "" if sub["consistent"] else "   <- differs from the group; gets no queues of this topic"
                    click.echo(f"    {topic}: '{sub['expression']}'{mark}")
                queues = ", ".join(f"{t}:{q}" for t, q in c["queues"]) or "none"
                click.echo(f"    queues pulled lately: {queues}")
            click.echo(f"  inconsistencies seen since start: {st['inconsistenciesSeen']}")

    _admin(namesrv, go, credentials, tls)


@group.command("filters")
@click.argument("name")
@namesrv_option
@credential_options
@tls_options
@click.option("--json", "as_json", is_flag=True, help="print the raw JSON of every broker")
def group_filters(
    name: str, namesrv: str, as_json: bool, credentials: Credentials | None, tls: ClientTls | None
) -> None:
    """Show what consumer group NAME's filters matched and filtered out (by tag hash, Bloom bitmap, evaluation, and
    its filter function on the brokers' filter servers)."""
    import orjson

    async def go(admin: Any) -> None:
        reports = await admin.group_filters(name)
        if not any(rep["filters"] for rep in reports):
            from sievemq.admin.errors import GroupNotFound
            from sievemq.admin.progress import known_groups

            if name not in await known_groups(admin):
                raise GroupNotFound(name)
        if as_json:
            click.echo(orjson.dumps(reports, option=orjson.OPT_INDENT_2).decode())
            return
        for rep in reports:
            click.echo(f"group {rep['group']} on broker {rep['broker']}")
            if not rep["filters"]:
                click.echo("  no subscriptions or filter counts")
            for flt in rep["filters"]:
                c = flt["counts"]
                click.echo(f"  topic {flt['topic']}: {flt['expressionType'] or '?'} '{flt['expression']}'")
                if "error" in flt:
                    click.echo(f"    DOES NOT COMPILE: {flt['error']}")
                click.echo(
                    f"    matched {c['matched']}, filtered out by tag hash {c['filtered_by_tag']}, "
                    f"by bitmap {c['filtered_by_bitmap']}, by evaluation {c['filtered_by_evaluation']} (Bloom false "
                    f"positives {c.get('bitmap_false_positives', 0)}), evaluation errors {c['evaluation_errors']}"
                )
                if (fc := flt.get("functionCounts")) is not None:
                    click.echo(f"    filter function (as its filter servers reported): matched {fc['matched']}, "
                               f"filtered out {fc['filteredOut']}, failed batches {fc['errors']}")  # fmt: skip

    _admin(namesrv, go, credentials, tls)


@group.command("update")
@click.argument("name")
@namesrv_option
@credential_options
@tls_options
@click.option("--orderly/--not-orderly", default=None,
              help="FIFO group: its 5.x consumers get the messages of a message group one at a time, in order "
              "(consumeMessageOrderly)")  # fmt: skip
@click.option("--retry-max-times", type=click.IntRange(-1, 2**31 - 1), default=None,
              help="deliveries after the first before a message goes to %DLQ%NAME (retryMaxTimes)")  # fmt: skip
@click.option("--consume-enable/--consume-disable", default=None, help="let the group consume (consumeEnable)")
@click.option("--broker", "-b", default=None, help="change it on this broker (host:port) only")
@click.option("--cluster", "-c", default=None, help="change it on every master of this cluster (default: all)")
def group_update(
    name: str,
    namesrv: str,
    orderly: bool | None,
    retry_max_times: int | None,
    consume_enable: bool | None,
    broker: str | None,
    cluster: str | None,
    credentials: Credentials | None,
    tls: ClientTls | None,
) -> None:
    """Create consumer group NAME, or change the settings given (the others stay as they are)."""
    given = {"consumeMessageOrderly": orderly, "retryMaxTimes": retry_max_times, "consumeEnable": consume_enable}
    changes = {k: v for k, v in given.items() if v is not None}

    async def go(admin: Any) -> None:
        for addr, cfg in await admin.update_group(name, changes, broker=broker, cluster=cluster):
            click.echo(f"group {name} on {addr}: orderly={str(cfg.get('consumeMessageOrderly', False)).lower()} "
                       f"retryMaxTimes={cfg.get('retryMaxTimes')} "
                       f"consumeEnable={str(cfg.get('consumeEnable', True)).lower()}")  # fmt: skip

    _admin(namesrv, go, credentials, tls)


@click.command()
@click.option("--topic", "-t", required=True, help="topic whose stored messages to examine")
@selector_options("a tag expression, e.g. 'TagA || TagB'")
@click.option("--last", default=1000, show_default=True, help="examine the last N messages of each queue")
@click.option("--json", "as_json", is_flag=True, help="print the raw JSON of every broker")
@namesrv_option
@credential_options
@tls_options
def explain(
    topic: str,
    tag: str | None,
    sql: str | None,
    expr: str | None,
    last: int,
    as_json: bool,
    namesrv: str,
    credentials: Credentials | None,
    tls: ClientTls | None,
) -> None:
    """Run a selector over a topic's stored messages: how many match, a sample, and where the time went.

    Answers "why don't I get my messages?": it shows messages that did not match and why (FALSE, NULL because a
    property is missing, or an evaluation error such as a number compared with text).
    """
    import orjson

    kind, expression = selector_of(tag, sql, expr, default_tag=None)

    async def go(admin: Any) -> None:
        reports = await admin.explain(topic, expression, kind, last)
        if as_json:
            click.echo(orjson.dumps(reports, option=orjson.OPT_INDENT_2).decode())
            return
        total = sum(r["scanned"] for r in reports)
        hits = sum(r["matched"] for r in reports)
        click.echo(f"{kind} {expression!r} on topic {topic}: {hits} of {total} messages match")
        neither: dict[str, int] = {}
        for r in reports:
            for w in r.get("warnings", []):
                neither[w["text"]] = neither.get(w["text"], 0) + int(w.get("messagesWithNeither", 0))
        for text, n in neither.items():
            click.echo(f"  warning: {text} ({n} of the {total} messages scanned have neither)")
        for r in reports:
            sec = r["seconds"]
            click.echo(
                f"  broker {r['broker']}: scanned {r['scanned']}, matched {r['matched']}, NULL {r['nullResults']}, "
                f"evaluation errors {r['evaluationErrors']}"
            )
            for prop, n in sorted(r["messagesMissingProperty"].items()):
                click.echo(f"    property {prop!r} is missing in {n} of {r['scanned']} messages")
            click.echo(
                f"    time: read {sec['read'] * 1000:.1f} ms, decode {sec['decode'] * 1000:.1f} ms, "
                f"evaluate {sec['evaluate'] * 1000:.1f} ms, total {sec['total'] * 1000:.1f} ms"
            )
            for row in r["sample"][:5]:
                click.echo(
                    f"    match     q{row['queueId']}@{row['queueOffset']} tags={row['tags']} {row['properties']}"
                )
            for row in r["notMatchedSample"][:5]:
                click.echo(
                    f"    no match  q{row['queueId']}@{row['queueOffset']} tags={row['tags']} {row['properties']}"
                    f"  {row.get('why', '')}"
                )

    _admin(namesrv, go, credentials, tls)


@click.group()
def cluster() -> None:
    """Watch the broker sets of the clusters."""


@cluster.command("status")
@namesrv_option
@credential_options
@tls_options
@click.option("--json", "as_json", is_flag=True, help="print one JSON object per broker")
def cluster_status(namesrv: str, as_json: bool, credentials: Credentials | None, tls: ClientTls | None) -> None:
    """Every broker of every set: role, address, commit-log end, a slave's lag (bytes, seconds) and link state."""
    import orjson

    async def go(admin: Any) -> None:
        rows = await admin.cluster_status()
        if as_json:
            click.echo(orjson.dumps(rows, option=orjson.OPT_INDENT_2).decode())
            return
        if not rows:
            click.echo("no brokers registered")
        for r in rows:
            head = f"{r['cluster']}/{r['brokerName']} #{r['brokerId']} {r['addr']:21} {r['role']:12}"
            tail = ""
            if "epoch" in r:  # automatic failover
                tail = f"  epoch {r['epoch']}  brokerId {r['replicaId']}"
                if r["role"] != "SLAVE":
                    tail += f"  SyncStateSet {r['syncStateSet']}"
                    history = r.get("epochHistory") or []
                    if history:  # each epoch after the first began with an election or a handover
                        tail += f"  epoch began at offset {history[-1][1]}"
            if r["state"] in ("unreachable", "refused"):
                click.echo(f"{head} {r['state'].upper()}: {r['error']}")
            elif r["role"] == "SLAVE":
                click.echo(f"{head} max {r['commitLogMaxOffset']}  behind {r['lagBytes']} B / "
                           f"{r['lagSeconds']:.1f} s  {r['state']}{tail}")  # fmt: skip
            else:
                click.echo(f"{head} max {r['commitLogMaxOffset']}  slaves {r['slaves']}  {r['state']}{tail}")

    _admin(namesrv, go, credentials, tls)


COMMANDS = [topic, group, explain, cluster]
