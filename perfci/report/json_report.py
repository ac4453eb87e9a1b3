"""A comparison as a JSON-ready dict: ``perfci compare --json``, stored comparisons and the API.

The document is :class:`perfci.transfer.ComparisonPublic`, which takes its fields from
:class:`~perfci.model.RunComparison` (and the nested dataclasses from theirs), so every field
of the model is in it under its own name. Keys may be added, none renamed or removed without
bumping :data:`SCHEMA_VERSION`. Floats that JSON cannot hold (NaN, ±inf) become ``null``.

Top level: ``schema_version``, every :class:`~perfci.model.RunComparison` field (``benchmark``,
``verdict``, ``metrics``, ``contributions``, ``baseline``, ``environment``, ``run_id``,
``commit``, ``branch``, ``pr_number``, ``ci_url``, ``shared_factor``, ``notes``,
``baseline_runs_used``, ``baseline_level_start``, ``primary_step`` (the key of the step series
the verdict was about)), and ``counts`` (metrics per verdict). A series is an object of its
fields plus ``display_name``.
"""

from __future__ import annotations

from typing import Any

import pydantic_core

from perfci.model import MetricComparison, RunComparison
from perfci.transfer import SCHEMA_VERSION, ComparisonPublic, MetricComparisonPublic

__all__ = ["SCHEMA_VERSION", "comparison_from_dict", "comparison_to_dict", "metric_to_dict"]


def comparison_to_dict(result: RunComparison) -> dict[str, Any]:
    """``result`` as plain dicts, lists, strings, numbers and ``None``."""
    return _plain(ComparisonPublic.of(result))


def metric_to_dict(metric: MetricComparison) -> dict[str, Any]:
    """Every field of ``metric``, in declaration order; the verdict as its string value."""
    return _plain(MetricComparisonPublic.of(metric))


def _plain(document: Any) -> dict[str, Any]:
    # Through JSON text: its encoder is the one that writes NaN and ±inf as null.
    plain: dict[str, Any] = pydantic_core.from_json(document.model_dump_json())
    return plain


def comparison_from_dict(data: dict[str, Any]) -> RunComparison:
    """The inverse of :func:`comparison_to_dict`: a stored comparison, ready to render again.

    Raises ``ValueError`` on a document of another schema version, or one that is not a
    comparison (a :class:`pydantic.ValidationError`).
    """
    if data.get("schema_version") != SCHEMA_VERSION:
        raise ValueError(
            f"comparison schema_version {data.get('schema_version')!r} is not {SCHEMA_VERSION}"
        )
    result: RunComparison = ComparisonPublic.model_validate(data).to_model()
    return result
