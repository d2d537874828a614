"""What the ledger builds with the system's C compiler at first use, into a private per-user cache: the hook
client and command wrapper (hooks/compiled.py) and masking's needle search (needles.py). Each is used wherever it
can be and never needed for correctness: the Python code it stands for serves where it cannot (no compiler, a
build that fails, a cache directory others could write).

The cache is ``$LEDGER_HOOK_CACHE``, else ``$XDG_CACHE_HOME/ledger-runtime``, else ``~/.cache/ledger-runtime``;
it and every directory above it must be this user's or root's, and none but a sticky one (/tmp) writable by
others. ``$CC`` names the compiler (else ``cc``, ``gcc``, ``clang`` on PATH). A build that failed is not tried
again for an hour (its ``.failed`` file says why).
"""

from __future__ import annotations

import hashlib
import os
import shlex
import shutil
import stat
import subprocess
import tempfile
import time
from pathlib import Path
from typing import Callable, Mapping

from ledger_runtime.ledger.private import DIR_MODE, private_parents, write_private

COMPILERS = ("cc", "gcc", "clang")
RETRY_FAILED_AFTER_S = 3600.0
CACHE_ENV = "LEDGER_HOOK_CACHE"
BUILD_TIMEOUT_S = 120.0


def build_key(name: bytes, source: bytes, flags: tuple[str, ...], machine: str) -> str:
    """The digest of what a build is made of (``name``: which helper, and its version): its name in the cache, and
    what the build says it is."""
    h = hashlib.sha256()
    for part in (name, machine.encode(), "\0".join(flags).encode(), source):
        h.update(len(part).to_bytes(8, "big") + part)
    return h.hexdigest()[:24]


def ours(path: Path) -> bool:
    """Whether the file at ``path`` (not followed if a link) is a regular file of this user's, written by no other."""
    try:
        st = os.lstat(path)
    except OSError:
        return False
    return stat.S_ISREG(st.st_mode) and st.st_uid == os.geteuid() and not st.st_mode & 0o022


def cache_dir(environ: Mapping[str, str]) -> Path:
    """Where builds are kept: ``$LEDGER_HOOK_CACHE``, else ``$XDG_CACHE_HOME/ledger-runtime``, else
    ``~/.cache/ledger-runtime`` (a relative path in either variable is ignored, as XDG says)."""
    given = environ.get(CACHE_ENV, "")
    if os.path.isabs(given):
        return Path(given)
    xdg = environ.get("XDG_CACHE_HOME", "")
    base = Path(xdg) if os.path.isabs(xdg) else Path(environ.get("HOME") or os.path.expanduser("~")) / ".cache"
    return base / "ledger-runtime"


def unsafe(st: os.stat_result, uid: int, *, own: bool) -> str | None:
    """Why a directory with this status could be changed by someone else (None: it cannot). ``own``: the
    cache directory itself (this user's, nobody else's to enter); else one above it (this user's or root's,
    written by no other unless sticky)."""
    if not stat.S_ISDIR(st.st_mode):
        return "not a directory"
    if own:
        if st.st_uid != uid:
            return f"it belongs to uid {st.st_uid}"
        return "others may enter it" if st.st_mode & 0o077 else None
    if st.st_uid not in (uid, 0):
        return f"it belongs to uid {st.st_uid}"
    if st.st_mode & 0o022 and not st.st_mode & stat.S_ISVTX:
        return "others may write it"
    return None


def private_cache(path: Path) -> tuple[Path | None, str]:
    """The cache directory made (0700) and checked, as a path without links; (None, why) when it is not
    this user's alone, nor anything above it safe from other users."""
    uid = os.geteuid()
    try:
        private_parents(path)  # XDG: a missing cache home is made 0700 (by the umask, it could be 0777)
        path.mkdir(mode=DIR_MODE, exist_ok=True)
        real = Path(os.path.realpath(path))
        st = os.lstat(real)
        if stat.S_ISDIR(st.st_mode) and st.st_uid == uid and st.st_mode & 0o077:
            os.chmod(real, 0o700)
            st = os.lstat(real)
        why = unsafe(st, uid, own=True)
        if why:
            return None, f"the cache {real}: {why}"
        for above in real.parents:
            why = unsafe(os.lstat(above), uid, own=False)
            if why:
                return None, f"the cache {real}: {above}: {why}"
    except OSError as e:
        return None, f"no cache directory at {path}: {e.strerror or e}"
    return real, ""


def find_compiler(environ: Mapping[str, str]) -> list[str] | None:
    """The C compiler's command: ``$CC`` (split as a shell would), else the first of COMPILERS on PATH."""
    given = environ.get("CC", "").strip()
    if given:
        try:
            argv = shlex.split(given)
        except ValueError:
            return None
        found = shutil.which(argv[0], path=environ.get("PATH")) if argv else None
        return [found, *argv[1:]] if found else None
    for name in COMPILERS:
        found = shutil.which(name, path=environ.get("PATH"))
        if found:
            return [found]
    return None


def failed_recently(marker: Path) -> str | None:
    try:
        if time.time() - os.lstat(marker).st_mtime < RETRY_FAILED_AFTER_S:
            return marker.read_text(errors="replace").strip()[:400] or "a build failed"
    except OSError:
        pass
    return None


def note_failure(marker: Path, why: str) -> None:
    try:
        write_private(marker, why + "\n")
    except OSError:
        pass


def build(
    directory: Path, name: str, source: tuple[str, bytes], compile_argv: list[str], works: Callable[[Path], str | None]
) -> str | None:
    """Compile ``source`` (its file name and text) with ``compile_argv`` (the compiler and its flags) into
    ``directory/name``: made in a private directory of its own, renamed into place once ``works`` finds nothing
    wrong with it (it says what is); why not, or None once it is there."""
    try:
        work = Path(tempfile.mkdtemp(prefix=".build-", dir=directory))
    except OSError as e:  # a cache on a full or read-only disk: the Python code serves
        return f"no room to build in {directory}: {e.strerror or e}"
    try:
        (work / source[0]).write_bytes(source[1])
        out = work / name
        argv = [*compile_argv, "-o", str(out), str(work / source[0])]
        try:
            p = subprocess.run(argv, capture_output=True, timeout=BUILD_TIMEOUT_S, stdin=subprocess.DEVNULL, cwd=work)
        except (OSError, subprocess.SubprocessError) as e:
            return f"{compile_argv[0]} did not run: {e}"
        if p.returncode != 0:
            said = [ln for ln in p.stderr.decode(errors="replace").splitlines() if ln.strip()]
            return f"{compile_argv[0]} failed (exit {p.returncode}): {said[-1][:300] if said else 'no message'}"
        os.chmod(out, 0o700)
        wrong = works(out)
        if wrong:
            return wrong
        os.replace(out, directory / name)
        return None
    except OSError as e:
        return f"the build could not be kept: {e}"
    finally:
        shutil.rmtree(work, ignore_errors=True)
