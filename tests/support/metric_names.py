"""Prometheus naming conventions, checked on a real scrape's exposition text (https://prometheus.io/docs/practices/naming/).

``naming_problems(text)`` lists every family that breaks one, as a sentence naming the family and the rule:

- a family name is snake_case (``[a-z][a-z0-9_]*``) and starts with ``sievemq_``, except the process, platform and
  GC families of prometheus_client (``process_``, ``python_``), which have their own standard names;
- a counter ends in ``_total``; a gauge, histogram or summary does not (nor in ``_count``, ``_sum``, ``_bucket``);
- a unit is the base unit, in the plural, last before ``_total``: ``_bytes`` / ``_bytes_total``, ``_seconds`` /
  ``_seconds_total``; never ``milliseconds``, ``kb`` and the like. A family whose HELP says it is bytes or a
  duration ("Bytes of ...", "Time from ...", "Seconds ...") must carry the unit;
- every family has a TYPE and a non-empty HELP;
- label names are snake_case and do not start with ``__`` (reserved for Prometheus).
"""

from __future__ import annotations

import re

from prometheus_client.parser import text_string_to_metric_families

__all__ = ["OTHER_PREFIXES", "naming_problems"]

OTHER_PREFIXES = ("process_", "python_", "rocketmq_")
"""Families of prometheus_client's own collectors, named by the library's (and every client library's) standard, and
RocketMQ 5's families, named as RocketMQ names them (``_milliseconds`` included: docs/metrics-rocketmq.md; checked
against RocketMQ's source by tests/integration/test_metrics_rocketmq.py)."""
_SNAKE = re.compile(r"^[a-z][a-z0-9_]*$")
_BASE_UNITS = ("bytes", "seconds")
_NOT_BASE_UNITS = frozenset({"milliseconds", "millis", "ms", "microseconds", "micros", "us", "nanoseconds", "ns",
                             "minutes", "hours", "days", "bits", "kb", "kib", "mb", "mib", "gb", "gib",
                             "kilobytes", "megabytes", "byte", "second"})  # fmt: skip
_HELP_UNIT = {"bytes": "bytes", "seconds": "seconds", "time": "seconds", "duration": "seconds"}
"""The first word of a HELP text that says what unit the family measures."""
_RESERVED_SUFFIXES = ("_count", "_sum", "_bucket", "_created")


def _families(text: str) -> tuple[dict[str, str], dict[str, str], set[str]]:
    """(name -> type, name -> help, names with samples but no TYPE) from the exposition's comment and sample lines."""
    types: dict[str, str] = {}
    helps: dict[str, str] = {}
    sampled: set[str] = set()
    for line in text.splitlines():
        if line.startswith("# TYPE "):
            _, _, name, kind = line.split(" ", 3)
            types[name] = kind.strip()
        elif line.startswith("# HELP "):
            parts = line.split(" ", 3)
            helps[parts[2]] = parts[3].strip() if len(parts) > 3 else ""
        elif line and not line.startswith("#"):
            sampled.add(re.split(r"[{ ]", line, maxsplit=1)[0])
    untyped = set()
    for sample in sampled:
        base = sample
        for suffix in (*_RESERVED_SUFFIXES, "_total"):
            if sample.endswith(suffix) and sample.removesuffix(suffix) in types:
                base = sample.removesuffix(suffix)
        if base not in types:
            untyped.add(sample)
    return types, helps, untyped


def _unit_problems(name: str, help_text: str) -> list[str]:
    words = name.removesuffix("_total").split("_")
    out = []
    for unit in _BASE_UNITS:
        if unit in words and words[-1] != unit:
            out.append(f"{name}: the unit '{unit}' must come last (before _total only): ..._{unit}"
                       f"{'_total' if name.endswith('_total') else ''}")  # fmt: skip
    for word in words:
        if word in _NOT_BASE_UNITS:
            out.append(f"{name}: '{word}' is not a base unit (bytes, seconds)")
    first = help_text.split(" ", 1)[0].lower() if help_text else ""
    wanted = _HELP_UNIT.get(first)
    if wanted is not None and words[-1] != wanted:
        out.append(f"{name}: its HELP says it measures {wanted} ({help_text[:40]!r}...) but the name does not end "
                   f"in _{wanted}{'_total' if name.endswith('_total') else ''}")  # fmt: skip
    return out


def naming_problems(text: str) -> list[str]:
    """Every break of the conventions in the module docstring found in ``text`` (Prometheus text format)."""
    types, helps, untyped = _families(text)
    problems = [f"{s}: a sample without a TYPE line" for s in sorted(untyped)]
    for name, kind in types.items():
        if not _SNAKE.match(name) or "__" in name:
            problems.append(f"{name}: not snake_case")
        if not name.startswith("sievemq_") and not name.startswith(OTHER_PREFIXES):
            problems.append(f"{name}: does not start with sievemq_")
        if kind == "counter" and not name.endswith("_total"):
            problems.append(f"{name}: a counter that does not end in _total")
        if kind != "counter" and name.endswith("_total"):
            problems.append(f"{name}: a {kind} that ends in _total (only counters do)")
        if name.endswith(_RESERVED_SUFFIXES):
            problems.append(f"{name}: ends in a suffix Prometheus reserves for samples of histograms and summaries")
        help_text = helps.get(name, "")
        if not help_text:
            problems.append(f"{name}: no HELP text")
        if name.startswith("sievemq_"):
            problems += _unit_problems(name, help_text)
    for family in text_string_to_metric_families(text):
        labels = {label for s in family.samples for label in s.labels}
        for label in sorted(labels):
            if not _SNAKE.match(label) or label.startswith("__"):
                problems.append(f"{family.name}: label {label!r} is not snake_case")
    return problems
