"""``sievemq message trace ID``: what happened to a message (its trace records: sent, delivered, consumed, retried,
dead-lettered, its transaction) and why each consumer group of its topic gets it or not (docs/traces.md)."""

from __future__ import annotations

from typing import Any

import click

from sievemq.acl.credentials import Credentials, credential_options
from sievemq.cli.admin import _admin
from sievemq.cli.connect import namesrv_option
from sievemq.cli.tls import tls_options
from sievemq.remoting.tls import ClientTls

__all__ = ["message_trace_cmd", "print_report"]


def _when(ms: int | None) -> str:
    from sievemq.admin.timespec import format_ms

    return format_ms(ms or 0)


def print_report(doc: dict[str, Any]) -> None:
    """The report of ``AdminClient.message_trace`` for people."""
    from sievemq.admin.render import print_table

    m = doc["message"]
    if m is not None:
        click.echo(f"message {doc['msgId']}: topic {m['topic']}, {m['brokerName']} queue {m['queueId']} offset "
                   f"{m['queueOffset']}, tags {m['tags'] or '-'}, keys {' '.join(m['keys']) or '-'}, stored "
                   f"{_when(m['storeTimestamp'])} (born on {m['bornHost']})")  # fmt: skip
    else:
        click.echo(f"message {doc['msgId']}: not found in its topic ({doc['errors'].get('message', '')})")
    click.echo(f"{doc['traceRecords']} trace record(s) in {doc['traceTopic']}")
    for s in doc["sent"]:
        where = f" ({s['brokerName']} queue {s['queueId']} offset {s['queueOffset']})" if "queueId" in s else ""
        click.echo(f"sent {_when(s['timestamp'])} by group {s['producerGroup']} from {s['clientHost']} to "
                   f"{s['storeHost']}{where} in {s['costMs']} ms: {s['status']} ({s['msgType']})")  # fmt: skip
    for x in doc["transaction"]:
        check = ", asked by a check-back" if x["fromTransactionCheck"] else ""
        click.echo(f"transaction {_when(x['timestamp'])} by group {x['producerGroup']}: {x['state']}{check}")
    if doc["events"]:
        print_table(["TIME", "EVENT", "GROUP", "HOST", "DETAIL"],
                    [[_when(e["timestamp"]), e["event"], e["group"], e["host"] or None, e["detail"]]
                     for e in doc["events"]], title="timeline")  # fmt: skip
    rows = []
    for g in doc["groups"]:
        f = g["filter"]
        filt = f"{f['verdict']} ({f['stage']})" if f else None
        sub = f["subscription"] if f else None
        expr = f"{sub['expressionType']} {sub['expression']}" if sub else None
        rows.append([g["group"], g["state"], len(g["deliveries"]), g["retries"], expr, filt,
                     f["reason"] if f else None])  # fmt: skip
    if rows:
        print_table(["GROUP", "STATE", "DELIVERIES", "RETRIES", "SUBSCRIPTION", "FILTER", "WHY"], rows,
                    numeric=["DELIVERIES", "RETRIES"], title="consumer groups")  # fmt: skip
    else:
        click.echo("no consumer group of its topic is known")
    for key, err in doc["errors"].items():
        if key != "message" or m is None:
            click.echo(f"{key}: {err}", err=True)


@click.command("trace")
@click.argument("msg_id")
@namesrv_option
@credential_options
@tls_options
@click.option("--topic", "-t", default=None, help="the message's topic (default: the topic its traces name)")
@click.option("--trace-topic", default="RMQ_SYS_TRACE_TOPIC", show_default=True,
              help="the topic the clients write traces to (a client's custom trace topic)")  # fmt: skip
@click.option("--group", "-g", "group_name", default=None, help="only this consumer group")
@click.option("--json", "as_json", is_flag=True, help="print JSON (stable field names: docs/traces.md)")
def message_trace_cmd(
    msg_id: str,
    namesrv: str,
    topic: str | None,
    trace_topic: str,
    group_name: str | None,
    as_json: bool,
    credentials: Credentials | None,
    tls: ClientTls | None,
) -> None:
    """Show message MSG_ID's trace (sent, delivered and consumed per group and client, retried, dead-lettered, its
    transaction) and, for every consumer group of its topic, whether its subscription lets the message through and
    why not (tag not in the set, SQL92 FALSE or NULL for a missing property, Bloom bitmap negative)."""
    from sievemq.admin.messages import message_id
    from sievemq.admin.render import echo_json

    try:
        message_id(msg_id)
    except ValueError as e:
        raise click.BadParameter(str(e), param_hint="MSG_ID") from None

    async def go(admin: Any) -> None:
        doc = await admin.message_trace(msg_id, topic, trace_topic, group_name)
        if as_json:
            echo_json(doc)
        else:
            print_report(doc)

    _admin(namesrv, go, credentials, tls)
