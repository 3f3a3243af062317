"""The worker side: a process that loads filter functions and runs them over batches of records.

Started by ``workers.WorkerPool`` as ``python -I -c <boot> '<json settings>'`` with an empty environment. Before
touching any user code it moves its protocol pipes off fds 0/1 (so ``print`` in a filter goes to stderr, a pipe the
pool logs, never into the protocol), asks Linux to kill it if the filter server dies, imports everything it and
typical filters need, and locks itself down (``lockdown``: namespaces, its own root, an unprivileged user, rlimits,
no_new_privs, Landlock, seccomp). Its ready message reports the layers that hold.

Pipe protocol (both directions: a 4-byte big-endian length, then that many bytes):

* request ``L`` + JSON spec: load (import or compile) a function; reply ``{"ok": true}`` or an error.
* request ``B`` + 4-byte JSON length + JSON ``{"fid", "spec"?}`` + stored records back to back: run the function
  on each record; reply ``{"ok": true, "m": [indexes of matches], "cpu": seconds used so far}``.
* reply on failure: ``{"ok": false, "kind": "load"|"raise"|"memory"|"result"|"decode"|"protocol", "error": text}``.

A worker serves one tenant, fixed in its settings before any user code runs: ``tenant`` empty, named functions only;
else only the uploaded function with that content id. It refuses any other (``protocol``, and the pool replaces it),
so even a mistake of the pool never puts two tenants' code in one interpreter (docs/protocol/filter-server.md §8).

Replies are JSON (never pickle): the filter server must not trust what comes back from user code's process. An
error of uploaded code names the exception type and the line of the uploaded source, never the exception's
message (it could carry what the function read); a named function's error also has the message (operator code).
"""

from __future__ import annotations

import contextlib
import importlib
import importlib.util
import os
import resource
import signal
import struct
import sys
import sysconfig
import traceback
import types
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import orjson

from sievemq.filtersrv import syscalls
from sievemq.filtersrv.lockdown import Lockdown, Plan, readable_dirs, tie_to_parent
from sievemq.protocol.compression import CompressionError, decompress
from sievemq.protocol.message import MessageExt, decode_records

_LEN = struct.Struct(">I")
FilterFn = Callable[[MessageExt], object]
_MAX_ERROR_CHARS = 1500
PRELOADED = (
    "json", "re", "math", "cmath", "decimal", "fractions", "statistics", "random", "datetime", "time", "calendar",
    "zoneinfo", "collections", "itertools", "functools", "operator", "string", "struct", "base64", "binascii",
    "hashlib", "hmac", "zlib", "ipaddress", "fnmatch", "uuid", "unicodedata", "bisect", "heapq", "copy", "enum",
    "dataclasses", "typing", "urllib.parse", "html", "csv", "io", "textwrap", "encodings.latin_1",
    "encodings.ascii", "encodings.utf_16", "encodings.idna",
)  # fmt: skip
"""Modules imported before the lockdown (a filter may import others from Python's own folders afterwards)."""


class LoadError(Exception):
    """A function could not be loaded; the message says why."""


@dataclass(frozen=True)
class Loaded:
    """A loaded function and what is needed to name its errors."""

    fn: FilterFn
    kind: str
    filename: str
    """``co_filename`` of the function's own code: frames there are the function's own lines."""
    lines: tuple[str, ...] = ()
    """Uploaded source, by line."""


def _read_exact(fd: int, n: int) -> bytes:
    chunks: list[bytes] = []
    while n > 0:
        chunk = os.read(fd, min(n, 1 << 20))
        if not chunk:
            raise EOFError
        chunks.append(chunk)
        n -= len(chunk)
    return b"".join(chunks)


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(_LEN.pack(len(data)) + data)
    while view:
        n = os.write(fd, view)
        view = view[n:]


def describe_error(e: BaseException, kind: str, filename: str, lines: tuple[str, ...] = ()) -> str:
    """``Type at line N: <that line>`` for uploaded code; ``Type: message at file:line`` for a named function.

    Only frames of the function's own code (``filename``) are named, so nothing of another module's source shows.
    """
    frames = [f for f in traceback.extract_tb(e.__traceback__) if f.filename == filename]
    name = type(e).__name__
    if kind == "source":
        if not frames or frames[-1].lineno is None:
            return name
        n = frames[-1].lineno
        text = lines[n - 1].strip()[:200] if 0 < n <= len(lines) else ""
        return f"{name} at line {n}" + (f": {text}" if text else "")
    where = f" at {os.path.basename(frames[-1].filename)}:{frames[-1].lineno}" if frames else ""
    return f"{name}: {e}{where}"[:_MAX_ERROR_CHARS]


def _load_named(name: str, allowed_modules: list[str]) -> Loaded:
    module_name, _, func_name = name.partition(":")
    if not any(module_name == m or module_name.startswith(m + ".") for m in allowed_modules):
        raise LoadError(f"module '{module_name}' is not allowed")
    try:
        module = importlib.import_module(module_name)
    except BaseException as e:
        if isinstance(e, KeyboardInterrupt):
            raise
        raise LoadError(f"{type(e).__name__}: {e}"[:_MAX_ERROR_CHARS]) from None
    fn = getattr(module, func_name, None)
    if fn is None:
        raise LoadError(f"module '{module_name}' has no function '{func_name}'")
    if not callable(fn):
        raise LoadError(f"'{name}' is not a function")
    code = getattr(fn, "__code__", None)
    return Loaded(fn, "named", code.co_filename if code is not None else "")


def _load_source(name: str, source: str, fid: str) -> Loaded:
    filename = f"<uploaded {name}>"
    lines = tuple(source.splitlines())
    try:
        code = compile(source, filename, "exec")
    except SyntaxError as e:
        raise LoadError(f"SyntaxError: {e.msg} at line {e.lineno} (the source must be Python)") from None
    module = types.ModuleType(f"sievemq_upload_{fid}")
    sys.modules[module.__name__] = module
    try:
        exec(code, module.__dict__)
    except BaseException as e:
        if isinstance(e, KeyboardInterrupt):
            raise
        raise LoadError(describe_error(e, "source", filename, lines)) from None
    fn = module.__dict__.get(name)
    if fn is None:
        raise LoadError(f"the uploaded source defines no '{name}'")
    if not callable(fn):
        raise LoadError(f"'{name}' is not a function")
    return Loaded(fn, "source", filename, lines)


def load_function(spec: dict[str, Any], allowed_modules: list[str]) -> Loaded:
    """Import ``module:function`` from an allowed module, or exec uploaded source and take ``name`` from it."""
    kind, name = spec.get("kind"), str(spec.get("name", ""))
    if kind == "named":
        return _load_named(name, allowed_modules)
    if kind == "source":
        return _load_source(name, str(spec.get("source", "")), str(spec.get("fid", name)))
    raise LoadError(f"unknown function kind {kind!r}")


def _inflate(msg: MessageExt) -> None:
    """Give the function the body a consumer would see (zlib, LZ4 or zstd); a corrupt one is left as stored."""
    with contextlib.suppress(CompressionError):
        msg.body = decompress(msg.body, msg.sys_flag)


def run_batch(loaded: Loaded, blob: bytes) -> list[int]:
    """Indexes of the records in ``blob`` that the function accepts. Its exceptions become FunctionRaised."""
    fn = loaded.fn
    matched: list[int] = []
    for i, msg in enumerate(decode_records(blob)):
        _inflate(msg)
        try:
            result = fn(msg)
        except MemoryError:
            raise
        except BaseException as e:  # the user's code may raise anything, even SystemExit
            text = describe_error(e, loaded.kind, loaded.filename, loaded.lines)
            raise FunctionRaised(f"{text} (message at queue offset {msg.queue_offset})") from None
        if result is None:
            raise _NoneResult(msg.queue_offset)
        if result:
            matched.append(i)
    return matched


class FunctionRaised(Exception):
    """The filter function raised on a message; the text names the error and the message."""


class _NoneResult(Exception):
    def __init__(self, offset: int) -> None:
        super().__init__(
            f"returned None for the message at queue offset {offset} (a filter must return True or False; "
            "is a 'return' missing?)"
        )


def _cpu_used() -> float:
    ru = resource.getrusage(resource.RUSAGE_SELF)
    return float(ru.ru_utime + ru.ru_stime)


def _move_pipes() -> tuple[int, int]:
    """Move the protocol off fds 0/1 (stdout goes to stderr); returns (read fd, write fd)."""
    rfd, wfd = os.dup(0), os.dup(1)
    devnull = os.open(os.devnull, os.O_RDONLY)
    os.dup2(devnull, 0)
    os.close(devnull)
    os.dup2(2, 1)
    sys.stdout = sys.stderr
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    return rfd, wfd


def preload() -> None:
    """Import what the worker and typical filters need while files can still be read."""
    for name in PRELOADED:
        with contextlib.suppress(ImportError):
            importlib.import_module(name)
    with contextlib.suppress(ImportError):
        syscalls.binding()
    _cpu_used()


def read_paths(filter_paths: list[str], modules: list[str], extra: list[str]) -> tuple[str, ...]:
    """What a worker may read: Python's own folders (sys.path, the standard library, site-packages), sievemq's
    package, the filterPaths, the allowed modules' folders and the operator's extra folders."""
    paths = [p for p in sys.path if p]
    paths += [v for k, v in sysconfig.get_paths().items() if k in ("stdlib", "platstdlib", "purelib", "platlib")]
    paths.append(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    paths += filter_paths + extra
    for name in {m.split(".", 1)[0] for m in modules}:
        try:
            spec = importlib.util.find_spec(name)
        except (ImportError, ValueError):
            continue
        if spec is not None:
            paths += list(spec.submodule_search_locations or [])
            if spec.origin and os.path.isabs(spec.origin):
                paths.append(spec.origin)
    return readable_dirs(paths)


def foreign(spec: dict[str, Any], tenant: str) -> str | None:
    """Why this worker (serving ``tenant``: a content id, or empty for named functions) must not load ``spec``."""
    kind, fid = spec.get("kind"), spec.get("fid")
    if tenant == "*":  # workers.ANY_FUNCTION: a test of the worker's own mechanics
        return None
    if not tenant:
        return None if kind == "named" else f"this worker runs named functions only, not {kind!r} ones"
    if kind == "source" and fid == tenant:
        return None
    return f"this worker runs only the uploaded function {tenant}, not {kind!r} {str(fid)[:40]!r}"


def _handle(kind: bytes, payload: bytes, funcs: dict[str, Loaded], modules: list[str], tenant: str) -> dict[str, Any]:
    if kind == b"L":
        spec = orjson.loads(payload)
        refusal = foreign(spec, tenant)
        if refusal:
            return {"ok": False, "kind": "protocol", "error": refusal}
        if spec["fid"] not in funcs:
            funcs[spec["fid"]] = load_function(spec, modules)
        return {"ok": True, "cpu": _cpu_used()}
    if kind == b"B":
        (hlen,) = _LEN.unpack_from(payload, 0)
        header = orjson.loads(payload[4 : 4 + hlen])
        fid = header["fid"]
        loaded = funcs.get(fid)
        if loaded is None:
            spec = header.get("spec")
            if not spec:
                return {"ok": False, "kind": "protocol", "error": f"function {fid} is not loaded in this worker"}
            refusal = foreign(spec, tenant)
            if refusal:
                return {"ok": False, "kind": "protocol", "error": refusal}
            loaded = funcs[fid] = load_function(spec, modules)
        blob = payload[4 + hlen :]
        try:
            matched = run_batch(loaded, blob)
        except ValueError as e:
            if "record" in str(e):
                return {"ok": False, "kind": "decode", "error": f"bad record in batch: {e}"}
            raise
        return {"ok": True, "m": matched, "cpu": _cpu_used()}
    return {"ok": False, "kind": "protocol", "error": f"unknown request {kind!r}"}


def _reply(frame: bytes, funcs: dict[str, Loaded], modules: list[str], tenant: str) -> dict[str, Any]:
    try:
        return _handle(frame[:1], frame[1:], funcs, modules, tenant)
    except LoadError as e:
        return {"ok": False, "kind": "load", "error": str(e)}
    except MemoryError:
        return {"ok": False, "kind": "memory", "error": "MemoryError: exceeded the worker's memory limit"}
    except _NoneResult as e:
        return {"ok": False, "kind": "result", "error": str(e)}
    except FunctionRaised as e:
        return {"ok": False, "kind": "raise", "error": str(e)}
    except BaseException as e:  # the user's code may raise anything, even SystemExit
        return {"ok": False, "kind": "raise", "error": type(e).__name__}


def main(argv: list[str]) -> int:
    """Worker entry point: lock down, then serve requests until the pipe closes."""
    settings = orjson.loads(argv[1]) if len(argv) > 1 else {}
    modules = [str(m) for m in settings.get("modules", [])]
    filter_paths = [str(p) for p in settings.get("paths", [])]
    tenant = str(settings.get("tenant", ""))
    rfd, wfd = _move_pipes()
    tie_to_parent(int(settings.get("parent", 0)))
    preload()
    plan = Plan(
        cpu_seconds=int(settings.get("cpu", 60)),
        memory_mb=int(settings.get("mem_mb", 0)),
        read_paths=read_paths(filter_paths, modules, [str(p) for p in settings.get("read", [])]),
        user=str(settings.get("user", "nobody")),
        skip=frozenset(str(s) for s in settings.get("skip", [])),
        parent=int(settings.get("parent", 0)),
    )
    for p in reversed(filter_paths):
        if p not in sys.path:
            sys.path.insert(0, p)
    report = Lockdown(plan).run()
    funcs: dict[str, Loaded] = {}
    _write_all(wfd, orjson.dumps({"ok": True, "ready": True, "pid": os.getpid(), "sandbox": report.to_json()}))
    while True:
        try:
            (n,) = _LEN.unpack(_read_exact(rfd, 4))
            frame = _read_exact(rfd, n)
        except EOFError:
            return 0
        try:
            data = orjson.dumps(_reply(frame, funcs, modules, tenant))
        except Exception:
            data = orjson.dumps({"ok": False, "kind": "protocol", "error": "unserializable reply"})
        try:
            _write_all(wfd, data)
        except OSError:
            return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
