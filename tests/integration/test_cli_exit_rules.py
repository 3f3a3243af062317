"""Issue 33, "the CLI in a newcomer's hands", items 4, 6 and 9, with real processes (a ``sievemq dev``, the CLI run as
a subprocess, a real TCP listener that answers HTTP):

- 4: one rule for every command (docs/operations.md, "Exit codes"): an argument naming something that does not
  exist (topic, group, cluster, broker set, queue id, message id) is an error on stderr and exit 1; a well-formed
  question that matches nothing is an answer on stdout and exit 0; a malformed command line exits 2.
- 6: ``-n`` pointed at a broker or at an HTTP port says what the peer is; ``message show garbage`` says it is not a
  message id before searching anything.
- 9: one selector vocabulary, ``--tag EXPR`` / ``--sql EXPR``, in every command that takes a selector; ``--expr``
  and ``-e`` still work, hidden.
"""

from __future__ import annotations

import logging
import os
import socket
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path

import click
import orjson
import pytest

from sievemq.cli.app import main as cli_root
from sievemq.remoting.codes import RequestCode
from sievemq.remoting.command import RemotingCommand
from sievemq.remoting.connection import ForeignProtocolError, connect
from tests.integration.conftest import _CLUSTER_KEY, Cluster
from tests.support.procs import Proc, free_port

BOUND = 90.0
"""Seconds after which a command that has not ended is a failure (it hangs): a safety net, never a measure."""
TOPIC = "ExitOrders"
QUEUES = 4
GROUP = "exit-rules-group"


def _env() -> dict[str, str]:
    """The test's environment without sievemq's variables (a developer's $SIEVEMQ_NAMESRV must not leak in)."""
    return {k: v for k, v in os.environ.items() if not k.startswith("SIEVEMQ_")}


def cli(*args: str) -> subprocess.CompletedProcess[str]:
    """``sievemq ARGS`` to its end."""
    return subprocess.run([sys.executable, "-m", "sievemq.cli", *args], capture_output=True, text=True, env=_env(),
                          timeout=BOUND)  # fmt: skip


def error(res: subprocess.CompletedProcess[str], *words: str) -> None:
    """``res`` is an error (exit 1): nothing on stdout, an ``Error:`` line on stderr with ``words``, no traceback."""
    assert res.returncode == 1, (res.returncode, res.stdout, res.stderr)
    assert not res.stdout, res.stdout
    assert res.stderr.startswith("Error: ") and "Traceback" not in res.stderr, res.stderr
    for w in words:
        assert w in res.stderr, (w, res.stderr)


def answer(res: subprocess.CompletedProcess[str], *words: str) -> None:
    """``res`` answered (exit 0) on stdout with ``words``, with nothing on stderr."""
    assert res.returncode == 0, (res.returncode, res.stdout, res.stderr)
    assert not res.stderr, res.stderr
    for w in words:
        assert w in res.stdout, (w, res.stdout)


class World:
    """One ``sievemq dev`` for the module, with topic ``TOPIC`` (``QUEUES`` queues, 3 messages tagged TagA with key
    k1), an empty topic ``ExitEmpty``, and a group ``GROUP`` that consumed ``TOPIC``."""

    def __init__(self, cluster: Cluster, dev: Proc) -> None:
        self.cluster = cluster
        self.dev = dev
        self.ns = str(dev.extra["namesrv"])
        self.broker = dev.addr
        self.http = str(dev.extra["http"]).removeprefix("http://")


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> Iterator[World]:
    c = Cluster(tmp_path_factory.mktemp("exit-rules"))
    try:
        w = World(c, c.dev())
        assert cli("topic", "create", TOPIC, "--queues", str(QUEUES), "-n", w.ns).returncode == 0
        assert cli("topic", "create", "ExitEmpty", "--queues", "2", "-n", w.ns).returncode == 0
        sent = cli("produce", TOPIC, "-n", w.ns, "--tag", "TagA", "-k", "k1", "--count", "3", "-q")
        assert sent.returncode == 0, sent.stderr
        got = cli("consume", TOPIC, "-n", w.ns, "-g", GROUP, "--from", "first", "--count", "3", "--timeout", "60")
        assert got.returncode == 0 and len(got.stdout.splitlines()) == 3, (got.stdout, got.stderr)
        yield w
    finally:
        c.close()


@pytest.fixture(autouse=True)
def _logs_on_failure(request: pytest.FixtureRequest) -> None:
    """A failing test gets the dev process's log attached (conftest's hook)."""
    if "world" in request.fixturenames:
        request.node.stash[_CLUSTER_KEY] = request.getfixturevalue("world").cluster


def _msg_id(w: World) -> str:
    found = cli("message", "find", "--topic", TOPIC, "--key", "k1", "-n", w.ns, "--json")
    assert found.returncode == 0, found.stderr
    return str(orjson.loads(found.stdout)["messages"][0]["msgId"])


# ------------------------------------------------------------------------------------------------ 4. exit codes
def test_nothing_found_is_an_answer_with_exit_0(world: World) -> None:
    ns = world.ns
    none = cli("message", "find", "--topic", TOPIC, "--key", "nokey", "-n", ns)
    answer(none, f"no message with key nokey in {TOPIC}")
    empty = cli("message", "find", "--topic", TOPIC, "--key", "nokey", "-n", ns, "--json")
    assert empty.returncode == 0 and orjson.loads(empty.stdout)["messages"] == [], (empty.stdout, empty.stderr)
    answer(cli("topic", "peek", "ExitEmpty", "-n", ns), "no messages in ExitEmpty")
    answer(cli("topic", "peek", TOPIC, "--queue", str(QUEUES - 1), "--offset", "1000", "-n", ns), "no messages")
    answer(cli("explain", "--topic", TOPIC, "--tag", "NoSuchTag", "-n", ns), "0 of 3 messages match")
    answer(cli("dlq", "resend", GROUP, "-n", ns), "0 dead letter(s) examined")


def test_topic_peek_of_a_queue_or_broker_set_that_does_not_exist_is_an_error(world: World) -> None:
    ns = world.ns
    error(cli("topic", "peek", TOPIC, "--queue", "9", "-n", ns),
          f"topic {TOPIC} has no queue 9", f"{QUEUES} queues (0..{QUEUES - 1}) on broker-a")  # fmt: skip
    error(cli("topic", "peek", TOPIC, "--queue", "9", "-n", ns, "--json"), "has no queue 9")
    error(cli("topic", "peek", TOPIC, "--broker", "broker-zz", "-n", ns), "broker set broker-zz does not exist",
          "broker-a")  # fmt: skip
    error(cli("topic", "peek", "NoSuchTopic", "-n", ns), "topic NoSuchTopic does not exist")
    for q in range(QUEUES):  # every queue that exists: an answer, messages or none
        assert cli("topic", "peek", TOPIC, "--queue", str(q), "-n", ns).returncode == 0


def test_group_commands_name_an_unknown_group_or_topic_as_an_error(world: World) -> None:
    ns = world.ns
    for sub in ("filters", "status", "progress"):
        error(cli("group", sub, "no-such-group", "-n", ns), "consumer group no-such-group does not exist")
    error(cli("group", "progress", GROUP, "--topic", "NoSuchTopic", "-n", ns), "topic NoSuchTopic does not exist")
    error(cli("group", "reset-offset", GROUP, "--topic", "NoSuchTopic", "--to", "earliest", "-n", ns),
          "topic NoSuchTopic does not exist")  # fmt: skip
    answer(cli("group", "progress", GROUP, "--topic", TOPIC, "-n", ns), f"consumer group {GROUP}")
    answer(cli("group", "filters", GROUP, "-n", ns), f"group {GROUP} on broker broker-a")


def test_message_commands_name_an_unknown_topic_or_message_as_an_error(world: World) -> None:
    ns = world.ns
    msg_id = _msg_id(world)
    error(cli("message", "show", msg_id, "--topic", "NoSuchTopic", "-n", ns), "topic NoSuchTopic does not exist")
    error(cli("message", "find", "--topic", "NoSuchTopic", "--key", "k1", "-n", ns), "topic NoSuchTopic does not exist")
    error(cli("message", "show", "F" * 32, "-n", ns, "--no-tracking"), f"no message {'F' * 32}")
    answer(cli("message", "show", msg_id, "-n", ns, "--no-tracking"), msg_id)


def test_selector_and_cluster_arguments_that_name_nothing_are_errors(world: World) -> None:
    ns = world.ns
    error(cli("explain", "--topic", "NoSuchTopic", "--sql", "a = 1", "-n", ns), "topic NoSuchTopic does not exist")
    error(cli("consume", "NoSuchTopic", "-n", ns, "--timeout", "1"), "topic 'NoSuchTopic' does not exist")
    error(cli("topic", "delete", TOPIC, "--cluster", "NoSuchCluster", "-n", ns),
          "cluster NoSuchCluster does not exist", "DefaultCluster")  # fmt: skip
    error(cli("topic", "create", "ExitOther", "--cluster", "NoSuchCluster", "-n", ns),
          "cluster NoSuchCluster does not exist")  # fmt: skip
    assert cli("topic", "peek", TOPIC, "-n", ns, "--count", "1").returncode == 0  # not deleted


# ------------------------------------------------------------------------------------------------ 6. wrong addresses
class HttpListener:
    """A real TCP listener that answers whatever it is sent with an HTTP 400, as a web server does."""

    def __init__(self) -> None:
        self.sock = socket.socket()
        self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.sock.bind(("127.0.0.1", free_port()))
        self.sock.listen(16)
        self.addr = f"127.0.0.1:{self.sock.getsockname()[1]}"
        self.thread = threading.Thread(target=self._serve, daemon=True)
        self.thread.start()

    def _serve(self) -> None:
        while True:
            try:
                conn, _ = self.sock.accept()
            except OSError:  # closed: the test is over
                return
            with conn:
                try:
                    conn.recv(65536)
                    conn.sendall(b"HTTP/1.1 400 Bad Request\r\nContent-Type: text/plain\r\nContent-Length: 11\r\n"
                                 b"Connection: close\r\n\r\nBad Request")  # fmt: skip
                except OSError:
                    pass

    def close(self) -> None:
        self.sock.close()
        self.thread.join(BOUND)


@pytest.fixture
def http_listener() -> Iterator[HttpListener]:
    listener = HttpListener()
    try:
        yield listener
    finally:
        listener.close()


async def test_a_client_connection_to_an_http_port_says_it_speaks_http(
    http_listener: HttpListener, caplog: pytest.LogCaptureFixture
) -> None:
    host, port = http_listener.addr.rsplit(":", 1)
    conn = await connect(host, int(port))
    with caplog.at_level(logging.WARNING), pytest.raises(ForeignProtocolError) as info:
        await conn.request(RemotingCommand.request(RequestCode.GET_ROUTEINFO_BY_TOPIC, {"topic": "T"}), BOUND)
    assert info.value.protocol == "HTTP" and info.value.first_line == "HTTP/1.1 400 Bad Request"
    assert str(info.value).startswith(f"{http_listener.addr} speaks HTTP, not RocketMQ's protocol"), info.value
    assert not [r for r in caplog.records if r.name.startswith("sievemq")], caplog.records  # no frame-length warning
    await conn.wait_closed()


def test_namesrv_pointed_at_an_http_port_says_it_speaks_http(world: World, http_listener: HttpListener) -> None:
    for http in (http_listener.addr, world.http):  # the test's listener, and the dev's own dashboard port
        for args in (["group", "list"], ["topic", "peek", TOPIC], ["produce", TOPIC], ["consume", TOPIC]):
            res = cli(*args, "-n", http)
            error(res, f"{http} speaks HTTP, not RocketMQ's protocol", "give the name server's address (9876")
            assert "frame length" not in res.stderr, res.stderr


def test_namesrv_pointed_at_a_broker_says_it_is_a_broker(world: World) -> None:
    for args in (["group", "list"], ["cluster", "status"], ["topic", "peek", TOPIC], ["produce", TOPIC],
                 ["consume", TOPIC, "--timeout", "1"]):  # fmt: skip
        error(cli(*args, "-n", world.broker), f"{world.broker} is a broker, not a name server",
              "give the name server's address (9876 by default)")  # fmt: skip
    # Among several addresses: the admin commands use the one that is a name server; the client commands, which
    # take the broker's refusal for an answer, name the broker.
    both = f"{world.broker};{world.ns}"
    answer(cli("group", "list", "-n", both), GROUP)
    error(cli("produce", TOPIC, "-n", both), f"{world.broker} is a broker, not a name server")


def test_message_show_of_something_that_is_not_a_message_id_says_so_before_searching(world: World) -> None:
    for args in (["message", "show", "garbage"], ["message", "verify", "garbage", "--group", GROUP],
                 ["message", "show", "ABC123"]):  # fmt: skip
        res = cli(*args, "-n", world.ns)
        assert res.returncode == 2 and not res.stdout, (res.returncode, res.stdout, res.stderr)
        assert "is not a message id" in res.stderr and "in any of" not in res.stderr, res.stderr
    res = cli("message", "show", "garbage", "-n", world.ns)
    assert "sievemq message find --topic TOPIC --key garbage" in res.stderr, res.stderr
    # Even with no name server at all: refused before anything is asked.
    res = cli("message", "show", "garbage", "-n", f"127.0.0.1:{free_port()}")
    assert res.returncode == 2 and "is not a message id" in res.stderr, res.stderr


# ------------------------------------------------------------------------------------------------ 9. selectors
def _commands(group: click.Group, path: tuple[str, ...] = ()) -> Iterator[tuple[str, click.Command]]:
    for name, cmd in group.commands.items():
        if isinstance(cmd, click.Group):
            yield from _commands(cmd, (*path, name))
        yield " ".join((*path, name)), cmd


def test_every_command_with_a_selector_speaks_tag_and_sql() -> None:
    with_selector = []
    for name, cmd in _commands(cli_root):
        opts = {o: p for p in cmd.params if isinstance(p, click.Option) for o in p.opts}
        if "--sql" not in opts:
            continue
        with_selector.append(name)
        assert "--tag" in opts and not opts["--tag"].hidden and not opts["--sql"].hidden, name
        assert opts["--tag"].metavar == opts["--sql"].metavar == "EXPR", name
        assert "--expr" in opts and opts["--expr"].hidden and "-e" in opts["--expr"].opts, name  # the old spelling
        shown = cli(*name.split(), "--help")
        assert "--tag EXPR" in shown.stdout and "--sql EXPR" in shown.stdout and "--expr" not in shown.stdout, name
    assert sorted(with_selector) == ["consume", "explain"]


def test_tag_and_its_old_spelling_work_in_consume_and_explain(world: World) -> None:
    ns = world.ns
    for flag in ("--tag", "--expr", "-e"):
        answer(cli("explain", "--topic", TOPIC, flag, "TagA", "-n", ns), "TAG 'TagA'", "3 of 3 messages match")
        got = cli("consume", TOPIC, "-n", ns, flag, "TagA", "-g", f"sel{flag.strip('-')}", "--from", "first",
                  "--count", "1", "--timeout", "60")  # fmt: skip
        assert got.returncode == 0 and len(got.stdout.splitlines()) == 1 and "tags=TagA" in got.stdout, got
    answer(cli("explain", "--topic", TOPIC, "--sql", "a = 1", "-n", ns), "SQL92 'a = 1'")
    for args in (["explain", "--topic", TOPIC, "--tag", "TagA", "--sql", "a = 1"],
                 ["consume", TOPIC, "--expr", "TagA", "--sql", "a = 1"]):  # fmt: skip
        res = cli(*args, "-n", ns)
        assert res.returncode == 2 and "exclude each other" in res.stderr, res.stderr
    res = cli("explain", "--topic", TOPIC, "-n", ns)
    assert res.returncode == 2 and "--tag EXPR" in res.stderr and "--sql EXPR" in res.stderr, res.stderr


def test_docs_show_one_selector_vocabulary() -> None:
    root = Path(__file__).resolve().parents[2]
    for doc in [root / "README.md", *sorted((root / "docs").rglob("*.md"))]:
        for line in doc.read_text().splitlines():
            if "sievemq consume" in line or "sievemq explain" in line:
                assert "--expr" not in line, (doc.name, line)
