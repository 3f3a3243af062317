"""The operator's commands as a user runs them (subprocesses of ``sievemq``), human and ``--json`` output, against a
real ``sievemq dev``; and every command's clear failure when the name server cannot be reached (docs/admin.md)."""

from __future__ import annotations

import asyncio
from collections import Counter
from collections.abc import AsyncIterator, Callable, Iterator
from datetime import datetime
from pathlib import Path
from zoneinfo import ZoneInfo

import orjson
import pytest

from sievemq.admin.api import AdminClient
from sievemq.admin.peek import peek
from sievemq.admin.progress import group_progress
from tests.client.conftest import eventually, start_dev
from tests.integration.conftest import _CLUSTER_KEY, Cluster
from tests.integration.test_admin_api import _caught_up, _consumer, _dlq_size, _fill
from tests.integration.test_cli import run_cli
from tests.support.procs import Proc, free_port
from tests.support.quiet import quiet_period

Names = Callable[[str], str]
_n = iter(range(1, 10_000))


@pytest.fixture(scope="module")
def dev(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Proc]:
    proc = start_dev(tmp_path_factory.mktemp("admin-cli-dev"))
    try:
        yield proc
    finally:
        proc.stop(timeout=10.0)


@pytest.fixture(autouse=True)
def _logs_on_failure(request: pytest.FixtureRequest, dev: Proc) -> None:
    holder = Cluster(dev.log_path.parent)
    holder.procs.append(dev)
    request.node.stash[_CLUSTER_KEY] = holder


@pytest.fixture
def namesrv(dev: Proc) -> str:
    return str(dev.extra["namesrv"])


@pytest.fixture
def names(request: pytest.FixtureRequest) -> Names:
    n = next(_n)
    return lambda kind: f"{kind}-{request.node.name.removeprefix('test_')[:30]}-{n}"


@pytest.fixture
async def admin(namesrv: str) -> AsyncIterator[AdminClient]:
    async with AdminClient(namesrv) as a:
        yield a


async def cli(namesrv: str, *args: str) -> tuple[int, str, str]:
    return await run_cli(*args, "--namesrv", namesrv)


async def cli_json(namesrv: str, *args: str) -> object:
    rc, out, err = await cli(namesrv, *args, "--json")
    assert rc == 0, f"{args}: exit {rc}: {err}"
    return orjson.loads(out)


async def test_group_commands(namesrv: str, names: Names, admin: AdminClient) -> None:
    topic, group = names("Cli"), names("g")
    await _fill(namesrv, topic, ["a", "b", "c"])
    consumer, _ = await _consumer(namesrv, group, topic)
    try:
        await eventually(lambda: _caught_up(admin, group, topic), what="caught up")
        listed = await cli_json(namesrv, "group", "list")
        assert isinstance(listed, list)
        (row,) = [g for g in listed if g["group"] == group]
        assert (row["members"], row["consumeType"], row["lag"]) == (1, "CONSUME_PASSIVELY", 0)
        rc, out, err = await cli(namesrv, "group", "list")
        assert rc == 0 and any(line.split()[:3] == [group, "1", "push"] for line in out.splitlines()), out

        progress = await cli_json(namesrv, "group", "progress", group)
        assert isinstance(progress, dict)
        assert [m["clientId"] for m in progress["members"]] == [consumer.client_id]
        assert progress["totals"]["lag"] == 0 and progress["totals"]["consumerOffset"] == 3
        assert {q["topic"] for q in progress["queues"]} == {topic, f"%RETRY%{group}"}
        rc, out, err = await cli(namesrv, "group", "progress", group)
        assert rc == 0 and f"consumer group {group}: 1 member(s) online (push, CLUSTERING), lag 0" in out, out
        assert any(line.split()[:4] == ["TOTAL", "3", "3", "3"] for line in out.splitlines()), out
    finally:
        await consumer.close()

    reset = await cli_json(namesrv, "group", "reset-offset", group, "--topic", topic, "--to", "earliest")
    assert isinstance(reset, dict)
    assert [(q["queueId"], q["before"], q["after"]) for q in reset["queues"]] == [(0, 3, 0), (1, 0, 0)]
    assert (reset["to"], reset["timestamp"], reset["clientsTold"]) == ("earliest", 0, [])
    rc, out, err = await cli(namesrv, "group", "reset-offset", group, "-t", topic, "--to", "latest")
    assert rc == 0 and "reset to latest" in out and "1 of 2 queue(s) changed; no consumer online" in out, out
    assert (await group_progress(admin, group, topic)).lag == 0
    rc, _, err = await cli(namesrv, "group", "reset-offset", group, "-t", topic, "--to", "last tuesday")
    assert rc == 2 and "is not a time" in err, err

    deleted = await cli_json(namesrv, "group", "delete", group)
    assert isinstance(deleted, dict)
    assert (deleted["brokers"], deleted["retryTopicDeleted"], deleted["offsetsRemoved"]) == (["broker-a"], True, True)
    for command in (["group", "progress", group], ["group", "delete", group], ["group", "status", group],
                    ["group", "reset-offset", group, "-t", topic, "--to", "earliest"]):  # fmt: skip
        rc, out, err = await cli(namesrv, *command)
        assert rc == 1 and f"consumer group {group} does not exist" in err and "Traceback" not in err, (command, err)


async def test_reset_offset_to_a_time_between_two_batches_redelivers_the_second(
    namesrv: str, names: Names, admin: AdminClient, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``group reset-offset G --topic T --to TIME`` with a time as an operator types it (ISO-8601, local time, no
    zone; the command runs in a zone 5:30 ahead of UTC): the running consumer gets the batch stored after that time
    again, exactly once more, and nothing older."""
    topic, group = names("TimeCli"), names("g")
    await _fill(namesrv, topic, ["old0", "old1"])
    await asyncio.sleep(0.05)  # the next batch is stored at least 50 ms later
    await _fill(namesrv, topic, ["new0", "new1"])
    stored = {v.body: v.msg.store_timestamp for v in (await peek(admin, topic, queue=0)).messages}
    assert sorted(stored) == [b"new0", b"new1", b"old0", b"old1"], stored
    old_last, new_first = max(stored[b"old0"], stored[b"old1"]), min(stored[b"new0"], stored[b"new1"])
    between = (old_last + new_first) // 2
    assert old_last < between < new_first, stored
    local = ZoneInfo("Asia/Kolkata")
    monkeypatch.setenv("TZ", "Asia/Kolkata")  # the command's local time (its subprocess inherits the environment)
    when = datetime.fromtimestamp(between / 1000, local).replace(tzinfo=None).isoformat(timespec="milliseconds")
    consumer, got = await _consumer(namesrv, group, topic)
    try:
        await eventually(lambda: len(got.msgs) >= 4, what="first delivery")
        await eventually(lambda: _caught_up(admin, group, topic), what="offsets committed")
        reset = await cli_json(namesrv, "group", "reset-offset", group, "--topic", topic, "--to", when)
        assert isinstance(reset, dict)
        assert (reset["to"], reset["timestamp"]) == (when, between), reset
        assert [(q["queueId"], q["before"], q["after"]) for q in reset["queues"]] == [(0, 4, 2), (1, 0, 0)], reset
        assert reset["clientsTold"] == [consumer.client_id], reset
        await eventually(lambda: len(got.msgs) >= 6, what="the second batch again")
        await quiet_period(0.3, "more deliveries", unchanged=lambda: len(got.msgs))
        assert Counter(got.bodies()) == {b"old0": 1, b"old1": 1, b"new0": 2, b"new1": 2}, got.bodies()
    finally:
        await consumer.close()


async def test_group_delete_refuses_a_group_with_consumers_online(namesrv: str, names: Names) -> None:
    topic, group = names("Online"), names("g")
    await _fill(namesrv, topic, ["a"])
    consumer, _ = await _consumer(namesrv, group, topic)
    try:
        rc, _out, err = await cli(namesrv, "group", "delete", group)
        assert rc == 1 and "consumer(s) online" in err and "--force" in err, err
        forced = await cli_json(namesrv, "group", "delete", group, "--force", "--keep-offsets")
        assert isinstance(forced, dict)
        assert (forced["members"], forced["offsetsRemoved"]) == ([consumer.client_id], False)
    finally:
        await consumer.close()


async def test_message_commands_and_peek(namesrv: str, names: Names, admin: AdminClient, tmp_path: Path) -> None:
    topic, group = names("Msg"), names("g")
    (msg_id,) = await _fill(namesrv, topic, ["hello body"], tags="TagA", keys=["order-7"])
    await _fill(namesrv, topic, ["\x00\x01binary"], keys=["order-7"], queue=1)
    consumer, _ = await _consumer(namesrv, group, topic)
    await eventually(lambda: _caught_up(admin, group, topic), what="caught up")
    await consumer.close()

    shown = await cli_json(namesrv, "message", "show", msg_id)
    assert isinstance(shown, list)
    (m,) = shown
    assert (m["topic"], m["msgId"], m["tags"], m["keys"], m["body"], m["bodyEncoding"]) == (
        topic, msg_id, "TagA", ["order-7"], "hello body", "utf-8")  # fmt: skip
    assert m["consumedBy"] == [{"group": group, "state": "CONSUMED", "online": False, "consumerOffset": 1,
                                "subscription": None, "error": None}]  # fmt: skip
    body_file = tmp_path / "body.bin"
    rc, out, err = await cli(namesrv, "message", "show", m["offsetMsgId"], "--body-file", str(body_file))
    assert rc == 0 and f"msgId            {msg_id}" in out and "consumed by" in out, out
    assert body_file.read_bytes() == b"hello body"
    rc, out, err = await cli(namesrv, "message", "show", "F" * 32, "--topic", topic)
    assert rc == 1 and "no message" in err, err

    found = await cli_json(namesrv, "message", "find", "--topic", topic, "--key", "order-7")
    assert isinstance(found, dict)
    assert sorted(x["bodyEncoding"] for x in found["messages"]) == ["hex", "utf-8"]
    rc, out, err = await cli(namesrv, "message", "find", "-t", topic, "-k", "order-7")
    assert rc == 0 and "2 message(s) with key order-7" in out and "0x0001" in out, out

    peeked = await cli_json(namesrv, "topic", "peek", topic, "--count", "1")
    assert isinstance(peeked, dict)
    assert [(x["queueId"], x["queueOffset"]) for x in peeked["messages"]] == [(0, 0), (1, 0)]
    rc, out, err = await cli(namesrv, "topic", "peek", topic, "-q", "0", "-o", "0")
    assert rc == 0 and "hello body" in out and "binary" not in out, out
    rc, out, err = await cli(namesrv, "topic", "peek", topic, "--count", "100000")
    assert rc == 2 and "100000" in err, "a peek reads at most 1000 messages per queue"
    rc, out, err = await cli(namesrv, "topic", "peek", names("Missing"))
    assert rc == 1 and "does not exist" in err, err


async def test_dlq_resend_command(namesrv: str, names: Names, admin: AdminClient) -> None:
    topic, group = names("Dlq"), names("g")
    await _fill(namesrv, topic, ["x", "y"], keys=["kx"])
    broken, _ = await _consumer(namesrv, group, topic, fail=lambda m: True, max_reconsume_times=0)
    await eventually(lambda: _dlq_size(admin, group, 2), what="two dead letters")
    await broken.close()
    dry = await cli_json(namesrv, "dlq", "resend", group, "--dry-run")
    assert isinstance(dry, dict)
    assert (dry["dryRun"], len(dry["resent"]), dry["cursors"]) == (True, 2, {"broker-a:0": [0, 0]})
    rc, out, err = await cli(namesrv, "dlq", "resend", group)
    assert rc == 0 and "2 dead letter(s) examined, 2 selected: 2 resent" in out, out
    rc, out, err = await cli(namesrv, "dlq", "resend", group)
    assert rc == 0 and "0 dead letter(s) examined, 0 selected: 0 resent" in out, out
    rc, out, err = await cli(namesrv, "dlq", "resend", names("nobody"))
    assert rc == 1 and "does not exist" in err, err


async def test_topic_delete_of_a_missing_topic_says_so(namesrv: str, names: Names) -> None:
    rc, out, err = await cli(namesrv, "topic", "delete", names("Never"))
    assert rc == 1 and "does not exist" in err and "deleted" not in out, (out, err)


@pytest.mark.parametrize(
    "command",
    [
        ["group", "list", "--json"],
        ["group", "progress", "G", "--json"],
        ["group", "status", "G", "--json"],
        ["group", "reset-offset", "G", "-t", "T", "--to", "earliest", "--json"],
        ["group", "delete", "G", "--json"],
        ["message", "show", "0" * 32, "--json"],
        ["message", "find", "-t", "T", "-k", "K", "--json"],
        ["topic", "peek", "T", "--json"],
        ["topic", "delete", "T"],
        ["dlq", "resend", "G", "--json"],
        ["cluster", "status", "--json"],
    ],
)
async def test_an_unreachable_name_server_is_a_clear_error(command: list[str]) -> None:
    dead = f"127.0.0.1:{free_port()}"
    rc, out, err = await run_cli(*command, "--namesrv", dead, timeout=20.0)
    assert rc == 1 and f"no name server answered ({dead}: connection refused)" in err, err
    assert "Traceback" not in err and out == ""
