"""The HTTP API's request and response bodies (pydantic), separate from the ORM tables.

Names follow ``RunCreate`` (what a client sends) / ``RunPublic`` (what it gets back). Every
string a client sends is bounded to what the store can hold and may not contain NUL (which
PostgreSQL text refuses), so bad input is a 422 before any SQL runs.
"""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Any

from pydantic import BaseModel, ConfigDict, Field, StringConstraints

from perfci.core.model import Better, Device, MetricKind

# The comparison and run bodies are derived from the model's dataclasses (perfci.core.transfer);
# re-exported here, with the API's other bodies.
from perfci.core.transfer import BaselinePublic as BaselinePublic
from perfci.core.transfer import ComparisonPublic as ComparisonPublic
from perfci.core.transfer import ContributionPublic as ContributionPublic
from perfci.core.transfer import MetricComparisonPublic as MetricComparisonPublic
from perfci.core.transfer import RunPublic as RunPublic
from perfci.core.transfer import SeriesPublic as SeriesPublic
from perfci.core.transfer import fields_of
from perfci.core.weekly import AlertInfo, AlertStatus
from perfci.usecases.browse.pages import ProjectSummary
from perfci.usecases.browse.runs import DeletedRun

#: Longest name (kernel, range, label) accepted; real kernel names stay well under it.
MAX_NAME = 1000
INT32 = 2**31 - 1
INT64 = 2**63 - 1
_NO_NUL = r"^[^\x00]*$"


def _text(max_length: int, min_length: int = 0) -> StringConstraints:
    """At most ``max_length`` characters, without NUL."""
    return StringConstraints(min_length=min_length, max_length=max_length, pattern=_NO_NUL)


Name = Annotated[str, _text(MAX_NAME, 1)]
ShortText = Annotated[str, _text(MAX_NAME)]
Text50 = Annotated[str, _text(50)]
Text64 = Annotated[str, _text(64)]
Text100 = Annotated[str, _text(100)]
Text200 = Annotated[str, _text(200)]
Text255 = Annotated[str, _text(255)]
Text2000 = Annotated[str, _text(2000)]
BenchmarkName = Annotated[str, _text(200, 1)]
Number = Annotated[float, Field(allow_inf_nan=False)]


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


class ContextIn(_Strict):
    """Where the run comes from (all optional); ``environment`` is the hardware fingerprint."""

    commit: Text64 | None = None
    branch: Text255 | None = None
    base_branch: Text255 | None = None
    merge_base: Text64 | None = None
    pr_number: Annotated[int, Field(ge=0, le=INT32)] | None = None
    ci_provider: Text50 | None = None
    ci_run_id: Text100 | None = None
    ci_run_attempt: Annotated[int, Field(ge=0, le=INT32)] | None = None
    ci_url: Text2000 | None = None
    commit_time: Text64 | None = None
    repository: Text255 | None = None
    environment: Annotated[dict[Text200, ShortText], Field(max_length=100)] = Field(
        default_factory=dict
    )


class MetricIn(BaseModel):
    """One metric of a perfci JSON document (``perfci parse --json``)."""

    model_config = ConfigDict(extra="ignore")

    kind: MetricKind
    name: Name
    device: Device = Device.GPU
    scope: ShortText | None = None
    calls: Annotated[int, Field(ge=0, le=INT64)] | None = None
    total_ns: Number | None = None
    self_ns: Number | None = None
    avg_ns: Number | None = None
    min_ns: Number | None = None
    max_ns: Number | None = None
    std_ns: Number | None = None
    median_ns: Number | None = None
    bytes: Number | None = None
    samples_ns: Annotated[list[Number], Field(max_length=100_000)] | None = None
    warmup: Annotated[int, Field(ge=0, le=INT32)] = 0
    # Schema version 2: a metric's unit and direction, and the numbers of non-time metrics.
    unit: Annotated[str, Field(min_length=1, max_length=32)] | None = None
    better: Better | None = None
    value: Number | None = None
    samples: Annotated[list[Number], Field(max_length=100_000)] | None = None


class ProfileIn(BaseModel):
    model_config = ConfigDict(extra="ignore")

    label: Text255 | None = None
    format: Text50 | None = None
    source: ShortText | None = None
    steps: Annotated[int, Field(ge=1, le=INT32)] | None = None
    metadata: dict[Text200, Any] = Field(default_factory=dict)
    metrics: list[MetricIn] = Field(default_factory=list)


class DocumentIn(BaseModel):
    """A perfci JSON document: the profiles of one repeat."""

    model_config = ConfigDict(extra="ignore")

    schema_version: Annotated[int, Field(ge=1, le=INT32)] = 1
    perfci_version: Text50 | None = None
    profiles: Annotated[list[ProfileIn], Field(min_length=1, max_length=1000)]


class RunMeta(_Strict):
    """The ``meta`` field of a multipart upload: the files are the repeats, one per file."""

    benchmark: BenchmarkName
    context: ContextIn = Field(default_factory=ContextIn)
    format: Text50 | None = None


class RunCreate(_Strict):
    """A run uploaded as JSON: one perfci JSON document per repeat."""

    benchmark: BenchmarkName
    context: ContextIn = Field(default_factory=ContextIn)
    repeats: Annotated[list[DocumentIn], Field(min_length=1, max_length=1000)]


# --- responses --------------------------------------------------------------------------------


class ErrorDetail(BaseModel):
    code: str
    message: str
    #: A 409 conflict's stored run (the same CI run, other content).
    run_id: int | None = None


class ErrorPublic(BaseModel):
    """Every error: ``{"error": {"code": ..., "message": ...}}``."""

    error: ErrorDetail


class RunCreated(BaseModel):
    """The answer to an upload: 201 for a new run, 200 (``created: false``) for a retry."""

    run_id: int
    created: bool
    project: str
    benchmark: str
    series: int
    samples: int
    url: str
    comparison: ComparisonPublic


class RunDeleted(fields_of(DeletedRun)):  # type: ignore[misc]
    """What ``DELETE /api/v1/runs/{run_id}`` removed (an audit event records it too)."""


class RunsPublic(BaseModel):
    project: str
    runs: list[RunPublic]


class BenchmarkPublic(BaseModel):
    name: str
    runs: int
    latest_run_id: int | None = None
    latest_at: datetime | None = None
    step_series: SeriesPublic | None = None
    latest_step_ns: float | None = None


class BenchmarksPublic(BaseModel):
    project: str
    benchmarks: list[BenchmarkPublic]


class ProjectPublic(fields_of(ProjectSummary)):  # type: ignore[misc]
    """A project, whether it is public, and how many benchmarks and runs it holds."""


class ProjectsPublic(BaseModel):
    projects: list[ProjectPublic]


class ProjectUpdate(_Strict):
    """Admin: make a project's runs and dashboard readable without a token."""

    public: bool


class HistoryPointPublic(BaseModel):
    run_id: int
    commit: str | None = None
    commit_time: datetime | None = None
    created_at: datetime
    values: list[float]


class SeriesHistoryPublic(BaseModel):
    project: str
    benchmark: str
    branch: str
    series: SeriesPublic
    points: list[HistoryPointPublic]


class AlertPublic(fields_of(AlertInfo, exclude=frozenset({"environment_id"}))):  # type: ignore[misc]
    """A change point on a branch's history (weekly reports record them)."""


class AlertsPublic(BaseModel):
    project: str
    alerts: list[AlertPublic]


class AlertUpdate(_Strict):
    """Acknowledge, dismiss or re-open an alert; ``note`` replaces the old one when given."""

    status: AlertStatus
    note: Annotated[str, _text(2000)] | None = None


class HealthPublic(BaseModel):
    status: str
    database: str
