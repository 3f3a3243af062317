"""The ``sievemq`` command: run the roles (dev, namesrv, broker) and administer topics."""

from __future__ import annotations

import asyncio
import sys
from dataclasses import fields
from functools import partial
from pathlib import Path
from typing import Any

import click

from sievemq.broker.config import BrokerConfig
from sievemq.cli import log_levels as cli_logging
from sievemq.cli.connect import export_line
from sievemq.cli.exits import RootGroup
from sievemq.cli.runner import config_options, run_until_signalled
from sievemq.dashboard.config import DashboardConfig
from sievemq.errors import SieveError
from sievemq.filtersrv.config import FiltersrvConfig, load_filtersrv_config
from sievemq.http.settings import DEV_PORT, derived_problem, http_port
from sievemq.namesrv.config import NamesrvConfig
from sievemq.proxy.config import ProxyConfig
from sievemq.settings import describe, load_config
from sievemq.util import heap
from sievemq.version import __version__

REFERENCE_SECTIONS: tuple[tuple[str, type[Any]], ...] = (
    ("name server (`sievemq namesrv`)", NamesrvConfig),
    ("broker (`sievemq broker`, `sievemq dev`)", BrokerConfig),
    ("filter server (`sievemq filtersrv`; env prefix `SIEVEMQ_FILTERSRV_`)", FiltersrvConfig),
    ("proxy (`sievemq proxy`, gRPC for 5.x clients)", ProxyConfig),
    ("dashboard (`sievemq dashboard`; env prefix `SIEVEMQ_DASHBOARD_`)", DashboardConfig),
)


def _overrides(kwargs: dict[str, Any], cls: type[Any]) -> dict[str, Any]:
    names = {f.name for f in fields(cls)}
    return {k: v for k, v in kwargs.items() if k in names and v is not None}


@click.group(cls=RootGroup)  # Ctrl-C exits 130, a closed stdout 141, in every command (cli/exits.py)
@click.version_option(__version__, prog_name="sievemq")
@cli_logging.log_level_option
def main(log_level: str | None) -> None:
    """sievemq: a RocketMQ-compatible message queue built around server-side filtering.

    Settings come from a TOML file (--config), then SIEVEMQ_<NAME> environment variables, then flags;
    later ones win. `sievemq config-reference` lists every setting. Servers log INFO on stderr; client and admin
    commands only warnings and errors (-v: INFO).
    """
    cli_logging.setup(log_level)


@main.command()
@click.option("--data", default="./sievemq-data", show_default=True, help="folder for the broker's store")
@click.option("--host", default="127.0.0.1", show_default=True, help="address both roles listen on and advertise")
@click.option("--namesrv-port", default=9876, show_default=True, type=int, help="name server port")
@click.option("--broker-port", default=10911, show_default=True, type=int, help="broker port")
@click.option("--grpc-port", default=8081, show_default=True, type=int,
              help="port of the gRPC proxy for RocketMQ 5.x clients (0: none)")  # fmt: skip
@click.option("--http-port", default=None, type=click.IntRange(0, 65535),
              help="HTTP port of the dashboard, /metrics (Prometheus) and /healthz for all three roles (0: none; "
              f"default: httpListenPort of --config or SIEVEMQ_HTTP_LISTEN_PORT when set, else {DEV_PORT})")
@click.option("--config", "config_path", default=None, help="broker TOML file (its settings apply to the broker)")
@click.option("--flush", type=click.Choice(["async", "sync"], case_sensitive=False), default=None,
              help="flush mode (default async)")  # fmt: skip
@click.option("--filtersrv", "filtersrv_nums", default=None, type=int,
              help="filter servers the broker starts (0; 1 with --filter-modules)")  # fmt: skip
@click.option("--filter-modules", default=None, metavar="MODULES",
              help="modules whose functions consumers may name (shop.filters,other.mod) on those filter servers")
@click.option("--filter-paths", default=None, metavar="FOLDERS",
              help="folders the filter servers import --filter-modules from (comma-separated)")
@click.option("--tls", "use_tls", is_flag=True, help="TLS on both ports, with a self-signed certificate in DATA/tls")
@click.option("--tls-cert", default=None, type=click.Path(exists=True, dir_okay=False), help="your certificate instead")
@click.option("--tls-key", default=None, type=click.Path(exists=True, dir_okay=False), help="the key of --tls-cert")
@click.option("--tls-mode", type=click.Choice(["enforcing", "permissive"], case_sensitive=False), default="enforcing",
              show_default=True,
              help="with TLS: TLS only, or TLS and plain TCP on the same ports")  # fmt: skip
def dev(
    data: str,
    host: str,
    namesrv_port: int,
    broker_port: int,
    grpc_port: int,
    http_port: int | None,
    config_path: str | None,
    flush: str | None,
    filtersrv_nums: int | None,
    filter_modules: str | None,
    filter_paths: str | None,
    use_tls: bool,
    tls_cert: str | None,
    tls_key: str | None,
    tls_mode: str,
) -> None:
    """Run a name server, a broker and the gRPC proxy in one process (data in a local folder).

    Topics are created on first send (auto-create on). Ctrl-C stops cleanly: the store is flushed and
    marked clean, so the next start needs no recovery. With --tls (or --tls-cert/--tls-key) both ports speak TLS
    (docs/protocol/tls.md); the banner says how to connect. Prometheus metrics of all three roles are on
    http://HOST:8080/metrics (--http-port, or httpListenPort; docs/metrics.md), and the dashboard on http://HOST:8080/
    (docs/dashboard.md; its account with ACL on: SIEVEMQ_DASHBOARD_ACCESS_KEY, SIEVEMQ_DASHBOARD_SECRET_KEY; with ACL
    on it asks for a login: the first start makes DATA/dashboard-users.toml and prints its admin token once).

    Filter functions: sievemq dev --filtersrv 1 --filter-modules shop.filters --filter-paths /opt/filters
    (other filter server settings: a TOML file named by the broker's filterServerConfig).
    """
    from sievemq.broker.controller import BrokerController
    from sievemq.namesrv.controller import NamesrvController

    try:
        tls = None
        if use_tls or tls_cert or tls_key:
            from sievemq.cli.devcert import dev_tls

            tls = dev_tls(Path(data), (host,) if host not in ("0.0.0.0", "") else (), tls_mode, tls_cert, tls_key)
        ns_overrides = {"listen_host": host, "listen_port": namesrv_port, "http_listen_port": 0,
                        **(tls.namesrv() if tls else {})}  # fmt: skip
        ns_cfg = load_config(NamesrvConfig, None, overrides=ns_overrides)
        overrides: dict[str, Any] = {
            "listen_host": host,
            "broker_ip": host if host not in ("0.0.0.0", "") else "127.0.0.1",
            "listen_port": broker_port,
            "namesrv_addr": f"{'127.0.0.1' if host in ('0.0.0.0', '') else host}:{namesrv_port}",
            "store_path_root_dir": data,
            "auto_create_topic_enable": True,
            "http_listen_port": 0,  # the dev command's own HTTP port serves all three roles
        }
        if flush:
            overrides["flush_disk_type"] = "SYNC_FLUSH" if flush == "sync" else "ASYNC_FLUSH"
        filtersrv_args = _dev_filter_args(filter_modules, filter_paths)
        if filtersrv_nums is None and filter_modules:
            filtersrv_nums = 1
        if filtersrv_nums is not None:
            overrides["filter_server_nums"] = filtersrv_nums
        if tls is not None:
            overrides.update(tls.broker())
        if http_port is None:  # the broker's httpListenPort (TOML, environment) when set: dev's one HTTP port
            mine = {k: v for k, v in overrides.items() if k != "http_listen_port"}
            asked = load_config(BrokerConfig, config_path, overrides=mine)
            http_port = DEV_PORT if asked.http_listen_port == -1 else asked.http_listen_port
        br_cfg = load_config(BrokerConfig, config_path, overrides=overrides)
        from sievemq.dashboard.serve import load_dashboard_config, logins

        board_cfg = load_dashboard_config(overrides={"namesrv_addr": overrides["namesrv_addr"],
                                                     **(tls.dashboard() if tls is not None else {})})  # fmt: skip
        board_logins = logins(board_cfg, acl_enabled=br_cfg.acl_enable,
                              data_dir=Path(br_cfg.store_path_root_dir)) if http_port else None  # fmt: skip
    except SieveError as e:
        raise click.ClickException(str(e)) from None

    async def run(stop: asyncio.Event) -> None:
        ns = NamesrvController(ns_cfg)
        await ns.start()
        broker = BrokerController(br_cfg)
        broker.filter_servers.extra_args += filtersrv_args
        try:
            await broker.start()
        except Exception:
            await ns.stop()
            raise
        proxy_tls = tls.proxy() if tls is not None else {}
        proxy = await _dev_proxy(ns.addr, host, br_cfg.broker_ip, grpc_port, proxy_tls) if grpc_port else None
        board, http = await _dev_http(ns, broker, proxy, host, http_port, board_cfg, board_logins)
        click.echo(f"sievemq {__version__} dev")
        click.echo(f"  name server  {ns.addr}")
        if (export := export_line(br_cfg.namesrv_addr)) is not None:  # not where the CLI looks by default
            click.echo(f"  CLI          {export}  (then sievemq commands use this name server)")
        click.echo(f"  broker       {br_cfg.advertised_addr}  ({br_cfg.broker_name}, {br_cfg.flush_disk_type})")
        if proxy is not None:
            click.echo(f"  gRPC proxy   {proxy.addr}  (RocketMQ 5.x clients{', TLS only' if tls else ''})")
        if http is not None:
            click.echo(f"  dashboard    {http.url}/")
            for line in board_logins.banner() if board_logins is not None else ():
                click.echo(line)
            click.echo(f"  metrics      {http.url}/metrics  (Prometheus; {http.url}/healthz)")
        click.echo(f"  data         {br_cfg.store_path_root_dir}")
        for line in tls.connect_lines(ns.addr) if tls else ():
            click.echo(line)
        click.echo("Press Ctrl-C to stop.", err=False)
        sys.stdout.flush()
        heap.settle()  # started: later garbage collections pause the loop briefly
        await stop.wait()
        click.echo("stopping...")
        if http is not None:
            await http.stop()
        if board is not None:
            await board.close()
        if proxy is not None:
            await proxy.stop()
        await broker.stop()
        await ns.stop()
        click.echo("stopped cleanly")

    run_until_signalled(run)


def _dev_filter_args(modules: str | None, paths: str | None) -> list[str]:
    """The flags of the filter servers ``dev`` starts, checked here (a bad value stops ``dev`` with its reason)."""
    overrides = {"filter_modules": modules, "filter_paths": paths}
    load_filtersrv_config(None, overrides=overrides)
    args = ["--filter-modules", modules] if modules else []
    return args + (["--filter-paths", paths] if paths else [])


async def _dev_proxy(namesrv: str, host: str, advertised_ip: str, port: int, tls: dict[str, Any]) -> Any:
    """The dev command's gRPC proxy (with ``tls``, the TLS settings of ``dev --tls``), or None (with a warning) when
    its port is taken."""
    from sievemq.proxy.server import ProxyServer

    cfg = load_config(ProxyConfig, None, overrides={"namesrv_addr": namesrv, "listen_host": host,
                                                    "listen_port": port, "advertised_ip": advertised_ip,
                                                    **tls})  # fmt: skip
    proxy = ProxyServer(cfg)
    try:
        await proxy.start()
    except RuntimeError as e:
        await proxy.stop()
        click.echo(f"warning: the gRPC proxy did not start on {host}:{port} ({e}); choose a free port with "
                   "--grpc-port, or 0 to turn it off", err=True)  # fmt: skip
        return None
    return proxy


async def _dev_http(
    ns: Any, broker: Any, proxy: Any, host: str, port: int, board_cfg: Any, board_logins: Any
) -> tuple[Any, Any]:
    """The dev command's HTTP port for its roles and the dashboard (asking for ``board_logins``, None: none): (the
    ``Dashboard``, the ``ProcessHttp``), both None when off, or (with a warning) when its port is taken."""
    from sievemq.broker.metrics import broker_metrics
    from sievemq.dashboard.serve import Dashboard
    from sievemq.http.serve import start_http
    from sievemq.http.server import HttpPortError
    from sievemq.namesrv.metrics import namesrv_metrics
    from sievemq.proxy.metrics import proxy_metrics

    if not port:
        return None, None
    roles = [namesrv_metrics(ns), broker_metrics(broker), *([proxy_metrics(proxy)] if proxy is not None else [])]
    board = Dashboard(board_cfg, host, board_logins)
    try:
        http = await start_http(roles, host, port, loop_lag=broker.loop_lag.stats, hint="--http-port",
                                routes=board.routes)  # fmt: skip
    except HttpPortError as e:
        await board.close()
        click.echo(f"warning: {e}", err=True)
        return None, None
    return board, http


async def _role_http(role: Any, cfg: Any, stop_role: Any, loop_lag: Any = None) -> Any:
    """A standalone role's HTTP port (a ``ProcessHttp``; None: off) for its config ``cfg``. When its port cannot
    be had the role is stopped (``stop_role()``) and ``HttpPortError`` ends the command with its message."""
    from sievemq.http.serve import start_http
    from sievemq.http.server import HttpPortError

    problem = derived_problem(role.role, cfg.http_listen_port, cfg.listen_port)
    if problem is not None:
        click.echo(f"warning: {problem}", err=True)
    port = http_port(role.role, cfg.http_listen_port, cfg.listen_port)
    try:
        http = await start_http([role], cfg.http_listen_host, port, loop_lag=loop_lag)
    except HttpPortError:
        await stop_role()
        raise
    if http is not None:
        click.echo(f"metrics on {http.url}/metrics")
    return http


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
        from sievemq.namesrv.metrics import namesrv_metrics

        ns = NamesrvController(cfg)
        await ns.start()
        http = await _role_http(namesrv_metrics(ns), cfg, ns.stop)
        click.echo(f"sievemq name server listening on {ns.addr}")
        sys.stdout.flush()
        heap.settle()  # started: later garbage collections pause the loop briefly
        await stop.wait()
        if http is not None:
            await http.stop()
        await ns.stop()

    run_until_signalled(run)


@main.command()
@click.option("--config", "config_path", default=None, help="broker TOML file (RocketMQ key names accepted)")
@click.option("--recover-from-slave", default="", metavar="HOST:PORT",
              help="a master: first copy the commit log of the slave at HOST:PORT (its remoting address), then "
              "serve (docs/protocol/replication.md §5)")  # fmt: skip
@config_options(BrokerConfig)
def broker(config_path: str | None, recover_from_slave: str, **kwargs: Any) -> None:
    """Run a broker: the durable store, sends and pulls. Registers with every name server of namesrvAddr."""
    from sievemq.broker.controller import BrokerController

    try:
        cfg = load_config(BrokerConfig, config_path, overrides=_overrides(kwargs, BrokerConfig))
    except SieveError as e:
        raise click.ClickException(str(e)) from None
    if recover_from_slave and cfg.broker_role == "SLAVE":
        raise click.ClickException("--recover-from-slave is for a master (brokerRole ASYNC_MASTER or SYNC_MASTER)")
    if cfg.controller_mode == "etcd":
        if recover_from_slave:
            raise click.ClickException("--recover-from-slave is not for controllerMode = etcd: a set under automatic "
                                       "failover elects its master and truncates a returning one by itself")
        run_until_signalled(partial(_failover_broker, cfg))
        return

    async def run(stop: asyncio.Event) -> None:
        from sievemq.broker.metrics import broker_metrics

        b = BrokerController(cfg, recover_from=recover_from_slave)
        await b.start()  # a failed recovery (RecoveryError) ends the command with its message
        http = await _role_http(broker_metrics(b), cfg, b.stop, b.loop_lag.stats)
        click.echo(
            f"sievemq broker {cfg.broker_name} listening on {cfg.advertised_addr}, "
            f"name servers {cfg.namesrv_addr or '(none)'}, data {cfg.store_path_root_dir}"
        )
        sys.stdout.flush()
        heap.settle()  # started: later garbage collections pause the loop briefly
        await stop.wait()
        if http is not None:
            await http.stop()
        await b.stop()

    run_until_signalled(run)


async def _failover_broker(cfg: BrokerConfig, stop: asyncio.Event) -> None:
    """``sievemq broker`` under ``controllerMode = etcd``: the broker runs in whatever role its set's state in etcd
    gives it (docs/failover.md)."""
    from sievemq.broker.controller import BrokerController
    from sievemq.broker.failover import FailoverBroker
    from sievemq.broker.metrics import broker_metrics
    from sievemq.http.serve import ProcessHttp, start_http
    from sievemq.http.server import HttpPortError

    served: list[ProcessHttp] = []

    async def http_follows(controller: BrokerController | None) -> None:
        """The HTTP port (/metrics, /healthz) serves the running term's broker."""
        while served:
            await served.pop().stop()
        if controller is None:
            return
        port = http_port("broker", cfg.http_listen_port, cfg.listen_port)
        try:
            http = await start_http([broker_metrics(controller)], cfg.http_listen_host, port,
                                    loop_lag=controller.loop_lag.stats)  # fmt: skip
        except HttpPortError as e:
            click.echo(f"warning: {e}", err=True)
            return
        if http is not None:
            served.append(http)

    b = FailoverBroker(cfg, on_term=http_follows)
    await b.start()
    click.echo(f"sievemq broker {cfg.broker_name} (brokerId {cfg.broker_id}, automatic failover on etcd "
               f"{cfg.etcd_endpoints}) starting on {cfg.advertised_addr}, data {cfg.store_path_root_dir}")  # fmt: skip
    sys.stdout.flush()
    heap.settle()  # started: later garbage collections pause the loop briefly
    await stop.wait()
    await b.stop()


@main.command()
@click.option("--config", "config_path", default=None, help="proxy TOML file")
@config_options(ProxyConfig)
def proxy(config_path: str | None, **kwargs: Any) -> None:
    """Run the gRPC proxy (apache.rocketmq.v2) for RocketMQ 5.x clients in front of a cluster (docs/proxy.md)."""
    from sievemq.proxy.server import ProxyServer

    try:
        cfg = load_config(ProxyConfig, config_path, overrides=_overrides(kwargs, ProxyConfig))
    except SieveError as e:
        raise click.ClickException(str(e)) from None

    async def run(stop: asyncio.Event) -> None:
        from sievemq.proxy.metrics import proxy_metrics

        server = ProxyServer(cfg)
        await server.start()
        http = await _role_http(proxy_metrics(server), cfg, server.stop)
        click.echo(f"sievemq proxy (gRPC, apache.rocketmq.v2) listening on {server.addr}, name servers "
                   f"{cfg.namesrv_addr}")  # fmt: skip
        sys.stdout.flush()
        heap.settle()  # started: later garbage collections pause the loop briefly
        await stop.wait()
        if http is not None:
            await http.stop()
        await server.stop()

    run_until_signalled(run)


def _markdown_value(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    return '""' if value == "" else str(value)


def reference_markdown() -> str:
    """The configuration reference (docs/configuration.md): one table row per setting of every role."""

    def cell(text: str) -> str:
        return text.replace("|", "\\|")

    lines = ["| key | default | allowed | meaning |", "| --- | --- | --- | --- |"]
    for title, cls in REFERENCE_SECTIONS:
        lines.append(f"| **{title}** | | | |")
        for key, _typ, default, doc, allowed in describe(cls):
            lines.append(f"| `{key}` | `{cell(_markdown_value(default))}` | {cell(allowed)} | {cell(doc)} |")
    return "\n".join(lines) + "\n"


@main.command("config-reference")
@click.option("--markdown", is_flag=True, help="print the Markdown table of docs/configuration.md instead")
def config_reference(markdown: bool) -> None:
    """Print every setting of the name server, the broker and the filter server: default, allowed values, meaning."""
    if markdown:
        click.echo(reference_markdown(), nl=False)
        return
    for title, cls in REFERENCE_SECTIONS:
        click.echo(f"[{title.replace('`', '')}]")
        for key, typ, default, doc, allowed in describe(cls):
            click.echo(f"  {key:34} {typ:6} {default!r:<24} {doc}")
            click.echo(f"  {'':34} {'':6} allowed: {allowed}")
        click.echo("")


# ------------------------------------------------------------------------------------------------ admin
from sievemq.cli.admin import COMMANDS as ADMIN_COMMANDS  # noqa: E402  (defined apart; must precede __main__)

for _command in ADMIN_COMMANDS:
    main.add_command(_command)

from sievemq.cli.admin_ops import COMMANDS as OPS_COMMANDS  # noqa: E402  (group list/progress/..., message, dlq)

for _command in OPS_COMMANDS:
    main.add_command(_command)

from sievemq.cli.acl import COMMANDS as ACL_COMMANDS  # noqa: E402  (acl user|policy|migrate: docs/acl2.md)

for _command in ACL_COMMANDS:
    main.add_command(_command)

# ------------------------------------------------------------------------------------------------ filtersrv
from sievemq.cli.filtersrv import filtersrv_group  # noqa: E402  (defined apart; must precede __main__ below)

main.add_command(filtersrv_group)


# ------------------------------------------------------------------------------------------------ dashboard
from sievemq.cli.dashboard import dashboard  # noqa: E402  (defined apart; must precede __main__ below)

main.add_command(dashboard)

# ------------------------------------------------------------------------------------------------ client
from sievemq.cli.client import consume, produce  # noqa: E402  (defined apart; must precede __main__ below)

main.add_command(produce)
main.add_command(consume)

# Client and admin commands (whatever is not a server role) log warnings only; -v shows INFO (cli_logging.py).
SERVER_COMMANDS = frozenset({"dev", "namesrv", "broker", "proxy", "dashboard"})
cli_logging.add_verbose(cmd for name, cmd in main.commands.items() if name not in SERVER_COMMANDS)


if __name__ == "__main__":
    main()
