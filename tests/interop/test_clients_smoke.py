"""Smoke tests of the interop harness itself; they need no broker.

They check that the three real clients install and import, and that every driver reports a failure as a JSON
``error`` event (instead of hanging) when nothing listens at the name server address.
"""

from __future__ import annotations

import socket
import subprocess
from pathlib import Path

import pytest

from tests.interop.clients import node_bin, python_for, run_driver, unique_name

pytestmark = pytest.mark.interop


def _closed_port() -> str:
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()  # nothing listens there any more
    return f"127.0.0.1:{port}"


@pytest.mark.parametrize(
    ("kind", "code"),
    [
        ("rmqcp", "from rocketmq.client import Producer, PushConsumer, Message"),
        ("rmq044", "from rocketmq.client import Producer; assert hasattr(Producer, 'send_batch')"),
    ],
)
def test_python_clients_import(interop_clients: Path, kind: str, code: str) -> None:
    proc = subprocess.run([str(python_for(kind)), "-c", code], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr


def test_ali_ons_requires(interop_clients: Path) -> None:
    proc = subprocess.run(
        [node_bin(), "-e", "const o = require('ali-ons'); if (!o.Producer || !o.Consumer) process.exit(1)"],
        cwd=interop_clients / "node",
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert proc.returncode == 0, proc.stderr


@pytest.mark.parametrize("kind", ["rmqcp", "rmq044", "ons"])
def test_produce_against_closed_port_reports_error(interop_clients: Path, kind: str) -> None:
    res = run_driver(
        kind,
        [
            "produce",
            "--namesrv",
            _closed_port(),
            "--topic",
            unique_name("T"),
            "--group",
            unique_name("P"),
            "--count",
            "2",
            "--tags",
            "TagA",
            "--timeout",
            "30",
        ],
        timeout=90,
    )
    assert res.returncode == 1, res.describe()
    assert res.of("error"), res.describe()
    assert not res.of("sent"), res.describe()


def test_batch_produce_against_closed_port_reports_error(interop_clients: Path) -> None:
    res = run_driver(
        "rmq044",
        [
            "produce-batch",
            "--namesrv",
            _closed_port(),
            "--topic",
            unique_name("T"),
            "--group",
            unique_name("P"),
            "--count",
            "3",
            "--batch-size",
            "2",
            "--timeout",
            "30",
        ],
        timeout=90,
    )
    assert res.returncode == 1, res.describe()
    assert res.of("error"), res.describe()


@pytest.mark.parametrize("kind", ["rmqcp", "rmq044", "ons"])
def test_consume_against_closed_port_times_out(interop_clients: Path, kind: str) -> None:
    args = [
        "consume",
        "--namesrv",
        _closed_port(),
        "--topic",
        unique_name("T"),
        "--group",
        unique_name("C"),
        "--expect",
        "1",
        "--timeout",
        "3",
        "--from",
        "first",
    ]
    args += ["--sql", "a > 1"] if kind == "ons" else ["--expr", "TagA || TagB"]
    res = run_driver(kind, args, timeout=90)
    assert res.returncode == 3, res.describe()
    assert res.of("timeout") and res.of("done"), res.describe()
    assert not res.of("received"), res.describe()
