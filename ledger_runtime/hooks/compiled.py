"""The hook client and command wrapper compiled from ``ledger_hook.c``: built at first use into a private
per-user cache with the system's C compiler, and used wherever it can be; the Python ones (fasthook.py)
serve where it cannot (no compiler, a build that fails, a cache directory others could write). It is never
needed for correctness: both do the same, the compiled one without an interpreter's start (a hook in about
1 ms instead of 8).

A build is keyed by the digest of what it is made of (the source, the compiler's flags, the machine): its
file is ``ledger-hook-KEY`` in the cache directory, and it prints KEY (``--version``), which is checked
before it is used, so a cache hit is a proof, not a guess. The cache directory and every directory above
it must be this user's or root's, and none but a sticky one (/tmp) writable by others; the build is made in
a private directory inside it and renamed into place once it has answered. A build that failed is not
tried again for an hour (``ledger-hook-KEY.failed`` says why).

``LEDGER_HOOK_CLIENT=python`` turns it off; ``$CC`` names the compiler (else ``cc``, ``gcc``, ``clang``
on PATH); ``LEDGER_HOOK_CACHE`` the cache directory (else ``$XDG_CACHE_HOME/ledger-runtime``, else
``~/.cache/ledger-runtime``). ``python -m ledger_runtime.hooks.compiled`` says which serves, and why.
"""

from __future__ import annotations

import os
import platform
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Mapping

from ledger_runtime.ledger import native
from ledger_runtime.ledger.native import (
    cache_dir,
    failed_recently,
    find_compiler,
    note_failure,
    private_cache,
)

SOURCE = Path(__file__).with_name("ledger_hook.c")
# linked statically where the C library allows it (a start without the dynamic loader: 0.3 ms less, twice a
# shell call), else as usual (macOS, a C library without its static archive)
BUILDS = (("-O2", "-static"), ("-O2",))
CHECK_TIMEOUT_S = 10.0
MODE_ENV = "LEDGER_HOOK_CLIENT"


@dataclass(frozen=True)
class Build:
    """Where the compiled hook client is (None: the Python one serves) and why."""

    path: str | None
    why: str


def build_key(source: bytes, flags: tuple[str, ...], machine: str) -> str:
    """The digest of what a build is made of: its name in the cache, and what the binary says it is."""
    return native.build_key(b"ledger-hook 1", source, flags, machine)


def answers_as(path: Path, key: str) -> bool:
    """Whether the binary at ``path`` is this user's, written by no other, and says it is build ``key``."""
    if not native.ours(path):
        return False
    try:
        p = subprocess.run(
            [str(path), "--version"], capture_output=True, timeout=CHECK_TIMEOUT_S, stdin=subprocess.DEVNULL
        )
    except (OSError, subprocess.SubprocessError):
        return False
    return p.returncode == 0 and p.stdout.strip() == key.encode()


def build(directory: Path, key: str, source: bytes, compiler: list[str], flags: tuple[str, ...]) -> str | None:
    """Compile ``source`` with ``flags`` into ``directory/ledger-hook-KEY`` (made in a private directory of its
    own, renamed into place once it answers as ``key``); why not, or None once it is there."""
    argv = [*compiler, *flags, f'-DLEDGER_HOOK_KEY="{key}"']
    return native.build(
        directory,
        f"ledger-hook-{key}",
        ("ledger_hook.c", source),
        argv,
        lambda out: None if answers_as(out, key) else "the build does not run here",
    )


def compiled_hook(environ: Mapping[str, str] | None = None) -> Build:
    """The compiled hook client for this source, built now when it is not in the cache yet; a Build
    without a path (and why) where it cannot be had."""
    environ = os.environ if environ is None else environ
    if environ.get(MODE_ENV, "").strip().lower() == "python":
        return Build(None, f"{MODE_ENV}=python")
    try:
        source = SOURCE.read_bytes()
    except OSError as e:
        return Build(None, f"no source to build: {e.strerror or e}")
    machine = f"{platform.system()}-{platform.machine()}"
    keys = [(flags, build_key(source, flags, machine)) for flags in BUILDS]
    directory, why = private_cache(cache_dir(environ))
    if directory is None:
        return Build(None, why)
    for _, key in keys:
        binary = directory / f"ledger-hook-{key}"
        if os.path.lexists(binary) and answers_as(binary, key):
            return Build(str(binary), "cached")
    marker = directory / f"ledger-hook-{keys[-1][1]}.failed"
    failed = failed_recently(marker)
    if failed:
        return Build(None, f"{failed} (tried again an hour after; remove {marker} to try now)")
    compiler = find_compiler(environ)
    if compiler is None:
        return Build(None, "no C compiler: $CC, cc, gcc or clang")
    for flags, key in keys:
        why = build(directory, key, source, compiler, flags)
        if why is None:
            return Build(str(directory / f"ledger-hook-{key}"), "built")
    note_failure(marker, why)  # the plainest build's reason
    return Build(None, why)


_found: dict[tuple[str, str], Build] = {}


def found() -> Build:
    """compiled_hook(), once per process (and per setting of the mode and the cache directory)."""
    memo = (os.environ.get(MODE_ENV, ""), str(cache_dir(os.environ)))
    if memo not in _found:
        _found[memo] = compiled_hook()
    return _found[memo]


def compiled_launcher() -> list[str] | None:
    """How to run the compiled hook client (``[PATH]``); None: the Python one serves."""
    path = found().path
    return [path] if path else None


def hook_client() -> str:
    """Which hook client serves, in words: what a run records, and what ``python -m`` of this module says."""
    build = found()
    return f"compiled: {build.path} ({build.why})" if build.path else f"python: {build.why}"


if __name__ == "__main__":
    print(hook_client())
    sys.exit(0)
