"""The ``sievemq`` command: run the roles (dev, namesrv, broker) and administer topics."""

from __future__ import annotations

import asyncio
import logging
import sys
from collections.abc import Awaitable, Callable
from dataclasses import fields
from typing import Any, TypeVar

import click

from sievemq import __version__
from sievemq.config import BrokerConfig, NamesrvConfig, describe, load_config
from sievemq.errors import SieveError
from sievemq.runner import run_until_signalled

F = TypeVar("F", bound=Callable[..., Any])


def _setup_logging(level: str) -> None:
    logging.basicConfig(
        level=getattr(logging, level.upper(), logging.INFO),
        format="%(asctime)s %(levelname)-7s %(name)s: %(message)s",
        stream=sys.stderr,
    )


def config_options(cls: type[Any], skip: frozenset[str] = frozenset()) -> Callable[[F], F]:
    """One ``--kebab-case`` option per config field, documented from the field's doc."""

    def deco(f: F) -> F:
        for fld in reversed(fields(cls)):
            if fld.name in skip:
                continue
            opt = "--" + fld.name.replace("_", "-")
            typ = {bool: click.BOOL, int: click.INT, float: click.FLOAT}.get(fld.type, click.STRING)  # type: ignore[call-overload]
            if isinstance(fld.type, str):
                typ = {"bool": click.BOOL, "int": click.INT, "float": click.FLOAT}.get(fld.type, click.STRING)
            help_text = f"{fld.metadata.get('doc', '')} [default: {fld.default}]"
            f = click.option(opt, fld.name, type=typ, default=None, help=help_text)(f)
        return f

    return deco


def _overrides(kwargs: dict[str, Any], cls: type[Any]) -> dict[str, Any]:
    names = {f.name for f in fields(cls)}
    return {k: v for k, v in kwargs.items() if k in names and v is not None}


@click.group()
@click.version_option(__version__, prog_name="sievemq")
@click.option("--log-level", default="INFO", show_default=True, help="DEBUG, INFO, WARNING or ERROR")
def main(log_level: str) -> None:
    """sievemq: a RocketMQ-compatible message queue built around server-side filtering.

    Settings come from a TOML file (--config), then SIEVEMQ_<NAME> environment variables, then flags;
    later ones win. `sievemq config-reference` lists every setting.
    """
    _setup_logging(log_level)


@main.command()
@click.option("--data", default="./sievemq-data", show_default=True, help="folder for the broker's store")
@click.option("--host", default="127.0.0.1", show_default=True, help="address both roles listen on and advertise")
@click.option("--namesrv-port", default=9876, show_default=True, type=int, help="name server port")
@click.option("--broker-port", default=10911, show_default=True, type=int, help="broker port")
@click.option("--config", "config_path", default=None, help="broker TOML file (its settings apply to the broker)")
@click.option("--flush", type=click.Choice(["async", "sync"]), default=None, help="flush mode (default async)")
@click.option("--filtersrv", "filtersrv_nums", default=None, type=int, help="filter servers the broker starts (0)")
def dev(
    data: str,
    host: str,
    namesrv_port: int,
    broker_port: int,
    config_path: str | None,
    flush: str | None,
    filtersrv_nums: int | None,
) -> None:
    """Run a name server and a broker in one process (data in a local folder).

    Topics are created on first send (auto-create on). Ctrl-C stops cleanly: the store is flushed and
    marked clean, so the next start needs no recovery.
    """
    from sievemq.broker.controller import BrokerController
    from sievemq.namesrv.controller import NamesrvController

    try:
        ns_cfg = load_config(NamesrvConfig, None, overrides={"listen_host": host, "listen_port": namesrv_port})
        overrides: dict[str, Any] = {
            "listen_host": host,
            "broker_ip": host if host not in ("0.0.0.0", "") else "127.0.0.1",
            "listen_port": broker_port,
            "namesrv_addr": f"{'127.0.0.1' if host == '0.0.0.0' else host}:{namesrv_port}",
            "store_path_root_dir": data,
            "auto_create_topic_enable": True,
        }
        if flush:
            overrides["flush_disk_type"] = "SYNC_FLUSH" if flush == "sync" else "ASYNC_FLUSH"
        if filtersrv_nums is not None:
            overrides["filter_server_nums"] = filtersrv_nums
        br_cfg = load_config(BrokerConfig, config_path, overrides=overrides)
    except SieveError as e:
        raise click.ClickException(str(e)) from None

    async def run(stop: asyncio.Event) -> None:
        ns = NamesrvController(ns_cfg)
        await ns.start()
        broker = BrokerController(br_cfg)
        try:
            await broker.start()
        except Exception:
            await ns.stop()
            raise
        click.echo(f"sievemq {__version__} dev")
        click.echo(f"  name server  {ns.addr}")
        click.echo(f"  broker       {br_cfg.advertised_addr}  ({br_cfg.broker_name}, {br_cfg.flush_disk_type})")
        click.echo(f"  data         {br_cfg.store_path_root_dir}")
        click.echo("Press Ctrl-C to stop.", err=False)
        sys.stdout.flush()
        await stop.wait()
        click.echo("stopping...")
        await broker.stop()
        await ns.stop()
        click.echo("stopped cleanly")

    run_until_signalled(run)


@main.command()
@click.option("--config", "config_path", default=None, help="name server TOML file")
@config_options(NamesrvConfig)
def namesrv(config_path: str | None, **kwargs: Any) -> None:
    """Run a name server: the routing registry brokers register with and clients ask for routes."""
    from sievemq.namesrv.controller import NamesrvController

    try:
        cfg = load_config(NamesrvConfig, config_path, overrides=_overrides(kwargs, NamesrvConfig))
    except SieveError as e:
        raise click.ClickException(str(e)) from None

    async def run(stop: asyncio.Event) -> None:
        ns = NamesrvController(cfg)
        await ns.start()
        click.echo(f"sievemq name server listening on {ns.addr}")
        sys.stdout.flush()
        await stop.wait()
        await ns.stop()

    run_until_signalled(run)


@main.command()
@click.option("--config", "config_path", default=None, help="broker TOML file (RocketMQ key names accepted)")
@config_options(BrokerConfig)
def broker(config_path: str | None, **kwargs: Any) -> None:
    """Run a broker: the durable store, sends and pulls. Registers with every name server of namesrvAddr."""
    from sievemq.broker.controller import BrokerController

    try:
        cfg = load_config(BrokerConfig, config_path, overrides=_overrides(kwargs, BrokerConfig))
    except SieveError as e:
        raise click.ClickException(str(e)) from None

    async def run(stop: asyncio.Event) -> None:
        b = BrokerController(cfg)
        await b.start()
        click.echo(
            f"sievemq broker {cfg.broker_name} listening on {cfg.advertised_addr}, "
            f"name servers {cfg.namesrv_addr or '(none)'}, data {cfg.store_path_root_dir}"
        )
        sys.stdout.flush()
        await stop.wait()
        await b.stop()

    run_until_signalled(run)


@main.command("config-reference")
def config_reference() -> None:
    """Print every setting of the name server and the broker with its default."""
    for title, cls in (("name server", NamesrvConfig), ("broker", BrokerConfig)):
        click.echo(f"[{title}]")
        for key, typ, default, doc in describe(cls):
            click.echo(f"  {key:34} {typ:6} {default!r:<24} {doc}")
        click.echo("")


# ------------------------------------------------------------------------------------------------ topics
namesrv_option = click.option(
    "--namesrv",
    "-n",
    default="127.0.0.1:9876",
    envvar="SIEVEMQ_NAMESRV",
    show_default=True,
    help="name server address(es), ';'-separated",
)


def _admin(namesrv_addr: str, fn: Callable[[Any], Awaitable[None]]) -> None:
    from sievemq.admin.api import AdminClient

    async def go() -> None:
        async with AdminClient(namesrv_addr) as admin:
            await fn(admin)

    try:
        asyncio.run(go())
    except SieveError as e:
        raise click.ClickException(str(e)) from None
    except (OSError, RuntimeError) as e:
        raise click.ClickException(str(e)) from None


@main.group()
def topic() -> None:
    """Create, list and delete topics."""


@topic.command("create")
@click.argument("name")
@namesrv_option
@click.option("--queues", "-q", default=8, show_default=True, help="read and write queues per broker")
@click.option("--perm", default=6, show_default=True, help="permission bits: 4 read, 2 write")
@click.option("--order", is_flag=True, help="mark the topic as ordered")
@click.option("--broker", "-b", default=None, help="create on this broker (host:port) only")
@click.option("--cluster", "-c", default=None, help="create on every master of this cluster (default: all)")
def topic_create(
    name: str, namesrv: str, queues: int, perm: int, order: bool, broker: str | None, cluster: str | None
) -> None:
    """Create (or update) topic NAME."""

    async def go(admin: Any) -> None:
        targets = await admin.create_topic(name, queues, perm, order, broker=broker, cluster=cluster)
        click.echo(f"topic {name}: {queues} queues on {', '.join(targets)}")

    _admin(namesrv, go)


@topic.command("list")
@namesrv_option
@click.option("--all", "show_all", is_flag=True, help="include system topics (retry, DLQ, TBW102, ...)")
def topic_list(namesrv: str, show_all: bool) -> None:
    """List topics with their queues and message counts."""
    from sievemq.errors import RemotingError

    async def go(admin: Any) -> None:
        names = await admin.topic_list()
        brokers = {b.name: b for b in await admin.brokers()}
        system = set(brokers) | {b.cluster for b in brokers.values()}
        for t in names:
            if not show_all and (
                t.startswith(("%RETRY%", "%DLQ%", "rmq_sys_", "RMQ_SYS_"))
                or t in system
                or t in ("TBW102", "SELF_TEST_TOPIC", "OFFSET_MOVED_EVENT", "SCHEDULE_TOPIC_XXXX")
            ):
                continue
            try:
                route = await admin.route(t)
            except RemotingError:
                continue
            parts, total = [], 0
            for qd in route.queue_datas:
                addr = brokers[qd.broker_name].addrs.get(0) if qd.broker_name in brokers else None
                n = 0
                if addr:
                    for q in range(qd.read_queue_nums):
                        n += await admin.max_offset(addr, t, q) - await admin.min_offset(addr, t, q)
                total += n
                parts.append(f"{qd.broker_name}:{qd.write_queue_nums}q")
            click.echo(f"{t:40} {' '.join(parts):30} {total} messages")

    _admin(namesrv, go)


@topic.command("delete")
@click.argument("name")
@namesrv_option
@click.option("--cluster", "-c", default=None, help="delete on this cluster's brokers only (default: all)")
def topic_delete(name: str, namesrv: str, cluster: str | None) -> None:
    """Delete topic NAME, its queues, messages' index entries and consumer offsets."""

    async def go(admin: Any) -> None:
        targets = await admin.delete_topic(name, cluster)
        click.echo(f"topic {name} deleted on {', '.join(targets)}")

    _admin(namesrv, go)


@main.group()
def group() -> None:
    """Inspect consumer groups."""


@group.command("status")
@click.argument("name")
@namesrv_option
@click.option("--json", "as_json", is_flag=True, help="print the raw JSON of every broker")
def group_status(name: str, namesrv: str, as_json: bool) -> None:
    """Show consumer group NAME: each client, its expressions, consistent or not, its queues, and the lag."""
    import orjson

    async def go(admin: Any) -> None:
        statuses = await admin.group_status(name)
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

    _admin(namesrv, go)


# ------------------------------------------------------------------------------------------------ filtersrv
from sievemq.filtersrv.cli import filtersrv_group  # noqa: E402  (defined apart; must precede __main__ below)

main.add_command(filtersrv_group)


# ------------------------------------------------------------------------------------------------ client
from sievemq.client.cli import consume, produce  # noqa: E402  (defined apart; must precede __main__ below)

main.add_command(produce)
main.add_command(consume)


@group.command("filters")
@click.argument("name")
@namesrv_option
@click.option("--json", "as_json", is_flag=True, help="print the raw JSON of every broker")
def group_filters(name: str, namesrv: str, as_json: bool) -> None:
    """Show what consumer group NAME's filters matched and filtered out (by tag hash, Bloom bitmap, evaluation)."""
    import orjson

    async def go(admin: Any) -> None:
        reports = await admin.group_filters(name)
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
                    f"by bitmap {c['filtered_by_bitmap']}, by evaluation {c['filtered_by_evaluation']}, "
                    f"evaluation errors {c['evaluation_errors']}"
                )

    _admin(namesrv, go)


@main.command()
@click.option("--topic", "-t", required=True, help="topic whose stored messages to examine")
@click.option("--sql", "sql", default=None, help="a SQL92 selector, e.g. \"region = 'eu' AND amount > 100\"")
@click.option("--tag", "tag", default=None, help='a tag expression instead, e.g. "TagA || TagB"')
@click.option("--last", default=1000, show_default=True, help="examine the last N messages of each queue")
@click.option("--json", "as_json", is_flag=True, help="print the raw JSON of every broker")
@namesrv_option
def explain(topic: str, sql: str | None, tag: str | None, last: int, as_json: bool, namesrv: str) -> None:
    """Run a selector over a topic's stored messages: how many match, a sample, and where the time went.

    Answers "why don't I get my messages?": it shows messages that did not match and why (FALSE, NULL because a
    property is missing, or an evaluation error such as a number compared with text).
    """
    import orjson

    if (sql is None) == (tag is None):
        raise click.UsageError("give exactly one of --sql and --tag")
    expression, kind = (sql, "SQL92") if sql is not None else (tag or "", "TAG")

    async def go(admin: Any) -> None:
        reports = await admin.explain(topic, expression, kind, last)
        if as_json:
            click.echo(orjson.dumps(reports, option=orjson.OPT_INDENT_2).decode())
            return
        total = sum(r["scanned"] for r in reports)
        hits = sum(r["matched"] for r in reports)
        click.echo(f"{kind} {expression!r} on topic {topic}: {hits} of {total} messages match")
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

    _admin(namesrv, go)


if __name__ == "__main__":
    main()
