"""What git says about a workspace: the work tree's top, where its index and exclude file are, what
it lists (tracked and untracked files that no rule ignores) and which paths its rules ignore.

The root a scanner looks at may be the top of a work tree, a directory below it, or a linked
worktree or submodule, whose ``.git`` is a file naming the real git directory; the index is that
directory's, the exclude file the common directory's (``commondir``: a linked worktree shares its
main repository's ``info/exclude``). A root that is not in a git repository gets a small built-in
ignore list (``DEFAULT_IGNORES``). Every call to git is one line of failure handling: no git, a
broken repository or a timeout answer None, never an exception.

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


def run_git(root, args, stdin=None):
    """git's stdout for ``git -C root ARGS`` (exit 0 or 1), or None when it failed."""
    import subprocess  # here: a helper call that needs no git does not pay for importing it

    try:
        proc = subprocess.Popen(
            ["git", "-C", root] + list(args),
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
    """The git directory of the work tree at ``top`` and its common directory (where ``info/exclude``
    is): ``top/.git`` for both, unless ``.git`` is a file ("gitdir: PATH", a linked worktree or a
    submodule). (None, None) when it cannot be read."""
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
    """What git's listing depends on besides the ignore files inside the root: the index, the exclude
    file, and the ``.gitignore`` of every directory from the top of the work tree down to the root's
    parent (their rules apply under the root too)."""
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
    """Stat data of ``paths`` (a missing one too: its creation changes the key)."""
    parts = []
    for p in paths:
        try:
            st = os.stat(p)
            parts.append((p, st.st_mtime_ns, st.st_ctime_ns, st.st_size, st.st_ino))
        except OSError:
            parts.append((p, None))
    return tuple(parts)


def list_included(root, excluded=()):
    """``git ls-files`` of everything not ignored under ``root``, tracked or not (NUL-separated, paths
    relative to the root), leaving out the directories ``excluded`` (relative); None when git failed."""
    args = ["ls-files", "-z", "--cached", "--others", "--exclude-standard"]
    if excluded:
        args += ["--", "."] + [":(exclude,literal)" + e for e in excluded]
    return run_git(root, args)


def list_tracked(root):
    return run_git(root, ["ls-files", "-z", "--cached"])


def list_tracked_ignored(root):
    """Tracked files that the ignore rules match (included only because git tracks them)."""
    return run_git(root, ["ls-files", "-z", "--cached", "--ignored", "--exclude-standard"])


def check_ignored(root, rel_paths):
    """Which of ``rel_paths`` (a directory's with a trailing "/") git's rules ignore, whether tracked or not."""
    out = run_git(
        root,
        ["check-ignore", "--no-index", "-z", "--stdin"],
        stdin=b"\0".join(os.fsencode(r) for r in rel_paths) + b"\0",
    )
    if out is None:
        return set()
    return {os.fsdecode(p) for p in out.split(b"\0") if p}


def default_ignored(rel):
    """Whether the built-in list ignores ``rel`` (a root outside git)."""
    import fnmatch  # here: it imports re, which only a root outside git needs

    name = os.path.basename(rel.rstrip("/"))
    return any(fnmatch.fnmatchcase(name, pat) for pat in DEFAULT_IGNORES)
