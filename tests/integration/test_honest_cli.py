"""Honest answers of the client commands (real processes): what is missing is named, the command ends non-zero
instead of waiting in silence, a refusal is said once, and client commands log no INFO unless asked (-v)."""

from __future__ import annotations

import asyncio
import os
import sys

import orjson
import pytest

from sievemq import Message, NoRouteError, Producer
from sievemq.protocol.reasons import Reason
from tests.integration.conftest import Cluster
from tests.support.procs import free_port

BOUND = 30.0
"""Seconds after which a command that should have ended is a failure (it hangs), not a slow pass."""


def _env() -> dict[str, str]:
    return {k: v for k, v in os.environ.items() if not k.startswith("SIEVEMQ_")}


async def run_cli(*args: str, timeout: float = BOUND) -> tuple[int, str, str]:
    """``python -m sievemq.cli ARGS`` -> (exit code, stdout, stderr); fails when it does not end in ``timeout``."""
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "sievemq.cli", *args,
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE, env=_env(),
    )  # fmt: skip
    try:
        out, err = await asyncio.wait_for(proc.communicate(), timeout)
    except TimeoutError:
        proc.kill()
        await proc.wait()
        pytest.fail(f"sievemq {' '.join(args)} still ran after {timeout} s")
    assert proc.returncode is not None
    return proc.returncode, out.decode(), err.decode()


async def test_consume_of_a_missing_topic_says_so_and_fails(cluster: Cluster) -> None:
    dev = cluster.dev()
    rc, out, err = await run_cli("consume", "NoSuchTopic", "-n", str(dev.extra["namesrv"]))
    assert rc == 1 and not out, (rc, out, err)
    assert "topic 'NoSuchTopic' does not exist" in err and "sievemq topic create NoSuchTopic" in err, err
    assert "Traceback" not in err


async def test_consume_against_a_dead_name_server_says_so_and_fails() -> None:
    port = free_port()
    rc, out, err = await run_cli("consume", "AnyTopic", "-n", f"127.0.0.1:{port}")
    assert rc == 1 and not out, (rc, out, err)
    assert "no name server answers" in err and f"127.0.0.1:{port}" in err and "Traceback" not in err, err


async def test_produce_with_the_broker_down_names_the_broker(cluster: Cluster) -> None:
    ns = cluster.namesrv()
    broker = cluster.broker(ns.addr, "broker-down")
    rc, _, err = await run_cli("produce", "DownTopic", "-n", ns.addr, "-b", "first")
    assert rc == 0, err
    broker.kill9()
    rc, out, err = await run_cli("produce", "DownTopic", "-n", ns.addr, "-b", "second")
    assert rc == 1 and not out, (rc, out, err)
    assert "broker broker-down" in err and broker.addr in err and "connection closed" in err, err
    rc, _, err = await run_cli("consume", "DownTopic", "-n", ns.addr)
    assert rc == 1 and "broker broker-down" in err, err

    async with Producer(ns.addr, "down-p") as p:  # programs get the reason to branch on
        with pytest.raises(NoRouteError) as caught:
            await p.send(Message("DownTopic", b"third"))
    assert caught.value.reason == Reason.BROKER_GONE and "broker-down" in str(caught.value)

    cluster.restart(broker)
    rc, _, err = await run_cli("produce", "DownTopic", "-n", ns.addr, "-b", "fourth")
    assert rc == 0, err


async def test_consume_refuses_expr_with_sql() -> None:
    rc, out, err = await run_cli("consume", "T", "--expr", "TagA", "--sql", "a = 1", "-n", "127.0.0.1:1")
    assert rc == 2 and not out and "--expr" in err and "--sql" in err and "exclude each other" in err, err


async def test_client_commands_log_no_info_unless_verbose(cluster: Cluster) -> None:
    ns = str(cluster.dev().extra["namesrv"])
    rc, out, err = await run_cli("produce", "QuietTopic", "-n", ns, "-b", "hello")
    assert rc == 0 and out.startswith("SEND_OK") and err == "", err
    consume = ("consume", "QuietTopic", "-n", ns, "--from", "first", "--count", "1", "--timeout", "20")
    rc, out, err = await run_cli(*consume, "-g", "quiet-1")
    assert rc == 0 and out.endswith(" hello\n") and err == "", (out, err)
    rc, out, err = await run_cli(*consume, "-g", "quiet-2", "-v")
    assert rc == 0 and out.endswith(" hello\n") and " INFO " in err, (out, err)
    rc, _, err = await run_cli("topic", "list", "-n", ns, "-v")
    assert rc == 0, err
    rc, _, err = await run_cli("--log-level", "BOGUS", "topic", "list", "-n", ns)
    assert rc == 2 and "BOGUS" in err and "--log-level" in err, err


async def test_a_refused_subscription_is_printed_once(cluster: Cluster) -> None:
    ns = str(cluster.dev().extra["namesrv"])
    rc, _, err = await run_cli("produce", "MixedTopic", "-n", ns, "-b", "x")
    assert rc == 0, err
    first = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "sievemq.cli", "consume", "MixedTopic", "-n", ns, "-g", "mixed", "--expr", "TagA", "-v",
        stdout=asyncio.subprocess.DEVNULL, stderr=asyncio.subprocess.PIPE, env=_env(),
    )  # fmt: skip
    try:
        assert first.stderr is not None
        seen = b""
        async with asyncio.timeout(BOUND):
            while b" took [" not in seen:  # its rebalance took the queues: the group's expression is TagA
                line = await first.stderr.readline()
                assert line, f"the first consumer ended: {seen.decode()}"
                seen += line
        rc, out, err = await run_cli("consume", "MixedTopic", "-n", ns, "-g", "mixed", "--expr", "TagB")
        assert rc == 1 and not out, (rc, out, err)
        assert err.count("consumer group 'mixed' subscribes topic 'MixedTopic' with 'TagA'") == 1, err
        assert len(err.strip().splitlines()) == 1, err
    finally:
        first.terminate()
        await first.wait()


async def test_dev_refuses_a_bad_filter_module_before_starting(tmp_path) -> None:  # type: ignore[no-untyped-def]
    data = tmp_path / "data"
    rc, out, err = await run_cli("dev", "--data", str(data), "--namesrv-port", str(free_port()), "--broker-port",
                                 str(free_port()), "--grpc-port", "0", "--filter-modules", "not a module")  # fmt: skip
    assert rc == 1 and not out and not data.exists(), (rc, out, err)
    assert err.strip() == (
        "Error: invalid filterModules 'not a module' (from the command line): expected dotted module names "
        "separated by commas (shop.filters), or empty"
    ), err


async def test_consume_with_a_count_leaves_what_it_did_not_print_to_the_group(cluster: Cluster) -> None:
    """``consume --count N`` of a group commits exactly the N messages it printed: the next run of the group goes on
    from there (the messages pulled past the count were committed unseen before)."""
    dev = cluster.dev()
    ns = str(dev.extra["namesrv"])
    rc, _, err = await run_cli("topic", "create", "CountT", "-n", ns, "-q", "1")
    assert rc == 0, err
    rc, _, err = await run_cli("produce", "CountT", "-n", ns, "-c", "20", "-b", "m", "-q")
    assert rc == 0, err
    seen: list[int] = []
    for count in (5, 15):
        rc, out, err = await run_cli("consume", "CountT", "-n", ns, "-g", "CountG", "--from", "first", "--count",
                                     str(count), "--json", timeout=60)  # fmt: skip
        assert rc == 0, err
        lines = [line for line in out.splitlines() if line.strip()]
        assert len(lines) == count, out
        seen += [int(orjson.loads(line)["queueOffset"]) for line in lines]
    assert seen == list(range(20)), f"the two runs of the group saw {seen}"
