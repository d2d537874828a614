"""The container helper and LocalWorkspace agree: here (the helper run on this machine) and in a real container.

adapters/container/helper.py runs the local workspace's own scanner (ledger_runtime/workspace/scanning/),
shipped into the container with it, and keeps its state in a file between calls. Here the "container"
is first this machine: a ContainerWorkspace talks to the helper through mini-swe-agent's LocalEnvironment
(the transport "env": installed with ``sh -c``, called with ``python3 -S -E helper.py --run NONCE
DIGEST ...``, its answers read by ``_json``/``unwrap``, as in a container); with a Docker engine, the
same tests run again with the tree bind-mounted into a real container at the same path (``docker
exec``, the container's own Python and git). A LocalWorkspace looks at the same real git tree. Both
must give the same snapshot (paths, digests, sizes, line counts), the same changes between snapshots,
the same kept and baseline contents of changed files, the same file states and the same signatures
of read keys, before and after edits, deletions, additions, chmods, renames and git index changes.

The two hash with different algorithms (xxh3_128 locally, blake2b-128 in the helper), so a digest is
compared in one of two ways:

- "translated": LocalWorkspace as shipped; each of its content digests is mapped to the helper's
  digest of the same bytes (``LocalWorkspace.digest(b)`` -> ``ContainerWorkspace.digest(b)``), from
  the files as they are. A digest that is not the hash of the file's current bytes maps to nothing
  and shows as a difference. The digests of listings (``d:``, ``r:``, ``f:`` of a directory) cannot
  be mapped back to bytes: they are compared in the other way only.
- "blake2b": LocalWorkspace given the helper's ``Digests`` (blake2b-128, "b2:"): every value, listing
  signatures included, must then be equal as it is.
"""

from __future__ import annotations

import errno
import glob
import hashlib
import os
import shutil
import stat
import subprocess
from pathlib import Path

import pytest
from conftest import age, git, make_repo, write_files
from docker_support import BASE_IMAGE, docker_image  # noqa: F401  (a fixture, named as a parameter)

from ledger_runtime.workspace.hashing import FileState
from ledger_runtime.workspace.local import LocalWorkspace
from ledger_runtime.workspace.scanner import Snapshot, delta
from ledger_runtime.workspace.scanning.filestate import Digests

pytest.importorskip("minisweagent")

KEEP = 2 * 1024 * 1024  # what ContainerWorkspace keeps of changed text files (the runtime's max_content_bytes)
MAX_HASH = 64 * 1024 * 1024  # both hash files up to this size, above it their stat data
LATIN = b"latin-\xe9.txt"  # a file name that is not UTF-8
# the helper's hash (helper.py), for LocalWorkspace: contents "b2:<hex>", a link's target "link:<hex>"
BLAKE2 = Digests("blake2b-128", lambda: hashlib.blake2b(digest_size=16), "b2:")


# -- the tree ----------------------------------------------------------------------------------------


def _supports_latin_names(d: Path) -> bool:
    try:
        p = os.path.join(os.fsencode(d), b"probe-\xe9")
        with open(p, "wb"):
            pass
        os.unlink(p)
        return True
    except (OSError, UnicodeError):
        return False


def build_tree(base: Path) -> Path:
    """A real git repository with every kind of entry the scanner and the signatures tell apart."""
    root = base / "repo"
    (root / "src" / "pkg" / "deep").mkdir(parents=True)
    git(root, "init", "-q", "-b", "main")
    files: dict[str, bytes] = {
        "README.md": b"# project\n" + b"".join(b"line %d\n" % i for i in range(40)),
        "stable.txt": b"never changed\n",
        "dirty.txt": b"committed\n",
        "src/app.py": b"def main():\n    return 1\n",
        "src/pkg/__init__.py": b"",
        "src/pkg/deep/mod.py": b"X = 1\n",
        "data.bin": bytes(range(256)) * 8,  # NUL bytes: binary, no line count
        "late_nul.bin": b"a text-like header\n" * 50 + b"\0 then binary\n",  # a NUL within the first 8 KiB
        "nul_after_8k.txt": b"x" * 9000 + b"\0\n",  # a NUL after the first 8 KiB: text, lines counted
        "empty.txt": b"",
        "no_newline.txt": b"first\nsecond",
        "crlf.txt": b"one\r\ntwo\r\n",
        "run.sh": b"#!/bin/sh\necho hi\n",
        "big.txt": b"".join(b"%07d the quick brown fox jumps over the lazy dog\n" % i for i in range(60000)),  # 3.3 MB
        "unicode-\u00e9.txt": "caf\u00e9\n".encode(),
        ".gitignore": b"*.log\nbuild/\n",
        "forced.log": b"tracked although *.log is ignored\n",
    }
    for rel, data in files.items():
        (root / rel).write_bytes(data)
    os.chmod(root / "run.sh", 0o755)
    if _supports_latin_names(root):
        with open(os.path.join(os.fsencode(root), LATIN), "wb") as f:
            f.write(b"latin-1 name\n")
    os.symlink("README.md", root / "link_to_file")
    os.symlink("src", root / "link_to_dir")
    os.symlink("nowhere.txt", root / "dangling")
    git(root, "add", "-A")
    git(root, "add", "-f", "forced.log")
    git(root, "commit", "-q", "-m", "initial")
    (root / "dirty.txt").write_bytes(b"committed\nthen changed\n")  # a dirty path at the baseline
    # untracked, included
    (root / "notes.txt").write_text("untracked notes\n")
    with open(root / "huge.img", "wb") as f:  # sparse, over the hash limit: signed by its stat data
        f.truncate(MAX_HASH + 1024)
    (base / "outside.txt").write_text("outside the root\n")
    os.symlink(str(base / "outside.txt"), root / "link_out")
    # ignored, or never listed
    (root / "debug.log").write_text("ignored, watched\n")
    (root / "trace.log").write_text("ignored until .gitignore says otherwise\n")
    (root / "build").mkdir()
    (root / "build" / "out.o").write_bytes(b"\x7fELF\0")
    (root / "emptydir").mkdir()
    (root / "emptydir2").mkdir()
    os.mkfifo(root / "fifo")
    age(root, 10.0)
    return root


def rel_paths(root: Path, files) -> set[str]:
    return {os.path.relpath(p, root) for p in files}


def entries(root: Path) -> set[str]:
    """Every path under root, ignored ones included, .git itself but nothing in it."""
    out = {str(root), str(root / ".git")}
    for d, dirs, names in os.walk(root):
        if ".git" in dirs:
            dirs.remove(".git")
        out.update(os.path.join(d, n) for n in dirs + names)
    return out


# -- the two workspaces ------------------------------------------------------------------------------


def _python36() -> str | None:
    """A Python 3.6, the oldest the helper promises to run on, if this machine has one."""
    pyenv = sorted(glob.glob(os.path.expanduser("~/.pyenv/versions/3.6*/bin/python3.6")))
    for cand in [shutil.which("python3.6"), *pyenv]:
        if not cand:
            continue
        try:
            out = subprocess.run(
                [cand, "-c", "import sys; print(sys.version_info[:2])"], capture_output=True, text=True, timeout=30
            )
        except (OSError, subprocess.SubprocessError):
            continue
        if out.returncode == 0 and out.stdout.strip() == "(3, 6)":
            return cand
    return None


class Pair:
    """A LocalWorkspace and a ContainerWorkspace on one tree: its helper run on this machine (``where``
    "here"), or in a real container (a Docker image's name) that has ``tmp_path`` bind-mounted at the
    same path, so that both see the same files by the same names."""

    def __init__(
        self,
        tmp_path: Path,
        root: Path,
        *,
        translated: bool,
        watch_events: bool,
        python: str | None,
        where: str = "here",
    ):
        from ledger_adapters.container.workspace import ContainerWorkspace

        self.root, self.translated, self.where = root, translated, where
        if where == "here":
            from minisweagent.environments.local import LocalEnvironment

            env = {}
            if python:  # the helper's install finds "python3" on the PATH: make it this one
                bindir = tmp_path / "bin"
                bindir.mkdir()
                os.symlink(python, bindir / "python3")
                env["PATH"] = f"{bindir}{os.pathsep}{os.environ.get('PATH', '')}"
            self.env = LocalEnvironment(cwd=str(root), env=env, timeout=120)
        else:
            from minisweagent.environments.docker import DockerEnvironment

            mount = ["-v", f"{tmp_path}:{tmp_path}", "--label", f"ledger-test-parity={os.getpid()}"]
            self.env = DockerEnvironment(image=where, cwd=str(root), run_args=["--rm", *mount], timeout=120)
        self.lw = LocalWorkspace(str(root), watch_events=watch_events, **({} if translated else {"digests": BLAKE2}))
        assert self.lw.scan_is_cheap == watch_events, "inotify is not available here" if watch_events else ""
        self.cw = ContainerWorkspace(self.env, str(root), transport="env" if where == "here" else "docker")
        self.names: dict[str, str] = {}  # a local digest -> the helper's digest of the same bytes
        self.last: tuple[Snapshot, Snapshot] | None = None

    def close(self) -> None:
        helper_dir = self.cw.dir
        try:
            self.cw.close()
            self.lw.close()
            if self.where == "here":
                assert helper_dir and not os.path.exists(helper_dir)
            else:
                left = self.env.execute({"command": f"test -e {helper_dir} && echo left || echo gone"})["output"]
                assert helper_dir and left.strip() == "gone"
        finally:
            if self.where != "here":
                self.env.cleanup()

    # running a command as the runtime does with a container: the report rides in its own exec
    def run(self, command: str) -> str:
        before = self.cw.reports_in_band
        out = self.env.execute({"command": self.cw.wrap(command, str(self.root))}, cwd=str(self.root))
        shown = self.cw.unwrap(out["output"])
        assert out["returncode"] == 0, shown
        assert self.cw.reports_in_band == before + 1, f"no in-band report: {out['output'][-500:]!r}"
        return shown

    # digests in the helper's terms
    def learn(self, paths) -> None:
        if not self.translated:
            return
        for p in paths:
            try:
                st = os.lstat(p)
                if stat.S_ISLNK(st.st_mode):
                    target = os.fsencode(os.readlink(p))
                    # both: "link:" + the hash of the target's text (without the "b2:" of the helper's content hashes)
                    self.names["link:" + self.lw.digest(target)] = "link:" + self.cw.digest(target)[3:]
                elif stat.S_ISREG(st.st_mode) and st.st_size <= MAX_HASH:
                    data = Path(p).read_bytes()
                    self.names[self.lw.digest(data)] = self.cw.digest(data)
            except OSError:
                pass

    def tr(self, fs: FileState | None) -> FileState | None:
        return None if fs is None else FileState(self.names.get(fs.digest, fs.digest), fs.size, fs.lines)

    def tr_sig(self, value: str, local: bool) -> str:
        if self.translated and value.startswith("dir:"):
            return "dir:<listing>"  # a listing's hash: compared in the blake2b mode
        if not (self.translated and local):
            return value
        digest, at, real = value.partition("@")
        return self.names.get(digest, digest) + at + real

    # the comparisons
    def snapshots(self, what: str) -> tuple[Snapshot, list[str] | None]:
        """Scan both; the snapshots, the changes since the last ones, what was kept and the baseline
        contents of the changed files must agree."""
        ls = self.lw.scan(keep_limit=KEEP)
        cs = self.cw.scan(keep_limit=KEEP)
        self.learn(set(ls.files) | set(cs.files))
        assert {p: self.tr(fs) for p, fs in ls.files.items()} == cs.files, f"{what}: snapshots differ"
        for p, fs in cs.files.items():  # what the runtime checks a file's bytes against
            if not fs.digest.startswith(("link:", "large:")):
                data = Path(p).read_bytes()
                assert fs.digest == self.cw.digest(data) and fs.size == len(data), p
        changes = None
        if self.last is not None:
            ld = [(c.path, self.tr(c.before), self.tr(c.after)) for c in delta(self.last[0], ls)]
            cd = [(c.path, c.before, c.after) for c in delta(self.last[1], cs)]
            assert ld == cd, f"{what}: changes differ"
            changes = [c[0] for c in cd]
            written = [p for p, _, after in cd if after is not None and not after.digest.startswith("link:")]
            lk = {p: self.lw.kept().get(p) for p in written}
            ck = {p: self.cw.kept().get(p) for p in written}
            assert lk == ck, f"{what}: kept contents of the changed files differ"
            for p, _, after in cd:  # a change's text is kept: a new file's too, where the hash cache knew it already
                # (only a path that holds a file is read: a link keeps no content, and may resolve to nothing)
                data = Path(p).read_bytes() if p in written and after.size <= KEEP else None
                if data is not None and b"\0" not in data[:8192]:
                    assert ck[p] == data, f"{what}: the content of {p} is not kept"
            head = self.cw.baseline(cs, "").head_commit
            for p in changes:
                lh = self.lw.baseline_content(p, head)
                if lh is None or len(lh) <= KEEP:  # the helper sends them up to its keep limit
                    assert self.cw.baseline_content(p, head) == lh, f"{what}: baseline content of {p}"
        gone = {p for p in (set(self.last[1].files) - set(cs.files) if self.last else ()) if not os.path.lexists(p)}
        for p in sorted(gone | {p for p, fs in cs.files.items() if not fs.digest.startswith("link:")}):
            assert self.tr(self.lw.file_state(p)) == self.cw.file_state(p), f"{what}: file_state({p!r})"
        self.last = (ls, cs)
        return cs, changes

    def file_states(self, paths, what: str) -> None:
        """The same file state of each of ``paths`` (any path: ignored, a directory, through a symlink,
        not there) from both, as ``cat`` would read it."""
        paths = sorted(set(paths))
        self.learn(set(paths) | {os.path.realpath(p) for p in paths})
        for p in paths:
            assert self.tr(self.lw.file_state(p)) == self.cw.file_state(p), f"{what}: file_state({p!r})"

    def keys(self, paths) -> list[str]:
        kinds = "fxm" if self.translated else "fxmdr"
        return [f"{k}:{p}" for p in sorted(paths) for k in kinds]

    def signatures(self, keys: list[str], what: str) -> dict[str, str]:
        """The same signatures from both (ContainerWorkspace's, and the helper's own when asked now)."""
        self.learn({os.path.realpath(k[2:]) for k in keys} | {k[2:] for k in keys})
        local = self.lw.sign_many(keys)
        theirs = self.cw.sign_many(keys)
        asked = self.cw._json(self.cw._exec(self.cw.helper_argv("sign", self.cw.state_file, *keys)))["sigs"]
        assert asked == theirs, f"{what}: ContainerWorkspace's signatures are not the helper's now"
        mine = {k: self.tr_sig(v, True) for k, v in local.items()}
        assert mine == {k: self.tr_sig(v, False) for k, v in theirs.items()}, f"{what}: signatures differ"
        return theirs


TRACKED = {
    "README.md",
    "stable.txt",
    "dirty.txt",
    "src/app.py",
    "src/pkg/__init__.py",
    "src/pkg/deep/mod.py",
    "data.bin",
    "late_nul.bin",
    "nul_after_8k.txt",
    "empty.txt",
    "no_newline.txt",
    "crlf.txt",
    "run.sh",
    "big.txt",
    "unicode-\u00e9.txt",
    ".gitignore",
    "forced.log",
    "link_to_file",
    "link_to_dir",
    "dangling",
}
UNTRACKED = {"notes.txt", "huge.img", "link_out"}


def _mode(t: bool, e: bool, p: str) -> str:
    return f"{'xxh3-translated' if t else 'blake2b'}-{'inotify' if e else 'walk'}-{p}"


MODES = [
    pytest.param(t, e, p, id=_mode(t, e, p), marks=[pytest.mark.docker] if p == "docker" else [])
    for t in (True, False)
    for e in (True, False)
    for p in ("python3", "python3.6", "docker")
    if p != "docker" or t != e  # in a container: each hash and each way of the local scanner, once
]


@pytest.mark.parametrize("translated,watch_events,python", MODES)
@pytest.mark.slow
def test_the_helper_and_the_local_workspace_agree_before_and_after_changes(
    tmp_path, request, translated, watch_events, python
):
    exe, where = None, "here"
    if python == "python3.6":
        exe = _python36()
        if exe is None:
            pytest.skip("no Python 3.6 on this machine")
    if python == "docker":
        request.getfixturevalue("docker_image")  # skips (or fails, where CI requires an engine) without one
        where = BASE_IMAGE
    root = build_tree(tmp_path)
    latin = os.fsdecode(os.path.join(os.fsencode(root), LATIN))
    has_latin = os.path.lexists(latin)
    tracked = TRACKED | ({os.path.relpath(latin, root)} if has_latin else set())
    pair = Pair(tmp_path, root, translated=translated, watch_events=watch_events, python=exe, where=where)
    r = str(root)
    try:
        if exe:
            version = subprocess.run(
                [pair.cw.python, "-c", "import sys; print(sys.version_info[:2])"], capture_output=True, text=True
            ).stdout.strip()
            assert version == "(3, 6)", f"the helper ran under {pair.cw.python}"
        seen: set[str] = set()

        # 0. the first snapshot (the helper's, taken when it was installed)
        cs, _ = pair.snapshots("first snapshot")
        assert rel_paths(root, cs.files) == tracked | UNTRACKED
        f = cs.files
        assert f[f"{r}/no_newline.txt"].lines == 2 and f[f"{r}/crlf.txt"].lines == 2
        assert (f[f"{r}/empty.txt"].size, f[f"{r}/empty.txt"].lines) == (0, 0)
        assert f[f"{r}/data.bin"].lines is None and f[f"{r}/big.txt"].lines == 60000
        assert f[f"{r}/late_nul.bin"].lines is None and f[f"{r}/nul_after_8k.txt"].lines == 1
        assert f[f"{r}/huge.img"].digest.startswith("large:") and f[f"{r}/huge.img"].lines is None
        assert all(f[f"{r}/{n}"].digest.startswith("link:") for n in ("link_to_file", "link_to_dir", "dangling"))
        lb, cb = pair.lw.baseline(pair.last[0], "t"), pair.cw.baseline(cs, "t")
        head = git(root, "rev-parse", "HEAD").strip()
        assert (
            (cb.root, cb.is_git, cb.head_commit, cb.branch, cb.dirty_paths, cb.file_count)
            == (lb.root, lb.is_git, lb.head_commit, lb.branch, lb.dirty_paths, lb.file_count)
            == (r, True, head, "main", ("dirty.txt",), len(tracked | UNTRACKED))
        )
        # the current state, and a few paths that are not there
        specials = {f"{r}/nope", f"{r}/nope/deeper", f"{r}/README.md/x", str(tmp_path / "outside.txt")}
        seen |= entries(root) | specials
        sigs = pair.signatures(pair.keys(seen), "first snapshot")
        readme = (root / "README.md").read_bytes()
        assert sigs[f"f:{r}/README.md"] == pair.cw.digest(readme)
        assert sigs[f"f:{r}/link_to_file"] == f"{pair.cw.digest(readme)}@{r}/README.md"
        assert sigs[f"x:{r}/link_to_dir"] == "link:src:dir" and sigs[f"x:{r}/dangling"] == "link:nowhere.txt:missing"
        assert sigs[f"f:{r}/nope"] == sigs[f"f:{r}/README.md/x"] == sigs[f"f:{r}/dangling"] == "missing"
        assert sigs[f"f:{r}/fifo"].startswith("special:") and sigs[f"f:{r}/huge.img"].startswith("large:")
        assert sigs[f"m:{r}/run.sh"].startswith("100755,")

        # 1. files the scan does not cover, watched; a command that reads a file, its report in band
        watched = [str(tmp_path / "outside.txt"), f"{r}/debug.log"]
        pair.lw.watch(watched)
        pair.cw.watch(watched)
        cs, changes = pair.snapshots("watched files")
        assert sorted(changes) == sorted(watched)
        assert pair.run("cat stable.txt") == "never changed\n"
        cs, changes = pair.snapshots("after a read")
        assert changes == []
        shown = pair.cw.content(f"{r}/stable.txt", KEEP)  # what the command's output is checked against
        assert shown == pair.lw.content(f"{r}/stable.txt", KEEP) == b"never changed\n"
        pair.signatures(pair.keys(seen), "after a read")

        # 2. changes made by a command, the snapshot in its report: edit, delete, add, chmod, rename...
        script = [
            "printf 'appended\\n' >> README.md",  # edit
            "printf 'ONE\\r\\nTWO\\r\\n' > crlf.txt",  # same size, within the same second
            "rm no_newline.txt",  # delete
            "printf 'new\\n' > src/new.py && mkdir -p newdir/sub && printf x > newdir/sub/file.txt",  # add
            "chmod -x run.sh && chmod +x empty.txt",  # chmod: no content change
            "mv src/app.py src/app_renamed.py && mv src/pkg src/pkg2",  # rename a file, a directory
            "ln -sfn crlf.txt link_to_file",  # a symlink to another target
            "printf '\\000\\001' >> data.bin",  # binary
            "printf 'tail\\n' >> big.txt",  # large-ish
            "printf '!trace.log\\n' >> .gitignore",  # an ignore rule: trace.log is included now
            "printf 'w\\n' >> debug.log && printf 'o\\n' >> ../outside.txt",  # the watched files
        ]
        if has_latin:
            script.append("printf 'more\\n' >> \"$(printf 'latin-\\351.txt')\"")  # a name that is not UTF-8
        pair.run(" && ".join(script))
        cs, changes = pair.snapshots("after a command's changes")
        moved = {"src/app.py", "src/pkg/__init__.py", "src/pkg/deep/mod.py", "no_newline.txt"}
        assert (
            rel_paths(root, cs.files)
            == (
                tracked
                | UNTRACKED
                | {
                    "src/new.py",
                    "newdir/sub/file.txt",
                    "trace.log",
                    "src/app_renamed.py",
                    "src/pkg2/__init__.py",
                    "src/pkg2/deep/mod.py",
                }
                | {"../outside.txt", "debug.log"}
            )
            - moved
        )
        expected = moved | {
            "README.md",
            "crlf.txt",
            "src/new.py",
            "newdir/sub/file.txt",
            "src/app_renamed.py",
            "src/pkg2/__init__.py",
            "src/pkg2/deep/mod.py",
            "link_to_file",
            "data.bin",
            "big.txt",
            ".gitignore",
            "trace.log",
            "debug.log",
            "../outside.txt",
        }
        assert set(rel_paths(root, changes)) == expected | ({os.path.relpath(latin, root)} if has_latin else set())
        seen |= entries(root)
        sigs = pair.signatures(pair.keys(seen), "after a command's changes")
        assert sigs[f"f:{r}/src/app.py"] == "missing" and sigs[f"x:{r}/src/pkg2/deep"] == "dir"
        assert sigs[f"m:{r}/run.sh"].startswith("100644,") and sigs[f"m:{r}/empty.txt"].startswith("100755,")

        # 3. changes made behind the helper's back (its own round trip): type changes, the index, ...
        shutil.rmtree(root / "newdir")
        (root / "src" / "new.py").write_text("new\nand more\n")
        os.unlink(root / "empty.txt")
        (root / "empty.txt").mkdir()
        (root / "empty.txt" / "inner.txt").write_text("a file where a file was\n")
        os.unlink(root / "link_to_dir")
        (root / "link_to_dir").write_text("a file where a link was\n")
        git(root, "rm", "-q", "--cached", "forced.log")  # untracked now, and ignored: out
        git(root, "add", "notes.txt")  # tracked now: no change
        os.utime(root / "stable.txt", (1_000_000_000, 1_000_000_000))  # stat data only: no change
        (root / "emptydir" / "now.txt").write_text("in the directory that was empty\n")
        (root / "build" / "new.o").write_bytes(b"ignored\n")
        os.unlink(root / "debug.log")
        cs, changes = pair.snapshots("after changes behind the helper's back")
        assert set(rel_paths(root, changes)) == {
            "newdir/sub/file.txt",
            "src/new.py",
            "empty.txt",
            "empty.txt/inner.txt",
            "link_to_dir",
            "forced.log",
            "emptydir/now.txt",
            "debug.log",
        }
        seen |= entries(root)
        sigs = pair.signatures(pair.keys(seen), "after changes behind the helper's back")
        assert sigs[f"x:{r}/empty.txt"] == "dir" and sigs[f"x:{r}/link_to_dir"] == "file"
        assert sigs[f"x:{r}/newdir"] == "missing"

        # 4. changes with git's index and ignore rules as they were (no listing rebuilt from git)
        (root / "emptydir2" / "first.txt").write_text("the first file of a directory empty at the start\n")
        (root / "late_nul.bin").write_bytes(b"still a header\n" * 10 + b"\0")
        (root / "nul_after_8k.txt").write_bytes(b"y" * 9000 + b"\0\n")
        os.unlink(root / "notes.txt")
        (root / "src" / "added.py").write_text("A = 1\n")
        cs, changes = pair.snapshots("after changes with the index unchanged")
        assert set(rel_paths(root, changes)) == {
            "emptydir2/first.txt",
            "late_nul.bin",
            "nul_after_8k.txt",
            "notes.txt",
            "src/added.py",
        }
        seen |= entries(root)
        pair.signatures(pair.keys(seen), "after changes with the index unchanged")

        # 5. nothing changed: the same again
        cs, changes = pair.snapshots("a scan after nothing changed")
        assert changes == []
        pair.signatures(pair.keys(seen), "a scan after nothing changed")
    finally:
        pair.close()


# -- the differences found: each asserts the agreement that should hold --------------------------------


@pytest.fixture(params=["here", pytest.param("docker", marks=pytest.mark.docker)])
def where(request) -> str:
    """Where the helper runs: on this machine, or in a real container (then the Docker tests' base image,
    which has python3 and git; no engine: skipped, and says why)."""
    if request.param == "here":
        return "here"
    request.getfixturevalue("docker_image")  # skips (or fails, where CI requires an engine) without one
    return BASE_IMAGE


@pytest.fixture
def pairs(tmp_path, where):
    made: list[Pair] = []

    def make(root: Path, *, translated: bool = True, watch_events: bool = False) -> Pair:
        made.append(Pair(tmp_path, root, translated=translated, watch_events=watch_events, python=None, where=where))
        return made[-1]

    yield make
    for pair in made:
        pair.close()


EVENTS = pytest.mark.parametrize("watch_events", [True, False], ids=["inotify", "walk"])


@EVENTS
def test_a_pattern_added_to_info_exclude_drops_the_file_from_both(tmp_path, pairs, watch_events):
    root = make_repo(tmp_path / "repo", {"a.txt": "a\n"})
    (root / "notes.txt").write_text("untracked\n")
    pair = pairs(root, watch_events=watch_events)
    cs, _ = pair.snapshots("before")
    assert f"{root}/notes.txt" in cs.files
    (root / ".git" / "info").mkdir(exist_ok=True)
    with open(root / ".git" / "info" / "exclude", "a") as f:
        f.write("notes.txt\n")
    cs, changes = pair.snapshots("after info/exclude changed")
    assert changes == [f"{root}/notes.txt"] and f"{root}/notes.txt" not in cs.files


@EVENTS
def test_a_new_gitignore_in_a_subdirectory_drops_what_it_ignores_from_both(tmp_path, pairs, watch_events):
    root = make_repo(tmp_path / "repo", {"sub/a.txt": "a\n"})
    (root / "sub" / "b.tmp").write_text("untracked\n")
    pair = pairs(root, watch_events=watch_events)
    pair.snapshots("before")
    (root / "sub" / ".gitignore").write_text("*.tmp\n")
    pair.snapshots("the scan that finds the new .gitignore")
    cs, changes = pair.snapshots("the next scan")
    assert f"{root}/sub/b.tmp" not in cs.files and changes == [f"{root}/sub/b.tmp"]


@EVENTS
@pytest.mark.parametrize("layout", ["subdirectory", "worktree"])
def test_an_index_change_is_seen_by_both_when_the_root_is_not_the_top_of_a_repository(
    tmp_path, pairs, layout, watch_events
):
    top = make_repo(tmp_path / "repo", {"sub/a.txt": "a\n", ".gitignore": "*.log\n"})
    (top / "sub" / "forced.log").write_text("tracked although ignored\n")
    git(top, "add", "-f", "sub/forced.log")
    git(top, "commit", "-q", "-m", "forced")
    if layout == "subdirectory":
        root = top / "sub"
    else:
        git(top, "worktree", "add", "-q", str(tmp_path / "wt"))
        root = tmp_path / "wt"  # a linked worktree: its .git is a file
    pair = pairs(root, watch_events=watch_events)
    forced = next(p for p in pair.snapshots("before")[0].files if p.endswith("forced.log"))
    git(root, "rm", "-q", "--cached", os.path.relpath(forced, root))
    cs, changes = pair.snapshots("after git rm --cached")
    assert forced not in cs.files and changes == [forced]


@EVENTS
def test_a_file_back_in_the_snapshot_has_its_content_kept_by_both(tmp_path, pairs, watch_events):
    """A file the snapshot dropped (its directory excluded) and takes in again, unchanged on disk and vouched for by
    both hash caches (its mtime past their racy window), is a new file in both with its content kept: a scan read it
    only where its hash was racy, so which workspace kept it depended on timing (the container parity test found it)."""
    root = make_repo(tmp_path / "repo", {"a.txt": "a\n"})
    write_files(root, {"sub/b.txt": "b\n", "sub/.gitignore": "*.log\n"})  # untracked: what info/exclude drops
    age(root, 10.0)
    pair = pairs(root, watch_events=watch_events)
    pair.snapshots("before")
    exclude = root / ".git" / "info" / "exclude"
    exclude.write_text("sub/\n")
    pair.snapshots("sub/ excluded")
    exclude.write_text("")
    _, changes = pair.snapshots("sub/ taken in again")
    back = {f"{root}/sub/.gitignore": b"*.log\n", f"{root}/sub/b.txt": b"b\n"}
    assert changes == sorted(back) and pair.cw.kept() == back == pair.lw.kept()


@EVENTS
def test_a_file_added_back_to_the_index_has_its_content_kept_by_both(tmp_path, pairs, watch_events):
    """The same through the index: a tracked file the ignore rules match leaves with ``git rm --cached`` and comes back
    with ``git add -f``, unchanged on disk."""
    root = make_repo(tmp_path / "repo", {"a.txt": "a\n", ".gitignore": "*.log\n"})
    (root / "forced.log").write_text("tracked although ignored\n")
    git(root, "add", "-f", "forced.log")
    git(root, "commit", "-q", "-m", "forced")
    age(root, 10.0)
    pair = pairs(root, watch_events=watch_events)
    pair.snapshots("before")
    git(root, "rm", "-q", "--cached", "forced.log")
    pair.snapshots("after git rm --cached")
    git(root, "add", "-f", "forced.log")
    _, changes = pair.snapshots("after git add -f")
    back = {f"{root}/forced.log": b"tracked although ignored\n"}
    assert changes == sorted(back) and pair.cw.kept() == back == pair.lw.kept()


@EVENTS
def test_a_root_outside_git_ignores_the_same_directories_in_both(tmp_path, pairs, watch_events):
    root = tmp_path / "plain"
    kept = ["a.py", "src/b.py", "build/out.txt"]
    ignored = [
        "x.pyc",
        "__pycache__/m.pyc",
        ".venv/lib.py",
        "node_modules/m.js",
        ".tox/t",
        ".mypy_cache/m",
        ".pytest_cache/p",
        ".git/HEAD",
        "venv/lib.py",
        ".ruff_cache/c",
        ".eggs/e.py",
        "pkg.egg-info/PKG-INFO",
    ]
    for rel in kept + ignored:
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(rel + "\n")
    pair = pairs(root, watch_events=watch_events)
    cs, _ = pair.snapshots("a root outside git")
    assert not pair.cw.baseline(cs, "").is_git and rel_paths(root, cs.files) == set(kept)


def test_a_file_under_proc_is_signed_by_its_stat_data_in_both(tmp_path, pairs):
    root = make_repo(tmp_path / "repo", {"a.txt": "a\n"})
    os.symlink("/proc/version", root / "lproc")
    pair = pairs(root)
    pair.snapshots("start")
    keys = ["f:/proc/version", f"f:{root}/lproc", "m:/proc/version", f"x:{root}/lproc"]
    if pair.where == "here":
        sigs = pair.signatures(keys, "/proc")
    else:  # a container's /proc is its own (its times are the container's): the same kind of signature, by mode
        sigs = pair.cw.sign_many(keys)
        assert {k: v.split(",")[0] for k, v in pair.lw.sign_many(keys).items()} == {
            k: v.split(",")[0] for k, v in sigs.items()
        }
    assert sigs["f:/proc/version"].startswith("special:") and sigs[f"f:{root}/lproc"].startswith("special:")


def test_a_path_through_a_symlink_loop_signs_alike(tmp_path, pairs):
    root = make_repo(tmp_path / "repo", {"a.txt": "a\n"})
    os.symlink("loop", root / "loop")
    pair = pairs(root)
    pair.snapshots("start")
    keys = [f"f:{root}/loop", f"m:{root}/loop/x"] + [f"{k}:{root}/loop/x" for k in "fxdr"]
    sigs = pair.signatures(keys, "a symlink loop")
    assert sigs[f"m:{root}/loop/x"] == f"error:{errno.ELOOP}"


def test_a_symlink_to_itself_is_signed_by_both(tmp_path, pairs):
    from ledger_adapters.container.workspace import HelperError

    root = make_repo(tmp_path / "repo", {"a.txt": "a\n"})
    os.symlink("loop", root / "loop")
    pair = pairs(root)
    pair.snapshots("start")
    try:
        sigs = pair.signatures([f"x:{root}/loop"], "x: of a self-loop")
    except HelperError as e:
        raise AssertionError(f"the helper failed: {e}") from None
    assert sigs[f"x:{root}/loop"].startswith("link:loop:")


@pytest.mark.parametrize("target", ["a.txt", "nowhere.txt"], ids=["a link to itself", "a dangling link"])
def test_a_file_replaced_by_a_link_that_resolves_to_nothing_is_told_alike_by_both(tmp_path, pairs, target):
    """The random parity test's find, ops [('symlink', 'b.log', 'a.txt'), ('rename', 'b.log', 'a.txt')]: the file a.txt
    becomes a link to itself (or to nothing). Both record it changed to that link, keep no content of it, and tell its
    state alike; the check had read the path's bytes to compare the content kept, and failed there (ELOOP, ENOENT)."""
    root = make_repo(tmp_path / "repo", {"a.txt": "a\n", "c.txt": "c\n"})
    pair = pairs(root)
    pair.snapshots("before")
    os.symlink(target, root / "b.log")
    os.rename(root / "b.log", root / "a.txt")
    cs, changes = pair.snapshots("a.txt replaced by the link")
    assert changes == [f"{root}/a.txt"] and cs.files[f"{root}/a.txt"].digest.startswith("link:")
    assert pair.cw.kept() == {} == pair.lw.kept()
    pair.file_states([f"{root}/a.txt", f"{root}/a.txt/x"], "after")


@pytest.mark.parametrize("which", ["ignored file", "file outside the root", "symlink in the snapshot"])
def test_file_state_of_a_path_the_snapshot_does_not_hash_agrees(tmp_path, pairs, which):
    root = make_repo(tmp_path / "repo", {"a.txt": "a\n", ".gitignore": "*.log\n"})
    (root / "debug.log").write_text("ignored\n")
    (tmp_path / "outside.txt").write_text("outside\n")
    os.symlink("a.txt", root / "la")
    path = {
        "ignored file": root / "debug.log",
        "file outside the root": tmp_path / "outside.txt",
        "symlink in the snapshot": root / "la",
    }[which]
    pair = pairs(root)
    pair.snapshots("start")
    pair.learn([str(path), os.path.realpath(path)])
    local = pair.tr(pair.lw.file_state(str(path)))
    assert local is not None and local.size == len(path.read_bytes())
    assert pair.cw.file_state(str(path)) == local


def test_file_state_after_a_read_then_an_edit_is_the_new_state_in_both(tmp_path, pairs):
    root = make_repo(tmp_path / "repo", {"a.txt": "a\n"})
    pair = pairs(root)
    pair.snapshots("start")
    assert pair.run("cat a.txt") == "a\n"
    pair.snapshots("after the read")
    pair.run("printf 'b\\n' >> a.txt")
    cs, changes = pair.snapshots("after the edit")
    assert changes == [f"{root}/a.txt"] and cs.files[f"{root}/a.txt"].size == 4


def test_what_the_helper_ships_is_the_standard_library_and_itself(tmp_path):
    """The scanner's package, shipped into containers: each module imports only the standard library
    and its siblings (relatively: the package is a directory of its own there); where this machine has a
    Python 3.6, the oldest the helper promises, the helper and the package import under it as shipped."""
    import ast
    import sys

    from ledger_runtime.workspace.scanning import UNPACK_SOURCES, pack_sources, scanner_sources

    sources = scanner_sources()
    assert {p for p, _ in sources} >= {"scanning/engine.py", "scanning/gitview.py", "scanning/signatures.py"}
    for path, data in sources:
        for node in ast.walk(ast.parse(data, path)):
            if isinstance(node, ast.ImportFrom):
                assert node.level == 1 or node.module.split(".")[0] in sys.stdlib_module_names, (path, node.module)
                assert node.module != "__future__", f"{path}: Python 3.6 has no 'from __future__ import annotations'"
            elif isinstance(node, ast.Import):
                assert all(a.name.split(".")[0] in sys.stdlib_module_names for a in node.names), path
    exe = _python36()
    if exe is None:
        pytest.skip("no Python 3.6 on this machine (the import check under it)")
    helper = Path(__file__).parents[1] / "adapters" / "container" / "helper.py"
    bundle = pack_sources([("helper.py", helper.read_bytes()), *sources])
    subprocess.run([exe, "-S", "-E", "-c", UNPACK_SOURCES, str(tmp_path)], input=bundle, check=True)
    probe = "import helper, scanning.engine, scanning.persist, scanning.signatures; print('ok')"
    out = subprocess.run([exe, "-S", "-E", "-c", probe], cwd=tmp_path, capture_output=True, text=True, timeout=60)
    assert out.stdout.strip() == "ok", out.stderr


@pytest.mark.parametrize(
    "value",
    [
        {"changes": [["/r/a.txt", ["b2:00", 3, 1]], ["/r/gone", None]], "sigs": {}, "ok": True, "no": False},
        ['quote " backslash \\ newline \n tab \t nul \0 bell \x07', "caf\u00e9", "\U0001f600", "latin-\udce9.txt"],
        {"nested": {"deeper": [[], {}, (1, 2)]}, "n": -3, "big": 10**20, "float": 0.1},
        "",
    ],
)
def test_the_helpers_json_is_what_json_writes(value):
    """The helper writes its answers without the json package (it would import re, a third of a call):
    the same text json.dumps writes, file names that are not UTF-8 included."""
    import importlib.util
    import json

    spec = importlib.util.spec_from_file_location(
        "ledger_container_helper", Path(__file__).parents[1] / "adapters" / "container" / "helper.py"
    )
    helper = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(helper)
    assert helper.to_json(value) == json.dumps(value)
