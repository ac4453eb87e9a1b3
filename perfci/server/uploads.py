"""Turning an upload into repeats of profiles: JSON documents or multipart profile files.

Everything is parsed and checked here, before the store is touched: a bad file, an unknown
``schema_version`` or a run over the limits writes nothing. The jobs :func:`parse_json_upload`
and :func:`parse_files_upload` run in a parse worker (:mod:`perfci.server.parse_pool`), on the
body or files that :mod:`perfci.server.receive` spooled to disk.

Memory per upload is bounded before anything big is built. A JSON body is first counted
(metrics and samples) by :func:`count_run`, which builds nothing per metric but an empty
struct, and refused with 413 when over the limits; only then is it validated into models. A
gzip file of a multipart upload is inflated to disk in chunks and refused with 413 as soon as
it passes the inflated-size cap or the ratio cap (:func:`perfci.server.inflate.inflate`), so a
gzip bomb never reaches the parser.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import msgspec
from fastapi.exceptions import RequestValidationError
from pydantic import TypeAdapter, ValidationError

from perfci.core.errors import ConfigError, InputTooLarge, ParseError, PerfciError
from perfci.core.model import Profile
from perfci.server.deps import Limits
from perfci.server.inflate import inflate
from perfci.server.parse_pool import Parsed, grow_budget
from perfci.server.schemas import MAX_NAME, DocumentIn, MetricIn, RunCreate
from perfci.usecases.submit.formats import profiles_from_document
from perfci.usecases.submit.repeats import parse_repeats

# --- counting before decoding -----------------------------------------------------------------


class _MetricShape(msgspec.Struct, gc=False):
    """A metric as :func:`count_run` sees it: its samples, kept as raw JSON (not decoded)."""

    samples_ns: msgspec.Raw = msgspec.Raw()


class _ProfileShape(msgspec.Struct, gc=False):
    metrics: list[_MetricShape] = []


class _DocumentShape(msgspec.Struct, gc=False):
    profiles: list[_ProfileShape] = []


class _RunShape(msgspec.Struct, gc=False):
    repeats: list[_DocumentShape] = []


_RUN_DECODER = msgspec.json.Decoder(_RunShape)
_DOCUMENT_DECODER = msgspec.json.Decoder(_DocumentShape)


def count_run(body: bytes, limits: Limits, *, document: bool = False) -> None:
    """Refuse a JSON run (or one perfci ``document``) holding more metrics or samples than
    ``limits`` allow, before it is decoded into models.

    Every metric is a JSON object and every further sample follows a comma, so a body with
    few ``{`` and ``,`` bytes is let through at once (the common case costs two byte counts).
    Otherwise the body is decoded into empty structs, one per metric, with the samples left as
    raw bytes: about 40 bytes per metric, a fraction of the body's own size.

    Raises
    ------
    InputTooLarge
        Over ``max_metrics`` or ``max_samples`` (the server answers 413).
    RequestValidationError
        The body is not JSON of the run's shape (422).
    """
    if body.count(b"{") <= limits.max_metrics and body.count(b",") < limits.max_samples:
        return
    try:
        if document:
            repeats = [_DOCUMENT_DECODER.decode(body)]
        else:
            repeats = _RUN_DECODER.decode(body).repeats
    except (msgspec.DecodeError, RecursionError) as exc:
        raise _json_invalid(exc, "") from None
    metrics = sum(len(profile.metrics) for repeat in repeats for profile in repeat.profiles)
    _check_counts(metrics, 0, limits)  # first: the samples loop is per metric
    samples = sum(
        _count_samples(metric.samples_ns)
        for repeat in repeats
        for profile in repeat.profiles
        for metric in profile.metrics
    )
    _check_counts(metrics, samples, limits)


def _count_samples(raw: msgspec.Raw) -> int:
    text = bytes(raw)
    if not text.startswith(b"[") or text.strip(b"[] \t\r\n") == b"":
        return 0
    return text.count(b",") + 1


def _check_counts(metrics: int, samples: int, limits: Limits) -> None:
    if metrics > limits.max_metrics:
        raise InputTooLarge(
            f"the run has {metrics} metrics; this server accepts at most "
            f"{limits.max_metrics} per run (PERFCI_MAX_METRICS)",
            source="upload",
        )
    if samples > limits.max_samples:
        raise InputTooLarge(
            f"the run has {samples} samples (samples_ns values); this server "
            f"accepts at most {limits.max_samples} per run "
            "(PERFCI_MAX_SAMPLES)",
            source="upload",
        )


def decode_run(body: bytes, limits: Limits) -> RunCreate:
    """The JSON upload ``body``, counted (:func:`count_run`) and then validated.

    Validation goes in small steps: msgspec decodes the JSON (fast), pydantic validates the run
    without its metrics, then the metrics :data:`_BATCH` at a time. Each step is one call that
    holds the GIL; one call for a whole 20 MB run held it for seconds, and every other client
    of the process (the event loop included) waited that long.
    """
    count_run(body, limits)
    try:
        raw = msgspec.json.decode(body)
    except (msgspec.DecodeError, RecursionError) as exc:
        raise _json_invalid(exc, "invalid JSON: ") from None
    pulled = _pull_metrics(raw)
    try:
        upload = RunCreate.model_validate(raw)
        for (repeat, profile), metrics in pulled.items():
            target = upload.repeats[repeat].profiles[profile]
            target.metrics = _validate_metrics(
                metrics, ("repeats", repeat, "profiles", profile, "metrics")
            )
    except ValidationError as exc:
        raise RequestValidationError(exc.errors(include_input=False)) from None
    return upload


def _json_invalid(exc: Exception, prefix: str) -> RequestValidationError:
    """A body msgspec could not decode; a RecursionError is JSON nested too deep for the
    decoder (a 500 once, issue 31), named as such."""
    message = "JSON nested too deeply to read" if isinstance(exc, RecursionError) else str(exc)
    return RequestValidationError(
        [{"loc": ("body",), "msg": prefix + message, "type": "json_invalid"}]
    )


#: Metrics validated per pydantic call (see :func:`decode_run`).
_BATCH = 2000
_METRICS = TypeAdapter(list[MetricIn])


def _pull_metrics(raw: Any) -> dict[tuple[int, int], list[Any]]:
    """Take the metric lists out of a decoded run, by (repeat, profile) position."""
    pulled: dict[tuple[int, int], list[Any]] = {}
    repeats = raw.get("repeats") if isinstance(raw, dict) else None
    for r, repeat in enumerate(repeats if isinstance(repeats, list) else []):
        profiles = repeat.get("profiles") if isinstance(repeat, dict) else None
        for p, profile in enumerate(profiles if isinstance(profiles, list) else []):
            if isinstance(profile, dict) and isinstance(profile.get("metrics"), list):
                pulled[(r, p)] = profile.pop("metrics")
    return pulled


def _validate_metrics(metrics: list[Any], where: tuple[Any, ...]) -> list[MetricIn]:
    out: list[MetricIn] = []
    for start in range(0, len(metrics), _BATCH):
        try:
            out += _METRICS.validate_python(metrics[start : start + _BATCH])
        except ValidationError as exc:
            errors = [
                {**e, "loc": (*where, start + int(e["loc"][0]), *e["loc"][1:])}
                for e in exc.errors(include_input=False)
            ]
            raise RequestValidationError(errors) from None
    return out


def documents_to_repeats(documents: list[DocumentIn]) -> list[list[Profile]]:
    """One repeat per perfci JSON document (read by
    :func:`perfci.usecases.submit.formats.profiles_from_document`)."""
    repeats = []
    for index, document in enumerate(documents):
        # Dumped profile by profile and metric by metric: short GIL holds (see decode_run).
        raw = document.model_dump(mode="json", exclude_none=True, exclude={"profiles"})
        raw["profiles"] = [
            {
                **profile.model_dump(mode="json", exclude_none=True, exclude={"metrics"}),
                "metrics": [m.model_dump(mode="json", exclude_none=True) for m in profile.metrics],
            }
            for profile in document.profiles
        ]
        repeats.append(profiles_from_document(raw, source=f"repeats[{index}]"))
    return repeats


# --- the jobs of the parse workers (perfci.server.parse_pool) ---------------------------------


def parse_json_upload(path: str, limits: Limits) -> Parsed:
    """A JSON upload spooled to ``path``: its benchmark, context and repeats, checked."""
    body = Path(path).read_bytes()
    upload = decode_run(body, limits)
    del body
    repeats = documents_to_repeats(upload.repeats)
    check_size(repeats, limits)
    return upload.benchmark, upload.context.model_dump(), repeats


def parse_files_upload(
    paths: list[Path], format: str | None, folder: str, limits: Limits
) -> Parsed:
    """The profile files of a multipart upload, one repeat per file, inflated and checked."""
    budget = limits.max_inflated_bytes
    plain = []
    for path in paths:
        path = inflate(path, limits, budget=budget)
        budget -= path.stat().st_size
        if path.suffix.lower() == ".json":
            count_run(path.read_bytes(), limits, document=True)
        plain.append(path)
    # The CPU budget of gzip files is that of what they inflated to.
    grow_budget(limits.max_inflated_bytes - budget)
    repeats = _parse(plain, format, folder, limits)
    check_size(repeats, limits)
    return None, None, repeats


def _parse(
    paths: list[Path], format: str | None, folder: str, limits: Limits
) -> list[list[Profile]]:
    """Parse each file as one repeat; error messages name the uploaded file, not our copy.

    The readers count metrics and samples as they read, against the run's caps: a file past
    one is refused (413) at that point, not once all of it was parsed (issue 31).
    """
    ours = re.compile(re.escape(str(Path(folder))) + r"/\d{4}/")
    try:
        repeats = parse_repeats(
            paths, format=format, max_metrics=limits.max_metrics, max_samples=limits.max_samples
        )
    except ParseError as exc:
        raise type(exc)(  # InputTooLarge stays one: a 413, not a 422
            ours.sub("", exc.message),
            source=ours.sub("", exc.source),
            line=exc.line,
            format=exc.format,
        ) from None
    except PerfciError as exc:
        raise type(exc)(ours.sub("", str(exc))) from None
    for group in repeats:
        for profile in group:
            profile.source = ours.sub("", profile.source)
    return repeats


def check_size(repeats: list[list[Profile]], limits: Limits) -> None:
    """Refuse runs with too many metrics or names too long to store (422)."""
    total = sum(len(p.metrics) for group in repeats for p in group)
    samples = sum(len(m.samples_ns or ()) for group in repeats for p in group for m in p.metrics)
    _check_counts(total, samples, limits)
    if len(repeats) > 1000:
        raise ConfigError("a run may have at most 1000 repeats")
    for group in repeats:
        for profile in group:
            _check_profile(profile)


#: How deep a profile's metadata may nest: what a profiler writes is a few levels deep, and
#: stored JSON nested hundreds deep could not be read back by a server thread (issue 31).
MAX_METADATA_DEPTH = 32


def _check_profile(profile: Profile) -> None:
    if _depth(profile.metadata) > MAX_METADATA_DEPTH:
        raise ConfigError(
            f"profile {profile.label!r}: its metadata is nested more than "
            f"{MAX_METADATA_DEPTH} levels deep"
        )
    if len(profile.format) > 50:
        raise ConfigError(
            f"profile format name is longer than 50 characters: {profile.format[:50]!r}…"
        )
    for metric in profile.metrics:
        if len(metric.name) > MAX_NAME or len(metric.scope or "") > MAX_NAME:
            raise ConfigError(
                f"a metric name is longer than {MAX_NAME} characters: {metric.name[:80]!r}…"
            )
        if "\x00" in metric.name or "\x00" in (metric.scope or ""):
            raise ConfigError("metric names may not contain NUL characters")


def _depth(value: Any) -> int:
    """How deep lists and dicts nest in ``value`` (without recursion: it may be very deep)."""
    deepest, stack = 0, [(value, 1)]
    while stack:
        item, depth = stack.pop()
        children = item.values() if isinstance(item, dict) else item
        if not isinstance(item, dict | list):
            continue
        deepest = max(deepest, depth)
        if depth <= MAX_METADATA_DEPTH:
            stack.extend((child, depth + 1) for child in children)
    return deepest
