"""Running a role from the command line: one event loop (uvloop when installed) until SIGINT or SIGTERM."""

from __future__ import annotations

import asyncio
import signal
from collections.abc import Awaitable, Callable

import click

from sievemq.errors import SieveError


def run_until_signalled(main: Callable[[asyncio.Event], Awaitable[None]]) -> None:
    """Run ``main(stop)``; SIGINT/SIGTERM set ``stop``. Start-up failures become a clean CLI error."""

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
