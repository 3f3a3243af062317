"""sievemq's apache.rocketmq.v2 definitions (``src/sievemq/proxy/v2/*.proto``) are the 5.x clients' wire contract,
and the committed Python modules are generated from them.

- They compile to exactly the descriptors the real 5.x client ``rocketmq-python-client`` 5.1.2 uses.
- Everything the Node.js client ``rocketmq-client-nodejs`` 1.0.8 defines in the .proto files it bundles (and its
  generated JavaScript reads) is ours too, field for field (``drivers/proto_contract.py``).
- ``scripts/gen_proto.sh`` run on them, with the grpcio-tools it names (installed in ``.interop/venv-rmq5`` by
  ``setup_clients.sh``), makes exactly the committed ``*_pb2*.py``: an edit of a .proto without regenerating fails.
"""

from __future__ import annotations

import difflib
import json
import re
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest

from tests.interop.clients import DRIVERS_DIR, REPO_ROOT, interop_dir, python_for

pytestmark = pytest.mark.interop

V2 = REPO_ROOT / "src" / "sievemq" / "proxy" / "v2"
GENERATED = ("definition_pb2.py", "service_pb2.py", "service_pb2_grpc.py")
NODE_PROTO = interop_dir() / "node-rmq5" / "node_modules" / "rocketmq-client-nodejs" / "proto"


def _contract(*extra: str) -> tuple[dict[str, Any], subprocess.CompletedProcess[str]]:
    out = subprocess.run([str(python_for("rmq5")), str(DRIVERS_DIR / "proto_contract.py"), str(V2), *extra],
                         capture_output=True, text=True, timeout=120)  # fmt: skip
    assert out.stdout.strip(), out.stderr
    return json.loads(out.stdout.strip().splitlines()[-1]), out


def test_our_v2_definitions_are_the_5x_clients_wire_contract(interop_clients: Path) -> None:
    report, out = _contract()
    assert report.get("files") and not any(report["files"].values()), report
    assert set(report["files"]) == {"definition.proto", "service.proto"}
    assert out.returncode == 0, out.stderr


def test_everything_the_node_client_defines_is_ours_field_by_field(interop_clients: Path) -> None:
    assert (NODE_PROTO / "apache" / "rocketmq" / "v2" / "definition.proto").is_file(), NODE_PROTO
    report, out = _contract("--node", str(NODE_PROTO))
    assert set(report.get("files", {})) == {"definition.proto", "service.proto"}, report
    assert not any(report["files"].values()), report
    assert out.returncode == 0, out.stderr


def test_the_committed_modules_are_what_gen_proto_makes_of_the_proto_files(
    interop_clients: Path, tmp_path: Path
) -> None:
    script = REPO_ROOT / "scripts" / "gen_proto.sh"
    pinned = re.search(r"grpcio-tools==([0-9.]+)", script.read_text())
    assert pinned is not None, "scripts/gen_proto.sh no longer names its grpcio-tools version"
    query = "import importlib.metadata as m; print(m.version('grpcio-tools'))"
    version = subprocess.run([str(python_for("rmq5")), "-c", query], capture_output=True, text=True, timeout=60)
    assert version.stdout.strip() == pinned.group(1), f"{version.stdout}{version.stderr} (gen_proto.sh: {pinned[1]})"
    # The layout gen_proto.sh works in: scripts/, .venv/bin/python (here the interop venv's, with grpcio-tools),
    # src/sievemq/proxy/v2/ holding only the .proto files.
    root = tmp_path / "repo"
    (root / "scripts").mkdir(parents=True)
    shutil.copy(script, root / "scripts" / "gen_proto.sh")
    out_dir = root / "src" / "sievemq" / "proxy" / "v2"
    out_dir.mkdir(parents=True)
    for proto in sorted(V2.glob("*.proto")):
        shutil.copy(proto, out_dir / proto.name)
    python = root / ".venv" / "bin" / "python"
    python.parent.mkdir(parents=True)
    python.write_text(f'#!/bin/sh\nexec "{python_for("rmq5")}" "$@"\n')
    python.chmod(0o755)
    run = subprocess.run(["bash", str(root / "scripts" / "gen_proto.sh")], capture_output=True, text=True,
                         timeout=120)  # fmt: skip
    assert run.returncode == 0, run.stdout + run.stderr
    for name in GENERATED:
        fresh, committed = (out_dir / name).read_text(), (V2 / name).read_text()
        diff = "".join(difflib.unified_diff(committed.splitlines(True), fresh.splitlines(True), f"committed/{name}",
                                            f"regenerated/{name}", n=1))  # fmt: skip
        assert fresh == committed, f"{name} is not what scripts/gen_proto.sh makes of the .proto files:\n{diff[:4000]}"
