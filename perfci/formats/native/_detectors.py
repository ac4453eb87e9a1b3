"""perfci's own document: its name and sniff, without its reader (see ``formats.protocol``)."""

from __future__ import annotations

from perfci.formats.protocol import Head, detector


def _perfci_json(head: Head) -> bool:
    start = head.text.lstrip()[:4096]
    return start.startswith("{") and '"perfci_version"' in start and '"profiles"' in start


PERFCI_JSON = detector(_perfci_json, "perfci's own JSON document (perfci parse --json)")
