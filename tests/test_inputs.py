"""A folder given to ``perfci parse`` / ``perfci ingest`` reads every profile file in it (issue 15).

Real CLI calls (``perfci.cli.main.main``) on folders of perfci JSON documents written by
perfci itself, a README and a hidden file beside them; the store is a real SQLite file.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from sqlalchemy import select
from sqlalchemy.orm import Session

from perfci.cli.main import main
from perfci.core.jsondoc import to_document
from perfci.core.model import Metric, MetricKind, Profile
from perfci.store.engines import make_engine
from perfci.store.schema import ProfileRow
from perfci.usecases.submit.inputs import expand_inputs


def _repeat(path: Path, step_ns: float) -> Path:
    profile = Profile(
        label="train",
        format="perfci_json",
        source=path.name,
        metrics=[
            Metric(MetricKind.STEP, "step", samples_ns=[step_ns, step_ns]),
            Metric(MetricKind.KERNEL, "gemm", calls=2, total_ns=step_ns),
        ],
        steps=2,
    )
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(to_document([profile])))
    return path


def _folder(root: Path) -> Path:
    folder = root / "profiles"
    for n in (10, 2, 1):  # written out of order: the natural order is 1, 2, 10
        _repeat(folder / f"rep{n}.json", 1e6 * n)
    (folder / "README.md").write_text("# profiles of the nightly job\n")
    (folder / ".perfci-cache").write_text("not looked at")
    return folder


def test_a_folder_expands_to_its_profile_files_in_natural_order(tmp_path: Path) -> None:
    folder = _folder(tmp_path)
    _repeat(folder / "more" / "rep3.json", 3e6)  # subfolders too
    found = expand_inputs([folder])
    assert [p.relative_to(folder).as_posix() for p in found.files] == [
        "more/rep3.json",
        "rep1.json",
        "rep2.json",
        "rep10.json",
    ]
    assert [p.name for p in found.skipped] == ["README.md"]


def test_perfci_parse_reads_a_folder_and_names_what_it_skipped(
    tmp_path: Path, outside_git: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    folder = _folder(tmp_path)
    assert main(["parse", str(folder), "--json"]) == 0
    captured = capsys.readouterr()
    document = json.loads(captured.out)
    sources = [p["source"] for p in document["profiles"]]
    assert [Path(s).name for s in sources] == ["rep1.json", "rep2.json", "rep10.json"]
    assert "skipped 1 file that no parser recognises or that hold" in captured.err
    assert "README.md" in captured.err


def test_perfci_ingest_stores_a_folder_as_one_repeat_per_file(
    tmp_path: Path, outside_git: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    folder = _folder(tmp_path)
    url = f"sqlite:///{tmp_path / 'store.db'}"
    args = ["ingest", str(folder), "--benchmark", "nightly", "--project", "acme/x"]
    assert main([*args, "--database-url", url, "--branch", "main", "--commit", "a" * 40]) == 0
    engine = make_engine(url)
    try:
        with Session(engine) as session:
            rows = session.execute(
                select(ProfileRow.repeat, ProfileRow.source).order_by(ProfileRow.repeat)
            ).all()
    finally:
        engine.dispose()
    assert [(r, Path(s).name) for r, s in rows] == [
        (0, "rep1.json"),
        (1, "rep2.json"),
        (2, "rep10.json"),
    ]


def test_a_folder_without_profiles_is_refused_before_the_store_is_opened(
    tmp_path: Path, outside_git: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    folder = tmp_path / "empty"
    folder.mkdir()
    (folder / "notes.txt").write_text("nothing a profiler would print\n")
    url = f"sqlite:///{tmp_path / 'store.db'}"
    code = main(["ingest", str(folder), "--benchmark", "b", "--database-url", url])
    assert code != 0
    err = capsys.readouterr().err
    assert "no profile files in this folder (1 files no parser recognises)" in err
    assert not (tmp_path / "store.db").exists()
    assert os.listdir(folder) == ["notes.txt"]


def test_links_lead_nowhere_out_of_the_folder_and_never_round_in_a_loop(
    tmp_path: Path, outside_git: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Issue 31: a loop of links was followed about 40 levels deep, every profile read again
    at each; a link out of the folder was opened. Now each file is read once, links out of the
    folder, dangling or looping are named and never opened."""
    folder = _folder(tmp_path)
    secret = tmp_path / "secret.json"
    secret.write_text('{"password": "TOP-S3CR3T"}\n')
    (folder / "loop").symlink_to("..")  # the folder itself, from inside
    (folder / "deeper").mkdir()
    (folder / "deeper" / "up").symlink_to("../..")  # the folder's parent
    (folder / "outside.json").symlink_to(secret)
    (folder / "dangling.json").symlink_to(tmp_path / "gone.json")
    (folder / "same").symlink_to("deeper")  # a second way to a folder read already
    (folder / "rep4.json").symlink_to(folder / "rep10.json")  # inside: rep10 is read once
    (folder / "a-link").symlink_to("deeper")  # inside, to a folder not read yet: followed
    _repeat(folder / "deeper" / "rep3.json", 3e6)
    found = expand_inputs([folder])
    # `deeper` is read through `a-link`, which comes first; each file once.
    assert [p.relative_to(folder).as_posix() for p in found.files] == [
        "a-link/rep3.json",
        "rep1.json",
        "rep2.json",
        "rep10.json",
    ]
    assert sorted(p.name for p in found.refused) == [
        "dangling.json",
        "loop",
        "outside.json",
        "rep4.json",  # rep10.json read already
        "same",
        "up",
    ]
    assert main(["parse", str(folder), "--json"]) == 0
    captured = capsys.readouterr()
    assert len(json.loads(captured.out)["profiles"]) == 4
    assert "outside.json" in captured.err and "loop" in captured.err
    assert "TOP-S3CR3T" not in captured.out + captured.err


def test_a_folder_of_links_out_of_it_quotes_nothing(
    tmp_path: Path, outside_git: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    folder = tmp_path / "profiles"
    folder.mkdir()
    secret = tmp_path / "id_rsa"
    secret.write_text("-----BEGIN OPENSSH PRIVATE KEY----- TOP-S3CR3T\n")
    (folder / "trace.json").symlink_to(secret)
    assert main(["parse", str(folder), "--format", "chrome_trace"]) == 2
    err = capsys.readouterr().err
    assert "1 links not followed" in err and "TOP-S3CR3T" not in err and "BEGIN" not in err
