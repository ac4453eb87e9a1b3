"""``tomllib`` (3.11), or its backport ``tomli`` on Python 3.10.

Apart from :mod:`perfci.core.compat`, which every module imports: loading a TOML reader compiles
a dozen regular expressions (about 30 ms on the 2-core VM), and only the settings read TOML, so
``perfci parse`` and ``perfci --help`` do not pay for it.
"""

from __future__ import annotations

import sys

if sys.version_info >= (3, 11):  # vermin: these lines only run on 3.11 and newer
    import tomllib  # novermin
else:  # pragma: no cover - exercised on Python 3.10 (scripts/check-install --python)
    import tomli as tomllib

__all__ = ["tomllib"]
