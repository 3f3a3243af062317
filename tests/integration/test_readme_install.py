"""The README's first command, as printed, on a fresh copy of the checkout: it makes a virtual environment, installs
sievemq into it and runs ``sievemq dev``, which serves (issue 16.6).

It installs every dependency into a new environment from the package index: about 30 s here with pip's cache empty
(wheels for every dependency), so it runs with the rest of the suite. The command's steps run in their order, the
installing ones on this machine's network (they reach the package index), the last one (``sievemq dev``) in a
network namespace of its own, so it has its default ports; where no namespace can be made (not root, no iproute2)
the test fails and says so (CI runs as root with iproute2).
"""

from __future__ import annotations

import os
import re
import shutil
import signal
import subprocess
import time
from pathlib import Path

import pytest

from tests.support.netns import NoNamespaces, loopback_only

REPO = Path(__file__).resolve().parents[2]


def first_command() -> str:
    """The ```sh block under the README's "Two commands" heading."""
    section = (REPO / "README.md").read_text().split("## Two commands", 1)[1]
    match = re.search(r"```sh\n(.*?)\n```", section, re.S)
    assert match is not None, "no sh block under 'Two commands'"
    return match.group(1).strip()


def fresh_copy(dest: Path) -> None:
    """The files git tracks or would add (not ignored), as they are in the working tree: what a clone of the next
    commit would hold, without build leftovers (in CI's clean checkout, exactly the clone's files)."""
    files = subprocess.run(["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"], cwd=REPO,
                           capture_output=True, check=True).stdout  # fmt: skip
    for name in filter(None, files.decode().split("\0")):
        src = REPO / name
        if src.is_file():
            (dest / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(src, dest / name)


def test_the_readme_first_command_installs_into_a_venv_and_serves(tmp_path: Path) -> None:
    command = first_command()
    assert command.startswith("python3 -m venv .venv") and command.endswith(".venv/bin/sievemq dev"), command
    *install, serve = command.split(" && ")
    checkout = tmp_path / "sievemq"
    fresh_copy(checkout)
    res = subprocess.run(["bash", "-c", " && ".join(install)], cwd=checkout, capture_output=True, text=True,
                         timeout=1200)  # fmt: skip
    assert res.returncode == 0, f"{' && '.join(install)}:\n{res.stdout[-3000:]}\n{res.stderr[-3000:]}"
    log = tmp_path / "first-command.log"
    try:
        with loopback_only("in") as prefix, open(log, "wb") as out:
            proc = subprocess.Popen([*prefix, "bash", "-c", serve], cwd=checkout, stdout=out,
                                    stderr=subprocess.STDOUT, start_new_session=True)  # fmt: skip
            try:
                deadline = time.monotonic() + 900
                while b"Press Ctrl-C to stop." not in log.read_bytes():
                    assert proc.poll() is None, f"exited with {proc.returncode}:\n{log.read_text()[-5000:]}"
                    assert time.monotonic() < deadline, log.read_text()[-5000:]
                    time.sleep(1)
                listed = subprocess.run([*prefix, str(checkout / ".venv/bin/sievemq"), "topic", "list"],
                                        capture_output=True, text=True, timeout=60)  # fmt: skip
                assert listed.returncode == 0, listed.stderr
            finally:
                if proc.poll() is None:
                    os.killpg(proc.pid, signal.SIGTERM)  # bash and the sievemq it started (our own group)
                    proc.wait(60)
    except NoNamespaces as e:
        pytest.fail(f"sievemq dev needs a network namespace of its own for its default ports, and none can be made "
                    f"here: {e}. Run the tests as root with iproute2 (ip) installed, as CI does.")  # fmt: skip
    assert "stopped cleanly" in log.read_text(), log.read_text()[-3000:]
