"""Which runs are comparable: the environment fingerprint's key.

Runs are only ever compared within one environment (GPU model and count, driver, CUDA,
frameworks, CPU, OS). Reading a machine's fingerprint is the run context's job
(:mod:`perfci.integrations.context`); this is what the store matches runs on.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping

__all__ = ["IDENTITY_KEYS", "fingerprint_hash"]

#: Fingerprint entries that tell individual machines apart but not what performance depends
#: on: kept with the run (history can tell a pool's cards apart) and left out of the hash that
#: matches environments, or runs on two cards of one model would never be compared.
IDENTITY_KEYS = frozenset({"gpu_uuid"})


def fingerprint_hash(fingerprint: Mapping[str, str]) -> str:
    """A stable 16-hex-digit key of a fingerprint (order-independent, ``IDENTITY_KEYS`` not
    counted)."""
    matched = {k: v for k, v in fingerprint.items() if k not in IDENTITY_KEYS}
    canonical = json.dumps(dict(sorted(matched.items())), separators=(",", ":"))
    return hashlib.sha256(canonical.encode()).hexdigest()[:16]
