"""What a reader needs to see a reported change on their own machine: the repro bundle.

The exact commands (``perfci check --ab`` between the two commits with the run's settings, and
``perfci bisect`` where a change landed on the base branch), the environment fingerprint, and
where the profiles of both sides are kept. Built by the use case that knows the run
(:func:`perfci.usecases.check.outputs.repro_of`), rendered by :mod:`perfci.report.repro`.
"""

from __future__ import annotations

from dataclasses import dataclass, field

__all__ = ["FINGERPRINT_LABELS", "PROFILES_ARTIFACT", "REPORT_ARTIFACT", "Repro"]

#: The Action's artifact names (github_action/README.md uploads them under these names).
REPORT_ARTIFACT = "perfci-report"
PROFILES_ARTIFACT = "perfci-profiles"

#: Fingerprint entries the bundle shows first, with their labels; the rest follow as stored.
FINGERPRINT_LABELS = (
    ("gpu", "GPU"),
    ("gpu_count", "GPUs"),
    ("driver", "Driver"),
    ("cuda", "CUDA"),
    ("torch", "torch"),
    ("runner", "Runner"),
    ("os", "OS"),
    ("cpu", "CPU"),
)


@dataclass(frozen=True, slots=True)
class Repro:
    """How to reproduce one comparison.

    ``base`` is the commit the candidate was compared with (the A/B's merge-base, or the
    newest baseline run's commit), ``commit`` the candidate. ``flags`` are the settings the
    verdict depends on, as command-line flags. ``profiles`` is the folder, relative to the
    checkout, that held the profiles of both sides; ``base_glob`` and ``candidate_glob`` their
    subfolders. ``bisect`` asks for a ``perfci bisect`` line (a change on the base branch).
    """

    benchmark: str
    commit: str
    base: str
    flags: tuple[str, ...] = ()
    environment: dict[str, str] = field(default_factory=dict)
    profiles: str = ".perfci/runs"
    base_glob: str = "ab/base-0/repeat-0"
    candidate_glob: str = "ab/pr-0/repeat-0"
    artifacts: tuple[str, ...] = (PROFILES_ARTIFACT, REPORT_ARTIFACT)
    bisect: bool = False
    #: The metric ``perfci bisect`` follows (``None``: the step).
    metric: str | None = None
