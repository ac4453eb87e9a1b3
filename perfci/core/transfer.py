"""Transfer types: the model's dataclasses as JSON documents and the HTTP API exchange them.

Each pydantic model here takes its fields from a dataclass of :mod:`perfci.core.model` when it is
imported (:func:`fields_of`), so a field added to the model reaches ``perfci compare --json``,
the stored comparisons, the API and its OpenAPI schema without an edit here. Only what the
dataclasses do not hold is written out: a document's ``schema_version`` and ``counts``, a
series' ``display_name``, a run's verdict (and its ``environment_id`` left out).

Both directions: :meth:`Transfer.of` reads a model object's attributes (properties included,
numpy scalars accepted), :meth:`Transfer.to_model` builds the dataclasses back. JSON cannot
hold NaN or ±inf, so they are written as ``null``: every float of a transfer type is nullable,
and a ``null`` where the model needs a number reads back as 0.0.
"""

from __future__ import annotations

import dataclasses
import types
import typing
from collections import Counter
from typing import Annotated, Any, ClassVar

from pydantic import (
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    TypeAdapter,
    computed_field,
    create_model,
    field_serializer,
)

from perfci.core.compat import Self
from perfci.core.model import (
    BaselineInfo,
    Contribution,
    MetricComparison,
    RunComparison,
    RunInfo,
    SeriesKey,
    Verdict,
)

__all__ = [
    "SCHEMA_VERSION",
    "BaselinePublic",
    "ComparisonPublic",
    "ContributionPublic",
    "MetricComparisonPublic",
    "RunPublic",
    "SeriesPublic",
    "Transfer",
    "comparison_from_dict",
    "fields_of",
]

#: Version of the comparison document; keys may be added, none renamed or removed without a bump.
SCHEMA_VERSION = 1


class Transfer(BaseModel):
    """A transfer type: built from a model object's attributes, and back to it."""

    # Validators are built on first use: most commands never convert a comparison.
    model_config = ConfigDict(from_attributes=True, defer_build=True)

    #: The dataclass the fields come from.
    source: ClassVar[type[Any]]

    @classmethod
    def __pydantic_init_subclass__(cls, **kwargs: Any) -> None:
        # A named subclass of fields_of(X) is X's transfer type, for X nested in others.
        super().__pydantic_init_subclass__(**kwargs)
        if "source" in vars(cls) or not hasattr(cls, "source"):
            return
        _TRANSFER[cls.source] = cls

    @classmethod
    def of(cls, value: Any) -> Self:
        """``value`` (a model object, or a decoded document) as this transfer type."""
        return cls.model_validate(value, from_attributes=True)

    def to_model(self) -> Any:
        """The model object again: the source dataclasses, built by pydantic from this one.

        Fields the model lacks (``counts``, ``display_name``) are left behind; a type that
        leaves a required field out (a run's ``environment_id``) cannot go back: that is a
        :class:`pydantic.ValidationError`.
        """
        return _adapter(self.source).validate_python(self.model_dump(round_trip=True))


#: Dataclass → its transfer type, so that nested fields (a comparison's metrics) map too.
_TRANSFER: dict[type[Any], type[Transfer]] = {}
_ADAPTERS: dict[type[Any], TypeAdapter[Any]] = {}


def _adapter(source: type[Any]) -> TypeAdapter[Any]:
    # Built on first use: most processes convert one way only.
    if source not in _ADAPTERS:
        _ADAPTERS[source] = TypeAdapter(source)
    return _ADAPTERS[source]


def _null_as_zero(value: Any) -> Any:
    return 0.0 if value is None else value


#: A float the model requires: written as null when NaN or ±inf, so read back from null as 0.
_NUMBER = Annotated[float | None, BeforeValidator(_null_as_zero)]


def fields_of(
    source: type[Any],
    *,
    exclude: frozenset[str] = frozenset(),
    leading: dict[str, Any] | None = None,
    **extra: Any,
) -> type[Transfer]:
    """A :class:`Transfer` base with ``leading``, ``source``'s dataclass fields, then ``extra``.

    Subclass it to name the type (the subclass's name is the OpenAPI schema's) and to add
    computed fields; ``leading`` and ``extra`` take ``create_model``'s ``(type, default)``.
    """
    hints = typing.get_type_hints(source)
    fields: dict[str, Any] = dict(leading or {})
    for field in dataclasses.fields(source):
        if field.name not in exclude:
            fields[field.name] = (_transfer_type(hints[field.name]), _default(field))
    base = create_model(f"_{source.__name__}Fields", __base__=Transfer, **fields, **extra)
    base.source = source
    return base


def _transfer_type(kind: Any) -> Any:
    """``kind`` with model dataclasses replaced by their transfer types, floats made nullable."""
    if kind is float:
        return _NUMBER
    if isinstance(kind, type) and kind in _TRANSFER:
        return _TRANSFER[kind]
    args = typing.get_args(kind)
    if not args:
        return kind
    origin = typing.get_origin(kind)
    optional = origin in (types.UnionType, typing.Union) and type(None) in args
    # An optional float keeps its null: only a required one reads null back as 0.
    mapped = tuple(float if optional and a is float else _transfer_type(a) for a in args)
    if origin in (types.UnionType, typing.Union):
        union = mapped[0]
        for arg in mapped[1:]:
            union = union | arg
        return union
    return origin[mapped]


def _default(field: dataclasses.Field[Any]) -> Any:
    if field.default is not dataclasses.MISSING:
        return field.default
    if field.default_factory is not dataclasses.MISSING:
        return Field(default_factory=field.default_factory)
    return ...


class SeriesPublic(fields_of(SeriesKey, display_name=(str | None, None))):  # type: ignore[misc]
    """A series' identity; ``display_name`` is how reports name it."""


class MetricComparisonPublic(fields_of(MetricComparison)):  # type: ignore[misc]
    """One metric of a comparison: its change, interval, q-value and verdict."""


class ContributionPublic(fields_of(Contribution)):  # type: ignore[misc]
    """How much of the step-time change one metric explains (ns per step, and share)."""


class BaselinePublic(fields_of(BaselineInfo)):  # type: ignore[misc]
    """The baseline runs a comparison used: branch, count, commits, run ids."""


class ComparisonPublic(
    fields_of(  # type: ignore[misc]
        RunComparison, leading={"schema_version": (int, SCHEMA_VERSION)}
    )
):
    """A comparison as reported (``perfci compare --json``, stored, and sent by the API)."""

    @computed_field  # type: ignore[prop-decorator]
    @property
    def counts(self) -> dict[str, int]:
        """Metrics per verdict, every verdict listed."""
        found = Counter(m.verdict for m in self.metrics)
        return {verdict.value: found[verdict] for verdict in Verdict}

    @field_serializer("environment")
    def _sorted(self, environment: dict[str, str]) -> dict[str, str]:
        return dict(sorted(environment.items()))


class RunPublic(
    fields_of(  # type: ignore[misc]
        RunInfo,
        exclude=frozenset({"environment_id"}),
        verdict=(Verdict | None, None),
    )
):
    """One stored run: commit, branch, CI, environment, and the verdict of its comparison."""


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
