"""A comparison as a JSON-ready dict: ``perfci compare --json``, stored comparisons and the API.

The document is :class:`perfci.core.transfer.ComparisonPublic` (read back by
:func:`perfci.core.transfer.comparison_from_dict`), which takes its fields from
:class:`~perfci.core.model.RunComparison` (and the nested dataclasses from theirs), so every field
of the model is in it under its own name. Keys may be added, none renamed or removed without
bumping :data:`SCHEMA_VERSION`. Floats that JSON cannot hold (NaN, ±inf) become ``null``.

Top level: ``schema_version``, every :class:`~perfci.core.model.RunComparison` field (``benchmark``,
``verdict``, ``metrics``, ``contributions``, ``baseline``, ``environment``, ``run_id``,
``commit``, ``branch``, ``pr_number``, ``ci_url``, ``shared_factor``, ``notes``,
``baseline_runs_used``, ``baseline_level_start``, ``primary_step`` (the key of the step series
the verdict was about)), and ``counts`` (metrics per verdict). A series is an object of its
fields plus ``display_name``.
"""

from __future__ import annotations

from typing import Any

import pydantic_core

from perfci.core.model import MetricComparison, RunComparison
from perfci.core.transfer import SCHEMA_VERSION, ComparisonPublic, MetricComparisonPublic

__all__ = ["SCHEMA_VERSION", "comparison_to_dict", "comparison_to_json", "metric_to_dict"]


def comparison_to_dict(result: RunComparison) -> dict[str, Any]:
    """``result`` as plain dicts, lists, strings, numbers and ``None``."""
    return _plain(ComparisonPublic.of(result))


def comparison_to_json(result: RunComparison) -> str:
    """:func:`comparison_to_dict` as compact JSON text."""
    text: str = ComparisonPublic.of(result).model_dump_json()
    return text


def metric_to_dict(metric: MetricComparison) -> dict[str, Any]:
    """Every field of ``metric``, in declaration order; the verdict as its string value."""
    return _plain(MetricComparisonPublic.of(metric))


def _plain(document: Any) -> dict[str, Any]:
    # Through JSON text: its encoder is the one that writes NaN and ±inf as null.
    plain: dict[str, Any] = pydantic_core.from_json(document.model_dump_json())
    return plain
