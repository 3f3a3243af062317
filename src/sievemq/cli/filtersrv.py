"""``sievemq filtersrv``: run a filter server, or ask one for its status (``sievemq filtersrv status``).

Kept apart from ``sievemq.cli.app`` (which only adds this group) so the filter server's imports load on demand.
"""

from __future__ import annotations

import asyncio
import sys
import time
from typing import Any

import click
import orjson

from sievemq.cli.runner import config_options, run_until_signalled
from sievemq.errors import SieveError
from sievemq.filtersrv.config import FiltersrvConfig, load_filtersrv_config

_options = config_options(FiltersrvConfig, aliases={"broker_addr": ["--broker"]}, shown={"upload_secret": "(none)"})


async def _serve(cfg: FiltersrvConfig, stop: asyncio.Event) -> None:
    from sievemq.filtersrv.controller import FiltersrvController
    from sievemq.filtersrv.metrics import filtersrv_metrics
    from sievemq.http.serve import start_http
    from sievemq.http.server import HttpPortError

    ctl = FiltersrvController(cfg)
    await ctl.start()
    try:
        http = await start_http([filtersrv_metrics(ctl)], cfg.http_listen_host, cfg.http_listen_port or None)
    except HttpPortError:
        await ctl.stop()
        raise
    click.echo(f"sievemq filter server listening on {ctl.addr}, broker {cfg.broker_addr}")
    if http is not None:
        click.echo(f"metrics on {http.url}/metrics")
    sys.stdout.flush()
    done = asyncio.ensure_future(ctl.done.wait())
    stopped = asyncio.ensure_future(stop.wait())
    await asyncio.wait({done, stopped}, return_when=asyncio.FIRST_COMPLETED)
    done.cancel()
    stopped.cancel()
    if http is not None:
        await http.stop()
    await ctl.stop()


def _run(cfg: FiltersrvConfig) -> None:
    async def main(stop: asyncio.Event) -> None:
        await _serve(cfg, stop)

    run_until_signalled(main)


@click.group("filtersrv", invoke_without_command=True)
@click.option("--config", "config_path", default=None, help="filter server TOML file")
@_options
@click.pass_context
def filtersrv_group(ctx: click.Context, /, config_path: str | None, **kwargs: Any) -> None:
    """Run a filter server for one broker: consumers' filter functions run here, in sandboxed workers.

    Example: sievemq filtersrv --broker 127.0.0.1:10911 --filter-modules shop.filters --filter-paths /opt/filters

    Settings come from --config (TOML), then SIEVEMQ_FILTERSRV_<NAME> variables, then flags.
    `sievemq filtersrv status --addr HOST:PORT` prints a running filter server's per-function counts.
    """
    if ctx.invoked_subcommand is not None:
        return
    try:
        cfg = load_filtersrv_config(config_path, overrides={k: v for k, v in kwargs.items() if v is not None})
    except SieveError as e:
        raise click.ClickException(str(e)) from None
    _run(cfg)


def _age(ms: int) -> str:
    if not ms:
        return "never"
    return f"{max(0.0, time.time() - ms / 1000):.0f} s ago"


def print_status(st: dict[str, Any]) -> None:
    """Human-readable status of a filter server."""
    w = st.get("workers", {})
    click.echo(
        f"filter server {st.get('filterServerAddr')}  broker {st.get('brokerName') or '?'} "
        f"(id {st.get('brokerId')}) at {st.get('brokerAddr')}, registered {_age(int(st.get('lastRegisteredMs', 0)))}"
    )
    replaced = ", ".join(f"{k} {v}" for k, v in sorted(w.get("replaced", {}).items())) or "none"
    click.echo(
        f"workers: {w.get('size')} (pids {' '.join(str(p) for p in w.get('pids', []))}), "
        f"batch limit {w.get('batchTimeoutSeconds')} s, cpu {w.get('cpuSeconds')} s, "
        f"memory {w.get('memoryMb')} MiB; replaced: {replaced}"
    )
    _print_tenants(w.get("uploads") or {})
    refused = f" ({st['uploadsRefused']})" if st.get("uploadsRefused") else ""
    click.echo(
        f"uploads {'enabled' if st.get('uploadsEnabled') else 'disabled'}{refused}; "
        f"filterModules: {', '.join(st.get('filterModules', [])) or 'none'}"
    )
    sandbox = w.get("sandbox") or {}
    active = ", ".join(sandbox.get("active", [])) or "none"
    missing = "; ".join(f"{k}: {v}" for k, v in (sandbox.get("missing") or {}).items()) or "none"
    click.echo(f"sandbox (sandboxRequire {st.get('sandboxRequire', '?')}): active {active}; missing: {missing}")
    funcs = st.get("functions", [])
    if not funcs:
        click.echo("no filter functions registered")
        return
    head = ("topic", "group", "function", "state", "seen", "matched", "filtered", "errors", "ms")
    rows = [head]
    for fn in funcs:
        state = "enabled" if fn["enabled"] else "DISABLED"
        rows.append((
            fn["topic"], fn["consumerGroup"], f"{fn['className']} ({fn['kind']})", state, str(fn["seen"]),
            str(fn["matched"]), str(fn["filteredOut"]), str(fn["errors"]), f"{fn['timeSpentMs']:.1f}",
        ))  # fmt: skip
    widths = [max(len(r[i]) for r in rows) for i in range(len(head))]
    for r in rows:
        click.echo("  ".join(c.ljust(widths[i]) if i < 4 else c.rjust(widths[i]) for i, c in enumerate(r)))
    for fn in funcs:
        if fn["lastError"]:
            click.echo(f"{fn['topic']}@{fn['consumerGroup']} last error: {fn['lastError']}")
        if fn["disabledReason"]:
            click.echo(f"{fn['topic']}@{fn['consumerGroup']} {fn['disabledReason']}")


def _print_tenants(up: dict[str, Any]) -> None:
    """The uploaded functions' own workers (docs/protocol/filter-server.md §8)."""
    if not up:
        return
    tenants = up.get("tenants", [])
    click.echo(
        f"upload workers: {up.get('workers', 0)} of at most {up.get('maxWorkers')} ({up.get('workersPerTenant')} per "
        f"function, stopped after {up.get('idleSeconds')} s idle), {len(tenants)} functions; refused "
        f"{up.get('refused', 0)}"
    )
    for t in tenants:
        pids = " ".join(str(p) for p in t.get("pids", [])) or t.get("state", "?")
        click.echo(
            f"  {t.get('topic')}@{t.get('consumerGroup')} '{t.get('className')}' by {t.get('account')}: pids {pids}, "
            f"idle {t.get('idleSeconds')} s"
        )


async def fetch_status(addr: str, timeout: float = 5.0) -> dict[str, Any]:
    """Ask the filter server at ``addr`` for its status (private request 30001)."""
    from sievemq.errors import RemotingError
    from sievemq.remoting.codes import RequestCode
    from sievemq.remoting.command import RemotingCommand
    from sievemq.remoting.connection import connect

    host, _, port = addr.rpartition(":")
    conn = await connect(host or "127.0.0.1", int(port), timeout=timeout)
    try:
        resp = await conn.request(RemotingCommand.request(RequestCode.FILTERSRV_STATUS), timeout)
    finally:
        conn.close()
    if resp.code != 0:
        raise RemotingError.from_response(resp.code, resp.remark or "status request refused", resp.ext_fields)
    st = orjson.loads(resp.body)
    if not isinstance(st, dict):
        raise RemotingError(1, "status is not a JSON object")
    return st


@filtersrv_group.command("status")
@click.option("--addr", required=True, help="the filter server, host:port")
@click.option("--json", "as_json", is_flag=True, help="print the raw JSON")
def status_command(addr: str, as_json: bool) -> None:
    """Print a filter server's registered functions with their counts."""
    try:
        st = asyncio.run(fetch_status(addr))
    except (SieveError, OSError, ValueError) as e:
        raise click.ClickException(f"cannot get the status of {addr}: {e}") from None
    if as_json:
        click.echo(orjson.dumps(st, option=orjson.OPT_INDENT_2).decode())
    else:
        print_status(st)
