"""git, run so that nothing a repository holds can run code or redirect it (issue 31).

The history branch is read and written with a token in git's environment, so every git
process perfci starts for it:

- runs no hook (``core.hooksPath=/dev/null``) and no file-system monitor
  (``core.fsmonitor=false``);
- reads no system or global config (``GIT_CONFIG_NOSYSTEM=1``, ``GIT_CONFIG_GLOBAL=/dev/null``)
  and no config passed down in the environment: the runner's ``~/.gitconfig`` is writable by an
  earlier job's benchmark on a persistent runner;
- works on a bare repository perfci created itself, outside the work tree (:func:`cache_root`):
  a pull request that commits ``.perfci/history/perfci-data.git/`` with a hook in it brings
  nothing perfci uses. The repository is checked each time it is opened (:func:`open_cache`):
  a real folder of this user holding only what ``git init --bare`` and fetches make, and
  ``config`` is rewritten with perfci's own every time, so no ``include``, ``includeIf``,
  ``core.sshCommand`` or other setting put there is ever read. Anything else and the folder
  is removed and made again (it is a cache: the next fetch fills it).
"""

from __future__ import annotations

import hashlib
import os
import shutil
import stat
import subprocess
import tempfile
from collections.abc import Mapping, Sequence
from pathlib import Path

from perfci.core.errors import StorageError

LOCAL_TIMEOUT_S = 120
#: ``-c`` settings of every git command: no hook, no file-system monitor, no pager.
SAFE_FLAGS = ("-c", "core.hooksPath=/dev/null", "-c", "core.fsmonitor=false")
#: The whole ``config`` of a cache repository, written by perfci each time it is opened.
CONFIG = "[core]\n\trepositoryformatversion = 0\n\tfilemode = true\n\tbare = true\n"
#: What a bare repository that perfci made and fetched into may hold at its top.
_EXPECTED = frozenset(
    {
        "HEAD",
        "config",
        "description",
        "objects",
        "refs",
        "packed-refs",
        "FETCH_HEAD",
        "ORIG_HEAD",
        "info",
        "hooks",
        "branches",
        "logs",
        "shallow",
        "gc.pid",
        "gc.log",
    }
)
#: Variables that would point git at another repository, index, object store or config.
_DROPPED = (
    "GIT_DIR",
    "GIT_WORK_TREE",
    "GIT_INDEX_FILE",
    "GIT_OBJECT_DIRECTORY",
    "GIT_ALTERNATE_OBJECT_DIRECTORIES",
    "GIT_COMMON_DIR",
    "GIT_CONFIG",
    "GIT_CONFIG_PARAMETERS",
    "GIT_CONFIG_COUNT",
    "GIT_CONFIG_SYSTEM",
    "GIT_EXEC_PATH",
    "GIT_TEMPLATE_DIR",
    "GIT_SSH",
    "GIT_SSH_COMMAND",
    "GIT_ASKPASS",
    "GIT_PROXY_COMMAND",
)


def git_env(config: Sequence[tuple[str, str]] = ()) -> dict[str, str]:
    """The environment of a history git process: ``config`` the only config it gets besides
    the repository's own (module docstring), handed in ``GIT_CONFIG_*`` variables (never on
    a command line, which ``ps`` shows)."""
    env = {
        k: v
        for k, v in os.environ.items()
        if k not in _DROPPED and not k.startswith(("GIT_CONFIG_KEY_", "GIT_CONFIG_VALUE_"))
    }
    env["GIT_TERMINAL_PROMPT"] = "0"  # fail, never wait for a password on a CI runner
    env["GIT_CONFIG_NOSYSTEM"] = "1"
    env["GIT_CONFIG_GLOBAL"] = os.devnull
    for index, (key, value) in enumerate(config):
        env[f"GIT_CONFIG_KEY_{index}"] = key
        env[f"GIT_CONFIG_VALUE_{index}"] = value
    env["GIT_CONFIG_COUNT"] = str(len(config))
    return env


def read_checkout(checkout: Path, *args: str) -> subprocess.CompletedProcess[bytes]:
    """A read-only git command in the user's checkout (its remote URL, a persisted header).

    ``safe.directory`` names the checkout on the command line (protected config): the global
    config, where ``actions/checkout`` puts it in containers, is not read.
    """
    try:
        return subprocess.run(
            ["git", *SAFE_FLAGS, "-c", f"safe.directory={checkout}", "-C", str(checkout), *args],
            capture_output=True,
            timeout=LOCAL_TIMEOUT_S,
            check=False,
            env=git_env(),
        )
    except FileNotFoundError:
        raise StorageError("git is not installed: the history branch needs it") from None


def cache_root(env: Mapping[str, str] | None = None) -> Path:
    """Where perfci keeps its history repositories: the user's cache folder
    (``$XDG_CACHE_HOME/perfci/history``, ``~/.cache/perfci/history``), never the checkout."""
    env = os.environ if env is None else env
    base = env.get("XDG_CACHE_HOME") or (
        str(Path(env["HOME"]) / ".cache") if env.get("HOME") else None
    )
    if base and Path(base).is_absolute():
        return Path(base) / "perfci" / "history"
    return Path(tempfile.gettempdir()) / f"perfci-{_uid()}" / "history"


def cache_name(branch_dir: str, url: str) -> str:
    """The cache repository's folder name: the branch and a digest of the remote's URL, so
    that two repositories on one runner never share one."""
    return f"{branch_dir}-{hashlib.sha256(url.encode()).hexdigest()[:12]}.git"


def open_cache(repo: Path, *, checkout: Path) -> None:
    """Make ``repo`` a bare repository perfci made itself, holding nothing else (module doc).

    Raises
    ------
    StorageError
        ``repo`` lies inside the checkout, or cannot be made.
    """
    inside = _inside(repo, checkout)
    if inside:
        raise StorageError(
            f"the history cache {repo} lies inside the checkout {checkout}: perfci keeps it "
            "in its own cache folder, out of reach of what a pull request commits"
        )
    if not _trusted(repo):
        shutil.rmtree(repo, ignore_errors=True)
        if repo.is_symlink() or repo.exists():
            repo.unlink()
    if not repo.exists():
        repo.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
        _init_atomically(repo)
    (repo / "config").write_text(CONFIG, encoding="utf-8")


def _inside(path: Path, folder: Path) -> bool:
    try:
        return path.resolve().is_relative_to(folder.resolve())
    except OSError:
        return False


def _trusted(repo: Path) -> bool:
    """A real folder of this user whose top holds only what git itself makes there."""
    try:
        info = repo.lstat()
    except FileNotFoundError:
        return True  # nothing there yet: made below
    if not stat.S_ISDIR(info.st_mode) or info.st_uid != _uid():
        return False
    names = {entry.name for entry in repo.iterdir()}
    if not names <= _EXPECTED or not {"HEAD", "objects", "refs"} <= names:
        return False
    hooks = repo / "hooks"
    return not hooks.exists() or (hooks.is_dir() and not any(hooks.iterdir()))


def _uid() -> int:
    """This process's user id (0 where the platform has none: every folder is its own)."""
    getuid = getattr(os, "getuid", None)
    return int(getuid()) if getuid is not None else 0


def _init_atomically(repo: Path) -> None:
    """Make the cache in a private folder beside it and rename it into place, so that a
    second job on the runner never sees (and never removes as untrusted) a half-made one."""
    staging = Path(tempfile.mkdtemp(dir=repo.parent, prefix=f".{repo.name}."))
    try:
        _init(staging)
        try:
            staging.rename(repo)
        except OSError:
            if not _trusted(repo):  # not another job's finished cache: something else
                raise StorageError(f"could not make the history cache {repo}") from None
    finally:
        shutil.rmtree(staging, ignore_errors=True)


def _init(repo: Path) -> None:
    # No template: no sample hooks, no description, nothing from a template folder.
    done = subprocess.run(
        ["git", *SAFE_FLAGS, "init", "--bare", "--quiet", "--template=", str(repo)],
        capture_output=True,
        timeout=LOCAL_TIMEOUT_S,
        check=False,
        env=git_env(),
    )
    if done.returncode != 0:
        reason = done.stderr.decode(errors="replace").strip() or "no message"
        raise StorageError(f"could not make the history cache {repo}: {reason}")
