"""History kept in the repository itself: run documents on a data branch of ``origin``.

On ephemeral CI runners (GitHub-hosted, autoscaled) the embedded SQLite store is gone when the
job ends. With ``history = "git:perfci-data"`` every base-branch run is appended to that branch as
one compressed run document (``runs/<benchmark>/<commit-time>-<key>.json.gz``), and every job
reads the branch back into its embedded store before it compares; see
:mod:`perfci.usecases.history.branch` for when each happens and :mod:`perfci.history.git_branch` for
the git side (a private bare repository in perfci's cache folder, outside the checkout, with no
hook and no repository-controlled config: the user's checkout, index and branches are never
touched; and only a branch perfci made is ever read or written).
"""

from perfci.history._files import BranchFile
from perfci.history._git import cache_root
from perfci.history.documents import HistoryRun, decode_run, encode_run, run_path
from perfci.history.git_branch import AppendResult, GitBranch
from perfci.history.setting import parse_history

__all__ = [
    "AppendResult",
    "BranchFile",
    "GitBranch",
    "HistoryRun",
    "cache_root",
    "decode_run",
    "encode_run",
    "parse_history",
    "run_path",
]
