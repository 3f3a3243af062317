"""A bad setting stops a role at once with one line on stderr naming the key, the value and what is allowed,
wherever the value came from (TOML file, environment, flag); nothing is created (real processes)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest


def run_cli(tmp_path: Path, *args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    """``python -m sievemq.cli ARGS`` in ``tmp_path`` with no inherited ``SIEVEMQ_*`` variables."""
    clean = {k: v for k, v in os.environ.items() if not k.startswith("SIEVEMQ_")}
    return subprocess.run(
        [sys.executable, "-m", "sievemq.cli", *args],
        cwd=tmp_path,
        env={**clean, **(env or {})},
        capture_output=True,
        text=True,
        timeout=60,
    )


def assert_one_line_error(res: subprocess.CompletedProcess[str], *words: str) -> str:
    """Exit code 1, nothing on stdout, exactly one line on stderr containing ``words``; returns the line."""
    assert res.returncode == 1, (res.returncode, res.stdout, res.stderr)
    lines = res.stderr.strip().splitlines()
    assert len(lines) == 1 and not res.stdout, res.stderr
    (line,) = lines
    assert line.startswith("Error: invalid ") and "Traceback" not in line, line
    for w in words:
        assert w in line, (w, line)
    return line


def test_broker_with_a_bad_toml_value(tmp_path: Path) -> None:
    (tmp_path / "bad.toml").write_text('brokerName = "broker-a"\nflushDiskType = "bogus"\n')
    res = run_cli(tmp_path, "broker", "--config", "bad.toml")
    line = assert_one_line_error(res, "flushDiskType", "'bogus'", "(from bad.toml)", "ASYNC_FLUSH or SYNC_FLUSH")
    assert line == (
        "Error: invalid flushDiskType 'bogus' (from bad.toml): expected ASYNC_FLUSH or SYNC_FLUSH (any letter case)"
    )
    assert not (tmp_path / "sievemq-data").exists(), "a refused broker creates no store"


def test_broker_with_a_bad_environment_variable(tmp_path: Path) -> None:
    res = run_cli(tmp_path, "broker", env={"SIEVEMQ_DISK_MAX_USED_SPACE_RATIO": "99"})
    assert_one_line_error(res, "diskMaxUsedSpaceRatio", "99", "SIEVEMQ_DISK_MAX_USED_SPACE_RATIO", "10..95")
    assert not (tmp_path / "sievemq-data").exists()


@pytest.mark.parametrize(
    ("args", "words"),
    [
        (["broker", "--max-error-rate-of-bloom-filter", "100"], ["maxErrorRateOfBloomFilter", "100", "1..99"]),
        (["broker", "--listen-port", "abc"], ["listenPort", "'abc'", "an integer in 0..65535"]),
        (["broker", "--namesrv-addr", "127.0.0.1"], ["namesrvAddr", "'127.0.0.1'", "host:port"]),
        (["broker", "--subscription-consistency", "loose"], ["subscriptionConsistency", "strict or rocketmq"]),
        (["namesrv", "--listen-port", "70000"], ["listenPort", "70000", "0..65535"]),
        (["filtersrv", "--worker-count", "0"], ["workerCount", "0", ">= 1"]),
        (["dev", "--broker-port", "70000"], ["listenPort", "70000", "0..65535"]),
    ],
)
def test_a_bad_flag(tmp_path: Path, args: list[str], words: list[str]) -> None:
    assert_one_line_error(run_cli(tmp_path, *args), *words, "(from the command line)")
    assert not (tmp_path / "sievemq-data").exists()


def test_filtersrv_with_a_bad_environment_variable(tmp_path: Path) -> None:
    res = run_cli(tmp_path, "filtersrv", env={"SIEVEMQ_FILTERSRV_BROKER_ADDR": "nowhere"})
    assert_one_line_error(res, "brokerAddr", "'nowhere'", "SIEVEMQ_FILTERSRV_BROKER_ADDR", "host:port")


def test_config_reference_shows_what_is_allowed(tmp_path: Path) -> None:
    res = run_cli(tmp_path, "config-reference")
    assert res.returncode == 0, res.stderr
    assert "allowed: ASYNC_FLUSH or SYNC_FLUSH (any letter case)" in res.stdout
    assert "[filter server" in res.stdout and "workerCount" in res.stdout
    md = run_cli(tmp_path, "config-reference", "--markdown")
    assert md.returncode == 0 and "| `diskMaxUsedSpaceRatio` | `75` | an integer in 10..95 |" in md.stdout
