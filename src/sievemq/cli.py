"""The ``sievemq`` command: run the roles (dev, namesrv, broker) and administer topics."""

from __future__ import annotations

import asyncio
import logging
import sys
from collections.abc import Callable
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


# ------------------------------------------------------------------------------------------------ admin
from sievemq.admin.cli import COMMANDS as ADMIN_COMMANDS  # noqa: E402  (defined apart; must precede __main__)

for _command in ADMIN_COMMANDS:
    main.add_command(_command)

# ------------------------------------------------------------------------------------------------ filtersrv
from sievemq.filtersrv.cli import filtersrv_group  # noqa: E402  (defined apart; must precede __main__ below)

main.add_command(filtersrv_group)


# ------------------------------------------------------------------------------------------------ client
from sievemq.client.cli import consume, produce  # noqa: E402  (defined apart; must precede __main__ below)

main.add_command(produce)
main.add_command(consume)


if __name__ == "__main__":
    main()
