"""``sievemq produce`` and ``sievemq consume`` as a user runs them (subprocesses)."""

from __future__ import annotations

import asyncio
import sys
from collections.abc import Callable

import orjson

Names = Callable[[str], str]
CLI = ["-m", "sievemq.cli"]


async def run_cli(*args: str, timeout: float = 30.0) -> tuple[int, str, str]:
    """``sievemq ARGS`` -> (exit code, stdout, stderr)."""
    proc = await asyncio.create_subprocess_exec(
        sys.executable, *CLI, *args, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE
    )
    try:
        out, err = await asyncio.wait_for(proc.communicate(), timeout)
    except TimeoutError:
        proc.kill()
        await proc.wait()
        raise
    assert proc.returncode is not None
    return proc.returncode, out.decode(), err.decode()


async def test_produce_then_consume_as_json_and_lines(namesrv: str, names: Names) -> None:
    topic = names("Cli")
    rc, out, err = await run_cli(
        "produce", topic, "--namesrv", namesrv, "--count", "30", "--size", "100", "--tag", "TagA",
        "--key", "k1", "--prop", "region=eu",
    )  # fmt: skip
    assert rc == 0, err
    assert "sent 30 of 30 messages" in out
    rc, out, err = await run_cli("produce", topic, "--namesrv", namesrv, "--tag", "TagB", "--body", "hello b")
    assert rc == 0, err
    assert out.startswith("SEND_OK msgId=")

    rc, out, err = await run_cli(
        "consume", topic, "--namesrv", namesrv, "--from", "first", "--json", "--count", "31", "--timeout", "15"
    )
    assert rc == 0, err
    rows = [orjson.loads(line) for line in out.splitlines()]
    assert len(rows) == 31
    a_rows = [r for r in rows if r["tags"] == "TagA"]
    assert len(a_rows) == 30 and all(len(r["body"]) == 100 and r["keys"] == ["k1"] for r in a_rows)
    assert all(r["properties"]["region"] == "eu" for r in a_rows)
    assert [r["body"] for r in rows if r["tags"] == "TagB"] == ["hello b"]

    rc, out, err = await run_cli(
        "consume", topic, "--namesrv", namesrv, "--from", "first", "--expr", "TagB", "--count", "1", "--timeout", "15"
    )
    assert rc == 0, err
    (line,) = out.splitlines()
    assert line.endswith(" tags=TagB hello b") and f" {topic}:" in line


async def test_cli_reports_bad_input(namesrv: str) -> None:
    rc, _, err = await run_cli("produce", "bad topic!", "--namesrv", namesrv)
    assert rc != 0 and "illegal characters" in err
    rc, _, err = await run_cli("produce", "T", "--namesrv", namesrv, "--prop", "novalue")
    assert rc != 0 and "k=v" in err
