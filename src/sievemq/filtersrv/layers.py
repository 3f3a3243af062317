"""The sandbox layers of filter workers, what each ``sandboxRequire`` level needs, and the decisions on them.

Pure logic (no ctypes, no processes): the worker side (``lockdown``) reports which layers it set up and verified;
the filter server decides here whether that is enough to accept uploaded source (docs/protocol/filter-server.md
§8, "The sandbox").
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

SandboxRequire = Literal["strict", "basic"]

LAYERS: tuple[str, ...] = (
    "rlimits",
    "no_new_privs",
    "seccomp",
    "landlock",
    "user",
    "pidns",
    "mountns",
    "netns",
    "ipcns",
)
"""Every layer, in the order a worker sets them up (the namespaces first, seccomp last)."""

LAYER_DOCS: Mapping[str, str] = {
    "rlimits": "RLIMIT_CPU/AS plus NPROC=0, NOFILE, FSIZE=0, CORE=0",
    "no_new_privs": "PR_SET_NO_NEW_PRIVS",
    "seccomp": "no sockets, no new processes, no signals to others, no mounts or namespaces (EPERM)",
    "landlock": "read-only access to the allowed folders only; no TCP; no signals outside the worker",
    "user": "an unprivileged user (sandboxUser) with no groups and no capabilities",
    "pidns": "a PID namespace of its own: other processes are invisible, and all die with the worker",
    "mountns": "a root of its own holding only the allowed folders, read-only (no /proc, /etc, /tmp)",
    "netns": "a network namespace with no interface up",
    "ipcns": "an IPC namespace of its own",
}

REQUIREMENTS: Mapping[str, tuple[str, ...]] = {
    "strict": LAYERS,
    "basic": ("rlimits", "no_new_privs", "seccomp"),
}
"""``sandboxRequire`` -> the layers every worker must have for the filter server to accept uploads. ``strict``:
every layer (the filter server must run as root, for ``user``); ``basic``: what any Linux gives an unprivileged
process."""

SKIPPABLE: tuple[str, ...] = tuple(name for name in LAYERS if name != "rlimits")
"""Layers an operator may turn off (``sandboxSkip``); the CPU and memory limits always apply."""


def _names(value: str) -> frozenset[str]:
    return frozenset(p.strip() for p in value.split(",") if p.strip())


def skip_is_valid(value: str) -> bool:
    """True when ``value`` (comma-separated) names only layers that may be skipped."""
    return _names(value) <= set(SKIPPABLE)


def parse_skip(value: str) -> frozenset[str]:
    """The layer names of a ``sandboxSkip`` value (comma-separated); ValueError naming an unknown one."""
    names = _names(value)
    unknown = sorted(names - set(SKIPPABLE))
    if unknown:
        raise ValueError(f"unknown sandbox layer(s) {', '.join(unknown)} (known: {', '.join(SKIPPABLE)})")
    return names


@dataclass(frozen=True)
class LayerReport:
    """What one worker set up: the active (verified) layers and, for each missing one, why."""

    active: tuple[str, ...] = ()
    missing: Mapping[str, str] = field(default_factory=dict)
    notes: Mapping[str, str] = field(default_factory=dict)
    """Details of active layers (the Landlock ABI and what it covers, the user id...)."""

    def to_json(self) -> dict[str, Any]:
        """The report as the worker sends it and the status shows it."""
        return {"active": list(self.active), "missing": dict(self.missing), "notes": dict(self.notes)}

    @classmethod
    def from_json(cls, data: object) -> LayerReport:
        """A report from a worker's ready message; anything malformed counts as no layer at all."""
        if not isinstance(data, dict):
            return cls((), {name: "the worker reported no sandbox" for name in LAYERS})
        named = data.get("active")
        active = tuple(n for n in LAYERS if isinstance(named, list) and n in named)
        missing, notes = data.get("missing"), data.get("notes")
        reasons = {str(k): str(v) for k, v in missing.items()} if isinstance(missing, dict) else {}
        details = {str(k): str(v) for k, v in notes.items()} if isinstance(notes, dict) else {}
        return cls(
            active,
            {n: reasons.get(n, "not reported") for n in LAYERS if n not in active},
            {k: v for k, v in details.items() if k in active},
        )

    def weaker_than(self, other: LayerReport) -> list[str]:
        """Layers ``other`` has and this report lacks."""
        return [n for n in other.active if n not in self.active]

    def common(self, other: LayerReport) -> LayerReport:
        """The layers both reports have (a pool is as strong as its weakest worker)."""
        active = tuple(n for n in self.active if n in other.active)
        missing = {**dict(other.missing), **dict(self.missing)}
        return LayerReport(active, {n: missing.get(n, "not on every worker") for n in LAYERS if n not in active},
                           {k: v for k, v in self.notes.items() if k in active})  # fmt: skip


def missing_for(require: str, active: Iterable[str]) -> list[str]:
    """The layers ``require`` needs that ``active`` lacks, in layer order."""
    have = set(active)
    return [n for n in REQUIREMENTS[require] if n not in have]


def upload_refusal(require: str, report: LayerReport) -> str | None:
    """Why uploads must stay off with the workers' ``report`` under ``sandboxRequire = require``; None if they may
    be on."""
    lacking = missing_for(require, report.active)
    if not lacking:
        return None
    why = "; ".join(f"{n}: {report.missing.get(n, 'not active')}" for n in lacking)
    hint = ' (sandboxRequire = "basic" accepts no_new_privs, seccomp and rlimits only)' if require == "strict" else ""
    layers = ", ".join(lacking)
    return f'sandboxRequire = "{require}" needs the sandbox layers {layers}, which are missing ({why}){hint}'


def describe(report: LayerReport) -> str:
    """One line for the log: active layers with notes, then the missing ones with their reasons."""
    active = ", ".join(f"{n} ({report.notes[n]})" if n in report.notes else n for n in report.active) or "none"
    missing = "; ".join(f"{n}: {why}" for n, why in report.missing.items()) or "none"
    return f"active: {active}; missing: {missing}"
