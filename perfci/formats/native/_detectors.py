"""perfci's own document: its name and sniff, without its reader (see ``formats.protocol``)."""

from __future__ import annotations

from perfci.formats.protocol import Detector, Head


def _perfci_json(head: Head) -> bool:
    start = head.text.lstrip()[:4096]
    return start.startswith("{") and '"perfci_version"' in start and '"profiles"' in start


PERFCI_JSON = Detector(
    name="perfci_json",
    description="perfci's own JSON document (perfci parse --json)",
    sniff=_perfci_json,
)
