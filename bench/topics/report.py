"""bench_topics.py's output: one table (a row per N), each figure's ratio to the first row, details, JSON."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any

from bench.topics.row import Row

MIB = 1024 * 1024


def _restart_s(x: float | None) -> str:
    return "-" if x is None else f"{x:.2f}"


Column = tuple[str, Callable[[Row], float | None], str]
"""Header, the figure of a row (None: not measured), its format."""

COLUMNS: list[Column] = [
    ("errors", lambda r: r.produce.errors + r.produce2.errors + r.consume.errors, "{:,}"),
    ("create s", lambda r: r.create_s, "{:.2f}"),
    ("topics/s", lambda r: r.n / r.create_s if r.create_s else None, "{:,.0f}"),
    ("routed s", lambda r: r.route_after_create_s, "{:.2f}"),
    ("prod msg/s", lambda r: r.produce.rate or None, "{:,.0f}"),
    (
        "brk us/prod",
        lambda r: r.broker_cpu_produce * 1e6 / r.produce.messages if r.produce.messages else None,
        "{:.0f}",
    ),
    ("prod2 msg/s", lambda r: r.produce2.rate or None, "{:,.0f}"),
    (
        "brk us/prod2",
        lambda r: r.broker_cpu_produce2 * 1e6 / r.produce2.messages if r.produce2.messages else None,
        "{:.0f}",
    ),
    ("cons msg/s", lambda r: r.consume.rate or None, "{:,.0f}"),
    ("pulls/s", lambda r: r.consume.request_rate if r.consume.messages else None, "{:,.0f}"),
    (
        "brk us/cons",
        lambda r: r.broker_cpu_consume * 1e6 / r.consume.messages if r.consume.messages else None,
        "{:.0f}",
    ),
    ("RSS MiB", lambda r: r.broker.rss_kib / 1024 or None, "{:,.0f}"),
    ("file MiB", lambda r: r.broker.rss_file_kib / 1024 or None, "{:,.0f}"),
    ("maps", lambda r: r.broker.maps or None, "{:,}"),
    ("fds", lambda r: r.broker.fds or None, "{:,}"),
    ("peak maps", lambda r: r.peak_maps or None, "{:,}"),
    ("peak fds", lambda r: r.peak_fds or None, "{:,}"),
    ("cq MiB", lambda r: r.cq.allocated / MIB if r.cq.files else None, "{:,.1f}"),
    ("KiB/queue", lambda r: r.per_queue_bytes() / 1024 if r.cq.files else None, "{:,.1f}"),
    ("route ms", lambda r: r.route_ms_p50 or None, "{:.2f}"),
    ("stop s", lambda r: r.restart.stop_s or None, "{:.2f}"),
    ("restart s", lambda r: r.restart.answer_s or None, "{:.2f}"),
    ("kill-9 s", lambda r: r.kill9.answer_s or None, "{:.2f}"),
    ("rerouted s", lambda r: r.kill9.route_s, "{:.2f}"),
    ("k9 RSS MiB", lambda r: r.kill9.broker.rss_kib / 1024 or None, "{:,.0f}"),
    ("ns MiB", lambda r: r.namesrv.rss_kib / 1024 or None, "{:,.0f}"),
    ("took s", lambda r: r.took_s, "{:.0f}"),
]


def _cell(v: float | None, fmt: str) -> str:
    return "-" if v is None else fmt.format(v)


def _markdown(head: list[str], body: list[list[str]]) -> list[str]:
    widths = [max(len(h), *(len(b[i]) for b in body)) if body else len(h) for i, h in enumerate(head)]
    lines = ["| " + " | ".join(h.rjust(w) for h, w in zip(head, widths, strict=True)) + " |",
             "|" + "|".join("-" * (w + 1) + ":" for w in widths) + "|"]  # fmt: skip
    lines += ["| " + " | ".join(c.rjust(w) for c, w in zip(b, widths, strict=True)) + " |" for b in body]
    return lines


def table(rows: list[Row]) -> list[str]:
    """The figures, a row per N (skipped rows say why)."""
    body = []
    for r in rows:
        if r.skipped:
            body.append([f"{r.n:,}"] + ["skipped"] + [""] * (len(COLUMNS) - 1))
        else:
            failed = any(x.startswith("FAILED") for x in r.notes)
            body.append([f"{r.n:,}" + (" FAILED" if failed else "")] + [_cell(get(r), fmt) for _, get, fmt in COLUMNS])
    return _markdown(["N"] + [h for h, _, _ in COLUMNS], body)


def ratios(rows: list[Row]) -> list[str]:
    """Each figure over the first measured row's (the N=1 row when it ran)."""
    done = [r for r in rows if not r.skipped]
    if len(done) < 2:
        return []
    base = done[0]
    body = []
    for r in done[1:]:
        cells = [f"{r.n:,} / {base.n:,}"]
        for _, get, _ in COLUMNS:
            v, b = get(r), get(base)
            cells.append("-" if v is None or not b else f"{v / b:.2f}x")
        body.append(cells)
    return _markdown(["N / base"] + [h for h, _, _ in COLUMNS], body)


def details(rows: list[Row]) -> list[str]:
    """What each row did, beyond the table: creation, phases, disk, each restart."""
    out = []
    for r in rows:
        if r.skipped:
            out.append(f"N={r.n:,}: skipped: {r.skipped}")
            continue
        out.append(f"N={r.n:,} ({r.queues:,} queues, {r.per_queue} + {r.per_queue} messages per queue), "
                   f"{r.took_s:.0f} s in all, load average {r.load:.2f} at its end:")  # fmt: skip
        out.append(f"  broker started (empty store, registered) in {r.first_start_s:.2f} s; {r.n:,} topics created "
                   f"in {r.create_s:.2f} s by {r.create_requests:,} requests ({r.create_mode})")  # fmt: skip
        for name, ph in (("produce (new queues)", r.produce), ("produce again", r.produce2), ("consume", r.consume)):
            out.append(f"  {name}: {ph.messages:,} messages, {ph.requests:,} requests in {ph.seconds:.2f} s, "
                       f"{ph.errors} errors")  # fmt: skip
        b, ns = r.broker, r.namesrv
        out.append(f"  broker after consuming: RSS {b.rss_kib / 1024:,.0f} MiB ({b.rss_file_kib / 1024:,.0f} file), "
                   f"peak {b.hwm_kib / 1024:,.0f} MiB, {b.maps:,} mappings, {b.fds:,} fds (sampled every 0.5 s "
                   f"since its start: at most {r.peak_maps:,} mappings, {r.peak_fds:,} fds); name server RSS "
                   f"{ns.rss_kib / 1024:,.0f} MiB")  # fmt: skip
        out.append(f"  consume queues: {r.cq.files:,} files, {r.cq.allocated / MIB:,.1f} MiB allocated "
                   f"({r.cq.apparent / MIB:,.1f} MiB apparent), {r.per_queue_bytes() / 1024:,.1f} KiB per queue; "
                   f"whole store {r.store.allocated / MIB:,.1f} MiB allocated")  # fmt: skip
        out.append(f"  route lookups of random topics: p50 {r.route_ms_p50:.2f} ms, p99 {r.route_ms_p99:.2f} ms")
        for name, rs in (("clean restart", r.restart), ("kill -9", r.kill9)):
            if not rs.answer_s:
                continue
            gone = "still routed" if rs.gone_s is None else f"{rs.gone_s:.2f} s"
            rb = rs.broker
            out.append(f"  {name}: stop {rs.stop_s:.2f} s, route dropped after {gone}; from the new start: "
                       f"listening {rs.listen_s:.2f} s, pull of the last topic answered {rs.answer_s:.2f} s, routed "
                       f"{_restart_s(rs.route_s)} s; then RSS {rb.rss_kib / 1024:,.0f} MiB, {rb.maps:,} mappings, "
                       f"{rb.fds:,} fds; consume queues {rs.cq.allocated / MIB:,.1f} MiB allocated")  # fmt: skip
        for note in r.notes[:12]:
            out.append(f"  NOTE {note}")
        if len(r.notes) > 12:
            out.append(f"  ... {len(r.notes) - 12} more notes")
    return out


def as_json(rows: list[Row], header: dict[str, Any]) -> dict[str, Any]:
    """Every row's figures (the dataclasses as they are, plus the table's derived figures)."""
    out = []
    for r in rows:
        d = dataclasses.asdict(r)
        d["table"] = {h: get(r) for h, get, _ in COLUMNS} if not r.skipped else {}
        out.append(d)
    return {"header": header, "rows": out}
