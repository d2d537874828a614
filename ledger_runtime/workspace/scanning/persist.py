"""The scanner's state as plain data that ``marshal`` writes, and back, for the one-process-per-call container helper.

So each call lists and hashes only what changed since the last.

Python 3.6+, standard library only (the package docstring says why).
"""

from .bounds import Untracked
from .engine import _make_dir
from .filemap import FileMap
from .filestate import FileState

FORMAT = 1  # a state of another format is not read: the next call starts afresh


def export(scanner):
    """All a later ``restore`` needs to scan on from here; no watcher, as inotify watches end with the process."""
    files = scanner._files
    return {
        "format": FORMAT,
        "root": scanner.root,
        "git_top": scanner.git_top,
        "nonce": scanner._nonce,
        "serial": scanner._serial,
        "dirs": {d: (e.key, e.listed_at, e.files, e.dirs, e.ignored, e.frozen) for d, e in scanner._dirs.items()},
        "git_key": scanner._git_key,
        "ignore_files": scanner._ignore_files,
        "files": None if files is None else {p: tuple(fs) for p, fs in files.items()},
        "cache": {p: (k, t, tuple(fs)) for p, (k, t, fs) in scanner.cache.entries.items()},
        "extra": scanner.extra_paths,
        "untracked": {p: tuple(u) for p, u in scanner.untracked.items()},
        "marked": scanner._marked,
        "recheck": scanner._recheck,
    }


def restore(scanner, data):
    """Puts an exported state back into ``scanner`` for the same root; False, changing nothing, if it is not one."""
    if not isinstance(data, dict) or data.get("format") != FORMAT or data.get("root") != scanner.root:
        return False
    make = FileState._make
    scanner.git_top = data["git_top"]
    scanner._git_watched = None
    scanner._nonce = data["nonce"]
    scanner._serial = data["serial"]
    scanner._dirs = {d: _make_dir(d, *e) for d, e in data["dirs"].items()}
    scanner._git_key = data["git_key"]
    scanner._ignore_files = set(data["ignore_files"])
    files = data["files"]
    scanner._files = None if files is None else FileMap({p: make(fs) for p, fs in files.items()})
    scanner.cache.entries = {p: (k, t, make(fs)) for p, (k, t, fs) in data["cache"].items()}
    scanner.extra_paths = set(data["extra"])
    scanner.untracked = {p: Untracked(*u) for p, u in data["untracked"].items()}
    scanner._marked = set(data["marked"])
    scanner._recheck = set(data["recheck"])
    return True
