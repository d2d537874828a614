"""Which of a few short texts occur in an output: masking asks it of every output before it runs a pattern (one whose
literal opening is absent cannot match), and of its lower case for the words that name a secret.

Python's ``in`` answers it one pass a needle (27 passes over a 2,000-line file: 1.2 ms); ``needles.c`` answers it in
one pass (0.1 ms), where it can be built (native.py: at a run's start, into the private cache) and loaded. The answer
is the same either way; ``LEDGER_NATIVE=python`` keeps to Python's. A text under ``NATIVE_MIN_CHARS`` is always
searched in Python, whose passes over it cost less than a call into C.
"""

from __future__ import annotations

import os
import threading
from pathlib import Path
from typing import Any, Mapping, Sequence

SOURCE = Path(__file__).with_name("needles.c")
FLAGS = ("-O2", "-shared", "-fPIC")
MODE_ENV = "LEDGER_NATIVE"  # "python": Python's search serves
NOT_BUILT = "not built yet"
NATIVE_MIN_CHARS = 512
MAX_NEEDLES = 250  # needles.c's


def library_key(source: bytes, machine: str) -> str:
    """The digest of what a build is made of: its name in the cache, and what the library says it is."""
    from ledger_runtime.ledger.native import build_key

    return build_key(b"ledger-needles 1", source, FLAGS, machine)


class _Library:
    """needles.c loaded, its functions typed."""

    def __init__(self, path: Path, key: str):
        import ctypes  # here: 3 ms of imports, for a process that loads the library

        lib = ctypes.CDLL(str(path))
        lib.ledger_needles_key.restype = ctypes.c_char_p
        if lib.ledger_needles_key() != key.encode():
            raise OSError(f"{path} is not build {key}")
        u8p, u32p = ctypes.c_char_p, ctypes.POINTER(ctypes.c_uint)
        lib.ledger_needles_table.argtypes = (u8p, u32p, ctypes.c_int, ctypes.c_char_p, ctypes.c_char_p)
        lib.ledger_needles_table.restype = ctypes.c_int
        lib.ledger_needles_find.argtypes = (u8p, ctypes.c_size_t, u8p, u32p, ctypes.c_int) + (ctypes.c_char_p,) * 3
        lib.ledger_needles_find.restype = ctypes.c_int
        self.table, self.find = lib.ledger_needles_table, lib.ledger_needles_find
        self.ctypes = ctypes


def _load(path: Path, key: str) -> _Library | None:
    from ledger_runtime.ledger.native import ours

    if not ours(path):
        return None
    try:
        return _Library(path, key)
    except Exception:  # not loadable, not this build, no ctypes in this Python: Python's search serves
        return None


def find_library(environ: Mapping[str, str], *, build: bool) -> tuple[_Library | None, str]:
    """needles.c loaded from the private cache, built first where ``build`` says and it is not there yet; else
    None and why."""
    import platform

    from ledger_runtime.ledger import native
    from ledger_runtime.ledger.native import cache_dir, failed_recently, find_compiler, note_failure, private_cache

    if environ.get(MODE_ENV, "").strip().lower() == "python":
        return None, f"{MODE_ENV}=python"
    try:
        source = SOURCE.read_bytes()
    except OSError as e:
        return None, f"no source to build: {e.strerror or e}"
    key = library_key(source, f"{platform.system()}-{platform.machine()}")
    directory, why = private_cache(cache_dir(environ))
    if directory is None:
        return None, why
    path = directory / f"ledger-needles-{key}.so"
    lib = _load(path, key)
    if lib is not None:
        return lib, "cached"
    if not build:
        return None, NOT_BUILT
    marker = directory / f"ledger-needles-{key}.failed"
    failed = failed_recently(marker)
    if failed:
        return None, f"{failed} (tried again an hour after; remove {marker} to try now)"
    compiler = find_compiler(environ)
    if compiler is None:
        return None, "no C compiler: $CC, cc, gcc or clang"
    argv = [*compiler, *FLAGS, f'-DLEDGER_NEEDLES_KEY="{key}"']

    def loads(out: Path) -> str | None:
        return None if _load(out, key) is not None else "the build does not load here"

    why = native.build(directory, path.name, ("needles.c", source), argv, loads) or ""
    lib = _load(path, key) if not why else None
    if lib is None:
        note_failure(marker, why or "the build does not load here")
        return None, why or "the build does not load here"
    return lib, "built"


_found: dict[tuple[str | None, ...], tuple[_Library | None, str]] = {}
_lock = threading.Lock()


def _setting() -> tuple[str | None, ...]:
    """What decides which search serves: the mode and where the cache is (read as set, not resolved)."""
    env = os.environ
    return env.get(MODE_ENV), env.get("LEDGER_HOOK_CACHE"), env.get("XDG_CACHE_HOME"), env.get("HOME")


def library(*, build: bool = False) -> _Library | None:
    """The compiled search for this process (None: Python's serves), looked for once per setting, and again by a
    ``build`` while none was built. Masking never waits for it: while a build holds the lock, Python's search
    serves; and a fault of ours in looking for it only leaves Python's search serving."""
    setting = _setting()
    got = _found.get(setting)
    if got is not None and not (build and got[0] is None and got[1] == NOT_BUILT):
        return got[0]
    if not _lock.acquire(blocking=build):
        return None
    try:
        got = _found.get(setting)
        if got is None or (build and got[0] is None and got[1] == NOT_BUILT):
            try:
                got = find_library(os.environ, build=build)
            except Exception as e:
                got = (None, f"the compiled search failed: {type(e).__name__}: {e}")
            _found[setting] = got
        return got[0]
    finally:
        _lock.release()


def prepare(*, wait: bool = True) -> str:
    """Builds the compiled search where it is not built yet (a run's start), or (``wait`` False) has a thread of
    its own build it, Python's search serving meanwhile; which search serves, in words."""
    got = _found.get(_setting())
    if got is not None and got[1] != NOT_BUILT:
        return "compiled" if got[0] is not None else f"python: {got[1]}"
    if not wait:
        threading.Thread(target=library, kwargs={"build": True}, daemon=True, name="ledger-needles-build").start()
        return "building"
    lib = library(build=True)
    return "compiled" if lib is not None else f"python: {_found[_setting()][1]}"


class Needles:
    """A set of needles, ASCII texts of two characters or more, and which of them a text holds."""

    def __init__(self, needles: Sequence[str]):
        if len(needles) > MAX_NEEDLES or any(len(n) < 2 or not n.isascii() for n in needles):
            raise ValueError("needles are at most 250 ASCII texts of two characters or more")
        self.needles = tuple(needles)
        self._packed = "".join(self.needles).encode("ascii")
        self._tables: dict[int, tuple[Any, Any, Any] | None] = {}  # per library: needles' lengths, table, or None

    def present(self, text: str) -> tuple[str, ...] | None:
        """The needles ``text`` holds, in their order, found by the compiled search; None where it does not serve
        (a text under NATIVE_MIN_CHARS, no library): the caller's own ``in`` is then the cheaper search."""
        lib = library() if len(text) >= NATIVE_MIN_CHARS else None
        tables = self._table_of(lib) if lib is not None else None
        if tables is None:
            return None
        # an ASCII needle's bytes stand in UTF-8 only for those characters ("surrogatepass": a lone surrogate
        # is three bytes of 0x80 and over, as any character past ASCII)
        data = text.encode("utf-8", "surrogatepass")
        count = len(self.needles)
        lens, table, nexts = tables
        hits = lib.ctypes.create_string_buffer(count)
        if lib.find(data, len(data), self._packed, lens, count, table, nexts, hits) < 0:
            return None
        return tuple(n for n, hit in zip(self.needles, hits.raw) if hit)

    def _table_of(self, lib: _Library) -> tuple[Any, Any, Any] | None:
        key = id(lib)
        if key not in self._tables:
            c, count = lib.ctypes, len(self.needles)
            lens = (c.c_uint * count)(*map(len, self.needles))
            table, nexts = c.create_string_buffer(65536), c.create_string_buffer(max(1, count))
            ok = lib.table(self._packed, lens, count, table, nexts) == 0
            self._tables[key] = (lens, table, nexts) if ok else None
        return self._tables[key]


__all__ = ["Needles", "library", "prepare", "NATIVE_MIN_CHARS"]
