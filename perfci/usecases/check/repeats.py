"""Do the repeats of one run measure the same thing? Refuse profiles of unrelated workloads.

The repeats of a run are draws of one measurement: their metrics are averaged per series and
compared with the baseline's. Profiles of unrelated runs given as repeats (an ``nsys stats``
report and a Megatron rank log, issue 16) would be stored as a run whose series each exist in
one repeat only, and compared as if they were one workload. Such a set is told apart by the
metric keys the repeats would store: repeats of one workload share most of them (a kernel or
an operator may come and go between repeats, the bulk does not), unrelated profiles share
almost none, and different profile formats make that certain.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from perfci.core.errors import ConfigError
from perfci.core.model import Profile

#: Repeats in different formats must share at least this share of the smaller one's metric
#: keys (nsys stats against nvprof of the same program share ~10 %: CUDA API names only).
MIN_SHARED_ACROSS_FORMATS = 0.5
#: How many metric names of each repeat the error shows.
EXAMPLES = 3

Key = tuple[str, str, str]


@dataclass(frozen=True, slots=True)
class RepeatShape:
    """What one repeat would store: its formats and metric keys (label, kind, name)."""

    number: int
    formats: tuple[str, ...]
    keys: frozenset[Key]
    sources: tuple[str, ...]

    def describe(self) -> str:
        kinds: dict[str, int] = {}
        for _, kind, _ in self.keys:
            kinds[kind] = kinds.get(kind, 0) + 1
        counts = ", ".join(f"{n} {kind}" for kind, n in sorted(kinds.items()))
        names = ", ".join(name for _, _, name in sorted(self.keys)[:EXAMPLES])
        more = ", …" if len(self.keys) > EXAMPLES else ""
        return (
            f"repeat {self.number} ({', '.join(self.sources)}: {'/'.join(self.formats)}; "
            f"{len(self.keys)} metrics: {counts or 'none'}; e.g. {names or '-'}{more})"
        )


def shape(number: int, repeat: Sequence[Profile]) -> RepeatShape:
    """The shape of a repeat, keyed as ingest stores it (label-prefixed when several profiles)."""
    several = len(repeat) > 1
    keys = frozenset(
        (p.label if several else "", m.kind.value, m.name) for p in repeat for m in p.metrics
    )
    return RepeatShape(
        number=number,
        formats=tuple(sorted({p.format for p in repeat})),
        keys=keys,
        sources=tuple(dict.fromkeys(p.source for p in repeat)),
    )


def shared_share(a: RepeatShape, b: RepeatShape) -> float:
    """Share of the smaller repeat's metric keys that the other one has too (1.0 if empty)."""
    smaller = min(len(a.keys), len(b.keys))
    return len(a.keys & b.keys) / smaller if smaller else 1.0


def check_repeats_match(repeats: Sequence[Sequence[Profile]]) -> None:
    """Refuse repeats that are not profiles of one workload, naming both metric sets.

    Every repeat is compared with the first: it is refused when it shares no metric key with
    it, or when their formats differ and they share under ``MIN_SHARED_ACROSS_FORMATS`` of
    the smaller one's keys.

    Raises
    ------
    ConfigError
        Naming the two repeats, their files, formats, metric counts per kind and examples.
    """
    shapes = [shape(index + 1, repeat) for index, repeat in enumerate(repeats) if repeat]
    if len(shapes) < 2:
        return
    first = shapes[0]
    for other in shapes[1:]:
        share = shared_share(first, other)
        mismatch = share == 0 or (
            other.formats != first.formats and share < MIN_SHARED_ACROSS_FORMATS
        )
        if mismatch:
            common = len(first.keys & other.keys)
            raise ConfigError(
                f"the repeats are not profiles of one workload: {first.describe()} and "
                f"{other.describe()} have {common} metric(s) in common. Give the repeats of "
                "one run (the same benchmark, profiled the same way), or ingest each profile "
                "as its own run"
            )
