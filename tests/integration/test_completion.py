"""Shell completion of the installed ``sievemq`` command (click's, as docs/getting-started.md documents): the script is
produced, and bash, running it, completes a subcommand and an option's values (real processes)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

SIEVEMQ = Path(sys.executable).parent / "sievemq"


def _env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("SIEVEMQ_", "_SIEVEMQ"))}
    env["PATH"] = f"{SIEVEMQ.parent}{os.pathsep}{env.get('PATH', '')}"
    return env


@pytest.mark.parametrize("shell", ["bash", "zsh", "fish"])
def test_the_completion_script_is_produced(shell: str) -> None:
    assert SIEVEMQ.exists(), f"{SIEVEMQ}: sievemq is not installed next to this Python (pip install -e .)"
    res = subprocess.run([str(SIEVEMQ)], env={**_env(), "_SIEVEMQ_COMPLETE": f"{shell}_source"},
                         capture_output=True, text=True, timeout=60)  # fmt: skip
    assert res.returncode == 0 and "_SIEVEMQ_COMPLETE" in res.stdout and "sievemq" in res.stdout, res.stderr


def _complete(words: str, cword: int) -> list[str]:
    """What bash, with the sourced completion script, offers for ``words`` (the ``cword``-th word completed)."""
    script = (
        'source <(_SIEVEMQ_COMPLETE=bash_source sievemq)\n'
        f"COMP_WORDS=({words}); COMP_CWORD={cword}; COMPREPLY=()\n"
        '_sievemq_completion sievemq\nprintf "%s\\n" "${COMPREPLY[@]}"\n'
    )
    res = subprocess.run(["bash", "-c", script], env=_env(), capture_output=True, text=True, timeout=60)
    assert res.returncode == 0, res.stderr
    return [line for line in res.stdout.splitlines() if line]


@pytest.mark.skipif(shutil.which("bash") is None, reason="bash is not installed")
def test_bash_completes_a_subcommand_and_an_option_value() -> None:
    assert _complete("sievemq con", 1) == ["config-reference", "consume"]
    assert set(_complete("sievemq topic ''", 2)) >= {"create", "delete", "list"}
    assert _complete("sievemq consume orders --from ''", 4) == ["first", "last"]
