"""The worker side: a process that loads filter functions and runs them over batches of records.

Started by ``workers.WorkerPool`` as ``python -P -m sievemq.filtersrv.sandbox '<json settings>'``. Before touching
any user code it moves its protocol pipes off fds 0/1 (so ``print`` in a filter goes to stderr, never into the
protocol), asks Linux to kill it if the filter server dies, sets ``RLIMIT_CPU``/``RLIMIT_AS`` and extends
``sys.path`` with the operator's ``filterPaths``.

Pipe protocol (both directions: a 4-byte big-endian length, then that many bytes):

* request ``L`` + JSON spec: load (import or compile) a function; reply ``{"ok": true}`` or an error.
* request ``B`` + 4-byte JSON length + JSON ``{"fid", "spec"?}`` + stored records back to back: run the function
  on each record; reply ``{"ok": true, "m": [indexes of matches], "cpu": seconds used so far}``.
* reply on failure: ``{"ok": false, "kind": "load"|"raise"|"memory"|"result"|"decode"|"protocol", "error": text}``.

Replies are JSON (never pickle): the filter server must not trust what comes back from user code's process.
"""

from __future__ import annotations

import contextlib
import ctypes
import importlib
import os
import resource
import signal
import struct
import sys
import traceback
import types
from collections.abc import Callable
from typing import Any

import orjson

from sievemq.protocol.compression import CompressionError, decompress
from sievemq.protocol.message import MessageExt, decode_records

_LEN = struct.Struct(">I")
FilterFn = Callable[[MessageExt], object]
_PR_SET_PDEATHSIG = 1
_MAX_ERROR_CHARS = 1500


class LoadError(Exception):
    """A function could not be loaded; the message says why."""


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


def _short_error(e: BaseException, name: str) -> str:
    """``Type: message`` plus the innermost frame of the filter's own code."""
    frames = [f for f in traceback.extract_tb(e.__traceback__) if f.filename != __file__]
    where = f" at {os.path.basename(frames[-1].filename)}:{frames[-1].lineno}" if frames else ""
    text = f"{type(e).__name__}: {e}{where}"
    return text[:_MAX_ERROR_CHARS]


def load_function(spec: dict[str, Any], allowed_modules: list[str]) -> FilterFn:
    """Import ``module:function`` from an allowed module, or exec uploaded source and take ``name`` from it."""
    kind, name = spec.get("kind"), str(spec.get("name", ""))
    try:
        if kind == "named":
            module_name, _, func_name = name.partition(":")
            if not any(module_name == m or module_name.startswith(m + ".") for m in allowed_modules):
                raise LoadError(f"module '{module_name}' is not allowed")
            module = importlib.import_module(module_name)
            fn = getattr(module, func_name, None)
            if fn is None:
                raise LoadError(f"module '{module_name}' has no function '{func_name}'")
        elif kind == "source":
            code = compile(str(spec.get("source", "")), f"<uploaded {name}>", "exec")
            module = types.ModuleType(f"sievemq_upload_{spec.get('fid', name)}")
            sys.modules[module.__name__] = module
            exec(code, module.__dict__)
            fn = module.__dict__.get(name)
            if fn is None:
                raise LoadError(f"the uploaded source defines no '{name}'")
        else:
            raise LoadError(f"unknown function kind {kind!r}")
    except LoadError:
        raise
    except SyntaxError as e:
        raise LoadError(f"SyntaxError: {e.msg} at line {e.lineno} (the source must be Python)") from None
    except BaseException as e:
        if isinstance(e, KeyboardInterrupt):
            raise
        raise LoadError(_short_error(e, name)) from None
    if not callable(fn):
        raise LoadError(f"'{name}' is not a function")
    func: FilterFn = fn
    return func


def _inflate(msg: MessageExt) -> None:
    """Give the function the body a consumer would see (zlib, LZ4 or zstd); a corrupt one is left as stored."""
    with contextlib.suppress(CompressionError):
        msg.body = decompress(msg.body, msg.sys_flag)


def run_batch(fn: FilterFn, blob: bytes) -> list[int]:
    """Indexes of the records in ``blob`` that ``fn`` accepts. Exceptions from ``fn`` propagate."""
    matched: list[int] = []
    for i, msg in enumerate(decode_records(blob)):
        _inflate(msg)
        try:
            result = fn(msg)
        except MemoryError:
            raise
        except BaseException as e:  # the user's code may raise anything, even SystemExit
            raise FunctionRaised(f"{_short_error(e, '')} (message at queue offset {msg.queue_offset})") from None
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


def _isolate(cpu_seconds: int, memory_mb: int, paths: list[str]) -> tuple[int, int]:
    """Move the protocol off fds 0/1, set the limits, extend sys.path; returns (read fd, write fd)."""
    rfd, wfd = os.dup(0), os.dup(1)
    devnull = os.open(os.devnull, os.O_RDONLY)
    os.dup2(devnull, 0)
    os.close(devnull)
    os.dup2(2, 1)
    sys.stdout = sys.stderr
    if sys.platform.startswith("linux"):
        with contextlib.suppress(Exception):
            ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    with contextlib.suppress(ValueError, OSError):
        resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
    resource.setrlimit(resource.RLIMIT_CPU, (cpu_seconds, cpu_seconds + 1))
    if memory_mb > 0:
        limit = memory_mb * 1024 * 1024
        resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
    for p in reversed(paths):
        if p not in sys.path:
            sys.path.insert(0, p)
    return rfd, wfd


def _handle(kind: bytes, payload: bytes, funcs: dict[str, FilterFn], modules: list[str]) -> dict[str, Any]:
    if kind == b"L":
        spec = orjson.loads(payload)
        if spec["fid"] not in funcs:
            funcs[spec["fid"]] = load_function(spec, modules)
        return {"ok": True, "cpu": _cpu_used()}
    if kind == b"B":
        (hlen,) = _LEN.unpack_from(payload, 0)
        header = orjson.loads(payload[4 : 4 + hlen])
        fid = header["fid"]
        fn = funcs.get(fid)
        if fn is None:
            spec = header.get("spec")
            if not spec:
                return {"ok": False, "kind": "protocol", "error": f"function {fid} is not loaded in this worker"}
            fn = funcs[fid] = load_function(spec, modules)
        blob = payload[4 + hlen :]
        try:
            matched = run_batch(fn, blob)
        except ValueError as e:
            if "record" in str(e):
                return {"ok": False, "kind": "decode", "error": f"bad record in batch: {e}"}
            raise
        return {"ok": True, "m": matched, "cpu": _cpu_used()}
    return {"ok": False, "kind": "protocol", "error": f"unknown request {kind!r}"}


def main(argv: list[str]) -> int:
    """Worker entry point: serve requests until the pipe closes."""
    settings = orjson.loads(argv[1]) if len(argv) > 1 else {}
    modules = [str(m) for m in settings.get("modules", [])]
    rfd, wfd = _isolate(int(settings.get("cpu", 60)), int(settings.get("mem_mb", 0)), list(settings.get("paths", [])))
    funcs: dict[str, FilterFn] = {}
    _write_all(wfd, orjson.dumps({"ok": True, "ready": True, "pid": os.getpid()}))
    while True:
        try:
            (n,) = _LEN.unpack(_read_exact(rfd, 4))
            frame = _read_exact(rfd, n)
        except EOFError:
            return 0
        reply: dict[str, Any]
        try:
            reply = _handle(frame[:1], frame[1:], funcs, modules)
        except LoadError as e:
            reply = {"ok": False, "kind": "load", "error": str(e)}
        except MemoryError:
            reply = {"ok": False, "kind": "memory", "error": "MemoryError: exceeded the worker's memory limit"}
        except RecursionError as e:
            reply = {"ok": False, "kind": "raise", "error": _short_error(e, "")}
        except _NoneResult as e:
            reply = {"ok": False, "kind": "result", "error": str(e)}
        except FunctionRaised as e:
            reply = {"ok": False, "kind": "raise", "error": str(e)}
        except BaseException as e:  # the user's code may raise anything, even SystemExit
            reply = {"ok": False, "kind": "raise", "error": _short_error(e, "")}
        try:
            data = orjson.dumps(reply)
        except Exception:
            data = orjson.dumps({"ok": False, "kind": "protocol", "error": "unserializable reply"})
        try:
            _write_all(wfd, data)
        except OSError:
            return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
