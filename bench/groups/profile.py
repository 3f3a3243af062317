"""``--profile``: py-spy recording the broker during a phase, and a summary of where its samples are."""

from __future__ import annotations

import collections
import shutil
import signal
import subprocess
import sys
from pathlib import Path


class PySpy:
    """``py-spy record --gil --format raw`` of one process, from ``start`` to ``stop`` (SIGINT makes it write).

    ``--gil``: only the thread holding the GIL is sampled, so the samples are where the process runs Python code
    (py-spy's idle detection does not tell the thread pool's and the flush thread's waits apart from work here:
    without it two thirds of the samples were idle ``ThreadPoolExecutor`` workers)."""

    def __init__(self, pid: int, out: Path, rate: int = 200) -> None:
        self.out = out
        venv = Path(sys.executable).parent / "py-spy"
        exe = str(venv) if venv.exists() else shutil.which("py-spy") or "py-spy"
        self.argv = [exe, "record", "--pid", str(pid), "--rate", str(rate), "--gil", "--format", "raw", "-o", str(out)]
        self.proc: subprocess.Popen[bytes] | None = None

    def start(self) -> None:
        """Start sampling."""
        log = open(self.out.with_suffix(".log"), "ab")  # noqa: SIM115 (kept open for the child)
        self.proc = subprocess.Popen(self.argv, stdout=log, stderr=subprocess.STDOUT)

    def stop(self) -> None:
        """Stop sampling and wait until the file is written."""
        if self.proc is None or self.proc.poll() is not None:
            return
        self.proc.send_signal(signal.SIGINT)
        try:
            self.proc.wait(30)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()


def _short(frame: str) -> str:
    """``func (path/to/sievemq/x/y.py:12)`` -> ``func (sievemq/x/y.py:12)``."""
    name, _, where = frame.partition(" (")
    where = where.rstrip(")")
    for marker in ("/src/", "/site-packages/", "/lib/python"):
        if marker in where:
            where = where.split(marker, 1)[1]
            break
    return f"{name} ({where})" if where else name


def _function(frame: str) -> str:
    """A frame without its line number: ``func (file)``."""
    short = _short(frame)
    head, _, _line = short.rpartition(":")
    return f"{head})" if head else short


def summarize(path: Path, top: int = 15) -> list[str]:
    """The top functions by own samples (the innermost frame, by line too) and sievemq's by samples under them.
    ``Runner.run`` as the innermost frame is uvloop's C code (socket I/O, callbacks) holding the GIL."""
    leaf_fn: collections.Counter[str] = collections.Counter()
    leaf_line: collections.Counter[str] = collections.Counter()
    total_fn: collections.Counter[str] = collections.Counter()
    total = 0
    for line in path.read_text(errors="replace").splitlines():
        stack, _, count = line.rpartition(" ")
        if not stack or not count.isdigit():
            continue
        n = int(count)
        total += n
        frames = [f for f in stack.split(";") if f and not f.startswith(("process ", "thread "))]
        if not frames:
            continue
        leaf_fn[_function(frames[-1])] += n
        leaf_line[_short(frames[-1])] += n
        for fn in {_function(f) for f in frames}:
            if "(sievemq/" in fn and "(sievemq/cli/" not in fn:
                total_fn[fn] += n
    if not total:
        return [f"no samples in {path}"]
    out = [f"{total} samples ({path})", "  own time, by function:"]
    out += [f"    {n / total:6.1%}  {fn}" for fn, n in leaf_fn.most_common(top)]
    out.append("  own time, by line:")
    out += [f"    {n / total:6.1%}  {fn}" for fn, n in leaf_line.most_common(top)]
    out.append("  inclusive, sievemq's functions (samples with the function on the stack):")
    out += [f"    {n / total:6.1%}  {fn}" for fn, n in total_fn.most_common(top + 10)]
    return out
