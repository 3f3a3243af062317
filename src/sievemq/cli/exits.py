"""How every ``sievemq`` command ends when the user or the shell stops it, handled once at the root of the CLI (the
``main`` group uses ``RootGroup``) instead of in each command:

- **stdout closed** (``sievemq group progress G | head -1``: ``head`` exits after its line): the command ends at
  once, prints nothing more (no ``Error: [Errno 32] Broken pipe``) and exits 141, as coreutils do. A program that
  writes to a closed pipe is killed by SIGPIPE and the shell reports 128 + 13 = 141 (``seq 1000000 | head -1;
  echo ${PIPESTATUS[0]}``), so scripts with ``set -o pipefail`` see sievemq as they see ``cat`` or ``grep``. Not 0:
  the output was cut short (a ``consume`` did not get to say everything), and a pipeline that must tell
  "finished" from "cut" keeps the difference. Not 1: that is sievemq's "the command failed" (an error message on
  stderr goes with it). And not by restoring SIGPIPE's default action: the CLI also writes to sockets, and a broker
  that closes a connection would then kill the command without a word (Python's documentation, "Note on SIGPIPE",
  advises the same).
- **Ctrl-C** (SIGINT) that reaches a command as ``KeyboardInterrupt``: exit 130 (128 + SIGINT), as shells expect,
  instead of click's "Aborted!" and 1. Commands that loop (``produce``, ``consume``) catch Ctrl-C themselves to wind
  down and print what they did before they exit 130.
"""

from __future__ import annotations

import errno
import os
import select
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import click

EXIT_SIGPIPE = 128 + 13
"""A closed stdout: what a shell reports for a program killed by SIGPIPE."""
EXIT_SIGINT = 128 + 2
"""Ctrl-C: what a shell reports for a program killed by SIGINT."""


def stdout_closed() -> bool:
    """Whether nobody reads this process's stdout any more (a pipe whose reader exited). A pipe's write end polls
    POLLERR once its last reader is gone; a terminal or a file never does."""
    try:
        fd = sys.__stdout__.fileno() if sys.__stdout__ is not None else 1
        poller = select.poll()
        poller.register(fd, select.POLLOUT)
        return any(events & select.POLLERR for _fd, events in poller.poll(0))
    except (OSError, ValueError, AttributeError):
        return False


def _is_broken_pipe(exc: BaseException) -> bool:
    """``exc`` is, or was raised while handling (a command that turns OSError into its own error message), an
    EPIPE."""
    seen: BaseException | None = exc
    for _ in range(8):  # a short chain: the command's own error, then the OSError it replaced
        if seen is None:
            return False
        if isinstance(seen, OSError) and seen.errno == errno.EPIPE:
            return True
        seen = seen.__cause__ or seen.__context__
    return False


def _end_quietly_on_closed_stdout() -> None:
    """Exit 141 without a word: stdout goes to /dev/null first, so that the interpreter's last flush of what is
    still buffered does not fail again on the closed pipe."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        os.close(devnull)
    except (OSError, ValueError, AttributeError):
        pass
    sys.exit(EXIT_SIGPIPE)


@contextmanager
def unix_exits() -> Iterator[None]:
    """Around a command: a closed stdout ends it with 141, Ctrl-C with 130 (see the module's docstring)."""
    try:
        yield
        if sys.stdout is not None:  # None: started with its stdout closed (``>&-``)
            sys.stdout.flush()  # what is still buffered fails here, not in the interpreter's shutdown
    except KeyboardInterrupt:
        sys.exit(EXIT_SIGINT)
    except Exception as e:
        if _is_broken_pipe(e) and stdout_closed():  # not a socket's EPIPE (a broker that hung up): that is an error
            _end_quietly_on_closed_stdout()
        raise


class RootGroup(click.Group):
    """The ``sievemq`` group: every command (and every ``--help``) runs inside ``unix_exits``."""

    def parse_args(self, ctx: click.Context, args: list[str]) -> list[str]:
        with unix_exits():
            return super().parse_args(ctx, args)

    def invoke(self, ctx: click.Context) -> Any:
        with unix_exits():
            return super().invoke(ctx)
