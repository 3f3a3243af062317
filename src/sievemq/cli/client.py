"""``sievemq produce`` and ``sievemq consume``: the client API from the command line."""

from __future__ import annotations

import asyncio
import base64
import os
import signal
import sys
import time
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import replace
from typing import TYPE_CHECKING, Any

import click
import orjson

from sievemq.acl.credentials import Credentials, credential_options, keys_of
from sievemq.cli.connect import namesrv_option, wrong_namesrv
from sievemq.cli.exits import EXIT_SIGINT
from sievemq.cli.selectors import SQL92, selector_of, selector_options, sql_warnings
from sievemq.cli.tls import client_kwargs, tls_options
from sievemq.errors import SieveError
from sievemq.protocol.delay_levels import DEFAULT_LEVEL_COUNT
from sievemq.remoting.tls import ClientTls

if TYPE_CHECKING:
    from sievemq.client.options import ClientOptions


def client_options(namesrv: str, credentials: Credentials | None, tls: ClientTls | None) -> ClientOptions:
    """The ``ClientOptions`` of the connection flags, each flag setting the field of its name: ``--namesrv``,
    ``--access-key``/``--secret-key`` (or ``--profile``), ``--tls``, ``--tls-ca-file``, ``--tls-cert-file``,
    ``--tls-key-file``, ``--no-tls-verify``."""
    from sievemq.client.options import ClientOptions

    access_key, secret_key = keys_of(credentials)
    try:
        return ClientOptions(namesrv=namesrv, access_key=access_key, secret_key=secret_key, **client_kwargs(tls))
    except ValueError as e:
        raise click.BadParameter(str(e), param_hint="--namesrv") from None


def _props(values: tuple[str, ...]) -> dict[str, str]:
    out: dict[str, str] = {}
    for v in values:
        k, sep, val = v.partition("=")
        if not sep or not k:
            raise click.BadParameter(f"{v!r} is not k=v", param_hint="--prop")
        out[k] = val
    return out


GRACE = 2.0
"""Seconds the sends in flight at Ctrl-C get to be answered before ``produce`` closes (one not answered may still be
stored: the summary counts it as sent, not as acknowledged)."""


async def explained(e: BaseException, options: ClientOptions) -> str:
    """``e`` in words, said plainly when it comes from ``-n`` pointing at something that is not a name server (a
    broker refusing name server requests as not supported, an HTTP port): the client only sees that no name server
    answered, so the address is asked once what it is (``cli/connect.py``)."""
    from sievemq.client.errors import NameServerUnreachableError, NotANameServerError
    from sievemq.errors import RemotingError
    from sievemq.remoting.codes import ResponseCode

    unsupported = isinstance(e, RemotingError) and e.code == ResponseCode.REQUEST_CODE_NOT_SUPPORTED
    if (unsupported or isinstance(e, NameServerUnreachableError)) and not isinstance(e, NotANameServerError):
        wrong = await wrong_namesrv(options)
        if wrong is not None:
            return str(wrong)
    return str(e)


def _run(coro: Any, options: ClientOptions | None = None) -> None:
    """Run a command's coroutine; the exit code it returns (130 after Ctrl-C) ends the command with that code. A
    failure is said plainly when ``options``' name server address is not a name server (``explained``)."""
    try:
        code = asyncio.run(coro)
    except SieveError as e:
        raise click.ClickException(asyncio.run(explained(e, options)) if options is not None else str(e)) from None
    except (OSError, ValueError) as e:  # a closed stdout (EPIPE) too: cli/exits.py ends those quietly with 141
        raise click.ClickException(str(e)) from None
    except KeyboardInterrupt:
        raise SystemExit(EXIT_SIGINT) from None
    if code:
        raise SystemExit(code)


@contextmanager
def _on_ctrl_c(*events: asyncio.Event) -> Iterator[None]:
    """While inside (in the running loop): the first Ctrl-C sets ``events`` (the command stops starting new work,
    winds down and says what it did, then exits 130); a second one interrupts at once (KeyboardInterrupt: 130)."""
    loop = asyncio.get_running_loop()

    def first() -> None:
        for event in events:
            event.set()
        loop.remove_signal_handler(signal.SIGINT)  # back to KeyboardInterrupt for the next Ctrl-C

    loop.add_signal_handler(signal.SIGINT, first)
    try:
        yield
    finally:
        loop.remove_signal_handler(signal.SIGINT)


async def _drain(workers: list[asyncio.Task[None]], interrupted: asyncio.Event, grace: float) -> None:
    """Wait until ``workers`` end, or ``interrupted`` is set: then give them ``grace`` seconds more (to finish what
    they started; they start nothing new once it is set) and cancel the rest. A worker's own error is raised."""
    stop = asyncio.ensure_future(interrupted.wait())
    running: set[asyncio.Task[None]] = set(workers)
    try:
        while running and not stop.done():
            done, _ = await asyncio.wait({*running, stop}, return_when=asyncio.FIRST_COMPLETED)
            for w in done:
                if w is not stop:
                    running.discard(w)  # type: ignore[arg-type]  # every other one is a worker
                    w.result()
        if running:
            _, running = await asyncio.wait(running, timeout=grace)
    finally:
        stop.cancel()
        for w in running:
            w.cancel()
        await asyncio.gather(*workers, return_exceptions=True)


@click.command()
@click.argument("topic")
@namesrv_option
@click.option("--tag", "-t", default=None, help="message tag")
@click.option("--key", "-k", "keys", multiple=True, help="business key (repeatable)")
@click.option("--prop", "-p", "props", multiple=True, help="user property k=v (repeatable)")
@click.option("--body", "-b", default=None, help="message body text (default: generated, or stdin with '-')")
@click.option("--count", "-c", default=1, show_default=True, type=click.IntRange(min=1), help="messages to send")
@click.option("--size", "-s", default=64, show_default=True, type=click.IntRange(min=1), help="generated body bytes")
@click.option(
    "--delay", default=0, show_default=True, type=click.IntRange(0, DEFAULT_LEVEL_COUNT), help="delay level (1 = 1 s)"
)
@click.option("--group", "-g", default="sievemq-cli-producer", show_default=True, help="producer group")
@click.option("--concurrency", default=64, show_default=True, type=click.IntRange(min=1), help="sends in flight")
@click.option("--quiet", "-q", is_flag=True, help="no progress bar, only the summary")
@credential_options
@tls_options
def produce(
    topic: str,
    namesrv: str,
    tag: str | None,
    keys: tuple[str, ...],
    props: tuple[str, ...],
    body: str | None,
    count: int,
    size: int,
    delay: int,
    group: str,
    concurrency: int,
    quiet: bool,
    credentials: Credentials | None,
    tls: ClientTls | None,
) -> None:
    """Send COUNT messages to TOPIC (a progress bar shows bulk sends)."""
    from sievemq.client.message import Message
    from sievemq.client.producer import Producer

    options = client_options(namesrv, credentials, tls)
    properties = _props(props)
    if body == "-":
        payload = sys.stdin.buffer.read()
    elif body is not None:
        payload = body.encode()
    else:
        payload = None

    def make(i: int) -> Message:
        data = payload if payload is not None else (f"message {i} ".encode() * (size // 8 + 1))[:size]
        return Message(topic, data, tags=tag, keys=list(keys), properties=dict(properties), delay_level=delay)

    async def go() -> int:
        begun = sent = failed = 0  # sends started; answered (acknowledged); failed
        first_error: SieveError | None = None
        interrupted = asyncio.Event()
        statuses: Counter[str] = Counter()
        started = time.monotonic()
        async with Producer(group=group, options=options) as p:
            if count == 1:
                r = await p.send(make(0))
                mq = r.message_queue
                click.echo(
                    f"{r.status.name} msgId={r.msg_id} offsetMsgId={r.offset_msg_id} "
                    f"queue={mq.broker_name}:{mq.queue_id} offset={r.queue_offset}"
                )
                return 0
            from rich.console import Console
            from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeRemainingColumn

            with Progress(
                TextColumn(f"[bold]{topic}"),
                BarColumn(),
                MofNCompleteColumn(),
                TextColumn("{task.fields[rate]:>8.0f} msg/s"),
                TimeRemainingColumn(),
                console=Console(stderr=True),
                disable=quiet or not sys.stderr.isatty(),
                transient=False,
            ) as progress:
                bar = progress.add_task("send", total=count, rate=0.0)

                async def worker() -> None:
                    """Send the next message until all are sent, or Ctrl-C: then it starts no new send."""
                    nonlocal begun, sent, failed, first_error
                    while begun < count and not interrupted.is_set():
                        i = begun
                        begun += 1
                        try:
                            statuses[(await p.send(make(i))).status.name] += 1
                            sent += 1
                        except SieveError as e:
                            failed += 1
                            first_error = first_error or e
                        elapsed = max(time.monotonic() - started, 1e-6)
                        progress.update(bar, advance=1, rate=(sent + failed) / elapsed)

                # ``concurrency`` workers, not one task per message: Ctrl-C has at most that many sends to wait for.
                with _on_ctrl_c(interrupted):
                    workers = [asyncio.create_task(worker()) for _ in range(min(concurrency, count))]
                    await _drain(workers, interrupted, GRACE)
        elapsed = max(time.monotonic() - started, 1e-6)
        rate = f"{sent / elapsed:.0f} msg/s"
        if interrupted.is_set():
            unanswered = begun - sent - failed
            click.echo(f"interrupted: sent {begun} of {count} messages to {topic} in {elapsed:.2f}s ({rate}), "
                       f"{sent} acknowledged" + (f", {failed} failed" if failed else "")
                       + (f", {unanswered} not answered within {GRACE:g}s" if unanswered else ""))  # fmt: skip
        else:
            click.echo(f"sent {sent} of {count} messages to {topic} in {elapsed:.2f}s ({rate})")
        for status, n in sorted(statuses.items()):
            if status != "SEND_OK":  # stored on the master, not (yet) on a slave: see docs/replication.md
                click.echo(f"  {n} answered {status}: stored on the master, not confirmed by a slave")
        first = await explained(first_error, options) if first_error is not None else ""
        if interrupted.is_set():
            if failed:
                click.echo(f"first error: {first}", err=True)
            return EXIT_SIGINT
        if failed:
            raise click.ClickException(f"{failed} sends failed; first error: {first}")
        return 0

    _run(go(), options)


async def check_topic(options: ClientOptions, topic: str) -> None:
    """Before consuming: a name server answers and knows ``topic`` (else a ClickException saying which is missing and
    what to do), so that ``consume`` never waits in silence for a topic that is not there."""
    from sievemq.client.errors import NameServerUnreachableError, NoRouteError
    from sievemq.client.instance import ClientConfig, ClientInstance

    inst = ClientInstance(ClientConfig.of(replace(options, instance_name=f"sievemq-cli-check-{os.getpid()}")))
    namesrv = ";".join(inst.config.namesrv)
    try:
        await inst.fetch_route(topic, missing_ok=False)
    except NameServerUnreachableError as e:
        text = await explained(e, options)
        raise click.ClickException(text if text != str(e) else f"{e} (--namesrv or $SIEVEMQ_NAMESRV; `sievemq dev` "
                                   "runs one)") from None  # fmt: skip
    except NoRouteError as e:
        if e.reason:  # the name server knows why (BROKER_GONE: the brokers that served it left)
            raise click.ClickException(e.detail) from None
        raise click.ClickException(
            f"topic {topic!r} does not exist: the name servers at {namesrv} know no route for it. Create it "
            f"(sievemq topic create {topic}), or send to it first where brokers create topics on first send "
            "(sievemq dev does)"
        ) from None
    finally:
        await inst.close()


def _message_json(m: Any) -> dict[str, Any]:
    try:
        body: str = m.body.decode()
        encoding = "utf-8"
    except UnicodeDecodeError:
        body = base64.b64encode(m.body).decode()
        encoding = "base64"
    return {
        "topic": m.topic,
        "msgId": m.msg_id,
        "offsetMsgId": m.offset_msg_id,
        "queueId": m.queue_id,
        "queueOffset": m.queue_offset,
        "tags": m.tags,
        "keys": m.keys,
        "properties": m.properties,
        "reconsumeTimes": m.reconsume_times,
        "bornTimestamp": m.born_timestamp,
        "storeTimestamp": m.store_timestamp,
        "body": body,
        "bodyEncoding": encoding,
    }


def _message_line(m: Any) -> str:
    body = m.body.decode(errors="replace")
    keys = f" keys={','.join(m.keys)}" if m.keys else ""
    tags = f" tags={m.tags}" if m.tags else ""
    return f"{m.msg_id} {m.topic}:{m.queue_id}:{m.queue_offset}{tags}{keys} {body}"


@click.command()
@click.argument("topic")
@namesrv_option
@selector_options("a tag expression, e.g. 'TagA || TagB' [default: *]")
@click.option("--group", "-g", default=None, help="consumer group (default: a new one per run)")
@click.option("--from", "from_", type=click.Choice(["first", "last"], case_sensitive=False), default="last",
              show_default=True,
              help="where a group without committed offsets starts: last (the messages sent from now on) or "
                   "first (every stored message); a group with offsets resumes from them")  # fmt: skip
@click.option("--json", "as_json", is_flag=True, help="one JSON object per message")
@click.option("--count", "-c", default=0, type=click.IntRange(min=0), help="stop after N messages (0: run on)")
@click.option("--timeout", default=0.0, type=click.FloatRange(min=0), help="stop after this many idle seconds")
@click.option("--broadcast", is_flag=True, help="broadcasting consumption (offsets kept locally)")
@credential_options
@tls_options
def consume(
    topic: str,
    namesrv: str,
    tag: str | None,
    sql: str | None,
    expr: str | None,
    group: str | None,
    from_: str,
    as_json: bool,
    count: int,
    timeout: float,
    broadcast: bool,
    credentials: Credentials | None,
    tls: ClientTls | None,
) -> None:
    """Print the messages of TOPIC as they arrive (one line, or one JSON object, per message)."""
    from sievemq.client.message import ConsumeResult, Selector
    from sievemq.client.options import ConsumeOptions
    from sievemq.client.push_consumer import PushConsumer
    from sievemq.protocol.message import MessageExt

    kind, expression = selector_of(tag, sql, expr, default_tag="*")
    for warning in sql_warnings(kind, expression):  # legal, so it runs; but most likely not what was meant
        click.echo(f"warning: {warning}", err=True)
    selector = Selector.sql(expression) if kind == SQL92 else Selector.tag(expression)
    group = group or f"sievemq-cli-{os.getpid()}"
    options = replace(client_options(namesrv, credentials, tls), rebalance_interval=5.0)

    async def go() -> int:
        await check_topic(options, topic)
        done = asyncio.Event()
        interrupted = asyncio.Event()  # Ctrl-C: done too
        closed_stdout: OSError | None = None  # nobody reads what is printed any more (`| head -1` exited)
        printed = 0
        last = time.monotonic()
        consumer = PushConsumer(
            group=group,
            options=options,
            consume=ConsumeOptions(concurrency=1, consume_batch_size=1),  # the listener decides message by message
            consume_from=from_,
            broadcasting=broadcast,
        )
        consumer.subscribe(topic, selector)

        @consumer.listener
        async def show(msgs: list[MessageExt]) -> ConsumeResult:
            nonlocal printed, last, closed_stdout
            if (count and printed >= count) or done.is_set():
                # Past the count, after Ctrl-C or a closed stdout (one message per call): leave it unconsumed.
                # Neither an ack (the group would never see it) nor a failure (it would be sent back): the abandoned
                # call keeps the message out of the offset the consumer commits when it closes, so the group's next
                # run starts at it.
                done.set()
                raise asyncio.CancelledError
            for m in msgs:
                try:
                    click.echo(orjson.dumps(_message_json(m)).decode() if as_json else _message_line(m))
                    sys.stdout.flush()
                except BrokenPipeError as e:  # not shown, so not consumed; the command ends (cli/exits.py: 141)
                    closed_stdout = e
                    done.set()
                    raise asyncio.CancelledError from None
                printed += 1
                last = time.monotonic()
            if count and printed >= count:
                done.set()
            return ConsumeResult.SUCCESS

        await consumer.start()
        try:
            with _on_ctrl_c(interrupted, done):
                while not done.is_set():
                    try:
                        async with asyncio.timeout(0.2):
                            await done.wait()
                    except TimeoutError:
                        if timeout and time.monotonic() - last > timeout:
                            break
        finally:
            await consumer.close()  # commits the offsets of what was printed
        if closed_stdout is not None:
            raise closed_stdout
        if interrupted.is_set():  # on stderr: stdout holds only the messages (one JSON object a line with --json)
            click.echo(f"interrupted: consumed {printed} message{'s' if printed != 1 else ''} from {topic}", err=True)
            return EXIT_SIGINT
        return 0

    _run(go(), options)
