"""What git says about a workspace: the work tree's top, its index and exclude file, its listing, its ignore rules.

In a linked worktree or submodule ``.git`` is a file naming the git directory, whose index is used; the exclude file is
the common directory's, shared with the main repository. A root outside git gets ``DEFAULT_IGNORES``. No git, a broken
repository or a timeout answer None, never an exception.

Python 3.6+, standard library only (the package docstring says why).
"""

import os

DEFAULT_IGNORES = (
    ".git",
    "__pycache__",
    "*.pyc",
    ".pytest_cache",
    ".mypy_cache",
    ".ruff_cache",
    ".tox",
    ".venv",
    "venv",
    "node_modules",
    ".eggs",
    "*.egg-info",
)
GIT_TIMEOUT = 60
# git as the ledger runs it: never the program a repository's config names as its file system monitor, which
# would be the repository's code run by the ledger (before the agent's folder trust, and at scans), its answer
# trusted for what changed, and as slow as it likes
GIT = ["git", "-c", "core.fsmonitor=false"]


def run_git(root, args, stdin=None):
    """git's stdout for ``git -C root ARGS`` when it exits 0 or 1, else None."""
    import subprocess  # here: a helper call that needs no git does not pay for importing it

    try:
        proc = subprocess.Popen(
            GIT + ["-C", root] + list(args),
            stdin=subprocess.PIPE if stdin is not None else subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
        )
    except OSError:
        return None
    try:
        out, _ = proc.communicate(stdin, timeout=GIT_TIMEOUT)
    except (OSError, subprocess.SubprocessError):
        proc.kill()
        proc.wait()
        return None
    return out if proc.returncode in (0, 1) else None


def git_toplevel(root):
    """The top of the git work tree containing ``root``, or None."""
    out = run_git(root, ["rev-parse", "--show-toplevel"])
    if not out:
        return None
    top = os.fsdecode(out.strip())
    return top or None


def git_dirs(top):
    """The git directory of the work tree at ``top`` and its common directory, where ``info/exclude`` is.

    Both are ``top/.git`` unless ``.git`` is a file ("gitdir: PATH") for a linked worktree or a submodule. (None, None)
    when it cannot be read."""
    g = os.path.join(top, ".git")
    if os.path.isfile(g):
        line = _read_line(g)
        if line is None or not line.startswith("gitdir:"):
            return None, None
        g = os.path.normpath(os.path.join(top, line[7:].strip()))
    common = g
    rel = _read_line(os.path.join(g, "commondir"))
    if rel:
        common = os.path.normpath(os.path.join(g, rel))
    return g, common


def _read_line(path):
    try:
        with open(path, encoding="utf-8", errors="surrogateescape") as f:
            return f.read().strip()
    except OSError:
        return None


def watched_files(root, top):
    """What git's listing depends on besides the root's ignore files: the index, exclude file, ``.gitignore`` above."""
    git_dir, common = git_dirs(top)
    if git_dir is None:
        return []
    out = [os.path.join(git_dir, "index"), os.path.join(common, "info", "exclude")]
    d = os.path.dirname(root)
    above = []
    while root != top and d.startswith(top) and len(d) >= len(top):
        above.append(os.path.join(d, ".gitignore"))
        if d == top:
            break
        d = os.path.dirname(d)
    return out + above[::-1]


def state_key(paths):
    """Stat data of ``paths``, a missing one included, so that its creation changes the key."""
    parts = []
    for p in paths:
        try:
            st = os.stat(p)
            parts.append((p, st.st_mtime_ns, st.st_ctime_ns, st.st_size, st.st_ino))
        except OSError:
            parts.append((p, None))
    return tuple(parts)


def list_included(root, excluded=()):
    """NUL-separated ``git ls-files`` of all not ignored under ``root``, less ``excluded``; None when git failed."""
    args = ["ls-files", "-z", "--cached", "--others", "--exclude-standard"]
    if excluded:
        args += ["--", "."] + [":(exclude,literal)" + e for e in excluded]
    return run_git(root, args)


def list_tracked(root):
    return run_git(root, ["ls-files", "-z", "--cached"])


def list_tracked_ignored(root):
    """Tracked files that the ignore rules match, included only because git tracks them."""
    return run_git(root, ["ls-files", "-z", "--cached", "--ignored", "--exclude-standard"])


def check_ignored(root, rel_paths):
    """Which of ``rel_paths``, a directory's ending in "/", git's rules ignore, tracked or not."""
    out = run_git(
        root,
        ["check-ignore", "--no-index", "-z", "--stdin"],
        stdin=b"\0".join(os.fsencode(r) for r in rel_paths) + b"\0",
    )
    if out is None:
        return set()
    return {os.fsdecode(p) for p in out.split(b"\0") if p}


def default_ignored(rel):
    """Whether the built-in list ignores ``rel``, for a root outside git."""
    import fnmatch  # here: it imports re, which only a root outside git needs

    name = os.path.basename(rel.rstrip("/"))
    return any(fnmatch.fnmatchcase(name, pat) for pat in DEFAULT_IGNORES)
