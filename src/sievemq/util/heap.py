"""The garbage collector of a long-running server role, set for short pauses (docs/performance.md).

CPython's collector pauses the event loop while it runs. A full (oldest-generation) collection walks every object
the process holds: in a started broker that took up to 85 ms, a stall every client's request waited behind.
Once a role has started, ``settle`` moves everything it made so far (modules, settings, tables) out of the
collector's way with ``gc.freeze``, so later collections walk only what was made since, and collects the youngest
generation after more allocations (a batch of messages is made and dropped between two collections, instead of
being walked again and again while it is stored).
"""

from __future__ import annotations

import gc

__all__ = ["GEN0_THRESHOLD", "settle"]

GEN0_THRESHOLD = 10_000
"""Allocations (net of frees) between two collections of the youngest generation (CPython's default: 700)."""


def settle() -> None:
    """After start-up: one collection, then freeze what survives and set the youngest generation's threshold."""
    gc.collect()
    gc.freeze()
    gen0, gen1, gen2 = gc.get_threshold()
    gc.set_threshold(max(gen0, GEN0_THRESHOLD), gen1, gen2)
