"""ContainerWorkspace: the ledger's workspace where the agent's commands run, when that is not this
machine: a Docker container (mini-swe-agent's DockerEnvironment: talked to with ``docker exec``), or
any other environment that runs bash commands (singularity, bubblewrap, SWE-ReX, Modal...: talked
to through the environment's own ``execute``).

A small helper (helper.py) is installed in the container on first use, with the scanner the local
workspace runs (ledger_runtime/workspace/scanning/, which it runs there), together with the first
snapshot, in one ``docker exec``. After that, the post-command snapshot rides in the SAME
``docker exec`` as the command: ``wrap`` prepends an EXIT trap that runs the helper when the
command's shell exits, and ``unwrap`` cuts the helper's report off the output, so the agent gets
the command's exact output and return code. Only when the report is missing (the command timed
out, replaced its shell with ``exec``, or set its own EXIT trap) does ``scan`` cost a round trip of
its own.

The helper lives in a directory of its own per install (``/tmp/.ledger-runtime-<nonce>``, made
with ``mkdir -m 700``, which never follows a planted symlink), and every call carries the run's
nonce and the script's digest: an answer without the nonce is not taken. When the helper fails in
any way (its directory removed, its state deleted or garbled, its call counter bumped, its script
overwritten), what the workspace believed is dropped, the helper is installed again and its first
snapshot is the new baseline: the changes since the last good snapshot are found against it, and
the fault is reported (``on_fault``). Nothing but the agent's commands changes the container, so
there is no scan before a
command; signatures of keys the runtime has not asked about before are taken as they were after
the command ("pending" before it).
"""

from __future__ import annotations

import base64
import hashlib
import os
import secrets
import shlex
import subprocess
from pathlib import Path
from typing import Any, Callable, Iterable

from ledger_runtime import (
    PENDING,
    UNPACK_SOURCES,
    Analysis,
    Baseline,
    FileState,
    Snapshot,
    UnreadableJSON,
    UntrackedTree,
    analyze,
    json_value,
    pack_sources,
    scanner_sources,
)

HELPER_BASE = "/tmp/.ledger-runtime"  # + "-<nonce>": one directory per install
HELPER_SOURCE = Path(__file__).with_name("helper.py")
# what is installed: the helper and the scanner's package beside it, as one stream (its digest names it)
HELPER_BUNDLE = pack_sources([("helper.py", HELPER_SOURCE.read_bytes()), *scanner_sources()])
HELPER_DIGEST = "b2:" + hashlib.blake2b(HELPER_BUNDLE, digest_size=16).hexdigest()
EXEC_TIMEOUT = 120
ARG_BYTES = "@b64:"  # an argument of a helper call given as the base64 of its bytes (``carried``)


class HelperError(RuntimeError):
    """The helper could not be installed or answered nonsense."""


def _b2(data: bytes) -> str:
    return "b2:" + hashlib.blake2b(data, digest_size=16).hexdigest()


class DockerExec:
    """Runs helper commands with ``docker exec`` (stdin supported)."""

    def __init__(self, container: str, executable: str = "docker"):
        self.container, self.executable = container, executable

    def __call__(self, argv: list[str], stdin: bytes | None, timeout: float) -> bytes:
        cmd = [self.executable, "exec", *(["-i"] if stdin is not None else []), self.container, *argv]
        try:
            proc = subprocess.run(cmd, input=stdin, capture_output=True, timeout=timeout, check=False)
        except (OSError, subprocess.SubprocessError) as e:
            raise HelperError(f"docker exec failed: {e}") from None
        if proc.returncode != 0 and not proc.stdout:
            raise HelperError(f"docker exec failed ({proc.returncode}): {proc.stderr.decode(errors='replace')[:300]}")
        return proc.stdout


class EnvExec:
    """Runs helper commands through a mini-swe-agent environment's own ``execute`` (stdin is sent
    base64-encoded inside the command)."""

    def __init__(self, env: Any):
        self.env = env

    def __call__(self, argv: list[str], stdin: bytes | None, timeout: float) -> bytes:
        cmd = " ".join(shlex.quote(a) for a in argv)
        if stdin is not None:
            cmd = f"echo {base64.b64encode(stdin).decode()} | base64 -d | {cmd}"
        out = self.env.execute({"command": cmd}, timeout=int(timeout))
        return str(out.get("output", "")).encode()


class ContainerWorkspace:
    """See the module docstring. ``env`` is the mini-swe-agent environment the commands run in."""

    rescan_before_command = False
    scan_is_cheap = False  # the snapshot rides in the command's own exec; there is no scan before one

    def __init__(self, env: Any, root: str, *, executable: str | None = None, transport: str = "auto"):
        self.env = env
        self.root = os.path.normpath(root)
        self._prepared: Analysis | None = None  # the next command, as the runtime analysed it
        if transport not in ("auto", "docker", "env"):
            raise ValueError(f"helper transport must be auto, docker or env, not {transport!r}")
        if transport != "env" and getattr(env, "container_id", None):
            self.transport: Any = DockerExec(
                env.container_id, executable or getattr(getattr(env, "config", None), "executable", "docker")
            )
        else:
            self.transport = EnvExec(env)
        self.nonce = ""
        self.dir = ""  # the helper's directory in the container (set by _install)
        self.on_fault: Callable[[str, BaseException], None] | None = None  # the runtime's report_fault
        self.reinstalls = 0
        self._files: dict[str, FileState] = {}
        self._sigs: dict[str, str] = {}
        self._states: dict[str, FileState | None] = {}  # file states known as of the last snapshot
        self._ignored: frozenset[str] = frozenset()  # what is in the tree that the snapshot does not hash
        self._untracked: tuple[str, ...] = ()  # directories the helper's scanner no longer tracks
        self._kept: dict[str, bytes] = {}
        self._contents: dict[str, bytes] = {}  # files the last command's output claims to show, as they are now
        self._links: dict[str, tuple[str, str]] = {}  # ...those of them that are symbolic links (workspace.symlink)
        self._heads: dict[str, bytes] = {}
        self._report: dict | None = None
        self._watch_new: list[str] = []
        self._keep_limit = 2 * 1024 * 1024
        self.python = "python3"
        self.seq = 0  # each post call is numbered; the helper ignores one older than the last it took
        self.state_file = self.marker = ""
        self.round_trips = 0
        self.reports_in_band = 0
        self._git: dict = {}
        self._first_scan = True
        self._install()

    # -- talking to the container -----------------------------------------------------------------

    def _exec(self, argv: list[str], stdin: bytes | None = None, timeout: float = EXEC_TIMEOUT) -> bytes:
        self.round_trips += 1
        return self.transport(argv, stdin, timeout)

    def _json(self, raw: bytes) -> dict:
        for line in reversed(raw.decode("utf-8", "replace").strip().splitlines()):
            if line.startswith("{"):
                try:
                    data = json_value(line, dict)
                except UnreadableJSON:
                    break
                if "error" in data:
                    raise HelperError(f"helper: {data['error']}")
                if data.get("nonce") != self.nonce:
                    raise HelperError("an answer not from this run's helper")
                return data
        raise HelperError(f"no answer from the helper: {raw[-300:]!r}")

    def helper_argv(self, *args: str) -> list[str]:
        """The argv of a helper call (its arguments in a form every transport carries: ``carried``)."""
        return [
            self.python,
            "-S",
            "-E",
            f"{self.dir}/helper.py",
            "--run",
            self.nonce,
            HELPER_DIGEST,
            *map(carried, args),
        ]

    def _install(self) -> None:
        """Copy the helper into a new private directory, find a Python, take the first snapshot: one
        exec. The directory of an earlier install goes."""
        old = self.dir
        self.nonce = secrets.token_hex(8)
        self.dir = f"{HELPER_BASE}-{self.nonce}"
        self.state_file = f"{self.dir}/state.marshal"
        self.marker = f"@@ledger-runtime:{self.nonce}@@"
        self.seq = 0
        script = (
            f"umask 077; {f'rm -rf {shlex.quote(old)}; ' if old else ''}mkdir -m 700 {self.dir} && "
            "PY=$(command -v python3 || command -v python || echo /usr/bin/python3) && "
            f'"$PY" -S -E -c {shlex.quote(UNPACK_SOURCES)} {self.dir} && '
            f'"$PY" -S -E {self.dir}/helper.py --run {self.nonce} {HELPER_DIGEST} init {shlex.quote(self.root)} '
            f"{self.state_file}"
        )
        data = self._json(self._exec(["sh", "-c", script], stdin=HELPER_BUNDLE))
        self.python = data.get("executable") or "python3"
        self._files = {p: FileState(*fs) for p, fs in data["files"].items()}
        self._untracked = tuple(data.get("untracked_dirs") or ())
        self._ignored = frozenset(data.get("ignored") or ())
        self._report_untracked(data)
        self._git = data.get("git") or {}

    def _recover(self, error: HelperError) -> None:
        """The helper failed: forget what it said, install it again (its snapshot is the new
        baseline), and report the fault. Raises HelperError when it cannot be installed."""
        self._sigs, self._states, self._kept, self._contents, self._heads = {}, {}, {}, {}, {}
        self._links = {}
        self._untracked = ()
        self._report, self._watch_new = None, []
        self.reinstalls += 1
        self._install()
        if self.on_fault is not None:
            self.on_fault("the container helper failed: installed again, its snapshot is the new baseline", error)

    # -- the command's own exec carries the snapshot ------------------------------------------------

    def prepare(self, analysis: Analysis) -> None:
        """The command about to run, as the runtime analysed it: ``wrap`` signs what it reads."""
        self._prepared = analysis

    def wrap(self, command: str, cwd: str) -> str:
        """``command`` with an EXIT trap that prints the helper's report after it."""
        a, self._prepared = self._prepared, None
        if a is None or a.command != command or (a.origin or a.cwd) != cwd:  # run without the runtime's plan
            a = analyze(command, cwd)
        keys = list(a.read_keys) + ["f:" + v.path for v in a.views]
        self.seq += 1
        args = ["post", self.state_file, "--seq", str(self.seq), "--keep", str(self._keep_limit)]
        for k in dict.fromkeys(keys):
            args += ["--sign", k]
        for p in dict.fromkeys(v.path for v in a.views):  # what the output is checked against
            args += ["--show", p]
        for p in self._watch_new:
            args += ["--watch", p]
        self._watch_new = []
        helper = " ".join(shlex.quote(x) for x in self.helper_argv(*args))
        trap = (
            f"__ledger_rc=$?; trap - EXIT; if [ -p /dev/stdout ]; then printf '\\n%s\\n' {self.marker}; "
            f"{helper} 2>/dev/null; fi; exit $__ledger_rc"
        )
        # stderr joins stdout first: docker exec carries the two streams apart and interleaves them at
        # random, which could put the report before the command's last words; one stream keeps it last.
        # All on the command's first line, so bash's "line N" messages keep their numbers.
        return f"exec 2>&1; trap {shlex.quote(trap)} EXIT; {command}"

    def unwrap(self, output: str) -> str:
        """The command's own output; keeps the report for the next ``scan``."""
        cut = output.rfind("\n" + self.marker + "\n")
        if cut < 0:
            self._report = None
            return output
        rest = output[cut + len(self.marker) + 2 :]
        line, _, after = rest.partition("\n")
        try:
            report = json_value(line, dict)
            if "error" in report or report.get("nonce") != self.nonce:
                raise ValueError("not a report of this run's helper")
        except ValueError:
            self._report = None
            return output[:cut] + after
        self._report = report
        self.reports_in_band += 1
        return output[:cut] + after  # anything a background job printed after the report stays

    # -- Workspace ------------------------------------------------------------------------------

    def scan(self, *, keep_limit: int = 0) -> Snapshot:
        report, self._report = self._report, None
        if report is None and self._first_scan:
            self._first_scan = False  # the snapshot taken when installing is the first scan
            return self._snapshot()
        self._first_scan = False
        if report is None:
            self.seq += 1
            try:
                report = self._json(
                    self._exec(
                        self.helper_argv(
                            "post",
                            self.state_file,
                            "--seq",
                            str(self.seq),
                            "--keep",
                            str(self._keep_limit),
                            *sum((["--watch", p] for p in self._watch_new), []),
                        )
                    )
                )
            except HelperError as e:
                self._recover(e)
                return self._snapshot()
            self._watch_new = []
        changed = set()
        # what was asked of the helper before holds no more: a change it does not list (a link's target, a
        # file no scan covers) can have changed it; this command's own states come with the report
        self._states = {}
        for path, fs in report.get("changes", []):
            if fs is None:
                self._files.pop(path, None)
            else:
                self._files[path] = FileState(*fs)
            changed.add(path)
        if changed:  # what an earlier command signed of them no longer holds: the new snapshot speaks
            self._sigs = {k: v for k, v in self._sigs.items() if not _touched(k, changed)}
        self._sigs.update(report.get("sigs", {}))
        self._states.update({p: (FileState(*fs) if fs else None) for p, fs in report.get("states", {}).items()})
        self._kept = {p: base64.b64decode(v) for p, v in report.get("kept", {}).items()}
        self._contents = {p: base64.b64decode(v) for p, v in report.get("contents", {}).items()}
        self._links = {p: (str(d), str(t)) for p, (d, t) in (report.get("links") or {}).items()}
        self._heads.update({p: base64.b64decode(v) for p, v in report.get("heads", {}).items()})
        self._untracked = tuple(report.get("untracked_dirs") or ())
        if report.get("ignored") is not None:  # sent when it changed
            self._ignored = frozenset(report["ignored"])
        self._report_untracked(report)
        return self._snapshot()

    def _snapshot(self) -> Snapshot:
        return Snapshot(dict(self._files), self.root, untracked=self._untracked)

    def _report_untracked(self, report: dict) -> None:
        """Each directory the helper's scanner stopped tracking, as the local workspace reports one."""
        if self.on_fault is None:
            return
        for _path, summary in report.get("untracked") or ():
            self.on_fault("scanning the workspace", UntrackedTree(summary))

    def kept(self) -> dict[str, bytes]:
        return self._kept

    def sign_many(self, keys: Iterable[str], *, exact: bool = True) -> dict[str, str]:
        keys = list(keys)
        out: dict[str, str] = {}
        missing = []
        for k in keys:
            if k in self._sigs:
                out[k] = self._sigs[k]
            elif (
                k.startswith("f:") and (fs := self._files.get(k[2:])) is not None and not fs.digest.startswith("link:")
            ):
                out[k] = fs.digest
            else:
                missing.append(k)
        if missing and exact:
            try:
                data = self._json(self._exec(self.helper_argv("sign", self.state_file, *missing)))
            except HelperError as e:
                self._recover(e)
                data = self._json(self._exec(self.helper_argv("sign", self.state_file, *missing)))
            out.update(data["sigs"])
        else:
            out.update({k: PENDING for k in missing})
        return out

    def file_state(self, path: str) -> FileState | None:
        """The state of ``path`` as ``cat`` reads it (symlinks followed), as of the last snapshot: from
        the snapshot where it holds the file itself, else asked of the helper (one round trip, its
        answer kept until the next snapshot)."""
        if path in self._states:
            return self._states[path]
        fs = self._files.get(path)
        if fs is not None and not fs.digest.startswith("link:"):
            return fs
        if fs is None and self._absent(path):
            return None
        try:
            data = self._json(self._exec(self.helper_argv("state", self.state_file, path)))
            raw = data["states"].get(path)
        except (HelperError, KeyError, AttributeError, TypeError) as e:
            if self.on_fault is not None:
                self.on_fault("asking the container helper for a file's state", e)
            return None
        self._states[path] = FileState(*raw) if raw else None
        return self._states[path]

    def _absent(self, path: str) -> bool:
        """Whether the last snapshot shows that no file is at ``path``: a path in the tree (not under
        ``.git``) that neither the snapshot, nor what it does not hash, nor an untracked directory holds
        (every directory of the tree is listed whole: a name in none of those is not there, or is a
        directory), nor reached through a symlink."""
        prefix = self.root.rstrip("/") + "/"
        path = os.path.normpath(path)
        if not path.startswith(prefix) or "/.git/" in path[len(prefix) - 1 :] + "/":
            return False
        d = path
        while len(d) >= len(prefix):
            if d in self._ignored or d in self._untracked:
                return False
            above = self._files.get(d)
            if above is not None and above.digest.startswith("link:"):
                return False  # reached through a symlink: its target's, which the helper resolves
            d = os.path.dirname(d)
        return True

    def content(self, path: str, limit: int) -> bytes | None:
        data = self._contents.get(path)
        return data if data is not None and len(data) <= limit else None

    def symlink(self, path: str) -> tuple[str, str | None] | None:
        """Where a path the last command's output showed is a symbolic link: its own digest and the file
        it resolves to, as the helper found them after the command; None for any other path."""
        return self._links.get(path)

    def watch(self, paths: Iterable[str]) -> None:
        for p in paths:
            if p not in self._watch_new:
                self._watch_new.append(p)

    def watched(self) -> int:
        return len(self._watch_new)

    def baseline(self, snapshot: Snapshot, task: str) -> Baseline:
        git = self._git
        return Baseline(
            root=self.root,
            is_git=bool(git.get("is_git")),
            head_commit=git.get("head"),
            branch=git.get("branch"),
            dirty_paths=tuple(git.get("dirty") or ()),
            file_count=len(snapshot.files),
            snapshot_digest=snapshot.digest,
            task=task,
        )

    def baseline_content(self, path: str, commit: str | None) -> bytes | None:
        return self._heads.get(path)

    def digest(self, data: bytes) -> str:
        return _b2(data)

    def close(self) -> None:
        """Remove the helper's directory (best effort: the container may be gone already)."""
        if self.dir:
            try:
                self._exec(["rm", "-rf", self.dir], timeout=10)
            except Exception:
                pass
            self.dir = ""


def carried(arg: str) -> str:
    """``arg`` as a transport can carry it: as it is when it is UTF-8, else ARG_BYTES and the base64 of
    its bytes (a file name that is not UTF-8: ``docker exec`` sends argv through JSON, which would make
    its bytes U+FFFD; the helper decodes it back)."""
    try:
        arg.encode("utf-8")
    except UnicodeEncodeError:
        return ARG_BYTES + base64.b64encode(os.fsencode(arg)).decode("ascii")
    return arg


def _touched(key: str, changed: set[str]) -> bool:
    """Whether a change to one of the ``changed`` paths can change the signature ``key``: the path's
    own content, existence or stat data, its directory's listing, the tree of a directory above it."""
    kind, _, path = key.partition(":")
    if kind in ("f", "x", "m"):
        return path in changed
    if kind == "d":
        return any(os.path.dirname(c) == path for c in changed)
    if kind == "r":
        prefix = path.rstrip("/") + "/"
        return any(c == path or c.startswith(prefix) for c in changed)
    return True
