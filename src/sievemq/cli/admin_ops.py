"""The operator's everyday commands (docs/admin.md): ``group list|progress|reset-offset|delete``, ``message
show|find|verify``, ``topic peek`` and ``dlq resend``; each with ``--json``. The ``group`` and ``topic`` subcommands are
added to the groups of ``cli/admin.py``."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import click

from sievemq.acl.credentials import Credentials, credential_options
from sievemq.admin.message_view import MessageView, body_text
from sievemq.admin.render import consume_type_word, echo_json, print_table
from sievemq.admin.timespec import ResetPoint, format_ms, parse_reset_point, parse_time
from sievemq.cli.admin import _admin, group, topic
from sievemq.cli.connect import namesrv_option
from sievemq.cli.tls import tls_options
from sievemq.cli.trace import message_trace_cmd
from sievemq.errors import SieveError
from sievemq.remoting.tls import ClientTls

__all__ = ["COMMANDS"]

_json_option = click.option("--json", "as_json", is_flag=True, help="print JSON (stable field names: docs/admin.md)")


class _ResetPointType(click.ParamType):  # type: ignore[type-arg]  # generic from click 8.2 on
    name = "earliest|latest|TIME"

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> ResetPoint:
        if isinstance(value, ResetPoint):
            return value
        try:
            return parse_reset_point(str(value))
        except ValueError as e:
            self.fail(str(e), param, ctx)


class _TimeType(click.ParamType):  # type: ignore[type-arg]  # generic from click 8.2 on
    name = "TIME"

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> int:
        if isinstance(value, int):
            return value
        try:
            return parse_time(str(value))
        except ValueError as e:
            self.fail(str(e), param, ctx)


class _MessageIdType(click.ParamType):  # type: ignore[type-arg]  # generic from click 8.2 on
    """A message id (UNIQ_KEY or offsetMsgId): anything else is refused before a search (exit 2, as every malformed
    value)."""

    name = "MSG_ID"

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> str:
        from sievemq.admin.messages import message_id

        try:
            return message_id(str(value))
        except ValueError as e:
            self.fail(str(e), param, ctx)


# ------------------------------------------------------------------------------------------------ groups
@group.command("list")
@namesrv_option
@credential_options
@tls_options
@click.option("--all", "show_all", is_flag=True, help="include the brokers' and tools' own groups")
@_json_option
def group_list_cmd(
    namesrv: str, show_all: bool, as_json: bool, credentials: Credentials | None, tls: ClientTls | None
) -> None:
    """Every consumer group: members online, how it consumes, and its lag over all brokers."""
    from sievemq.admin.progress import group_list

    async def go(admin: Any) -> None:
        groups = await group_list(admin, show_all)
        if as_json:
            echo_json([g.to_json() for g in groups])
            return
        if not groups:
            click.echo("no consumer groups")
            return
        rows = [[g.group, g.members, consume_type_word(g.consume_type), g.message_model, g.lag, g.inflight,
                 format_ms(g.last_timestamp), ", ".join(g.topics) or "-"] for g in groups]  # fmt: skip
        print_table(["GROUP", "MEMBERS", "TYPE", "MODEL", "LAG", "INFLIGHT", "LAST CONSUMED", "TOPICS"], rows,
                    numeric=["MEMBERS", "LAG", "INFLIGHT"])  # fmt: skip
        for g in groups:
            for broker, err in g.errors.items():
                click.echo(f"group {g.group}: broker {broker} did not answer: {err}", err=True)

    _admin(namesrv, go, credentials, tls)


@group.command("progress")
@click.argument("name")
@namesrv_option
@credential_options
@tls_options
@click.option("--topic", "-t", default=None, help="only this topic's queues")
@_json_option
def group_progress_cmd(
    name: str, namesrv: str, topic: str | None, as_json: bool, credentials: Credentials | None, tls: ClientTls | None
) -> None:
    """Consumer group NAME per queue: broker offset, consumer offset, lag, last consume time; and its members."""
    from sievemq.admin.progress import group_progress

    async def go(admin: Any) -> None:
        p = await group_progress(admin, name, topic)
        if as_json:
            echo_json(p.to_json())
            return
        click.echo(f"consumer group {p.group}: {len(p.members)} member(s) online"
                   + (f" ({consume_type_word(p.consume_type)}, {p.message_model})" if p.members else "")
                   + f", lag {p.lag}, last consumed {format_ms(p.last_timestamp)}")  # fmt: skip
        for t, expr in p.subscriptions.items():
            click.echo(f"  subscribes {t}: {expr}")
        if p.message_model == "BROADCASTING":
            click.echo("  broadcasting: each client keeps its own offsets; the brokers' lag below means nothing")
        pop = p.inflight > 0 or p.consume_type == "CONSUME_POP"
        cols = ["TOPIC", "BROKER", "QUEUE", "BROKER OFFSET", "CONSUMER OFFSET", "LAG"] + (["INFLIGHT"] if pop else [])
        rows = [[q.topic, q.broker, q.queue_id, q.broker_offset, q.consumer_offset, q.lag]
                + ([q.inflight] if pop else []) + [format_ms(q.last_timestamp)] for q in p.queues]  # fmt: skip
        rows.append(["TOTAL", "", len(p.queues), sum(q.broker_offset for q in p.queues),
                     sum(q.consumer_offset for q in p.queues), p.lag] + ([p.inflight] if pop else [])
                    + [format_ms(p.last_timestamp)])  # fmt: skip
        print_table([*cols, "LAST CONSUMED"], rows, numeric=["QUEUE", "BROKER OFFSET", "CONSUMER OFFSET", "LAG",
                                                            "INFLIGHT"])  # fmt: skip
        if p.members:
            print_table(["CLIENT ID", "ADDRESS", "LANGUAGE", "VERSION", "BROKERS"],
                        [[m.client_id, m.client_addr, m.language, m.version, ", ".join(m.brokers)]
                         for m in p.members])  # fmt: skip
        for broker, err in p.errors.items():
            click.echo(f"broker {broker} did not answer (its queues are missing above): {err}", err=True)

    _admin(namesrv, go, credentials, tls)


@group.command("reset-offset")
@click.argument("name")
@namesrv_option
@credential_options
@tls_options
@click.option("--topic", "-t", required=True, help="the topic whose offsets to reset")
@click.option("--to", "point", required=True, type=_ResetPointType(),
              help="earliest, latest, epoch milliseconds or ISO-8601 time (local time without a zone)")  # fmt: skip
@_json_option
def group_reset_offset_cmd(
    name: str,
    namesrv: str,
    topic: str,
    point: ResetPoint,
    as_json: bool,
    credentials: Credentials | None,
    tls: ClientTls | None,
) -> None:
    """Move consumer group NAME's offsets of a topic; its running consumers move too (docs/admin.md §4)."""
    from sievemq.admin.group_ops import reset_offset

    async def go(admin: Any) -> None:
        r = await reset_offset(admin, name, topic, point)
        if as_json:
            echo_json(r.to_json())
        else:
            at = "" if r.timestamp in (0, -1) else f" ({format_ms(r.timestamp)})"
            click.echo(f"consumer group {r.group}, topic {r.topic}: reset to {r.to}{at}")
            print_table(["BROKER", "QUEUE", "BEFORE", "AFTER", "MOVED"],
                        [[q.broker, q.queue_id, q.before, q.after,
                          q.after - q.before if q.before is not None else "-"] for q in r.queues],
                        numeric=["QUEUE", "BEFORE", "AFTER", "MOVED"])  # fmt: skip
            changed = sum(1 for q in r.queues if q.before != q.after)
            told = f"; told {len(r.clients_told)} online consumer(s): {', '.join(r.clients_told)}" if r.clients_told \
                else "; no consumer online"  # fmt: skip
            click.echo(f"{changed} of {len(r.queues)} queue(s) changed{told}")
        for broker, err in r.errors.items():
            click.echo(f"broker {broker}: NOT reset: {err}", err=True)
        if r.errors:
            raise SieveError(f"the offsets on {len(r.errors)} broker set(s) were not reset (see above)")

    _admin(namesrv, go, credentials, tls)


@group.command("delete")
@click.argument("name")
@namesrv_option
@credential_options
@tls_options
@click.option("--force", is_flag=True, help="delete even with consumers online")
@click.option("--keep-offsets", is_flag=True, help="keep the group's committed offsets (a re-created group resumes)")
@click.option("--delete-dlq", is_flag=True, help="delete its dead-letter topic %DLQ%NAME too (default: kept)")
@_json_option
def group_delete_cmd(
    name: str,
    namesrv: str,
    force: bool,
    keep_offsets: bool,
    delete_dlq: bool,
    as_json: bool,
    credentials: Credentials | None,
    tls: ClientTls | None,
) -> None:
    """Delete consumer group NAME on every master: config, offsets and POP state, retry topic (refused while its
    consumers are online, unless --force)."""
    from sievemq.admin.group_ops import delete_group

    async def go(admin: Any) -> None:
        r = await delete_group(admin, name, force=force, keep_offsets=keep_offsets, delete_dlq=delete_dlq)
        if as_json:
            echo_json(r.to_json())
        else:
            kept = " (offsets kept)" if keep_offsets else " (offsets removed)"
            click.echo(f"consumer group {r.group} deleted on {', '.join(r.brokers) or 'no broker'}{kept}")
            if r.members:
                click.echo(f"  {len(r.members)} consumer(s) were online: {', '.join(r.members)}")
            if r.retry_topic_deleted:
                click.echo(f"  retry topic %RETRY%{r.group} deleted")
            if r.dlq_topic and r.dlq_deleted:
                click.echo(f"  dead-letter topic {r.dlq_topic} deleted ({r.dlq_messages} messages)")
            elif r.dlq_topic:
                click.echo(f"  dead-letter topic {r.dlq_topic} kept ({r.dlq_messages} messages; --delete-dlq "
                           "deletes it)")  # fmt: skip
        for broker, err in r.errors.items():
            click.echo(f"broker {broker}: NOT deleted: {err}", err=True)
        if r.errors:
            raise SieveError(f"the group was not deleted on {len(r.errors)} broker set(s) (see above)")

    _admin(namesrv, go, credentials, tls)


# ------------------------------------------------------------------------------------------------ messages
@click.group()
def message() -> None:
    """Find stored messages and see who consumed them."""


message.add_command(message_trace_cmd)  # ``message trace`` (docs/traces.md)

def _message_rows(views: list[MessageView]) -> list[list[Any]]:
    rows = []
    for v in views:
        m = v.msg
        encoding, text = body_text(v.body, 60)
        text = text if encoding == "utf-8" else f"0x{text}"
        rows.append([format_ms(m.store_timestamp), v.broker, m.queue_id, m.queue_offset, m.uniq_key or m.offset_msg_id,
                     m.tags, " ".join(m.keys) or None, text.replace("\n", " ")[:60]])  # fmt: skip
    return rows


_MESSAGE_COLUMNS = ["STORED", "BROKER", "QUEUE", "OFFSET", "MSG ID", "TAGS", "KEYS", "BODY"]


@message.command("show")
@click.argument("msg_id", type=_MessageIdType())
@namesrv_option
@credential_options
@tls_options
@click.option("--topic", "-t", default=None, help="the message's topic (faster for a message id; else all topics)")
@click.option("--body-file", type=click.Path(dir_okay=False, writable=True), default=None,
              help="write the whole body to this file")  # fmt: skip
@click.option("--no-tracking", is_flag=True, help="do not ask which groups consumed it")
@_json_option
def message_show_cmd(
    msg_id: str,
    namesrv: str,
    topic: str | None,
    body_file: str | None,
    no_tracking: bool,
    as_json: bool,
    credentials: Credentials | None,
    tls: ClientTls | None,
) -> None:
    """Show message MSG_ID (the msgId a send returns, or an offsetMsgId) and which groups consumed it."""
    from sievemq.admin.messages import consumption, show

    async def go(admin: Any) -> None:
        found = await show(admin, msg_id, topic)
        tracks = [[] if no_tracking else await consumption(admin, v) for v in found.messages]
        if body_file is not None:
            Path(body_file).write_bytes(found.messages[0].body)
        if as_json:
            echo_json([{**v.to_json(), "consumedBy": [t.to_json() for t in ts]}
                       for v, ts in zip(found.messages, tracks, strict=True)])  # fmt: skip
            return
        for i, (v, ts) in enumerate(zip(found.messages, tracks, strict=True)):
            if i:
                click.echo("")
            for line in v.lines():
                click.echo(line)
            if ts:
                print_table(["GROUP", "STATE", "ONLINE", "CONSUMER OFFSET", "SUBSCRIPTION"],
                            [[t.group, t.state.value, "yes" if t.online else "no", t.consumer_offset,
                              t.subscription or t.error] for t in ts], title="consumed by")  # fmt: skip
            elif not no_tracking:
                click.echo("no group consumes its topic")
        if body_file is not None:
            click.echo(f"body ({len(found.messages[0].body)} bytes) written to {body_file}")

    _admin(namesrv, go, credentials, tls)


@message.command("verify")
@click.argument("msg_id", type=_MessageIdType())
@namesrv_option
@credential_options
@tls_options
@click.option("--group", "-g", "group_name", required=True, help="the consumer group whose listener consumes it")
@click.option("--client", "client_id", default=None, help="the consumer's client id (default: the group's first "
              "consumer online at the message's broker; `sievemq group progress` lists them)")  # fmt: skip
@click.option("--topic", "-t", default=None, help="the message's topic (faster for a message id; else all topics)")
@click.option("--timeout", type=click.FloatRange(0.5, 60.0), default=10.0, show_default=True,
              help="seconds to wait for the consumer's answer")  # fmt: skip
@_json_option
def message_verify_cmd(
    msg_id: str,
    namesrv: str,
    group_name: str,
    client_id: str | None,
    topic: str | None,
    timeout: float,
    as_json: bool,
    credentials: Credentials | None,
    tls: ClientTls | None,
) -> None:
    """Have one consumer of GROUP run its listener on message MSG_ID and say what it did (RocketMQ's
    consumeMessageDirectly; 5.x clients are asked through their proxy). Offsets do not move. Exits 1 unless the
    listener consumed it."""
    from sievemq.admin.verify import verify

    outcome: list[bool] = []

    async def go(admin: Any) -> None:
        v = await verify(admin, msg_id, group_name, client_id, topic, int(timeout * 1000))
        outcome.append(v.ok)
        if as_json:
            echo_json(v.to_json())
            return
        if v.result is not None:
            r = v.result
            word = r.consume_result.value if r.consume_result else "no verdict"
            click.echo(f"message {v.msg_id} ({v.topic} on {v.broker}): consumer {v.client_id} of group {v.group} "
                       f"answered {word} in {r.spent_ms} ms")  # fmt: skip
            for line in r.remark.strip().splitlines():
                click.echo(f"  {line}")
        if v.error is not None:
            click.echo(f"message {v.msg_id}: not verified by {v.client_id}: {v.error}", err=True)

    _admin(namesrv, go, credentials, tls)
    if outcome != [True]:
        sys.exit(1)


@message.command("find")
@namesrv_option
@credential_options
@tls_options
@click.option("--topic", "-t", required=True, help="topic to search")
@click.option("--key", "-k", required=True, help="a business key (KEYS) or a message id")
@click.option("--begin", type=_TimeType(), default=None, help="stored at or after (epoch ms or ISO-8601)")
@click.option("--end", type=_TimeType(), default=None, help="stored at or before (epoch ms or ISO-8601)")
@click.option("--max", "limit", type=click.IntRange(1, 1000), default=64, show_default=True, help="most messages")
@_json_option
def message_find_cmd(
    namesrv: str,
    topic: str,
    key: str,
    begin: int | None,
    end: int | None,
    limit: int,
    as_json: bool,
    credentials: Credentials | None,
    tls: ClientTls | None,
) -> None:
    """Every message of a topic with a key, over all brokers, newest first."""
    from sievemq.admin.messages import find_by_key

    async def go(admin: Any) -> None:
        found = await find_by_key(admin, topic, key, begin or 0, end, limit)
        if as_json:
            echo_json(found.to_json())
        elif found.messages:
            print_table(_MESSAGE_COLUMNS, _message_rows(found.messages), numeric=["QUEUE", "OFFSET"])
            click.echo(f"{len(found.messages)} message(s) with key {key} in {topic}")
        else:
            click.echo(f"no message with key {key} in {topic}")
        for broker, err in found.errors.items():
            click.echo(f"broker {broker} did not answer: {err}", err=True)

    _admin(namesrv, go, credentials, tls)


@topic.command("peek")
@click.argument("name")
@namesrv_option
@credential_options
@tls_options
@click.option("--queue", "-q", type=click.IntRange(min=0), default=None, help="only this queue id")
@click.option("--broker", "-b", default=None, help="only this broker set (broker name)")
@click.option("--offset", "-o", type=click.IntRange(min=0), default=None,
              help="read from this offset (default: the last COUNT messages)")  # fmt: skip
@click.option("--count", "-c", type=click.IntRange(1, 1000), default=10, show_default=True,
              help="messages per queue")  # fmt: skip
@_json_option
def topic_peek_cmd(
    name: str,
    namesrv: str,
    queue: int | None,
    broker: str | None,
    offset: int | None,
    count: int,
    as_json: bool,
    credentials: Credentials | None,
    tls: ClientTls | None,
) -> None:
    """Read topic NAME's messages without a consumer group: nothing is committed or created on the brokers."""
    from sievemq.admin.peek import peek

    async def go(admin: Any) -> None:
        p = await peek(admin, name, queue=queue, offset=offset, count=count, broker=broker)
        if as_json:
            echo_json(p.to_json())
        elif p.messages:
            print_table(_MESSAGE_COLUMNS, _message_rows(p.messages), numeric=["QUEUE", "OFFSET"])
        else:
            click.echo(f"no messages in {name}" + (" from that offset" if offset is not None else ""))
        for note in p.notes:
            click.echo(note, err=True)
        for b, err in p.errors.items():
            click.echo(f"broker {b} did not answer: {err}", err=True)

    _admin(namesrv, go, credentials, tls)


# ------------------------------------------------------------------------------------------------ DLQ
@click.group()
def dlq() -> None:
    """Dead-letter topics: send their messages back to be consumed again."""


@dlq.command("resend")
@click.argument("group_name", metavar="GROUP")
@namesrv_option
@credential_options
@tls_options
@click.option("--dry-run", is_flag=True, help="say what would be resent; send nothing")
@click.option("--key", "-k", default=None, help="only dead letters with this key")
@click.option("--msg-id", type=_MessageIdType(), default=None,
              help="only the dead letter with this message id (or offsetMsgId)")  # fmt: skip
@click.option("--to-origin", is_flag=True,
              help="send to the original topic (every group of it gets them) instead of %RETRY%GROUP")  # fmt: skip
@_json_option
def dlq_resend_cmd(
    group_name: str,
    namesrv: str,
    dry_run: bool,
    key: str | None,
    msg_id: str | None,
    to_origin: bool,
    as_json: bool,
    credentials: Credentials | None,
    tls: ClientTls | None,
) -> None:
    """Send GROUP's dead letters (%DLQ%GROUP) back so that GROUP consumes them again, each once (docs/admin.md §6)."""
    from sievemq.admin.dlq import resend

    async def go(admin: Any) -> None:
        r = await resend(admin, group_name, dry_run=dry_run, key=key, msg_id=msg_id, to_origin=to_origin)
        if as_json:
            echo_json(r.to_json())
        else:
            verb = "would resend" if dry_run else "resent"
            click.echo(f"{r.dlq_topic}: {r.examined} dead letter(s) examined, {r.selected} selected: {len(r.resent)} "
                       f"{verb}, {r.already} resent before (skipped), {len(r.failed)} failed")  # fmt: skip
            if r.resent:
                print_table(["DEAD LETTER", "MSG ID", "ORIGINAL TOPIC", "SENT TO", "TAGS", "KEYS"],
                            [[e["deadLetter"], e["msgId"], e["originTopic"], e["topic"], e["tags"],
                              " ".join(e["keys"]) or None] for e in r.resent])  # fmt: skip
            for mark, why in r.failed.items():
                click.echo(f"{mark}: NOT resent: {why}", err=True)
            if dry_run:
                click.echo("dry run: nothing was sent")
        for broker, err in r.errors.items():
            click.echo(f"broker {broker}: {err}", err=True)
        if r.failed or r.errors:
            raise SieveError(f"{len(r.failed)} dead letter(s) not resent, {len(r.errors)} broker set(s) failed "
                             "(see above); run it again to resend the rest")

    _admin(namesrv, go, credentials, tls)


COMMANDS = [message, dlq]
