"""Pull-scan throughput with and without consume-queue extension bitmaps (docs/protocol/bloom.md §6-§7).

Builds a store directly with ``MessageStore``: N messages (default 1,000,000, small bodies) in one
queue, a bitmap calculator that sets one SQL92 group's Bloom bits for ~1% of them (property
``a = '1'`` on every 100th message, deterministic), then walks the whole queue with ``get_message``
(default pull size 32, scan window ``max_cq_scan_entries``) and reports entries scanned per second:

(a) evaluation only: ``match_cq`` passes everything; every record is read from the commit log and
    its properties decoded (``read_properties``) and evaluated (``a = '1'``; with
    ``sievemq.filter.sql92.compile_selector`` when it exists, else a property comparison);
(b) bitmap first: the filter offers its Bloom bits as a ``BitmapProbe`` (and tests them in
    ``match_cq``), so only survivors (matches + Bloom false positives) are read and evaluated;
(c) for reference, the same bitmap test through per-entry ``match_cq`` calls (no probe);
(a') for reference, (a) with a bench-local decoder that extracts only the property string instead of
    ``read_record_summary`` (which also formats hosts and builds a full summary): shows how much of
    (a) is the store's scan and how much is record decoding.

Targets (issue): (b) >= 5,000,000 entries/s and >= 10x (a); (a) >= 500,000 entries/s.

    .venv/bin/python bench/bench_cq_scan.py [--messages N] [--dir PATH] [--repeat R]
"""

from __future__ import annotations

import argparse
import asyncio
import shutil
import struct
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from sievemq.protocol.message import MAGIC_V1, MessageExt, read_properties, string_to_properties
from sievemq.protocol.sysflag import BORNHOST_V6_FLAG, STOREHOSTADDRESS_V6_FLAG
from sievemq.store import AcceptingFilter, BitmapProbe, CqExtUnit, GetStatus, MessageStore, StoreConfig

TOPIC = "BenchTopic"
BITMAP_LEN = 14  # Bloom m = 112 bits (RocketMQ defaults: 32 consumers, 20% error, k = 3)
GROUP_BITS = (63, 14, 51)  # docs/protocol/bloom.md §3: "please_rename_unique_group_name_4#TopicTest"


def _bits(positions: tuple[int, ...]) -> bytes:
    out = bytearray(BITMAP_LEN)
    for p in positions:
        out[p // 8] |= 1 << (p % 8)
    return bytes(out)


MASK = _bits(GROUP_BITS)
ZERO = bytes(BITMAP_LEN)


def calculator(topic: str, props: dict[str, str], tags: str | None) -> bytes | None:
    """The broker's dispatch-time bitmap: the group's bits when its expression matches."""
    return MASK if props.get("a") == "1" else ZERO


def _make_evaluator() -> tuple[str, Callable[[dict[str, str]], bool]]:
    try:
        from sievemq.filter.sql92 import compile_selector  # type: ignore[attr-defined]
    except ImportError:
        return "property compare a == '1'", lambda props: props.get("a") == "1"
    sel: Any = compile_selector("a = '1'")
    fn = sel.evaluate if hasattr(sel, "evaluate") else sel
    return "sql92 compile_selector(\"a = '1'\")", lambda props: fn(props) is True


EVAL_NAME, EVALUATE = _make_evaluator()


class EvalOnly(AcceptingFilter):
    """(a) no bitmaps: every record is decoded and evaluated."""

    ignores_cq = True  # like the broker's SqlFilter without Bloom bits: no extension-unit reads

    def __init__(self) -> None:
        self.evaluated = 0

    def match_cq(self, tags_code: int, ext: CqExtUnit | None) -> bool:
        return True

    def match_record(self, record: memoryview) -> bool:
        self.evaluated += 1
        return EVALUATE(read_properties(record))


_I32 = struct.Struct(">i")
_U32 = struct.Struct(">I")
_I16 = struct.Struct(">h")


def lean_properties(rec: memoryview) -> dict[str, str]:
    """Only the properties of a stored record (docs/protocol/message-format.md §1 offsets), no other field decoded."""
    sys_flag = _I32.unpack_from(rec, 36)[0]
    p = 84 + (12 if sys_flag & BORNHOST_V6_FLAG else 0) + (12 if sys_flag & STOREHOSTADDRESS_V6_FLAG else 0)
    p += 4 + _I32.unpack_from(rec, p)[0]
    if _U32.unpack_from(rec, 4)[0] == MAGIC_V1:
        p += 1 + rec[p]
    else:
        p += 2 + _I16.unpack_from(rec, p)[0]
    n = _I16.unpack_from(rec, p)[0]
    return string_to_properties(str(rec[p + 2 : p + 2 + n], "utf-8"))


class EvalOnlyLean(EvalOnly):
    """(a') as (a) with ``lean_properties`` instead of ``read_record_summary``."""

    def match_record(self, record: memoryview) -> bool:
        self.evaluated += 1
        return EVALUATE(lean_properties(record))


class BitmapFirst(EvalOnly):
    """(b) the group's Bloom bits first (vectorised by the store through the probe), then evaluation."""

    ignores_cq = False

    def __init__(self, *, probe: bool = True) -> None:
        super().__init__()
        self.probe = probe

    def bitmap_probe(self) -> BitmapProbe | None:
        return BitmapProbe(MASK, 0) if self.probe else None

    def match_cq(self, tags_code: int, ext: CqExtUnit | None) -> bool:
        if ext is None or len(ext.bitmap) != BITMAP_LEN or ext.store_time <= 0:
            return True
        bm = ext.bitmap
        return all(bm[i] & m == m for i, m in enumerate(MASK) if m)


async def build(root: Path, n: int) -> MessageStore:
    cfg = StoreConfig(root=root, flush_interval_ms=60_000, cleanup_interval_ms=3_600_000)
    store = MessageStore(cfg, ("127.0.0.1", 10911))
    store.set_bitmap_calculator(calculator)  # before load(), as the broker does
    store.load()
    batch = 500
    t0 = time.perf_counter()
    for start in range(0, n, batch):
        msgs = [
            MessageExt(
                TOPIC,
                b"body-%07d" % i,
                properties={"a": "1" if i % 100 == 0 else "0", "TAGS": "TagA"},
                queue_id=0,
                born_host=("10.0.0.1", 5555),
                born_timestamp=1,
            )
            for i in range(start, min(n, start + batch))
        ]
        r = await store.put_messages(msgs)
        assert r.ok, r.status
    dt = time.perf_counter() - t0
    print(f"stored {n:,} messages in {dt:.1f}s ({n / dt:,.0f}/s), queue max offset {store.get_max_offset(TOPIC, 0):,}")
    return store


def scan(store: MessageStore, flt: EvalOnly, max_msgs: int) -> tuple[float, int, int]:
    """Pull the whole queue; returns (seconds, entries scanned, messages delivered)."""
    end = store.get_max_offset(TOPIC, 0)
    off = 0
    found = 0
    t0 = time.perf_counter()
    while off < end:
        r = store.get_message(TOPIC, 0, off, max_msgs, flt)
        if r.status not in (GetStatus.FOUND, GetStatus.NO_MATCHED_MESSAGE):
            raise RuntimeError(f"unexpected {r.status} at {off}")
        found += r.message_count
        off = r.next_begin_offset
    return time.perf_counter() - t0, end, found


async def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--messages", type=int, default=1_000_000)
    ap.add_argument("--dir", type=Path, default=None, help="store folder (default: a temporary one, deleted)")
    ap.add_argument("--repeat", type=int, default=3, help="runs per mode; the best is reported")
    ap.add_argument("--max-msgs", type=int, default=32)
    args = ap.parse_args()
    tmp = None
    root = args.dir
    if root is None:
        tmp = tempfile.mkdtemp(prefix="sievemq-bench-cq-")
        root = Path(tmp) / "store"
    store = await build(root, args.messages)
    expect = (args.messages + 99) // 100
    print(f"evaluation: {EVAL_NAME}; scan window {store.config.max_cq_scan_entries} entries, "
          f"pull size {args.max_msgs}; expecting {expect:,} matches")  # fmt: skip
    try:
        rates: dict[str, float] = {}
        modes: list[tuple[str, Callable[[], EvalOnly]]] = [
            ("(a) evaluation only", EvalOnly),
            ("(b) bitmap first (probe)", BitmapFirst),
            ("(c) bitmap via match_cq only", lambda: BitmapFirst(probe=False)),
            ("(a') evaluation only, lean decode", EvalOnlyLean),
        ]
        for name, make in modes:
            best = 0.0
            for _ in range(args.repeat):
                flt = make()
                dt, entries, found = scan(store, flt, args.max_msgs)
                if found != expect:
                    raise RuntimeError(f"{name}: delivered {found}, expected {expect}")
                best = max(best, entries / dt)
            rates[name] = best
            print(f"{name:34s} {best:>14,.0f} entries/s   (records evaluated per run: {flt.evaluated:,})")
        a = rates["(a) evaluation only"]
        b = rates["(b) bitmap first (probe)"]
        print(f"ratio (b)/(a): {b / a:.1f}x")
        print(f"targets: (b) >= 5,000,000/s {'OK' if b >= 5e6 else 'MISSED'}; (b)/(a) >= 10x "
              f"{'OK' if b >= 10 * a else 'MISSED'}; (a) >= 500,000/s {'OK' if a >= 5e5 else 'MISSED'}")  # fmt: skip
    finally:
        await store.shutdown()
        if tmp is not None:
            shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    asyncio.run(main())
