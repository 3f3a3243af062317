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


if __name__ == "__main__":
    main()
