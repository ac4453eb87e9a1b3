"""A metric keeps its numbers in one of its two value systems, chosen by its unit.

:class:`perfci.core.model.Metric` says why both exist: times in the ``*_ns`` fields, any other
unit in ``value`` / ``samples``. Comparisons pick the system by ``unit``
(:func:`perfci.analysis.values.compared_value`), so a reader that filled the other one would
have its numbers silently ignored. Every real file the tests hold is read and checked.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from conftest import SHARED

from perfci.core.errors import UnknownFormatError
from perfci.core.model import Metric, MetricKind
from perfci.formats import registry

TIME_FIELDS = (
    "total_ns",
    "self_ns",
    "avg_ns",
    "min_ns",
    "max_ns",
    "std_ns",
    "median_ns",
    "samples_ns",
    "step_totals_ns",
)
DATA = Path(__file__).parent / "data"


def misplaced(metric: Metric) -> list[str]:
    """The fields of ``metric`` set in the value system its unit does not use."""
    if metric.is_time:
        return [f for f in ("value", "samples") if getattr(metric, f) is not None]
    return [f for f in TIME_FIELDS if getattr(metric, f) is not None]


def _files() -> list[Path]:
    roots = [DATA, SHARED / "seeds", SHARED / "corpus"]
    return sorted(p for root in roots if root.is_dir() for p in root.rglob("*") if p.is_file())


def _readable(path: Path) -> bool:
    try:
        registry.detect(path)
    except UnknownFormatError:
        return False  # a README, a GPU-state CSV: not a profile
    return True


def test_the_checker_sees_a_number_in_the_wrong_system() -> None:
    assert misplaced(Metric(kind=MetricKind.KERNEL, name="k", total_ns=1.0)) == []
    assert misplaced(Metric(kind=MetricKind.KERNEL, name="k", value=1.0)) == ["value"]
    rate = Metric(kind=MetricKind.MEASURE, name="r", unit="tokens/s", value=9.0, avg_ns=1.0)
    assert misplaced(rate) == ["avg_ns"]


@pytest.mark.parametrize("path", [p for p in _files() if _readable(p)], ids=str)
def test_every_metric_uses_the_value_system_of_its_unit(path: Path) -> None:
    profiles = registry.parse_file(path)
    wrong = {
        f"{profile.label}/{metric.key}": misplaced(metric)
        for profile in profiles
        for metric in profile.metrics
        if misplaced(metric)
    }
    assert wrong == {}
    for profile in profiles:
        for metric in profile.metrics:
            if not metric.is_time:
                assert metric.value is not None or metric.samples, metric.key
