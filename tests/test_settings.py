"""Settings from pydantic-settings' own sources: flags > ``PERFCI_*`` > config file > ``GITHUB_*``
> defaults; unknown keys in the file or among the flags are a ConfigError naming the nearest
valid key; the upload limits have one definition."""

from __future__ import annotations

from pathlib import Path

import pytest

from perfci.core.errors import ConfigError
from perfci.core.settings import MAX_BODY_BYTES, MAX_METRICS, Settings, get_settings


@pytest.fixture(autouse=True)
def clean_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    """No PERFCI_* or GitHub variable of the machine running the tests leaks into these."""
    for name in Settings.model_fields:
        monkeypatch.delenv(f"PERFCI_{name.upper()}", raising=False)
    for name in ("GITHUB_TOKEN", "GITHUB_API_URL"):
        monkeypatch.delenv(name, raising=False)


def _pyproject(folder: Path, table: str) -> Path:
    path = folder / "pyproject.toml"
    path.write_text('[project]\nname = "x"\n\n[tool.perfci]\n' + table, encoding="utf-8")
    return path


def test_flags_beat_environment_beat_file_beat_defaults(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _pyproject(tmp_path, "repeats = 7\nab-pairs = 4\nmax_repeats = 20\nbaseline-runs = 12\n")
    monkeypatch.setenv("PERFCI_AB_PAIRS", "6")
    monkeypatch.setenv("PERFCI_MAX_REPEATS", "30")
    settings = get_settings({"max_repeats": 40, "alpha": None}, start=tmp_path)
    assert settings.max_repeats == 40  # flag over env and file
    assert settings.ab_pairs == 6  # env over file
    assert settings.repeats == 7 and settings.baseline_runs == 12  # file over defaults
    assert settings.alpha == 0.05  # a flag given as None is no flag
    assert settings.min_baseline_runs == 3  # default


def test_github_actions_variables_sit_under_the_file_and_perfci_variables(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("GITHUB_TOKEN", "ghs_from_actions")
    monkeypatch.setenv("GITHUB_API_URL", "https://ghe.example/api/v3")
    token = get_settings(start=tmp_path).github_token
    assert token is not None and token.get_secret_value() == "ghs_from_actions"
    _pyproject(tmp_path, 'github-token = "ghs_from_file"\n')
    token = get_settings(start=tmp_path).github_token
    assert token is not None and token.get_secret_value() == "ghs_from_file"
    monkeypatch.setenv("PERFCI_GITHUB_TOKEN", "ghs_from_perfci")
    settings = get_settings(start=tmp_path)
    assert settings.github_api_url == "https://ghe.example/api/v3"
    assert settings.github_token is not None
    assert settings.github_token.get_secret_value() == "ghs_from_perfci"


@pytest.mark.parametrize(
    ("line", "instead"),
    [
        ('github-api-url = "https://evil.example/api"', "GITHUB_API_URL"),
        ('github_api_url = "https://evil.example/api"', "PERFCI_GITHUB_API_URL"),
        ('server-url = "https://evil.example"', "PERFCI_SERVER_URL"),
    ],
)
def test_where_tokens_go_is_never_read_from_the_repository(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, line: str, instead: str
) -> None:
    """Issue 31: a pull request that sets the API URL in pyproject.toml would receive the
    GitHub token at its own host. The environment and flags set it; the file is refused."""
    monkeypatch.setenv("GITHUB_TOKEN", "ghs_from_actions")
    monkeypatch.setenv("PERFCI_TOKEN", "pct_upload")
    _pyproject(tmp_path, line + "\n")
    with pytest.raises(ConfigError) as caught:
        get_settings(start=tmp_path)
    message = str(caught.value)
    assert line.split(" ")[0] in message and "never read from the repository" in message
    assert instead in message
    assert "ghs_from_actions" not in message and "evil.example" not in message
    (tmp_path / "pyproject.toml").unlink()
    (tmp_path / "perfci.toml").write_text(line + "\n", encoding="utf-8")
    with pytest.raises(ConfigError, match="never read from the repository"):
        get_settings(start=tmp_path)
    # The same values from the environment or a flag are the job's own choice.
    (tmp_path / "perfci.toml").unlink()
    monkeypatch.setenv("PERFCI_GITHUB_API_URL", "https://ghe.example/api/v3")
    settings = get_settings({"server_url": "https://perfci.example"}, start=tmp_path)
    assert settings.github_api_url == "https://ghe.example/api/v3"
    assert settings.server_url == "https://perfci.example"


def test_settings_built_directly_read_no_file_and_no_github_variables(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _pyproject(tmp_path, "repeats = 7\n")
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("GITHUB_TOKEN", "ghs_from_actions")
    monkeypatch.setenv("PERFCI_ALPHA", "0.01")
    settings = Settings()
    assert settings.repeats == 5 and settings.github_token is None and settings.alpha == 0.01
    assert get_settings().repeats == 7  # the working directory is the default start


def test_the_nearest_file_wins_and_a_pyproject_without_the_table_is_passed_over(
    tmp_path: Path,
) -> None:
    _pyproject(tmp_path, "repeats = 7\n")
    package = tmp_path / "packages" / "model"
    package.mkdir(parents=True)
    (package / "pyproject.toml").write_text('[project]\nname = "model"\n', encoding="utf-8")
    assert get_settings(start=package).repeats == 7
    (tmp_path / "packages" / "perfci.toml").write_text("repeats = 9\n", encoding="utf-8")
    assert get_settings(start=package).repeats == 9
    assert get_settings(start=tmp_path).repeats == 7


def test_dashes_and_underscores_both_work_and_benchmark_names_are_kept(tmp_path: Path) -> None:
    (tmp_path / "perfci.toml").write_text(
        'max-repeats = 11\nmin_baseline_runs = 4\npass-env = ["HF_HOME"]\n\n'
        '[benchmarks.gpt-tiny]\ncommand = ["python", "bench.py"]\ndelta = 0.1\n\n'
        '[benchmarks.gpt_small]\ncommand = "true"\n',
        encoding="utf-8",
    )
    settings = get_settings(start=tmp_path)
    assert settings.max_repeats == 11 and settings.min_baseline_runs == 4
    assert settings.pass_env == ["HF_HOME"]
    assert set(settings.benchmarks) == {"gpt-tiny", "gpt_small"}
    assert settings.for_benchmark("gpt-tiny").delta == 0.1


@pytest.mark.parametrize(
    ("line", "message"),
    [
        (
            "baseline-run = 10",
            r"unknown setting 'baseline-run' in .*pyproject\.toml \[tool\.perfci\]:"
            r" did you mean 'baseline-runs'\?",
        ),
        (
            "databse_url = 'sqlite://'",
            r"unknown setting 'databse_url' in .*: did you mean "
            r"'database_url'\?",
        ),
        ("colour = 'red'", r"unknown setting 'colour' in .*: perfci has no setting of that name"),
    ],
)
def test_an_unknown_key_in_pyproject_names_it_and_the_nearest_valid_key(
    tmp_path: Path, line: str, message: str
) -> None:
    _pyproject(tmp_path, f"repeats = 3\n{line}\n")
    with pytest.raises(ConfigError, match=message) as caught:
        get_settings(start=tmp_path)
    assert caught.value.exit_code == 2


def test_an_unknown_key_in_perfci_toml_names_the_file(tmp_path: Path) -> None:
    (tmp_path / "perfci.toml").write_text("gate-shares = 0.1\n", encoding="utf-8")
    with pytest.raises(
        ConfigError,
        match=r"'gate-shares' in .*perfci\.toml: did you mean "
        r"'gate-share'\?",
    ):
        get_settings(start=tmp_path)


def test_an_unknown_flag_names_the_nearest_valid_key(tmp_path: Path) -> None:
    with pytest.raises(
        ConfigError,
        match=r"unknown setting 'databse_url' given as an override: "
        r"did you mean 'database_url'\?",
    ):
        get_settings({"databse_url": "sqlite://"}, start=tmp_path)


def test_unknown_perfci_environment_variables_are_ignored(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The PERFCI_ namespace holds variables that are not settings (the Slack webhook, the test
    # suite's database URL): they must not make every command fail.
    monkeypatch.setenv("PERFCI_SLACK_WEBHOOK", "https://hooks.example/x")
    monkeypatch.setenv("PERFCI_BASELINE_RUN", "10")
    assert get_settings(start=tmp_path).baseline_runs == 30


def test_bad_values_and_bad_toml_are_config_errors_naming_them(tmp_path: Path) -> None:
    _pyproject(tmp_path, 'baseline-runs = "many"\n')
    with pytest.raises(ConfigError, match="invalid settings: baseline_runs: Input should be"):
        get_settings(start=tmp_path)
    (tmp_path / "perfci.toml").write_text("repeats = = 3\n", encoding="utf-8")
    with pytest.raises(ConfigError, match=r"perfci\.toml: invalid TOML"):
        get_settings(start=tmp_path)


def test_the_upload_limits_are_defined_once() -> None:
    settings = Settings()
    assert (settings.max_body_bytes, settings.max_metrics) == (MAX_BODY_BYTES, MAX_METRICS)
    assert (MAX_BODY_BYTES, MAX_METRICS) == (64 * 1024 * 1024, 200_000)


def test_a_command_run_with_a_typo_in_the_file_exits_2_and_writes_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from perfci.cli.main import main

    _pyproject(tmp_path, "baseline-run = 10\n")
    monkeypatch.chdir(tmp_path)
    assert main(["runs", "list", "--project", "acme/x", "-b", "gpt"]) == 2
    error = capsys.readouterr().err
    assert "unknown setting 'baseline-run'" in error and "did you mean 'baseline-runs'?" in error
    assert not (tmp_path / ".perfci").exists()  # the embedded store was not created


def test_the_service_limits_and_serve_help_read_the_settings_defaults(
    capsys: pytest.CaptureFixture[str],
) -> None:
    pytest.importorskip("fastapi", reason="the server extra is not installed")
    from perfci.cli.main import main
    from perfci.server.deps import Limits

    limits, settings = Limits(), Settings()
    for name in (
        "max_body_bytes",
        "max_metrics",
        "max_samples",
        "max_inflated_bytes",
        "max_inflation_ratio",
        "parse_cpu_seconds",
        "parse_cpu_seconds_per_mib",
        "parse_memory_bytes",
    ):
        assert getattr(limits, name) == getattr(settings, name), name
    assert main(["serve", "--help"]) == 0
    # The words of the help, whatever its width: Rich may wrap a default across two lines of
    # its box (80 columns under pytest-xdist, where stdout is no terminal).
    help_text = " ".join(capsys.readouterr().out.replace("│", " ").split())
    assert "(default 64 MiB)" in help_text and "(default 200,000)" in help_text


def test_serve_hands_its_workers_one_settings_object_whole(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from perfci.core.settings_handover import settings_from_json, settings_to_json

    built = get_settings(
        {
            "database_url": "postgresql://perfci:s3cret-pw@db.example/perfci",
            "header_timeout": 2.5,
            "max_metrics": 1234,
            "metrics_token": "m" * 32,
        }
    )
    handed = settings_to_json(built)
    # A worker's own environment cannot change what serve resolved.
    monkeypatch.setenv("PERFCI_MAX_METRICS", "99")
    monkeypatch.setenv("PERFCI_HEADER_TIMEOUT", "40")
    worker = settings_from_json(handed)
    assert worker == built
    assert worker.metrics_token is not None
    assert worker.metrics_token.get_secret_value() == "m" * 32
    assert (worker.header_timeout, worker.max_metrics) == (2.5, 1234)


def test_settings_handed_over_broken_are_a_config_error() -> None:
    from perfci.core.settings_handover import settings_from_json

    with pytest.raises(ConfigError, match=r"PERFCI_SERVE_SETTINGS.*max_metrics") as caught:
        settings_from_json('{"max_metrics": -1, "github_token": "ghp_not-shown-anywhere"}')
    assert "ghp_not-shown" not in str(caught.value)
