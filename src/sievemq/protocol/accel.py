"""Whether the compiled codec is in use (docs/performance.md).

``sievemq.protocol._codec`` is built from ``_codec.pyx`` by ``pip install`` when Cython and a C compiler are
there; it holds compiled twins of the hot codec functions. ``message.py`` and ``batch.py`` swap them in at import
unless the environment sets ``SIEVEMQ_PURE_PYTHON=1`` (or the module is missing): then the pure-Python
reference runs. Both give the same results byte for byte (``tests/unit/protocol/test_accel.py``).
"""

from __future__ import annotations

import importlib
import os
from collections.abc import Mapping
from types import ModuleType

__all__ = ["PURE_ENV", "codec", "implementation", "install"]

PURE_ENV = "SIEVEMQ_PURE_PYTHON"
"""Set to 1 to run the pure-Python codecs although the compiled module is installed."""

_codec: ModuleType | None = None
_loaded = False


def codec() -> ModuleType | None:
    """The compiled codec module, or None (not built, or switched off by ``SIEVEMQ_PURE_PYTHON=1``)."""
    global _codec, _loaded
    if not _loaded:
        _loaded = True
        if os.environ.get(PURE_ENV, "") not in ("1", "true", "yes"):
            try:
                _codec = importlib.import_module("sievemq.protocol._codec")
            except ImportError:
                _codec = None
    return _codec


def implementation() -> str:
    """``"compiled"`` or ``"pure-python"``: which codecs this process runs (shown by ``sievemq version``)."""
    return "compiled" if codec() is not None else "pure-python"


def install(module: ModuleType, reference: Mapping[str, object], init: str) -> None:
    """Put the compiled twins of ``reference``'s functions in ``module`` (after the codec's ``init`` function has
    taken the references); nothing when the compiled codec is not in use."""
    compiled = codec()
    if compiled is None:
        return
    getattr(compiled, init)(module)
    for name in reference:
        setattr(module, name, getattr(compiled, name))
