"""Whether the compiled codec is in use (docs/performance.md).

``sievemq.protocol._codec`` is built from ``_codec.pyx`` by ``pip install`` when Cython and a C compiler are
there; it holds compiled twins of the hot codec functions. ``message.py`` and ``batch.py`` swap them in at import
unless the environment sets ``SIEVEMQ_PURE_PYTHON=1`` (or the module is missing): then the pure-Python
reference runs. Both give the same results byte for byte (``tests/unit/protocol/test_accel.py``).

``sievemq.store._scan`` (from ``store/_scan.pyx``, built the same way) twins the pull scan's loop over consume-queue
entries (``store/scan.py``); ``scan()`` selects it under the same rules (``tests/unit/store/test_scan_accel.py``).
"""

from __future__ import annotations

import importlib
import os
from collections.abc import Callable, Mapping
from types import ModuleType

__all__ = ["PURE_ENV", "codec", "headers", "implementation", "install", "scan"]

PURE_ENV = "SIEVEMQ_PURE_PYTHON"
"""Set to 1 to run the pure-Python codecs although the compiled module is installed."""

_modules: dict[str, ModuleType | None] = {}
"""The compiled modules looked for so far, by name (None: not built, or switched off)."""


def _compiled(name: str) -> ModuleType | None:
    if name not in _modules:
        module = None
        if os.environ.get(PURE_ENV, "") not in ("1", "true", "yes"):
            try:
                module = importlib.import_module(name)
            except ImportError:
                module = None
        _modules[name] = module
    return _modules[name]


def codec() -> ModuleType | None:
    """The compiled codec module, or None (not built, or switched off by ``SIEVEMQ_PURE_PYTHON=1``)."""
    return _compiled("sievemq.protocol._codec")


def headers() -> ModuleType | None:
    """The compiled header twins (``sievemq.protocol._headers``: frames, the edge check, the send header), or None."""
    return _compiled("sievemq.protocol._headers")


def scan() -> ModuleType | None:
    """The compiled pull scan (``sievemq.store._scan``), or None (not built, or ``SIEVEMQ_PURE_PYTHON=1``)."""
    return _compiled("sievemq.store._scan")


def implementation() -> str:
    """``"compiled"`` or ``"pure-python"``: which codecs this process runs (shown by ``sievemq version``)."""
    return "compiled" if codec() is not None else "pure-python"


def install(
    module: ModuleType, reference: Mapping[str, object], init: str, source: Callable[[], ModuleType | None] = codec
) -> None:
    """Put the compiled twins of ``reference``'s functions in ``module`` (after the compiled module's ``init``
    function has taken the references); nothing when it is not in use. ``source``: the compiled module (the codec's
    by default, ``scan`` for the pull scan's)."""
    compiled = source()
    if compiled is None:
        return
    getattr(compiled, init)(module)
    for name in reference:
        setattr(module, name, getattr(compiled, name))
