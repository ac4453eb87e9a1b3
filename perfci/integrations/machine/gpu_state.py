"""The GPU's state during each repeat: clocks, temperature, power and throttle reasons.

A repeat that ran on a throttled GPU (too hot, at its power cap, slowed by the hardware) is slower
for reasons that have nothing to do with the code under test (issue 12 point 10). The runner samples
the GPU(s) in use while a repeat runs (:mod:`perfci.integrations.machine.gpu_sampler`); each
repeat's samples are summarised per GPU (:func:`summarise`,
:mod:`perfci.integrations.machine.gpu_readings`) into a JSON-ready ``gpu_state`` that travels in the
repeat's profile metadata, carried there by the sidecar file this module writes and reads;
:class:`StateJudge` (:mod:`perfci.integrations.machine.judge`) tells which repeats ran throttled or
at a low SM clock, for the comparison to leave out and name.

This module is the entry point the runner and the use cases import; the names of the
the `perfci.gpu_*` modules are re-exported here.
"""

from __future__ import annotations

import json
from collections.abc import Collection, Mapping, Sequence
from pathlib import Path
from typing import Any

from perfci.integrations.machine.gpu_readings import (
    CLOCK_DROP,
    INTERVAL_MS,
    SLOWDOWN_REASONS,
    SMI_FIELDS,
    THROTTLE_REASONS,
    THROTTLED_SHARE,
    GpuSample,
    parse_smi_csv,
    reason_names,
    summarise,
)
from perfci.integrations.machine.gpu_sampler import GpuSampler, sample_while
from perfci.integrations.machine.judge import RepeatJudgement, StateJudge, repeat_clock

#: The file the runner leaves in each repeat's output directory.
SIDECAR = "perfci-gpu-state.json"


# --- carrying the state with the repeat --------------------------------------------------------


def write_sidecar(directory: Path, state: Mapping[str, Any]) -> Path:
    """Leave a repeat's state beside its profiles (``SIDECAR``), for :func:`read_sidecar`."""
    path = directory / SIDECAR
    path.write_text(json.dumps(state, indent=1), encoding="utf-8")
    return path


def read_sidecar(files: Collection[Path]) -> dict[str, Any] | None:
    """The ``gpu_state`` the runner left beside a repeat's profile ``files``, if any."""
    for folder in dict.fromkeys(Path(f).parent for f in files):
        for candidate in (folder, *folder.parents[:2]):
            path = candidate / SIDECAR
            if path.is_file():
                try:
                    state = json.loads(path.read_text(encoding="utf-8"))
                except (OSError, ValueError):
                    return None
                return state if isinstance(state, dict) else None
    return None


def attach(repeats: Sequence[Sequence[Any]], files: Sequence[Collection[Path]]) -> None:
    """Put each repeat's sidecar state into its profiles' metadata under ``gpu_state``.

    ``repeats`` are the parsed profiles of each repeat (:class:`perfci.core.model.Profile`) and
    ``files`` the files they came from, in the same order. Profile metadata is stored per
    repeat and carried by perfci JSON documents, so remote uploads carry the state too.
    """
    for profiles, paths in zip(repeats, files, strict=False):
        state = read_sidecar(paths)
        if state is None:
            continue
        for profile in profiles:
            profile.metadata["gpu_state"] = state


__all__ = [
    "CLOCK_DROP",
    "INTERVAL_MS",
    "SIDECAR",
    "SLOWDOWN_REASONS",
    "SMI_FIELDS",
    "THROTTLED_SHARE",
    "THROTTLE_REASONS",
    "GpuSample",
    "GpuSampler",
    "RepeatJudgement",
    "StateJudge",
    "attach",
    "parse_smi_csv",
    "read_sidecar",
    "reason_names",
    "repeat_clock",
    "sample_while",
    "summarise",
    "write_sidecar",
]
