"""A bisection's saved state, ``.perfci/bisect-<id>.json``, and the probes it can reuse.

The state is written after every probe, so a stopped bisection (budget spent, Ctrl-C, a lost
runner) loses at most the probe in progress; ``--resume`` reads it back and replays the search
with the probes already run. A probe of another bisection in the same folder is reused too when
it compared the same two commits of the same benchmark in the same environment (fingerprint):
the A/B of a pair of commits does not depend on why it was run. A confirming rerun is never
taken from another bisection: its point is to measure again.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from perfci.core.bisection import Probe
from perfci.core.errors import ConfigError

__all__ = [
    "STATE_VERSION",
    "BisectState",
    "bisect_id",
    "load_state",
    "reusable",
    "save_state",
    "state_path",
]

STATE_VERSION = 1


@dataclass(slots=True)
class BisectState:
    """The search's identity (range, benchmark, metric) and its probes so far, in order."""

    id: str
    good: str
    bad: str
    benchmark: str
    metric: str
    probes: list[Probe] = field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        return {
            "version": STATE_VERSION,
            "id": self.id,
            "good": self.good,
            "bad": self.bad,
            "benchmark": self.benchmark,
            "metric": self.metric,
            "probes": [p.to_json() for p in self.probes],
        }


def bisect_id(good: str, bad: str, benchmark: str, metric: str) -> str:
    """A short stable id of one search: the same range, benchmark and metric resume it."""
    text = "\0".join((good, bad, benchmark, metric))
    return hashlib.sha256(text.encode()).hexdigest()[:12]


def state_path(folder: Path, ident: str) -> Path:
    return folder / f"bisect-{ident}.json"


def load_state(path: Path) -> BisectState:
    """The state saved at ``path``; ``ConfigError`` naming the file when it is unreadable."""
    try:
        raw = json.loads(path.read_text(encoding="utf-8"))
        if raw.get("version") != STATE_VERSION:
            raise ValueError(f"version {raw.get('version')!r}, expected {STATE_VERSION}")
        return BisectState(
            id=str(raw["id"]),
            good=str(raw["good"]),
            bad=str(raw["bad"]),
            benchmark=str(raw["benchmark"]),
            metric=str(raw["metric"]),
            probes=[Probe.from_json(p) for p in raw["probes"]],
        )
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise ConfigError(f"{path}: not a perfci bisect state file ({exc})") from None


def save_state(path: Path, state: BisectState) -> None:
    """Write the state whole (a temporary file renamed into place: never half-written)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    temporary = path.with_suffix(".json.tmp")
    temporary.write_text(json.dumps(state.to_json(), indent=1) + "\n", encoding="utf-8")
    temporary.replace(path)


def reusable(folder: Path, benchmark: str, *, own: Path, resume: bool) -> list[Probe]:
    """Probes of ``benchmark`` saved by the bisections in ``folder`` that may be reused: every
    probe of ``own`` when resuming it (none when starting it over: the same search run again
    without ``--resume`` measures again), no rerun (or second reading) of the others'."""
    found: list[Probe] = []
    for path in sorted(folder.glob("bisect-*.json")):
        mine = path.resolve() == own.resolve()
        if mine and not resume:
            continue
        try:
            state = load_state(path)
        except ConfigError:
            continue  # another version's or a damaged file: never a reason to stop
        if state.benchmark != benchmark:
            continue
        found += [p for p in state.probes if mine or not p.role.repeats_a_reading]
    return found
