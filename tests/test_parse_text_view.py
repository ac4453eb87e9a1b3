"""``perfci parse``'s text view of a PyTorch table printed with its Self columns only: the self
times must show, not blank total columns.

torch itself always prints the total columns; self-only tables are real tables with the total
columns cut out (as people paste them), made here from a corpus table and from a table torch
prints in the test.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from perfci.cli._console import console
from perfci.cli.main import main
from perfci.core.model import Device, MetricKind
from perfci.core.units import format_ns
from perfci.formats import registry

TOTALS = ("CPU total %", "CPU total", "CPU time avg", "CUDA total", "CUDA time avg")
MEMORY = ("CPU Mem", "Self CPU Mem", "CUDA Mem", "Self CUDA Mem")


def drop_columns(text: str, headers: tuple[str, ...]) -> str:
    """``text`` with the named columns cut out of every table in it (by the separator's spans)."""
    lines = text.splitlines()
    out: list[str] = []
    spans: list[tuple[int, int]] = []
    keep: list[int] = []
    for index, line in enumerate(lines):
        if line.startswith("---") and index + 1 < len(lines) and "Name  " in lines[index + 1]:
            spans = [(m.start(), m.end()) for m in re.finditer(r"-+", line)]
            names = re.split(r" {2,}", lines[index + 1].strip())
            keep = [i for i, name in enumerate(names) if name not in headers]
        if spans and (line.startswith(("---", " ")) or line[:1].isalnum()) and "  " in line:
            padded = line.ljust(spans[-1][1] + 2)
            if not padded.startswith(("Self ", "Top ", "Torch ")):
                line = "".join(padded[spans[i][0] : spans[i][1] + 2] for i in keep)
        out.append(line)
    return "\n".join(out) + "\n"


def _view(path: Path, capsys: pytest.CaptureFixture[str]) -> str:
    # Wide enough that no name folds onto a second line, whatever width the console took
    # when it was imported (a terminal, COLUMNS, or the log width).
    width = console.width
    console.width = 250
    try:
        assert main(["parse", "--top", "50", str(path)]) == 0
    finally:
        console.width = width
    return capsys.readouterr().out


def _rows(out: str) -> dict[tuple[str, str], list[str]]:
    """(name, device) → the cells after them, of every row of the view."""
    rows = {}
    for line in out.splitlines():
        match = re.match(r"^ (\S.*?)\s{2,}(cpu|gpu)\s+(.*)$", line)
        if match:
            rows[(match.group(1), match.group(2))] = match.group(3).split()
    return rows


def test_self_only_table_shows_self_times(
    corpus_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    source = corpus_dir / "pytorch_table" / "duoan_playground-cuda__blog_torch_profile.txt"
    path = tmp_path / "self_only.txt"
    path.write_text(drop_columns(source.read_text(), TOTALS + MEMORY))
    first = registry.parse_file(path)[0]
    assert first.metadata["columns"] == [
        "Name",
        "Self CPU %",
        "Self CPU",
        "Self CUDA",
        "Self CUDA %",
        "# of Calls",
    ]
    mul = first.find(MetricKind.OP, "aten::mul", device=Device.GPU)
    assert mul is not None and (mul.self_ns, mul.total_ns) == (1_459_000.0, None)
    out = _view(path, capsys)
    assert " self " in out and " total " not in out
    rows = _rows(out)
    # aten::mul: Self CPU 6.752ms, Self CUDA 1.459ms, 1152 calls
    assert rows[("aten::mul", "cpu")] == ["1,152", *format_ns(6_752_000).split()]
    assert rows[("aten::mul", "gpu")] == ["1,152", *format_ns(1_459_000).split()]
    # cudaLaunchKernel: Self CPU 22.039ms, no device time
    assert rows[("cudaLaunchKernel", "cpu")] == ["3,264", *format_ns(22_039_000).split()]
    assert ("cudaLaunchKernel", "gpu") not in rows


@pytest.mark.torch
def test_self_only_table_made_by_torch_shows_self_times(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    torch = pytest.importorskip("torch")
    from torch.profiler import ProfilerActivity, profile

    layer = torch.nn.Linear(64, 64)
    with profile(activities=[ProfilerActivity.CPU]) as prof:
        for _ in range(3):
            layer(torch.randn(128, 64)).sum().backward()
    # Names whole (torch cuts them at 55 characters by default): which operators reach the top
    # 8 depends on the machine's load, and an autograd node's cut name matches no event key.
    table = prof.key_averages().table(
        sort_by="self_cpu_time_total", row_limit=8, max_name_column_width=120
    )
    path = tmp_path / "self_only.txt"
    path.write_text(drop_columns(table, TOTALS))
    [profile_] = registry.parse_file(path)
    assert profile_.metadata["columns"] == ["Name", "Self CPU %", "Self CPU", "# of Calls"]
    averages = {event.key: event for event in prof.key_averages()}
    rows = _rows(_view(path, capsys))
    assert len(rows) == 8
    for metric in profile_.metrics:
        assert metric.total_ns is None and metric.self_ns is not None
        event = averages[metric.name]
        # the table's Self CPU (3 decimals in its unit) is what the view shows
        assert abs(metric.self_ns - event.self_cpu_time_total * 1000) <= 0.0005 * 1e6
        assert rows[(metric.name, "cpu")] == [
            f"{event.count:,}",
            *format_ns(metric.self_ns).split(),
        ]
