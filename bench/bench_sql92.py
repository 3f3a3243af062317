"""Evaluations per second of SQL92 selectors: compiled vs the reference interpreter.

Run: ``.venv/bin/python bench/bench_sql92.py [--seconds 1.0]``. Single thread, one core. The target
for the typical 3-condition selector is >= 500,000 evaluations/s compiled.
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Callable, Mapping

from sievemq.filter.sql92 import compile_selector, parse, reference_evaluate

TYPICAL = "region = 'eu' AND amount > 100 AND kind IN ('a','b')"

# A realistic stored property map: user properties plus the system ones the broker keeps.
BASE = {
    "TAGS": "TagA",
    "KEYS": "order-1234",
    "UNIQ_KEY": "7F0000011B2C18B4AAC27A1C2B3D0000",
    "WAIT": "true",
    "CLUSTER": "DefaultCluster",
    "MIN_OFFSET": "0",
    "MAX_OFFSET": "1000",
}

SELECTORS = [
    (TYPICAL, {**BASE, "region": "eu", "amount": "250", "kind": "a"}, "typical, TRUE"),
    (TYPICAL, {**BASE, "region": "us", "amount": "250", "kind": "a"}, "typical, FALSE at the 1st test"),
    (TYPICAL, {**BASE, "region": "eu", "amount": "25x", "kind": "a"}, "typical, evaluation error"),
    (
        "TAGS IN ('TagA', 'TagB') OR (price BETWEEN 10.0 AND 99.5 AND NOT (vip = 'false'))",
        {**BASE, "TAGS": "TagC", "price": "42.5", "vip": "true"},
        "OR / BETWEEN / NOT",
    ),
    ("a LIKE 'ord%' AND EXISTS(b) AND c NOT CONTAINS 'x'", {**BASE, "a": "order", "b": "1", "c": "abc"}, "extensions"),
]


def rate(fn: Callable[[Mapping[str, str]], object], props: Mapping[str, str], seconds: float) -> float:
    """Evaluations per second of ``fn(props)`` measured over about ``seconds``."""
    n = 1000
    while True:
        start = time.perf_counter()
        for _ in range(n):
            fn(props)
        elapsed = time.perf_counter() - start
        if elapsed >= seconds:
            return n / elapsed
        n = int(n * max(2.0, 1.2 * seconds / max(elapsed, 1e-6)))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--seconds", type=float, default=1.0, help="measuring time per row")
    args = ap.parse_args()
    print(f"{'selector':34s} {'matcher/s':>12s} {'evaluate/s':>12s} {'reference/s':>12s} {'speed-up':>9s}")
    for text, props, label in SELECTORS:
        selector = compile_selector(text)
        tree = parse(text)
        compiled = rate(selector.matcher, props, args.seconds)
        method = rate(selector.evaluate, props, args.seconds)
        ref = rate(lambda p, tree=tree: reference_evaluate(tree, p), props, args.seconds / 4)  # type: ignore[misc]
        print(f"{label:34s} {compiled:12,.0f} {method:12,.0f} {ref:12,.0f} {compiled / ref:8.1f}x")
    start = time.perf_counter()
    for i in range(2000):
        compile_selector(f"{TYPICAL} AND n <> '{i}'")
    print(f"compile (parse + codegen, uncached): {(time.perf_counter() - start) / 2000 * 1e6:,.0f} us per expression")
    scaling(args.seconds)


def _chain(n: int) -> str:
    return " OR ".join(f"p{i} = '{i}'" for i in range(n))


def _nested(n: int) -> str:
    """AND inside OR inside AND...: n levels of tree; with ``a = '-1'`` every term is evaluated."""
    text = "a = '0'"
    for i in range(1, n):
        text = f"a <> '{i}' AND ({text})" if i % 2 else f"a = '{i}' OR ({text})"
    return text


def scaling(seconds: float) -> None:
    """Evaluation time against size: per term it must stay flat (linear evaluation), chains and nesting alike."""
    print(f"\n{'size (no term matches: all evaluated)':40s} {'compile s':>10s} {'eval us':>10s} {'ns/term':>9s}")
    rows: dict[str, list[float]] = {}
    for kind, build, sizes in (("OR chain", _chain, (100, 1_000, 10_000)), ("nested AND/OR", _nested, (100, 1_000))):
        for n in sizes:
            start = time.perf_counter()
            selector = compile_selector(build(n))
            took = time.perf_counter() - start
            props = {**BASE, "a": "-1", "p0": "x"}
            per_eval = 1.0 / rate(selector.matcher, props, seconds / 2)
            per_term = per_eval / n * 1e9
            rows.setdefault(kind, []).append(per_term)
            print(f"{kind + f', {n:,} terms':40s} {took:10.3f} {per_eval * 1e6:10.1f} {per_term:9.1f}")
    for kind, per_term in rows.items():
        print(f"{kind}: ns per term at the largest size / at the smallest: {per_term[-1] / per_term[0]:.2f}x "
              "(about 1.0 = linear)")  # fmt: skip


if __name__ == "__main__":
    main()
