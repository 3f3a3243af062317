"""Issue 33, "the CLI in a newcomer's hands" (items 1, 3, 5 and 10), with real processes: Ctrl-C stops ``produce``
and ``consume`` at once with what they did and exit 130; ``sievemq dev`` on another port says how to point the CLI
at it and every ``-n`` help names ``$SIEVEMQ_NAMESRV``; a closed stdout (``| head -1``) ends a command quietly with
141; the transaction example prints its state's name; a taken gRPC port is said in sievemq's words (item 11)."""

from __future__ import annotations

import os
import queue
import re
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import click
import orjson

from sievemq.cli.app import main as cli_root
from sievemq.cli.connect import DEFAULT_NAMESRV, export_line
from tests.integration.conftest import Cluster
from tests.support.procs import free_port

BOUND = 90.0
"""Seconds after which a command that should have ended, or output that should have come, is a failure (a safety
net on a loaded machine, never a measure)."""
REPO = Path(__file__).resolve().parents[2]
CLI = [sys.executable, "-m", "sievemq.cli"]


def _env(**extra: str) -> dict[str, str]:
    """The test's environment without sievemq's variables (a developer's $SIEVEMQ_NAMESRV must not leak in)."""
    return {**{k: v for k, v in os.environ.items() if not k.startswith("SIEVEMQ_")}, **extra}


def _cli(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    """``sievemq ARGS`` to its end."""
    return subprocess.run([*CLI, *args], capture_output=True, text=True, env=env or _env(), timeout=BOUND)


def _reap(proc: subprocess.Popen[bytes]) -> None:
    """Kill ``proc`` if a failed test left it running."""
    if proc.poll() is None:
        proc.kill()
        proc.wait()


def _until(what: str, check: Callable[[], bool]) -> None:
    deadline = time.monotonic() + BOUND
    while not check():
        assert time.monotonic() < deadline, f"no {what} within {BOUND} s"
        time.sleep(0.05)


class _Reader:
    """Everything a file descriptor delivers (a pty's master, a pipe), read by a thread so the writer never
    blocks."""

    def __init__(self, fd: int) -> None:
        self.fd = fd
        self.chunks: list[bytes] = []
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def _run(self) -> None:
        while True:
            try:
                chunk = os.read(self.fd, 65536)
            except OSError:  # EIO: the pty's last writer closed it
                return
            if not chunk:
                return
            self.chunks.append(chunk)

    def text(self) -> str:
        return b"".join(self.chunks).decode(errors="replace")


def _lines(stream: Iterator[bytes]) -> queue.Queue[bytes]:
    """The lines of a pipe, as they come, read by a thread."""
    q: queue.Queue[bytes] = queue.Queue()

    def run() -> None:
        for line in stream:
            q.put(line)

    threading.Thread(target=run, daemon=True).start()
    return q


def _stored(ns: str, topic: str) -> int:
    """Messages stored in ``topic``: the sum of its queues' ends (the admin client's max offsets)."""
    import asyncio

    from sievemq.admin.api import AdminClient

    async def go() -> int:
        async with AdminClient(ns) as admin:
            route = await admin.route(topic)
            addrs = {b.broker_name: b.broker_addrs[0] for b in route.broker_datas}  # the masters
            return sum(
                [await admin.max_offset(addrs[q.broker_name], topic, i) for q in route.queue_datas
                 for i in range(q.write_queue_nums)]
            )  # fmt: skip

    return asyncio.run(go())


def _consumer_offsets(ns: str, group: str, topic: str) -> int:
    """The sum of ``group``'s committed offsets in ``topic``'s queues (``sievemq group progress --json``)."""
    res = _cli("group", "progress", group, "-n", ns, "--json")
    assert res.returncode == 0, res.stderr
    queues = [q for q in orjson.loads(res.stdout)["queues"] if q["topic"] == topic]
    assert queues, res.stdout
    return sum(max(q["consumerOffset"], 0) for q in queues)


# ------------------------------------------------------------------------------------------------ 1. Ctrl-C
def test_ctrl_c_stops_produce_at_once_says_what_was_sent_and_exits_130(cluster: Cluster) -> None:
    ns = str(cluster.dev().extra["namesrv"])
    master, slave = os.openpty()  # stderr on a terminal: the progress bar a newcomer sees
    proc = subprocess.Popen(
        [*CLI, "produce", "CtrlC", "-n", ns, "--count", "200000"],
        stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=slave, env=_env(TERM="xterm", COLUMNS="160"),
    )  # fmt: skip
    os.close(slave)
    screen = _Reader(master)
    try:

        def progressed() -> int:
            done = [int(n) for n in re.findall(r"(\d+)/200000", screen.text())]
            assert proc.poll() is None, f"produce ended before Ctrl-C: {screen.text()[-2000:]}"
            return max(done, default=0)

        _until("progress on the bar", lambda: progressed() > 0)  # sends are being answered
        seen = progressed()
        proc.send_signal(signal.SIGINT)
        out, _ = proc.communicate(timeout=BOUND)
    finally:
        _reap(proc)
        screen.thread.join(5)
        os.close(master)
    summary = out.decode()
    assert proc.returncode == 130, (proc.returncode, summary, screen.text()[-2000:])
    m = re.match(
        r"interrupted: sent (\d+) of 200000 messages to CtrlC in [\d.]+s \(\d+ msg/s\), (\d+) acknowledged", summary
    )
    assert m, summary
    sent, acked = int(m.group(1)), int(m.group(2))
    assert seen <= acked <= sent < 200000, (seen, summary)  # it stopped, and counts what the bar showed
    assert "failed" not in summary and "Traceback" not in screen.text(), summary
    assert _stored(ns, "CtrlC") >= acked  # acknowledged means stored


def test_ctrl_c_stops_consume_says_what_was_consumed_and_exits_130(cluster: Cluster) -> None:
    ns = str(cluster.dev().extra["namesrv"])
    res = _cli("produce", "CtrlCConsume", "-n", ns, "--count", "20", "--quiet")
    assert res.returncode == 0, res.stderr
    proc = subprocess.Popen(
        [*CLI, "consume", "CtrlCConsume", "-n", ns, "--from", "first", "-g", "ctrl-c"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=_env(),
    )  # fmt: skip
    try:
        assert proc.stdout is not None
        lines = _lines(iter(proc.stdout.readline, b""))
        got = [lines.get(timeout=BOUND) for _ in range(20)]  # all 20 printed: now it waits for more
        proc.send_signal(signal.SIGINT)
        out, err = proc.communicate(timeout=BOUND)
    finally:
        _reap(proc)
    assert proc.returncode == 130, (proc.returncode, err)
    assert len(got) == 20 and not out, out
    assert err.decode().strip() == "interrupted: consumed 20 messages from CtrlCConsume", err
    assert _consumer_offsets(ns, "ctrl-c", "CtrlCConsume") == 20  # it closed: what it printed is committed


def test_ctrl_c_ends_an_admin_command_with_130() -> None:
    """A command without a loop of its own (here waiting for a name server that accepts and never answers) exits
    130 too, not click's "Aborted!" and 1."""

    def interrupted_while_waiting() -> tuple[int | None, bytes, bytes]:
        with socket.create_server(("127.0.0.1", free_port())) as silent:
            silent.settimeout(BOUND)
            addr = f"127.0.0.1:{silent.getsockname()[1]}"
            proc = subprocess.Popen([*CLI, "topic", "list", "-n", addr], stdout=subprocess.PIPE,
                                    stderr=subprocess.PIPE, env=_env())  # fmt: skip
            try:
                conn, _ = silent.accept()
                with conn:
                    conn.settimeout(BOUND)
                    assert conn.recv(4), "the command sent no request"  # it asked, and waits for the answer
                    proc.send_signal(signal.SIGINT)
                    out, err = proc.communicate(timeout=BOUND)
            finally:
                _reap(proc)
        return proc.returncode, out, err

    for _ in range(3):  # its 5 s request timeout can win the race on a starved machine: then ask again
        code, out, err = interrupted_while_waiting()
        if not (code == 1 and b"no answer in time" in err):
            break
    assert code == 130 and not out, (code, out, err)
    assert b"Aborted" not in err and b"Traceback" not in err, err


# ------------------------------------------------------------------------------------------------ 3. other ports
def test_dev_on_another_port_prints_the_export_line_that_points_the_cli_at_it(cluster: Cluster) -> None:
    dev = cluster.dev()
    m = re.search(r"export SIEVEMQ_NAMESRV=(\S+)", dev.log())
    assert m and m.group(1) == dev.extra["namesrv"], dev.log()
    res = _cli("topic", "list", env=_env(SIEVEMQ_NAMESRV=m.group(1)))  # the line, as a newcomer pastes it
    assert res.returncode == 0, res.stderr
    assert export_line(DEFAULT_NAMESRV) is None  # nothing to say on the default port


def test_a_taken_grpc_port_is_said_in_sievemqs_words(cluster: Cluster, tmp_path: Path) -> None:
    """Issue 33 item 11: ``sievemq dev`` with its gRPC port taken warns once, in its own words, and serves the rest;
    ``sievemq proxy`` on a taken port exits with the reason. Neither shows gRPC's own ``add_port.cc`` log line nor
    its ``GRPC_VERBOSITY`` hint."""
    with socket.socket() as taken:
        taken.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        dev = cluster.dev("--grpc-port", str(port))  # the last --grpc-port wins
        log = dev.log()
        assert f"the gRPC proxy did not start on 127.0.0.1:{port} (cannot listen on 127.0.0.1:{port}: the port " \
               "is taken)" in log, log  # fmt: skip
        proxy = _cli("proxy", "--namesrv-addr", str(dev.extra["namesrv"]), "--listen-port", str(port))
        assert proxy.returncode != 0 and f"cannot listen on 127.0.0.1:{port}: the port is taken" in proxy.stderr, proxy
        for text in (log, proxy.stdout + proxy.stderr):
            assert "add_port.cc" not in text and "GRPC_VERBOSITY" not in text, text


def _namesrv_commands() -> list[tuple[str, click.Command]]:
    """Every command of ``sievemq`` (by its full name) with a ``--namesrv`` option."""
    out: list[tuple[str, click.Command]] = []

    def walk(name: str, cmd: click.Command) -> None:
        if isinstance(cmd, click.Group):
            for sub_name, sub in cmd.commands.items():
                walk(f"{name} {sub_name}".strip(), sub)
        elif any("--namesrv" in getattr(p, "opts", ()) for p in cmd.params):
            out.append((name, cmd))

    walk("", cli_root)
    return out


def test_every_namesrv_option_shows_its_environment_variable() -> None:
    commands = _namesrv_commands()
    names = {name for name, _ in commands}
    assert {"produce", "consume", "topic list", "group progress", "message find"} <= names, names
    for name, cmd in commands:
        ctx = click.Context(cmd, info_name=name)
        (param,) = [p for p in cmd.params if "--namesrv" in getattr(p, "opts", ())]
        record = param.get_help_record(ctx)
        assert record is not None and "-n" in record[0], name
        assert f"env var: SIEVEMQ_NAMESRV; default: {DEFAULT_NAMESRV}" in record[1], (name, record)
    res = _cli("group", "progress", "--help")  # as printed
    assert res.returncode == 0 and "env var: SIEVEMQ_NAMESRV" in " ".join(res.stdout.split()), res.stdout


# ------------------------------------------------------------------------------------------------ 5. pipes
def _with_closed_stdout(*args: str) -> tuple[int, str]:
    """``sievemq ARGS`` writing into a pipe nobody reads any more (``| head -1`` after its line): (exit code,
    stderr)."""
    proc = subprocess.Popen([*CLI, *args], stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=_env())
    assert proc.stdout is not None and proc.stderr is not None
    proc.stdout.close()  # before it writes anything: its first write meets the closed pipe
    try:
        err = proc.stderr.read()
        rc = proc.wait(BOUND)
    finally:
        _reap(proc)
    return rc, err.decode()


def test_a_closed_stdout_ends_commands_quietly_with_141(cluster: Cluster) -> None:
    ns = str(cluster.dev().extra["namesrv"])
    res = _cli("produce", "Piped", "-n", ns, "--count", "3", "--quiet")
    assert res.returncode == 0, res.stderr
    res = _cli("consume", "Piped", "-n", ns, "--from", "first", "-g", "piped", "--count", "3")
    assert res.returncode == 0 and len(res.stdout.splitlines()) == 3, res.stderr

    assert _with_closed_stdout("group", "progress", "piped", "-n", ns) == (141, "")
    assert _with_closed_stdout("produce", "Piped", "-n", ns, "--body", "one more") == (141, "")
    assert _with_closed_stdout("group", "progress", "--help") == (141, "")
    # consume runs on until it is stopped: a closed stdout stops it, and what it could not print stays unconsumed
    assert _with_closed_stdout("consume", "Piped", "-n", ns, "--from", "first", "-g", "piped-2") == (141, "")
    assert _consumer_offsets(ns, "piped-2", "Piped") == 0


def test_an_error_on_a_readable_stdout_is_still_an_error() -> None:
    """Only a closed stdout is quiet: a name server that is not there is still said, with exit code 1."""
    res = _cli("group", "progress", "G", "-n", f"127.0.0.1:{free_port()}")
    assert res.returncode == 1 and res.stderr.startswith("Error: "), res.stderr


# ------------------------------------------------------------------------------------------------ 10. transactions
def test_the_transaction_example_prints_the_state_by_name(cluster: Cluster, tmp_path: Path) -> None:
    ns = str(cluster.dev().extra["namesrv"])
    page = (REPO / "docs" / "messaging.md").read_text(encoding="utf-8")
    (code,) = [b for b in re.findall(r"```python\n(.*?)```", page, re.S) if "print(r.state" in b]
    script = tmp_path / "transaction_example.py"
    script.write_text(code.replace("127.0.0.1:9876", ns))
    res = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, env=_env(), timeout=BOUND)
    assert res.returncode == 0, res.stderr
    state, msg_id = res.stdout.split()
    assert state == "COMMIT" and len(msg_id) == 32, res.stdout

    from sievemq import TransactionState

    assert f"{TransactionState.ROLLBACK}" == "ROLLBACK" and int(TransactionState.COMMIT) == 8  # the wire's value
    assert f"{TransactionState.COMMIT:d}" == "8" and TransactionState(12) is TransactionState.ROLLBACK
