"""Renamed kernels: a kernel missing in the pull request paired with a new one of its family.

A pull request that changes a tile size or a template argument makes the same work run under
another name. Compared name by name, that is one kernel *missing* and one *new*, neither
tested nor gated, and the step's change goes unexplained. Within one comparison, and one
section, scope, kind, device and unit, the missing and the new kernels are grouped by
:func:`perfci.analysis.kernel_family.family_of`; a group with exactly one missing and one
new member is a rename: the base side's values of the old name become the baseline of the
new name, and the pair is tested, gated and attributed as one metric. A group with several
on either side is ambiguous (which replaced which cannot be told from names) and stays as it
is, with a note. Names of different families never pair, nor does an ``exact`` family (a
name no rule recognised) with anything.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import TypeVar

from perfci.analysis.kernel_family import Family, family_of
from perfci.core.model import MetricKind, RunComparison, SeriesKey

__all__ = [
    "PAIRED_KINDS",
    "Rename",
    "any_repeat",
    "any_run",
    "any_value",
    "find_renames",
    "mark_renames",
    "pair_renamed",
]

#: Kinds whose names a build or a backend choice can change: kernels, collectives (NCCL
#: kernels) and operators (ATen's backends).
PAIRED_KINDS = frozenset({MetricKind.KERNEL, MetricKind.COMM, MetricKind.OP})

V = TypeVar("V")
W = TypeVar("W")


@dataclass(frozen=True, slots=True)
class Rename:
    """``old`` (base side only) and ``new`` (pull request only) are one kernel of ``family``."""

    old: SeriesKey
    new: SeriesKey
    family: Family


def find_renames(
    missing: Iterable[SeriesKey], new: Iterable[SeriesKey]
) -> tuple[list[Rename], list[str]]:
    """Pair each missing series with the one new series of its family, where that is unique.

    Returns
    -------
    tuple[list[Rename], list[str]]
        The pairs (sorted by the new series' key), and one note per ambiguous family.
    """
    groups: dict[tuple[object, ...], tuple[list[SeriesKey], list[SeriesKey]]] = {}
    families: dict[tuple[object, ...], Family] = {}
    group: tuple[object, ...]
    for side, keys in ((0, missing), (1, new)):
        for key in keys:
            if key.kind not in PAIRED_KINDS:
                continue
            family = family_of(key.name)
            if family.exact:
                continue
            group = (key.kind, key.device, key.scope, key.section, key.unit, family)
            families[group] = family
            groups.setdefault(group, ([], []))[side].append(key)
    renames, notes = [], []
    for group, (old, fresh) in groups.items():
        family = families[group]
        if len(old) == 1 and len(fresh) == 1:
            renames.append(Rename(old[0], fresh[0], family))
        elif old and fresh:
            notes.append(
                f"{len(old)} missing and {len(fresh)} new {old[0].kind.value}s of one family "
                f"({family.name}, rule {family.rule}) were not paired: which replaced which "
                "cannot be told from their names."
            )
    renames.sort(key=lambda r: r.new.key)
    return renames, sorted(notes)


def pair_renamed(
    base: Mapping[SeriesKey, V],
    pr: Mapping[SeriesKey, W],
    base_present: Callable[[V], bool],
    pr_present: Callable[[W], bool],
) -> tuple[dict[SeriesKey, V], list[Rename], list[str]]:
    """``base`` with each renamed kernel's values moved to its new name.

    ``base_present`` and ``pr_present`` say whether a side's values hold any measurement
    (history mode: a baseline run with repeats, a candidate repeat; A/B: a pair with a
    value). Returns the new base mapping, the renames and the notes of :func:`find_renames`.
    """
    missing = [
        k for k, v in base.items() if base_present(v) and not (k in pr and pr_present(pr[k]))
    ]
    new = [k for k, v in pr.items() if pr_present(v) and not (k in base and base_present(base[k]))]
    renames, notes = find_renames(missing, new)
    if not renames:
        return dict(base), [], notes
    moved = dict(base)
    for rename in renames:
        moved[rename.new] = moved.pop(rename.old)
    return moved, renames, notes


def any_run(runs: Sequence[Sequence[float]]) -> bool:
    """History mode's baseline: the series was measured in at least one run."""
    return any(len(run) > 0 for run in runs)


def any_repeat(values: Sequence[float]) -> bool:
    """History mode's candidate: the series was measured in at least one repeat."""
    return len(values) > 0


def any_value(values: Sequence[float | None]) -> bool:
    """A/B mode: the series has a value in at least one pair."""
    return any(v is not None and not math.isnan(v) for v in values)


def mark_renames(result: RunComparison, renames: Sequence[Rename], notes: Sequence[str]) -> None:
    """Name on each paired line the kernel it replaces, its family and the rule; add the notes.

    Edits ``result`` in place (its lines are frozen: each paired one is replaced).
    """
    by_key = {r.new.key: r for r in renames}
    if by_key:
        result.metrics = [
            dataclasses.replace(
                m,
                replaces=by_key[m.key].old.name,
                family=by_key[m.key].family.name,
                family_rule=by_key[m.key].family.rule,
            )
            if m.key in by_key
            else m
            for m in result.metrics
        ]
    result.notes.extend(notes)
