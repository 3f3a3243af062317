"""What the gRPC proxy costs a client: the RocketMQ 5.x Python client through ``sievemq proxy`` against sievemq's own
4.x client straight to the broker, in one run on this machine.

Fresh processes on 127.0.0.1: a name server, a broker (``ASYNC_FLUSH``, store in a temporary folder) and a proxy in
front of them; topics of 4 queues. The 5.x client (``rocketmq-python-client`` 5.1.2) needs a newer protobuf than
sievemq, so it runs in ``<INTEROP_DIR>/venv-rmq5`` (``INTEROP_DIR`` defaults to ``<repo>/.interop``;
``tests/interop/setup_clients.sh`` installs it), driven by ``bench/proxy_driver.py``: one process per row. sievemq's
4.x client runs in this process (asyncio, uvloop when installed): while a row is timed nothing else runs here, so
this process's CPU time is the client's, and there is no pipe between the client and the clock.

Phases, each round (the systems alternate: 5.x first in even rounds, last in odd ones):

1. **produce**: ``--sync-messages`` messages of ``--size`` bytes one at a time (5.x ``Producer.send``, 4.x
   ``await Producer.send``), then ``--messages`` with ``--inflight`` sends in flight (5.x ``Producer.send_async``
   with a semaphore, 4.x ``--inflight`` tasks each awaiting ``Producer.send``).
2. **consume** ``--messages`` from a backlog: the 5.x ``SimpleConsumer`` (``receive`` of 32, a synchronous ``ack``
   of each message) against the 4.x ``PullConsumer`` (``poll`` of up to 32, then ``commit``: the 4.x client's
   receive and acknowledgement) and against POP straight to the broker (``sievemq.client.pop_api``: POP of 32 and
   an ACK of each, what the proxy does for the 5.x client, without gRPC).
3. **filtered receive**: a backlog of ``--messages`` of which 10% match ``a > 5 AND b = 'x'`` (user properties) and
   carry the tag ``TagA`` (the others ``TagB``): the 5.x SimpleConsumer with that SQL92 ``FilterExpression``, the
   same with the TAG filter ``TagA`` (same messages), and the 4.x PullConsumer with the same SQL. Every group
   registers before the backlog is written, so all SQL groups are served with their Bloom bitmaps
   (docs/protocol/bloom.md). Each consumer must receive exactly the matching messages: a wrong count, a message that
   does not match, a duplicate or a message after the last one is an error that stops the bench, not a figure.

Only the steady part is timed. A 5.x client process imports the client (~0.7 s here) and starts it (``startup()``,
~20-30 ms: the route query, the telemetry stream and the client's settings on it; a Producer or a SimpleConsumer
does not wait for the server's settings, only a PushConsumer waits for them, up to 10 s, so no row meets that wait);
then a producer sends 20 warm-up messages, a consumer makes one receive of the still empty topic (its group is
registered and its cursors are placed before the backlog is written; with ``--await 0`` it answers at once). All of
that happens before the clock starts, and its times are printed at the end. The 4.x producer is started once and
warmed with 20 sends before the first row; a 4.x PullConsumer's clock starts when ``start()`` has returned (a few
ms: its first fetches are timed, as the 5.x consumer's first receive is). The consumer phases' three 5.x processes
are launched together before that round's first consume row, so their imports overlap and fall outside every
row. After its last message each consumer asks once more (untimed) and must get nothing.

Printed per row: messages per second (median of ``--rounds``), the ratio to the direct 4.x row of the phase, and the
CPU time per message of the broker, the proxy and the client process (utime + stime of all threads from
``/proc``; filtered rows per message of the topic, the scanned ones); then each round's ratios, the broker's
filter counts and the start-up times. The defaults take about 2 minutes on this 2-core machine (more when it is busy).

    .venv/bin/python bench/bench_proxy.py [--messages 5000] [--sync-messages 1000] [--size 1024] [--inflight 32]
                                          [--rounds 3] [--await 0] [--keep]
"""

from __future__ import annotations

import argparse
import asyncio
import shutil
import sys
import tempfile
from collections.abc import Coroutine
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from tests.interop.clients import interop_dir

from bench.proxy.client5 import BenchError
from bench.proxy.report import header, report
from bench.proxy.rounds import Rounds, matches


def run(coro: Coroutine[Any, Any, None]) -> None:
    """On uvloop when it is installed (sievemq's clients' usual loop)."""
    try:
        import uvloop
    except ImportError:
        asyncio.run(coro)
        return
    uvloop.run(coro)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--messages", type=int, default=5000, help="messages of the in-flight, consume and filter rows")
    ap.add_argument("--sync-messages", type=int, default=1000, help="messages of the one-at-a-time produce rows")
    ap.add_argument("--size", type=int, default=1024, help="body bytes")
    ap.add_argument("--inflight", type=int, default=32, help="sends in flight in the in-flight produce rows")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--await", dest="await_s", type=int, default=0,
                    help="the 5.x SimpleConsumer's long polling (s); 0: a receive answers at once (a backlog does)")
    ap.add_argument("--client-python", type=Path, default=None,
                    help="the 5.x client's interpreter (default: $INTEROP_DIR/venv-rmq5/bin/python)")
    ap.add_argument("--keep", action="store_true", help="keep the temporary folder (stores, logs)")
    args = ap.parse_args()
    if args.messages < 40 or min(args.sync_messages, args.size, args.inflight, args.rounds) < 1 or args.await_s < 0:
        ap.error("--messages must be at least 40 (4 of every 40 match the filter), the other counts at least 1")
    python = args.client_python or interop_dir() / "venv-rmq5" / "bin" / "python"
    if not python.exists():
        print(f"no 5.x client at {python}: run tests/interop/setup_clients.sh (it installs .interop/venv-rmq5), "
              "or point INTEROP_DIR or --client-python at an installed one", file=sys.stderr)
        return 2
    tmp = Path(tempfile.mkdtemp(prefix="bench-proxy-"))
    rounds = Rounds(args, tmp, python)
    failed = True
    try:
        run(_run(rounds, args, python))
        failed = False
    except BenchError as e:
        print(f"\nERROR: {e}", file=sys.stderr)
    finally:
        if args.keep or failed:
            print(f"\nkept {tmp} (server logs, driver logs, stores)")
        else:
            shutil.rmtree(tmp, ignore_errors=True)
    if failed:
        return 1
    report(rounds, args, sum(1 for i in range(args.messages) if matches(i)))
    return 0


async def _run(rounds: Rounds, args: argparse.Namespace, python: Path) -> None:
    await rounds.run(lambda: header(rounds, args, python))


if __name__ == "__main__":
    sys.exit(main())
