"""Where settings come from besides flags: the config file and the environment.

The config file is ``perfci.toml`` or the ``[tool.perfci]`` table of ``pyproject.toml``, found
from a directory upwards; :class:`ConfigFileSource` reads it and refuses unknown keys and the
settings that say where a token is sent (:data:`TOKEN_DESTINATIONS`). The environment is the
``PERFCI_*`` variables (those perfci holds in memory included) and GitHub Actions' own.
:mod:`perfci.core.settings` puts these sources in their order.
"""

from __future__ import annotations

import difflib
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from pydantic.fields import FieldInfo
from pydantic_settings import (
    BaseSettings,
    EnvSettingsSource,
    PydanticBaseSettingsSource,
    TomlConfigSettingsSource,
)

from perfci.core import private_env
from perfci.core.errors import ConfigError
from perfci.core.tomlcompat import tomllib

#: Settings that say where a token is sent: never read from a config file, which is the
#: repository's (a pull request's) to change; only flags and the environment set them.
TOKEN_DESTINATIONS = ("github_api_url", "server_url")


def find_project_root(start: Path | None = None) -> Path:
    """The nearest directory upwards holding ``.git``, ``perfci.toml`` or ``pyproject.toml``."""
    here = (start or Path.cwd()).resolve()
    for candidate in (here, *here.parents):
        if any(
            (candidate / marker).exists() for marker in (".git", "perfci.toml", "pyproject.toml")
        ):
            return candidate
    return here


def find_config_file(start: Path | None = None) -> tuple[Path, tuple[str, ...]] | None:
    """The config file and the table in it: ``perfci.toml``, or ``pyproject.toml`` holding
    ``[tool.perfci]``, in ``start`` or the nearest directory above it; ``None`` when neither.

    A ``pyproject.toml`` without the table does not stop the search: a monorepo's package
    may have its own ``pyproject.toml`` under the root that configures perfci.
    """
    here = (start or Path.cwd()).resolve()
    for candidate in (here, *here.parents):
        dedicated = candidate / "perfci.toml"
        if dedicated.is_file():
            return dedicated, ()
        pyproject = candidate / "pyproject.toml"
        if pyproject.is_file():
            table = read_toml(pyproject).get("tool", {}).get("perfci")
            if isinstance(table, dict):
                return pyproject, ("tool", "perfci")
    return None


class ConfigFileSource(TomlConfigSettingsSource):
    """The config file's settings: keys spelled with dashes or underscores, unknown keys refused.

    Only the top-level keys are respelled: the names under ``[tool.perfci.benchmarks]`` are
    benchmark names, kept as written.
    """

    def __init__(
        self, settings_cls: type[BaseSettings], path: Path, table: tuple[str, ...]
    ) -> None:
        self.where = f"{path} [{'.'.join(table)}]" if table else str(path)
        super().__init__(settings_cls, toml_file=path, toml_table_header=table)
        unknown = [
            key for key in self.toml_data if key.replace("-", "_") not in settings_cls.model_fields
        ]
        if unknown:
            raise ConfigError(
                unknown_setting_message(unknown[0], f"in {self.where}", settings_cls.model_fields)
            )
        refused = [key for key in self.toml_data if key.replace("-", "_") in TOKEN_DESTINATIONS]
        if refused:
            raise ConfigError(destination_message(refused[0], self.where))
        self.init_kwargs = {key.replace("-", "_"): value for key, value in self.toml_data.items()}

    def _read_file(self, file_path: Path) -> dict[str, Any]:  # type: ignore[override]
        return read_toml(file_path)


def destination_message(key: str, where: str) -> str:
    """Why ``key`` (a setting naming where a token is sent) is refused in a config file."""
    name = key.replace("-", "_")
    instead = {
        "github_api_url": "GITHUB_API_URL (set by GitHub Actions) or PERFCI_GITHUB_API_URL",
        "server_url": "PERFCI_SERVER_URL or the GitHub Action's `server-url` input",
    }.get(name, f"PERFCI_{name.upper()}")
    return (
        f"'{key}' in {where}: where perfci sends a token is never read from the repository "
        f"(a pull request could point it at its own host); set {instead} in the job instead"
    )


class PrivateEnvSource(EnvSettingsSource):
    """``PERFCI_*`` variables: the environment and those perfci holds in memory
    (:mod:`perfci.core.private_env`: after ``perfci check`` moved them out of its
    environment)."""

    def _load_env_vars(self) -> Mapping[str, str | None]:
        loaded = dict(super()._load_env_vars())
        for name, value in private_env.held().items():
            loaded[name if self.case_sensitive else name.lower()] = value
        return loaded


class GitHubActionsSource(PydanticBaseSettingsSource):
    """``GITHUB_TOKEN`` and ``GITHUB_API_URL``, which GitHub Actions sets in every job."""

    _VARIABLES = (("github_token", "GITHUB_TOKEN"), ("github_api_url", "GITHUB_API_URL"))

    def get_field_value(self, field: FieldInfo, field_name: str) -> tuple[Any, str, bool]:
        return None, field_name, False  # not used: __call__ reads the two variables itself

    def __call__(self) -> dict[str, Any]:
        env = private_env.environ()
        return {field: env[name] for field, name in self._VARIABLES if name in env}


def unknown_setting_message(key: str, where: str, settings: Iterable[str]) -> str:
    """``unknown setting 'KEY' WHERE: did you mean 'NAME'?``, in the spelling ``key`` uses;
    ``settings`` are the names of the settings there are."""
    dashed = "-" in key
    names = [n.replace("_", "-") if dashed else n for n in settings]
    close = difflib.get_close_matches(key, names, n=1)
    hint = f"did you mean '{close[0]}'?" if close else "perfci has no setting of that name"
    return f"unknown setting '{key}' {where}: {hint}"


def read_toml(path: Path) -> dict[str, Any]:
    try:
        with path.open("rb") as handle:
            return tomllib.load(handle)
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"{path}: invalid TOML: {exc}") from exc
