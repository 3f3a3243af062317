"""sievemq's apache.rocketmq.v2 definitions (``src/sievemq/proxy/v2/*.proto``) compile to exactly the descriptors
the real 5.x client ``rocketmq-python-client`` 5.1.2 uses: the wire contract of the gRPC proxy."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from tests.interop.clients import DRIVERS_DIR, REPO_ROOT, python_for

pytestmark = pytest.mark.interop


def test_our_v2_definitions_are_the_5x_clients_wire_contract(interop_clients: Path) -> None:
    proto_dir = REPO_ROOT / "src" / "sievemq" / "proxy" / "v2"
    out = subprocess.run([str(python_for("rmq5")), str(DRIVERS_DIR / "proto_contract.py"), str(proto_dir)],
                         capture_output=True, text=True, timeout=120)  # fmt: skip
    assert out.stdout.strip(), out.stderr
    report = json.loads(out.stdout.strip().splitlines()[-1])
    assert report.get("files") and not any(report["files"].values()), report
    assert set(report["files"]) == {"definition.proto", "service.proto"}
    assert out.returncode == 0, out.stderr
