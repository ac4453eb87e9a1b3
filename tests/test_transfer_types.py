"""One definition per transfer type: the model's dataclasses, with the JSON documents and the API
bodies derived from them (perfci.core.transfer); one series-key format, whose stored hashes never
change."""

from __future__ import annotations

import dataclasses
import json
import math
from datetime import UTC, datetime
from typing import Any

import pytest
from pydantic import ValidationError

from perfci.core.jsondoc import from_document, metric_to_dict, to_document
from perfci.core.model import (
    SERIES_FIELDS,
    BaselineInfo,
    Contribution,
    Device,
    Metric,
    MetricComparison,
    MetricKind,
    Profile,
    RunComparison,
    RunInfo,
    SeriesKey,
    Verdict,
)
from perfci.core.transfer import (
    BaselinePublic,
    ComparisonPublic,
    ContributionPublic,
    MetricComparisonPublic,
    RunPublic,
    SeriesPublic,
    comparison_from_dict,
    fields_of,
)
from perfci.report.json_report import comparison_to_dict
from perfci.server import schemas
from perfci.store.schema import series_key_hash, series_list_hash, series_parts_hash

STEP = SeriesKey(MetricKind.STEP, "train_step")
GEMM = SeriesKey(MetricKind.KERNEL, "volta_sgemm", scope="Layer 0", section="train")
FORWARD = SeriesKey(MetricKind.RANGE, "forward", Device.CPU, section="2.7B_ctx512_train")

# series.key_hash as perfci has always stored it (computed before the series-key refactor):
# a database keeps these, so they may never change.
STORED_HASHES = {
    STEP: "3110dbf73868c239e7a70fc5f33080fa",
    SeriesKey(MetricKind.KERNEL, "ampere_sgemm_128x64_tn"): "b505d549f183e110702a3de59e031158",
    GEMM: "84ba24ca74bbd791c7756bba0c76a27a",
    FORWARD: "89847237f82c493f3b91aeaab2d70509",
    SeriesKey(
        MetricKind.API, "cudaLaunchKernel", scope="iteration ▸ 3"
    ): "8b105f0ee8c9a30b6f71de40f212ff52",
    SeriesKey(
        MetricKind.OP, "aten::mm", Device.CPU, scope="a/b", section="[x] y"
    ): "5f6423d946e76d4c81ff15031c8dcd19",
}
STORED_LIST_HASH = "5e442f9f2f6738d2bef52aee554b5497"


def _metric(key: SeriesKey, verdict: Verdict, **values: Any) -> MetricComparison:
    return MetricComparison(key=key.key, verdict=verdict, series=key, **values)


def _comparison() -> RunComparison:
    """A comparison with every field set, the newest ones included."""
    step = _metric(
        STEP,
        Verdict.REGRESSION,
        baseline_median=1e7,
        candidate_median=1.1e7,
        change=0.1,
        ci_low=0.05,
        ci_high=0.15,
        p_value=1e-4,
        q_value=2e-4,
        n_baseline=20,
        n_candidate=3,
        gated=True,
        share_of_step=1.0,
        adjusted_change=0.08,
        adjusted_ci_low=0.04,
        adjusted_ci_high=0.12,
    )
    gemm = _metric(GEMM, Verdict.INCONCLUSIVE, change=0.02, repeats_needed=12)
    shared = MetricComparison(key="shared-factor", verdict=Verdict.UNCHANGED, change=0.01)
    return RunComparison(
        benchmark="gpt|<b>",
        verdict=Verdict.REGRESSION,
        metrics=[step, gemm, _metric(FORWARD, Verdict.NEW)],
        contributions=[
            Contribution(GEMM.key, 4.1e5, 0.41, GEMM),
            Contribution("kernel:gpu:gone", -1.0, -0.1),
        ],
        baseline=BaselineInfo("main", 20, "1111111", "2222222", [3, 4, 5]),
        environment={"torch": "2.3.0", "gpu": "A100"},
        run_id=7,
        commit="abc",
        branch="pr",
        pr_number=12,
        ci_url="https://ci.example/7",
        shared_factor=shared,
        notes=["a note"],
        baseline_runs_used=[0, 2],
        baseline_level_start=1,
        primary_step=STEP.key,
    )


def _through_json(document: dict[str, Any]) -> dict[str, Any]:
    decoded: dict[str, Any] = json.loads(json.dumps(document, allow_nan=False))
    return decoded


# --- series keys ------------------------------------------------------------------------------


def test_stored_key_hashes_are_unchanged() -> None:
    for key, stored in STORED_HASHES.items():
        assert series_key_hash(key) == stored, key
        assert series_parts_hash(*key.parts) == stored, key
    assert series_list_hash([series_key_hash(k) for k in STORED_HASHES]) == STORED_LIST_HASH


def test_every_form_of_a_series_identity_is_derived_from_the_series_key() -> None:
    metric = Metric(kind=MetricKind.KERNEL, name="volta_sgemm", scope="Layer 0")
    assert metric.key == SeriesKey.of(metric).key == "kernel:gpu:Layer 0 ▸ volta_sgemm"
    assert GEMM.key == "kernel:gpu:[train] Layer 0 ▸ volta_sgemm"
    assert GEMM.key.endswith(GEMM.display_name)
    for key in STORED_HASHES:
        assert dict(zip(SERIES_FIELDS, key.parts, strict=True)) == {
            "kind": key.kind.value,
            "device": key.device.value,
            "scope": key.scope,
            "section": key.section,
            "name": key.name,
        }
        assert SeriesKey.from_parts(key.parts) == key


# --- model → JSON → model ---------------------------------------------------------------------


def test_a_comparison_survives_json_with_every_field() -> None:
    result = _comparison()
    document = _through_json(comparison_to_dict(result))
    assert document["schema_version"] == 1 and document["primary_step"] == STEP.key
    assert document["metrics"][0]["adjusted_change"] == 0.08
    assert document["baseline_runs_used"] == [0, 2] and document["baseline_level_start"] == 1
    assert document["counts"] == {
        "regression": 1,
        "improvement": 0,
        "unchanged": 0,
        "inconclusive": 1,
        "new": 1,
        "missing": 0,
        "no-baseline": 0,
    }
    assert document["metrics"][1]["series"]["display_name"] == "[train] Layer 0 ▸ volta_sgemm"
    assert list(document["environment"]) == ["gpu", "torch"]  # sorted, as documented
    assert comparison_from_dict(document) == result


def test_numbers_json_cannot_hold_are_written_as_null() -> None:
    result = _comparison()
    broken = dataclasses.replace(result.metrics[0], change=math.nan, ci_high=math.inf)
    odd = Contribution("kernel:gpu:k", math.nan, -math.inf)
    result = dataclasses.replace(result, metrics=[broken, *result.metrics[1:]], contributions=[odd])
    document = _through_json(comparison_to_dict(result))
    assert document["metrics"][0]["change"] is None and document["metrics"][0]["ci_high"] is None
    assert document["contributions"][0]["delta_ns"] is None
    back = comparison_from_dict(document)
    assert back.metrics[0].change is None
    # a contribution needs its numbers: null reads back as 0, as stored comparisons always did
    assert back.contributions[0] == Contribution("kernel:gpu:k", 0.0, 0.0)


def test_a_document_written_before_the_new_fields_still_reads() -> None:
    document = comparison_to_dict(_comparison())
    for name in ("baseline_runs_used", "baseline_level_start", "primary_step"):
        del document[name]
    for metric in document["metrics"]:
        del metric["adjusted_change"], metric["adjusted_ci_low"], metric["adjusted_ci_high"]
    back = comparison_from_dict(document)
    assert back.primary_step is None and back.baseline_runs_used == []
    assert back.metrics[0].adjusted_change is None and back.metrics[0].change == 0.1


def test_a_document_of_another_version_or_shape_is_refused() -> None:
    document = comparison_to_dict(_comparison())
    with pytest.raises(ValueError, match="schema_version 2 is not 1"):
        comparison_from_dict({**document, "schema_version": 2})
    with pytest.raises(ValueError):
        comparison_from_dict({**document, "verdict": "maybe"})


# --- model → API → model ----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("transfer", "value"),
    [
        (SeriesPublic, GEMM),
        (MetricComparisonPublic, _comparison().metrics[0]),
        (ContributionPublic, _comparison().contributions[0]),
        (BaselinePublic, _comparison().baseline),
        (ComparisonPublic, _comparison()),
    ],
)
def test_each_transfer_type_goes_through_the_api_and_back(transfer: Any, value: Any) -> None:
    body = transfer.of(value).model_dump_json()
    assert transfer.model_validate_json(body).to_model() == value


def test_a_run_goes_to_the_api_without_its_environment_id() -> None:
    run = RunInfo(
        id=3,
        project="acme/gpt",
        benchmark="train",
        environment_id=9,
        created_at=datetime(2026, 11, 2, tzinfo=UTC),
        repeats=3,
        commit="abc",
        commit_time=datetime(2026, 11, 1, tzinfo=UTC),
        branch="main",
        environment={"gpu": "A100"},
    )
    body = json.loads(RunPublic.of(run).model_dump_json())
    assert "environment_id" not in body and body["verdict"] is None
    expected = {k: v for k, v in dataclasses.asdict(run).items() if k != "environment_id"}
    read = RunPublic.model_validate(body)
    assert {k: getattr(read, k) for k in expected} == expected
    with pytest.raises(ValidationError, match="environment_id"):
        read.to_model()  # the id stays in the store


def test_the_api_names_the_same_types() -> None:
    assert schemas.ComparisonPublic is ComparisonPublic and schemas.RunPublic is RunPublic
    assert schemas.RunCreated.model_fields["comparison"].annotation is ComparisonPublic


# --- derived, not repeated --------------------------------------------------------------------


@pytest.mark.parametrize(
    ("transfer", "source", "extra"),
    [
        (SeriesPublic, SeriesKey, ["display_name"]),
        (MetricComparisonPublic, MetricComparison, []),
        (ContributionPublic, Contribution, []),
        (BaselinePublic, BaselineInfo, []),
        (ComparisonPublic, RunComparison, ["schema_version"]),
    ],
)
def test_the_transfer_fields_are_the_dataclass_fields(
    transfer: Any, source: Any, extra: list[str]
) -> None:
    names = [f.name for f in dataclasses.fields(source)]
    assert sorted(transfer.model_fields) == sorted([*names, *extra])


def test_a_field_added_to_the_model_flows_through_without_an_edit() -> None:
    @dataclasses.dataclass(frozen=True, slots=True)
    class Wider(MetricComparison):
        energy_j: float | None = None
        tags: list[str] = dataclasses.field(default_factory=list)

    class WiderPublic(fields_of(Wider)):  # type: ignore[misc]
        pass

    value = Wider(key="k", verdict=Verdict.REGRESSION, series=GEMM, energy_j=3.5, tags=["x"])
    body = json.loads(WiderPublic.of(value).model_dump_json())
    assert body["energy_j"] == 3.5 and body["tags"] == ["x"]
    assert body["series"]["display_name"] == GEMM.display_name  # nested types map too
    assert WiderPublic.model_validate(body).to_model() == value
    schema = WiderPublic.model_json_schema()
    assert {"energy_j", "tags", "adjusted_change"} <= set(schema["properties"])


# --- perfci parse --json ----------------------------------------------------------------------


def test_the_parse_document_writes_identity_first_and_only_what_is_set() -> None:
    metric = Metric(
        kind=MetricKind.KERNEL,
        name="k",
        calls=0,
        total_ns=0.0,
        scope="s",
        samples_ns=[],
        warmup=0,
        attrs={},
    )
    assert list(metric_to_dict(metric).items()) == [
        ("kind", "kernel"),
        ("name", "k"),
        ("device", "gpu"),
        ("scope", "s"),
        ("unit", "ns"),  # unit and direction on every metric (schema version 2)
        ("better", "lower"),
        ("calls", 0),
        ("total_ns", 0.0),
    ]
    full = Metric(
        kind=MetricKind.API,
        name="cudaMalloc",
        device=Device.CPU,
        calls=3,
        total_ns=9.0,
        self_ns=8.0,
        avg_ns=3.0,
        min_ns=1.0,
        max_ns=5.0,
        std_ns=2.0,
        median_ns=3.0,
        bytes=64.0,
        samples_ns=[1.0, 3.0, 5.0],
        warmup=1,
        attrs={"style": "nvtx"},
    )
    assert list(metric_to_dict(full)) == [
        "kind",
        "name",
        "device",
        "unit",
        "better",
        "calls",
        "total_ns",
        "self_ns",
        "avg_ns",
        "min_ns",
        "max_ns",
        "std_ns",
        "median_ns",
        "bytes",
        "samples_ns",
        "warmup",
        "attrs",
    ]
    profile = Profile(label="p", format="perfci_json", source="x.json", metrics=[metric, full])
    assert from_document(_through_json(to_document([profile])))[0] == dataclasses.replace(
        profile, metrics=[dataclasses.replace(metric, samples_ns=None), full]
    )


def test_the_openapi_schema_has_every_model_field_under_the_old_names() -> None:
    from perfci.core.settings import Settings
    from perfci.server.app import create_app

    app = create_app(Settings(api_docs=True), database_url="sqlite://")
    found = app.openapi()["components"]["schemas"]
    for name, source, extra in [
        ("ComparisonPublic", RunComparison, {"schema_version", "counts"}),
        ("MetricComparisonPublic", MetricComparison, set()),
        ("ContributionPublic", Contribution, set()),
        ("BaselinePublic", BaselineInfo, set()),
        ("SeriesPublic", SeriesKey, {"display_name"}),
        ("RunPublic", RunInfo, {"verdict"}),
    ]:
        names = {f.name for f in dataclasses.fields(source)} - {"environment_id"}
        assert set(found[name]["properties"]) == names | extra, name
    metric = found["MetricComparisonPublic"]["properties"]
    assert metric["series"]["anyOf"][0] == {"$ref": "#/components/schemas/SeriesPublic"}


def test_the_ingest_keys_series_by_the_series_key_parts() -> None:
    from perfci.usecases.submit.prepare import prepare_run

    metrics = [
        Metric(kind=MetricKind.KERNEL, name="k", scope="Layer 0"),
        Metric(kind=MetricKind.RANGE, name="fwd", device=Device.CPU),
    ]
    forward = Profile(label="forward", format="t", source="f", metrics=metrics)
    backward = Profile(label="backward", format="t", source="b", metrics=metrics[:1])
    prepared = prepare_run([[forward, backward]])
    expected = [SeriesKey.of(m, p.label).parts for p in (forward, backward) for m in p.metrics]
    assert list(prepared.cells) == expected
    assert [series_parts_hash(*parts) for parts in prepared.cells] == [
        series_key_hash(SeriesKey.from_parts(parts)) for parts in expected
    ]
