"""One typed settings object. Precedence: flags > env (``PERFCI_*``) > config file > defaults.

The config file is ``perfci.toml`` (top-level keys) or the ``[tool.perfci]`` table of
``pyproject.toml``, looked up from the working directory upwards. Build settings with
``get_settings()`` at a boundary (CLI command, app factory) and pass them in; nothing reads
the environment at import time.

The layers are pydantic-settings' own sources, in :meth:`Settings.settings_customise_sources`:
the flags (init keywords), the environment, the config file (a ``TomlConfigSettingsSource``)
and GitHub Actions' ``GITHUB_TOKEN``/``GITHUB_API_URL``, first one wins. ``Settings(...)``
built directly reads the flags and the environment only; ``get_settings()`` adds the file.

Unknown keys in the config file or among the flags are a :class:`~perfci.core.errors.ConfigError`
naming the key and the nearest valid one (a typo must not silently change nothing). The
settings that say where a token is sent (``github_api_url``, ``server_url``) are refused in
the config file, which a pull request can change: flags and the environment only (issue 31;
the sources are in :mod:`perfci.core.settings_sources`). Unknown ``PERFCI_*`` environment
variables are ignored: that namespace also holds variables that are not settings
(``PERFCI_SLACK_WEBHOOK``, the test suite's ``PERFCI_TEST_POSTGRES_URL``, variables a benchmark
reads).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from contextvars import ContextVar
from pathlib import Path
from typing import Annotated, Any
from urllib.parse import urlsplit, urlunsplit

from pydantic import Field, SecretStr, ValidationError, field_validator, model_validator
from pydantic_settings import (
    BaseSettings,
    NoDecode,
    PydanticBaseSettingsSource,
    SettingsConfigDict,
)

from perfci.core.errors import ConfigError

# What one upload may hold is defined once, in perfci.core.limits (it imports nothing, for the
# CLI's cold start); these are the defaults of the settings below.
from perfci.core.limits import (
    MAX_BODY_BYTES,
    MAX_INFLATED_BYTES,
    MAX_INFLATION_RATIO,
    MAX_METRICS,
    MAX_SAMPLES,
    PARSE_CPU_SECONDS,
    PARSE_CPU_SECONDS_PER_MIB,
    PARSE_MEMORY_BYTES,
    UPLOAD_BURST,
    UPLOAD_RATE,
)
from perfci.core.settings_sources import (
    ConfigFileSource,
    GitHubActionsSource,
    PrivateEnvSource,
    find_config_file,
    find_project_root,
    unknown_setting_message,
)

DEFAULT_DB_DIR = ".perfci"
DEFAULT_DB_NAME = "perfci.db"
#: Keys of ``[tool.perfci.benchmarks.NAME]`` that override the global threshold of that name.
BENCHMARK_THRESHOLDS = ("delta", "alpha")
_VARIABLE_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")

#: The directory ``get_settings`` looks for the config file from, while it builds the settings;
#: ``None`` (the default) means no config file, as for ``Settings(...)`` built directly.
_config_start: ContextVar[Path | None] = ContextVar("perfci_config_start", default=None)


class Settings(BaseSettings):
    """Everything configurable in perfci. Field comments say meaning, default and advice."""

    model_config = SettingsConfigDict(env_prefix="PERFCI_", extra="forbid", populate_by_name=True)

    # Database URL. Default: SQLite at .perfci/perfci.db in the repository root (embedded store).
    # Production: postgresql+psycopg://user@host/db. The password is never printed.
    database_url: str | None = None
    # perfci server for remote mode (uploads over HTTP instead of holding DB credentials).
    # The project token is sent there: flag or environment only, never the config file.
    server_url: str | None = None
    # History kept in the repository itself, for ephemeral runners with no database or server:
    # `git:BRANCH` (e.g. `git:perfci-data`) reads the runs on that branch of `origin` into the
    # embedded store before a check, and appends base-branch runs to it. Default: none.
    # A database URL of `git:BRANCH` selects it too (and leaves the store at its default).
    history: str | None = None
    # Compressed size of the runs kept on the history branch; the oldest are dropped beyond it.
    history_max_bytes: int = Field(50 * 1024 * 1024, ge=1024)
    # Fail the check when the history branch cannot be read or written (default: a warning).
    history_required: bool = False
    # Project token for the server (scopes: upload, read, admin). Never logged.
    token: SecretStr | None = None
    # Project name used to group benchmarks in the store; default: the repository name.
    project: str | None = None

    # --- comparison (analysis/compare.py) ---
    # Branch whose history is the baseline when the run has no PR base branch.
    baseline_branch: str = "main"
    # How many of the most recent baseline runs to compare against.
    baseline_runs: int = Field(30, ge=1)
    # Fewer baseline runs than this gives `no-baseline` instead of a guess.
    min_baseline_runs: int = Field(3, ge=1)
    # Practical margin: changes smaller than this (relative) are never regressions.
    delta: float = Field(0.02, gt=0, lt=1)
    # False-discovery rate for Benjamini–Hochberg across the metrics of one comparison.
    alpha: float = Field(0.05, gt=0, lt=1)
    # Metrics with less than this share of step time are reported but do not gate.
    gate_share: float = Field(0.02, ge=0, le=1)
    # Exit 1 on a gated regression (perfci check / compare).
    fail_on_regression: bool = True

    # --- runner ---
    # Repeats of the benchmark per CI run.
    repeats: int = Field(5, ge=1)
    # Same-runner A/B mode (`perfci check --ab`): pairs of base and PR runs, alternating.
    ab_pairs: int = Field(5, ge=2)
    # Adaptive repeats: most repeats (or A/B pairs) one check may run when its verdict is
    # inconclusive only because intervals are too wide. Default: 3x repeats (or pairs); set it
    # equal to repeats to switch adaptive repeats off. See docs/adaptive.md.
    max_repeats: int | None = Field(None, ge=1)
    # Seconds of benchmark time the adaptive repeats may spend in all (default: no limit).
    budget: float | None = Field(None, gt=0)
    # Benchmarks declared in config: {name: {command = [...], profiler = "torch", ...}}.
    benchmarks: dict[str, dict[str, Any]] = Field(default_factory=dict)
    # Environment variables the benchmark may see although perfci withholds them. The benchmark #
    # (code under test) starts without perfci's own PERFCI_* variables and the CI's tokens #
    # (perfci.integrations.runner.WITHHELD_CI_VARIABLES, issue 13); name here the ones it needs,
    # e.g. # ["PERFCI_EXAMPLE_SLOW_ATTENTION"]. Flag: --pass-env NAME; env: PERFCI_PASS_ENV="A,B".
    pass_env: Annotated[list[str], NoDecode] = Field(default_factory=list)

    # --- service (perfci serve) ---
    # Largest request body an upload may send, in bytes (413 beyond it).
    max_body_bytes: int = Field(MAX_BODY_BYTES, ge=1)
    # Most metrics one uploaded run may hold, all repeats together (422 beyond it).
    max_metrics: int = Field(MAX_METRICS, ge=1)
    # Most samples (per-step values, `samples_ns`) one uploaded run may hold (413 beyond it).
    max_samples: int = Field(MAX_SAMPLES, ge=1)
    # Largest size a `.gz` profile may inflate to, and the largest inflation ratio (413 beyond
    # either): a 1 MB gzip bomb inflates to 1 GB. Real profiles compress 5-20x.
    max_inflated_bytes: int = Field(MAX_INFLATED_BYTES, ge=1)
    max_inflation_ratio: int = Field(MAX_INFLATION_RATIO, ge=1)
    # Uploads parsed, stored and compared at once per worker process; more wait their turn, so
    # a burst of big uploads cannot take the memory or the event loop from other clients.
    upload_concurrency: int = Field(2, ge=1)
    # Each upload is parsed in a worker process of its own, which may spend parse_cpu_seconds
    # of CPU time plus parse_cpu_seconds_per_mib per MiB of input (the inflated size of .gz
    # files), and parse_memory_bytes of memory; beyond either the upload is refused (422 or
    # 413) and nothing else waits for it. Real profiles parse at 20-300 MiB/s: a slow parse of
    # a small file is a hostile one (issue 31: a 64 KB log that backtracked for 21 s).
    parse_cpu_seconds: float = Field(PARSE_CPU_SECONDS, gt=0)
    parse_cpu_seconds_per_mib: float = Field(PARSE_CPU_SECONDS_PER_MIB, ge=0)
    parse_memory_bytes: int = Field(PARSE_MEMORY_BYTES, ge=64 * 1024 * 1024)
    # Uploads per minute one token may send (per server process), after a burst of
    # upload_burst; more are answered 429 with Retry-After (the CLI and Action wait and retry).
    upload_rate: float = Field(UPLOAD_RATE, gt=0)
    upload_burst: int = Field(UPLOAD_BURST, ge=1)
    # Seconds a client may take to send a request's headers, and its whole body; slower
    # connections are closed (slowloris). Idle keep-alive connections close after keep_alive.
    header_timeout: float = Field(10.0, gt=0)
    body_timeout: float = Field(120.0, gt=0)
    keep_alive_timeout: float = Field(5.0, gt=0)
    # Serve /docs, /redoc and /openapi.json (default: off; the schema is in docs/service.md).
    api_docs: bool = False
    # /metrics: off by default; with metrics_token set it answers requests carrying
    # `Authorization: Bearer <metrics_token>`; public_metrics opens it to all (private network).
    metrics_token: SecretStr | None = None
    public_metrics: bool = False

    # --- storage at scale (PostgreSQL; docs/operations.md, issue 17) ---
    # A read replica (hot standby) of database_url. The service's dashboard pages, series
    # histories, run lists and weekly reports read there; uploads, comparisons, tokens and
    # everything that writes stay on database_url. A replica lags: a run just uploaded may
    # show on the dashboard a moment later. Default: none (everything on database_url).
    read_database_url: str | None = None
    # How long runs keep their raw per-repeat samples: "90d", "12w" or a number of days.
    # `perfci db prune` / `perfci db maintain` roll older runs up into one summary per series
    # (median, spread, count), which charts, change points and weekly reports read. Whole
    # months go at once, so raw samples stay up to a month longer. Default: kept forever.
    keep_samples: int | None = Field(None, ge=1)
    # The same for base-branch runs (pushes to baseline_branch or to a branch that pull
    # requests target); longer than keep_samples keeps the base branch's repeats for longer.
    # Default: keep_samples.
    keep_base_samples: int | None = Field(None, ge=1)
    # Base branches, as glob patterns (`release/*`): their pushes' runs keep their raw samples
    # for keep_base_samples, as do those of baseline_branch and of every branch a pull
    # request targets. `perfci db prune --dry-run` shows them. Env: PERFCI_BASE_BRANCHES="a,b".
    base_branches: Annotated[list[str], NoDecode] = Field(
        default_factory=lambda: ["main", "master", "release/*"]
    )
    # Months of sample partitions made ahead of the current one by `perfci db upgrade` and
    # `perfci db maintain` (an ingest makes a missing one itself; ahead is cheaper).
    partitions_ahead: int = Field(3, ge=0, le=24)

    # --- GitHub ---
    github_token: SecretStr | None = None
    # Where the GitHub token is sent (GITHUB_API_URL in Actions, PERFCI_GITHUB_API_URL): flag or
    # environment only, never the config file (a pull request could change that).
    github_api_url: str = "https://api.github.com"

    @classmethod
    def settings_customise_sources(
        cls,
        settings_cls: type[BaseSettings],
        init_settings: PydanticBaseSettingsSource,
        env_settings: PydanticBaseSettingsSource,
        dotenv_settings: PydanticBaseSettingsSource,
        file_secret_settings: PydanticBaseSettingsSource,
    ) -> tuple[PydanticBaseSettingsSource, ...]:
        """Flags > ``PERFCI_*`` > config file > ``GITHUB_*`` > defaults; no .env, no secrets dir.

        The config file and GitHub's variables are read only inside :func:`get_settings`.
        ``GITHUB_TOKEN`` sits under the config file because Actions sets it in every job: a
        token written in the file is the more deliberate choice (the API URL it goes to
        cannot be written there:
        :data:`~perfci.core.settings_sources.TOKEN_DESTINATIONS`). The environment includes the
        variables perfci holds in memory (:mod:`perfci.core.private_env`).
        """
        env = PrivateEnvSource(settings_cls)
        start = _config_start.get()
        if start is None:
            return init_settings, env
        found = find_config_file(start)
        files = () if found is None else (ConfigFileSource(settings_cls, *found),)
        return init_settings, env, *files, GitHubActionsSource(settings_cls)

    @field_validator("database_url", "read_database_url")
    @classmethod
    def _normalise_dsn(cls, value: str | None) -> str | None:
        if value is None or not value.strip():
            return None
        value = value.strip()
        # Accept the bare scheme users copy from psql/Heroku and pick the driver we ship.
        for prefix in ("postgres://", "postgresql://"):
            if value.startswith(prefix):
                return "postgresql+psycopg://" + value[len(prefix) :]
        return value

    @field_validator("keep_samples", "keep_base_samples", mode="before")
    @classmethod
    def _days(cls, value: object) -> object:
        return parse_days(value) if isinstance(value, str) else value

    @model_validator(mode="after")
    def _history_from_database_url(self) -> Settings:
        # `--database-url git:perfci-data` names the history branch, not a database.
        if self.database_url and self.database_url.startswith("git:"):
            self.history, self.database_url = self.database_url, None
        return self

    @field_validator("pass_env", mode="before")
    @classmethod
    def _variable_names(cls, value: object) -> list[str]:
        # The environment gives one string: "A,B" or "A B".
        names = value.replace(",", " ").split() if isinstance(value, str) else value
        if not isinstance(names, list | tuple) or not all(isinstance(n, str) for n in names):
            raise ValueError("must be a list of environment variable names")
        bad = [n for n in names if not _VARIABLE_NAME.fullmatch(n)]
        if bad:
            raise ValueError(f"not an environment variable name: {', '.join(map(repr, bad))}")
        return list(dict.fromkeys(names))

    @field_validator("base_branches", mode="before")
    @classmethod
    def _branch_patterns(cls, value: object) -> list[str]:
        names = value.replace(",", " ").split() if isinstance(value, str) else value
        if not isinstance(names, list | tuple) or not all(
            isinstance(n, str) and n.strip() for n in names
        ):
            raise ValueError("must be a list of branch names or glob patterns")
        return list(dict.fromkeys(n.strip() for n in names))

    @field_validator("token", "github_token", "metrics_token")
    @classmethod
    def _reject_placeholders(cls, value: SecretStr | None) -> SecretStr | None:
        if value is not None and value.get_secret_value().strip() in {"", "changeme", "***"}:
            raise ValueError("is a placeholder, not a real token")
        return value

    def resolved_database_url(self, root: Path | None = None) -> str:
        """The database URL, defaulting to the embedded SQLite file under ``root``."""
        if self.database_url:
            return self.database_url
        base = (root or find_project_root()) / DEFAULT_DB_DIR / DEFAULT_DB_NAME
        return f"sqlite:///{base}"

    def for_benchmark(self, name: str, flags: Mapping[str, Any] | None = None) -> Settings:
        """These settings with ``delta``/``alpha`` from ``[tool.perfci.benchmarks.NAME]``.

        A benchmark's own threshold wins over the global one (a noisy benchmark may need a
        wider margin than the others); a flag (``flags[key]`` not ``None``) wins over both.
        """
        table = self.benchmarks.get(name)
        if not isinstance(table, Mapping):
            return self
        update = {
            key: table[key]
            for key in BENCHMARK_THRESHOLDS
            if key in table and (flags or {}).get(key) is None
        }
        for key, value in update.items():
            if isinstance(value, bool) or not isinstance(value, int | float) or not 0 < value < 1:
                raise ConfigError(
                    f"[tool.perfci.benchmarks.{name}] {key} must be a number "
                    f"between 0 and 1 (exclusive), got {value!r}"
                )
        return self.model_copy(update={k: float(v) for k, v in update.items()}) if update else self


def get_settings(
    overrides: Mapping[str, Any] | None = None, *, start: Path | None = None
) -> Settings:
    """Settings with flags (``overrides``, ``None`` values ignored) > env > file > defaults.

    ``start`` is where the config file is looked for (default: the working directory).
    """
    flags = {k: v for k, v in (overrides or {}).items() if v is not None}
    token = _config_start.set((start or Path.cwd()).resolve())
    try:
        return Settings(**flags)
    except ValidationError as exc:
        problems = validation_problems(exc)
        raise ConfigError(f"invalid settings: {problems}") from None
    finally:
        _config_start.reset(token)


def validation_problems(exc: ValidationError) -> str:
    """What is wrong in ``exc``, one clause a setting, without the values (they may be
    secrets)."""
    return "; ".join(_problem(err) for err in exc.errors())


def _problem(err: Any) -> str:
    where = ".".join(str(p) for p in err["loc"])
    if err["type"] == "extra_forbidden":
        # Only a flag can get here: the config file's keys are checked by ConfigFileSource.
        return unknown_setting_message(where, "given as an override", Settings.model_fields)
    return f"{where}: {err['msg']}"


_DURATION = re.compile(r"^\s*(\d+)\s*([dw]?)\s*$", re.IGNORECASE)


def parse_days(text: str) -> int:
    """Days in a retention period: ``"90d"``, ``"12w"`` or ``"90"``; else ``ValueError``."""
    match = _DURATION.match(text)
    if match is None:
        raise ValueError(f"{text!r} is not a period: write days or weeks, e.g. 90d or 12w")
    return int(match[1]) * (7 if match[2].lower() == "w" else 1)


def redact_url(url: str) -> str:
    """``url`` with any password replaced by ``***``, for printing (a database or server URL:
    ``postgresql+psycopg://root:***@db:5432/perfci``)."""
    try:
        parts = urlsplit(url)
        password = parts.password
    except ValueError:  # not a URL at all: hide everything after the scheme
        scheme, _, _ = url.partition("://")
        return f"{scheme}://***"
    if password is None:
        return url
    user, _, _ = parts.netloc.rpartition("@")[0].partition(":")
    host = parts.netloc.rpartition("@")[2]
    return urlunsplit(parts._replace(netloc=f"{user}:***@{host}"))
