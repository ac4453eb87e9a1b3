"""How ``perfci serve`` hands its worker processes the one Settings object it built, whole.

The flags, environment and config file are resolved once, in the parent; each worker reads
the result from :data:`HANDED_OVER_ENV` and nothing of its own environment or files.
"""

from __future__ import annotations

import json

from pydantic import SecretStr, ValidationError

from perfci.core.errors import ConfigError
from perfci.core.settings import Settings, validation_problems

#: The environment variable through which ``perfci serve`` hands its worker processes the one
#: Settings object it built (flags, environment and file already resolved), whole.
HANDED_OVER_ENV = "PERFCI_SERVE_SETTINGS"


def settings_to_json(settings: Settings) -> str:
    """``settings`` as JSON for another process of this program, secrets included (they go
    only into that process's environment, never to a log)."""
    data = settings.model_dump(mode="json")
    for name, value in settings:
        if isinstance(value, SecretStr):
            data[name] = value.get_secret_value()
    return json.dumps(data)


def settings_from_json(text: str) -> Settings:
    """The Settings :func:`settings_to_json` wrote: every field given, so nothing of this
    process's environment or config file can change them."""
    try:
        data = json.loads(text)
    except ValueError:
        raise ConfigError(f"the settings handed over in {HANDED_OVER_ENV} are not JSON") from None
    try:
        return Settings(**data)
    except ValidationError as exc:
        # Only what is wrong, never the values: they hold the secrets.
        problems = validation_problems(exc)
        raise ConfigError(
            f"invalid settings handed over in {HANDED_OVER_ENV}: {problems}"
        ) from None
