"""The one Settings object a server process serves with.

``perfci serve`` resolves its flags, the environment and the config file once and hands the
result to each worker process whole (:data:`~perfci.core.settings_handover.HANDED_OVER_ENV`);
the app factory and the HTTP protocol of that worker both read it here. A server started
another way (``uvicorn --factory perfci.server.app:create_app_from_env``) resolves its own.
"""

from __future__ import annotations

import functools
import os

from perfci.core.settings import Settings, get_settings
from perfci.core.settings_handover import HANDED_OVER_ENV, settings_from_json


@functools.cache
def served_settings() -> Settings:
    """This process's settings, resolved once (module doc)."""
    handed = os.environ.get(HANDED_OVER_ENV)
    return settings_from_json(handed) if handed else get_settings()
