"""Running a role from the command line: its settings as flags, then one event loop (uvloop when installed) until
SIGINT or SIGTERM."""

from __future__ import annotations

import asyncio
import signal
from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import Any, TypeVar

import click

from sievemq.cli import log_levels as cli_logging
from sievemq.errors import SieveError
from sievemq.settings import specs

F = TypeVar("F", bound=Callable[..., Any])
_TYPE_NAMES = {bool: "boolean", int: "integer", float: "float", str: "text"}


class _Unconverted(click.ParamType):  # type: ignore[type-arg]  # generic from click 8.2 on; >= 8.1 allowed
    """A flag's text passed on unchanged, so ``load_config`` converts and checks it like any other source (one
    error format for all); ``name`` is what ``--help`` shows (INTEGER, BOOLEAN, ...)."""

    def __init__(self, name: str) -> None:
        self.name = name

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> Any:
        return value


def config_options(
    cls: type[Any], aliases: Mapping[str, Sequence[str]] | None = None, shown: Mapping[str, str] | None = None
) -> Callable[[F], F]:
    """One ``--kebab-case`` option per config field, documented from its declaration (doc, allowed, default).

    ``aliases`` adds flag names to a field (``{"broker_addr": ["--broker"]}``); ``shown`` replaces a default in
    the help (a secret's).
    """

    def deco(f: F) -> F:
        for spec in reversed(specs(cls)):
            names = [*(aliases or {}).get(spec.name, ()), "--" + spec.name.replace("_", "-")]
            allowed = "" if spec.allowed == "any text" else f"allowed: {spec.allowed}; "
            default = (shown or {}).get(spec.name, spec.default)
            help_text = f"{spec.doc} [{allowed}default: {default}]"
            typ = _Unconverted(_TYPE_NAMES.get(spec.kind, "text"))
            f = click.option(*names, spec.name, type=typ, default=None, help=help_text)(f)
        return f

    return deco


def run_until_signalled(main: Callable[[asyncio.Event], Awaitable[None]]) -> None:
    """Run ``main(stop)`` (a server role: it logs INFO unless ``--log-level`` says otherwise); SIGINT/SIGTERM set
    ``stop``. Start-up failures become a clean CLI error."""
    cli_logging.role_level()

    async def runner() -> None:
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGINT, signal.SIGTERM):
            loop.add_signal_handler(sig, stop.set)
        await main(stop)

    try:
        try:
            import uvloop
        except ImportError:
            asyncio.run(runner())
        else:
            uvloop.run(runner())
    except OSError as e:
        raise click.ClickException(f"cannot start: {e}") from None
    except SieveError as e:
        raise click.ClickException(str(e)) from None
