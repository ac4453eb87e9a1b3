"""``perfci bisect``: which commit of a range moved a metric (same-runner A/B probes)."""

from perfci.usecases.bisect.run import BisectRequest, ProbeProgress, run_bisect

__all__ = ["BisectRequest", "ProbeProgress", "run_bisect"]
