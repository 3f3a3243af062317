"""``sievemq proxy`` on a port another proxy holds fails with a clear message (no silent SO_REUSEPORT sharing)."""

from __future__ import annotations

import subprocess
import sys

from tests.integration.conftest import Cluster


def test_a_second_proxy_on_a_taken_port_exits_with_the_reason(cluster: Cluster) -> None:
    ns = cluster.namesrv()
    first = cluster.proxy(ns.addr, "proxy-1")
    out = subprocess.run(
        [sys.executable, "-m", "sievemq.cli", "proxy", "--namesrv-addr", ns.addr, "--listen-port", str(first.port)],
        capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert out.returncode != 0, out.stdout
    assert f"cannot listen on 127.0.0.1:{first.port}" in out.stderr, out.stderr
