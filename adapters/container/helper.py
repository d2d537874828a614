"""Ledger helper that runs INSIDE a container, next to the agent's commands.

Installed on first use by ContainerWorkspace (workspace.py). It must run on any Python 3.6+ with
the standard library alone (run with ``python3 -S -E``), so it is written in that dialect.

    helper.py --run NONCE DIGEST init ROOT STATE      first snapshot, git baseline; JSON on stdout
    helper.py --run NONCE DIGEST post STATE [options] after a command: what changed, signatures
    helper.py --run NONCE DIGEST sign STATE KEY...    signatures only

Every call names the run (NONCE) and the digest of the script as installed (DIGEST): a script that
is no longer what was installed refuses to answer, a state file of another run is not read, and
every answer carries the NONCE, so the ledger takes nothing from an old, foreign or changed helper.

Options of ``post``: ``--seq N`` (calls are numbered; one older than the last taken is ignored:
the late EXIT trap of a command that timed out must not overwrite newer state), ``--keep N`` (send
the content of changed text files up to N bytes),
``--sign KEY`` (sign this read key now and after every later command, when cheap),
``--watch PATH`` (also track this file outside the workspace), ``--show PATH`` (send the content of
this file, a command's output claims to show lines of it, up to the --keep size; not under /proc,
/sys or /dev).

State (stat cache, directory listings, the last snapshot, watched keys) lives in the STATE file
(marshal), so each call reads only what changed. Content hashes are blake2b-128 ("b2:" prefix):
xxhash is not in the container, and the ledger compares hashes only with hashes of the same run.
Signatures mirror ledger_runtime/workspace/signatures.py; the snapshot mirrors
ledger_runtime/workspace/scanner.py.
"""

import binascii
import errno
import fnmatch
import json
import marshal
import os
import stat
import sys
import time

try:  # the C module itself: hashlib would also load OpenSSL, which costs more than the hashing
    from _blake2 import blake2b
except ImportError:  # pragma: no cover
    from hashlib import blake2b

VERSION = 1
RACY_NS = 2000000000
MAX_HASH = 64 * 1024 * 1024
# the same as the local scanner's (ledger_runtime/workspace/scanner.py; tests/test_helper_parity.py checks)
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
PSEUDO_TREES = ("/proc/", "/sys/", "/dev/")  # never read to sign (signatures.py)


def b2(data):
    return "b2:" + blake2b(data, digest_size=16).hexdigest()


def meta(st):
    return "%o,%d,%d,%d,%d,%d,%d,%d" % (
        st.st_mode,
        st.st_size,
        st.st_mtime_ns,
        st.st_ctime_ns,
        st.st_ino,
        st.st_nlink,
        st.st_uid,
        st.st_gid,
    )


NONCE = ""  # the run's, from --run: every answer carries it


def reply(obj):
    obj["nonce"] = NONCE
    sys.stdout.write(json.dumps(obj) + "\n")


def own_digest():
    with open(os.path.abspath(__file__), "rb") as f:
        return b2(f.read())


def open_quietly(path, flags):
    """os.open without touching the file's access time where its owner (or root) may ask that."""
    noatime = getattr(os, "O_NOATIME", 0)
    if noatime:
        try:
            return os.open(path, flags | noatime)
        except OSError as e:
            if e.errno != errno.EPERM:
                raise
    return os.open(path, flags)


class State(object):
    def __init__(self, path):
        self.path = path
        self.data = None
        try:
            with open(path, "rb") as f:
                data = marshal.load(f)
            if isinstance(data, dict) and data.get("version") == VERSION and data.get("nonce") == NONCE:
                self.data = data
        except Exception:
            self.data = None
        if self.data is None:
            self.data = {
                "version": VERSION,
                "root": "",
                "cache": {},
                "dirs": {},
                "files": {},
                "keys": [],
                "extra": [],
                "git_key": None,
                "head_sent": {},
                "is_git": False,
                "nonce": NONCE,
            }
        self.kept = {}
        self.keep_limit = 0
        self.dirty = False  # only a changed state is written back

    def save(self, force=False):
        if not (self.dirty or force):
            return
        tmp = self.path + ".tmp"
        with open(tmp, "wb") as f:
            marshal.dump(self.data, f)
        os.replace(tmp, self.path)

    # -- hashing with a stat cache (never trusting a racy entry) --

    def file_state(self, path, st=None):  # noqa: C901
        try:
            if st is None:
                st = os.lstat(path)
        except OSError:
            return None
        mode = st.st_mode
        if stat.S_ISLNK(mode):
            try:
                return ["link:" + b2(os.fsencode(os.readlink(path)))[3:], st.st_size, None]
            except OSError:
                return None
        if not stat.S_ISREG(mode):
            return None
        key = [st.st_mtime_ns, st.st_ctime_ns, st.st_size, st.st_ino, st.st_mode]
        cache = self.data["cache"]
        hit = cache.get(path)
        if hit is not None and hit[0] == key and st.st_mtime_ns < hit[1] - RACY_NS:
            return hit[2]
        if st.st_size > MAX_HASH:
            fs = ["large:%d:%d:%d:%d" % (st.st_size, st.st_mtime_ns, st.st_ctime_ns, st.st_ino), st.st_size, None]
            cache[path] = [key, time.time_ns() if hasattr(time, "time_ns") else int(time.time() * 1e9), fs]
            self.dirty = True
            return fs
        hashed_at = time.time_ns() if hasattr(time, "time_ns") else int(time.time() * 1e9)
        try:
            with os.fdopen(open_quietly(path, os.O_RDONLY), "rb") as f:
                data = f.read()
        except OSError:
            if not os.path.lexists(path):
                return None
            return [
                "unreadable:%d:%d:%d:%d" % (st.st_size, st.st_mtime_ns, st.st_ctime_ns, st.st_ino),
                st.st_size,
                None,
            ]
        binary = b"\0" in data[:8192]
        lines = None if binary else data.count(b"\n") + (1 if data and not data.endswith(b"\n") else 0)
        fs = [b2(data), len(data), lines]
        cache[path] = [key, hashed_at, fs]
        self.dirty = True
        if self.keep_limit and not binary and len(data) <= self.keep_limit:
            self.kept[path] = data
        return fs

    # -- listing: what git does not ignore --

    def git(self, args, stdin=None):
        try:
            import subprocess  # only when git is needed: importing it costs milliseconds

            p = subprocess.Popen(
                ["git", "-C", self.data["root"]] + args,
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=subprocess.DEVNULL,
            )
            out, _ = p.communicate(stdin)
        except OSError:
            return None
        return out if p.returncode in (0, 1) else None

    def git_key(self):
        parts = []
        for p in [os.path.join(self.data["root"], ".git", "index")] + sorted(self.data.get("ignore_files", [])):
            try:
                st = os.stat(p)
                parts.append([p, st.st_mtime_ns, st.st_ctime_ns, st.st_size])
            except OSError:
                parts.append([p])
        return parts

    def ignored(self, rels):
        if not rels:
            return set()
        if not self.data["is_git"]:
            return set(
                r
                for r in rels
                if any(fnmatch.fnmatchcase(os.path.basename(r.rstrip("/")), pat) for pat in DEFAULT_IGNORES)
            )
        out = self.git(
            ["check-ignore", "--no-index", "-z", "--stdin"], b"\0".join(os.fsencode(r) for r in rels) + b"\0"
        )
        return set(os.fsdecode(x) for x in (out or b"").split(b"\0") if x)

    def refresh(self):  # noqa: C901
        root = self.data["root"]
        if not self.data["is_git"]:
            return
        key = self.git_key()
        if key == self.data["git_key"] and self.data["dirs"]:
            return
        out = self.git(["ls-files", "-z", "--cached", "--others", "--exclude-standard"])
        if out is None:
            self.data["is_git"] = False
            self.data["dirs"] = {}
            return
        tree = {root: [set(), set()]}
        ignore_files = []
        for raw in out.split(b"\0"):
            if not raw:
                continue
            rel = os.fsdecode(raw)
            parts = rel.split("/")
            d = root
            for part in parts[:-1]:
                tree.setdefault(d, [set(), set()])[1].add(part)
                d = d + "/" + part if d != "/" else "/" + part
            tree.setdefault(d, [set(), set()])[0].add(parts[-1])
            if parts[-1] == ".gitignore":
                ignore_files.append(os.path.join(root, rel))
        self.data["ignore_files"] = ignore_files
        now = time.time_ns() if hasattr(time, "time_ns") else int(time.time() * 1e9)
        dirs = {}
        empty = []
        for d, (files, subdirs) in tree.items():
            try:
                st = os.lstat(d)
                names = os.listdir(d)
            except OSError:
                continue
            others = [n for n in names if n not in files and n not in subdirs and n != ".git"]
            dirs[d] = [[st.st_mtime_ns, st.st_ctime_ns, st.st_ino], now, sorted(files), sorted(subdirs), others]
            for n in others:
                p = os.path.join(d, n)
                if os.path.isdir(p) and not os.path.islink(p):
                    empty.append(p)
        if empty:
            rels = [os.path.relpath(p, root) + "/" for p in empty]
            ign = self.ignored(rels)
            for p, r in zip(empty, rels):
                if r in ign or r.rstrip("/") in ign:
                    continue
                d, name = os.path.split(p)
                dirs[d][3].append(name)
                dirs[d][4].remove(name)
        self.data["dirs"] = dirs
        self.dirty = True
        self.data["git_key"] = self.git_key()

    def listing(self, d, pending):  # noqa: C901
        dirs = self.data["dirs"]
        try:
            st = os.lstat(d)
        except OSError:
            dirs.pop(d, None)
            return None
        if not stat.S_ISDIR(st.st_mode):
            dirs.pop(d, None)
            return None
        key = [st.st_mtime_ns, st.st_ctime_ns, st.st_ino]
        cached = dirs.get(d)
        if cached is not None and cached[0] == key and st.st_mtime_ns < cached[1] - RACY_NS:
            return cached
        listed_at = time.time_ns() if hasattr(time, "time_ns") else int(time.time() * 1e9)
        files, subdirs, ignored, new = [], [], [], []
        kf = set(cached[2]) if cached else set()
        kd = set(cached[3]) if cached else set()
        ki = set(cached[4]) if cached else set()
        try:
            entries = list(os.scandir(d))
        except OSError:
            return None
        for e in entries:
            name = e.name
            if name == ".git":
                continue
            try:
                is_dir = e.is_dir(follow_symlinks=False)
                is_file = e.is_file(follow_symlinks=False) or e.is_symlink()
            except OSError:
                continue
            if not (is_dir or is_file):
                ignored.append(name)
            elif name in ki:
                ignored.append(name)
            elif is_dir and name in kd:
                subdirs.append(name)
            elif is_file and name in kf:
                files.append(name)
            else:
                new.append(name + "/" if is_dir else name)
        if new:
            pending.append((d, new))
        entry = [key, listed_at, files, subdirs, ignored]
        dirs[d] = entry
        self.dirty = True
        return entry

    def scan(self):  # noqa: C901
        root = self.data["root"]
        self.refresh()
        files = {}
        pending = []
        self.walk([root], files, pending)
        while pending:
            rel = []
            for d, names in pending:
                for n in names:
                    r = os.path.relpath(os.path.join(d, n.rstrip("/")), root)
                    rel.append((d, n, r + "/" if n.endswith("/") else r))
            pending = []
            ign = self.ignored([r for _, _, r in rel])
            new_dirs = []
            for d, n, r in rel:
                entry = self.data["dirs"].get(d)
                name = n.rstrip("/")
                if entry is None:
                    continue
                if r in ign or r.rstrip("/") in ign:
                    entry[4].append(name)
                elif n.endswith("/"):
                    entry[3].append(name)
                    new_dirs.append(os.path.join(d, name))
                else:
                    entry[2].append(name)
                    fs = self.file_state(os.path.join(d, name))
                    if fs is not None:
                        files[os.path.join(d, name)] = fs
            self.walk(new_dirs, files, pending)
        for p in self.data["extra"]:
            if p not in files:
                fs = self.file_state(p)
                if fs is not None:
                    files[p] = fs
        return files

    def walk(self, stack, files, pending):
        while stack:
            d = stack.pop()
            entry = self.listing(d, pending)
            if entry is None:
                continue
            base = d if d != "/" else ""
            for name in entry[2]:
                p = base + "/" + name
                fs = self.file_state(p)
                if fs is not None:
                    files[p] = fs
            stack.extend(base + "/" + name for name in entry[3])

    # -- read-key signatures (see ledger_runtime/workspace/signatures.py) --

    def sign(self, key):  # noqa: C901
        kind, _, path = key.partition(":")
        try:
            if kind == "f":
                try:
                    st = os.stat(path)
                except (FileNotFoundError, NotADirectoryError):
                    return "missing"
                if stat.S_ISDIR(st.st_mode):
                    return "dir:" + self.listing_sig(path)
                real = os.path.realpath(path)
                if not stat.S_ISREG(st.st_mode) or (real + "/").startswith(PSEUDO_TREES):
                    return "special:" + meta(st)
                fs = self.file_state(real)
                if fs is None:
                    return "missing"
                return fs[0] if real == path else fs[0] + "@" + real
            if kind == "x":
                try:
                    st = os.lstat(path)
                except (FileNotFoundError, NotADirectoryError):
                    return "missing"
                if stat.S_ISLNK(st.st_mode):
                    real = os.path.realpath(path)
                    if real == path:  # a link the path cannot be resolved past (a loop)
                        return "link:" + os.readlink(path) + ":error:%s" % errno.ELOOP
                    return "link:" + os.readlink(path) + ":" + self.sign("x:" + real)
                return "dir" if stat.S_ISDIR(st.st_mode) else "file"
            if kind == "m":
                return meta(os.lstat(path))
            if kind == "d":
                return self.listing_sig(path)
            if kind == "r":
                return self.tree_sig(path)
        except OSError as e:
            return "error:%s" % e.errno
        return "unknown-key:" + kind

    def listing_sig(self, path):
        try:
            st = os.lstat(path)
        except (FileNotFoundError, NotADirectoryError):
            return "missing"
        h = blake2b(digest_size=16)
        h.update(meta(st).encode())
        if stat.S_ISLNK(st.st_mode):
            h.update(os.fsencode(os.readlink(path)))
            try:
                st = os.stat(path)
            except OSError:
                return h.hexdigest()
            h.update(meta(st).encode())
        if not stat.S_ISDIR(st.st_mode):
            fs = self.file_state(os.path.realpath(path))
            h.update((fs[0] if fs else "missing").encode())
            return h.hexdigest()
        for e in os.scandir(path):
            h.update(os.fsencode(e.name) + b"\0")
            try:
                h.update(meta(e.stat(follow_symlinks=False)).encode())
            except OSError:
                h.update(b"gone")
        return h.hexdigest()

    def tree_sig(self, path):  # noqa: C901
        try:
            st = os.lstat(path)
        except (FileNotFoundError, NotADirectoryError):
            return "missing"
        h = blake2b(digest_size=16)
        if stat.S_ISLNK(st.st_mode):
            h.update(b"L" + os.fsencode(os.readlink(path)))
            real = os.path.realpath(path)
            if os.path.isdir(real):
                h.update(self.tree_sig(real).encode())
                return h.hexdigest()
        if not stat.S_ISDIR(st.st_mode):
            return "file:" + self.listing_sig(path)
        stack = [path]
        while stack:
            d = stack.pop()
            h.update(b"D" + os.fsencode(d) + b"\0")
            try:
                it = list(os.scandir(d))
            except OSError as e:
                h.update(("unlistable:%s" % e.errno).encode())
                continue
            for e in it:
                h.update(os.fsencode(e.name) + b"\0")
                try:
                    est = e.stat(follow_symlinks=False)
                except OSError:
                    h.update(b"gone")
                    continue
                h.update(meta(est).encode())
                if stat.S_ISDIR(est.st_mode):
                    stack.append(e.path)
                elif stat.S_ISREG(est.st_mode) or stat.S_ISLNK(est.st_mode):
                    fs = self.file_state(e.path, est)
                    h.update((fs[0] if fs else "missing").encode())
        return h.hexdigest()


def read_seq(state_path):
    try:
        with open(state_path + ".seq") as f:
            return int(f.read().strip() or 0)
    except (OSError, ValueError):
        return 0


def write_seq(state_path, seq):
    with open(state_path + ".seq", "w") as f:
        f.write(str(seq))


def git_info(state):
    info = {"is_git": False, "head": None, "branch": None, "dirty": [], "top": None}
    top = state.git(["rev-parse", "--show-toplevel"])
    if not top:
        return info
    info["is_git"] = True
    info["top"] = os.fsdecode(top.strip())
    head = state.git(["rev-parse", "--verify", "-q", "HEAD"])
    info["head"] = os.fsdecode(head.strip()) if head and head.strip() else None
    branch = state.git(["symbolic-ref", "-q", "--short", "HEAD"])
    info["branch"] = os.fsdecode(branch.strip()) if branch and branch.strip() else None
    status = state.git(["status", "--porcelain", "-z", "--untracked-files=no"]) or b""
    info["dirty"] = sorted(os.fsdecode(p[3:]) for p in status.split(b"\0") if len(p) > 3)
    return info


def head_content(state, path, top, head):
    if not head or not top:
        return None
    rel = os.path.relpath(path, top)
    if rel.startswith(".."):
        return None
    try:
        import subprocess

        p = subprocess.Popen(
            ["git", "-C", top, "cat-file", "blob", head + ":" + rel], stdout=subprocess.PIPE, stderr=subprocess.DEVNULL
        )
        out, _ = p.communicate()
    except OSError:
        return None
    return out if p.returncode == 0 else None


def regular_content(path, limit):
    """A regular file's bytes (symlinks followed), at most ``limit`` of them, never from /proc, /sys
    or /dev (mirrors ledger_runtime/workspace/local.py's read_regular)."""
    real = os.path.realpath(path)
    if (real + "/").startswith(("/proc/", "/sys/", "/dev/")):
        return None
    try:
        fd = open_quietly(real, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0))
    except OSError:
        return None
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode) or st.st_size > limit:
            return None
        chunks = []
        size = 0
        while size <= limit:
            chunk = os.read(fd, limit + 1 - size)
            if not chunk:
                break
            chunks.append(chunk)
            size += len(chunk)
        return b"".join(chunks) if size <= limit else None
    except OSError:
        return None
    finally:
        os.close(fd)


def enc(data):
    return binascii.b2a_base64(data, newline=False).decode("ascii")


def cheap(key):
    return not key.startswith("r:")


def main(argv):  # noqa: C901
    global NONCE
    if len(argv) < 5 or argv[1] != "--run":
        reply({"error": "called without --run NONCE DIGEST"})
        return 2
    NONCE, digest = argv[2], argv[3]
    if own_digest() != digest:
        reply({"error": "helper.py is not the script that was installed (changed since)"})
        return 3
    argv = [argv[0]] + argv[4:]
    cmd = argv[1]
    if cmd == "init":
        root, state_path = argv[2], argv[3]
        state = State(state_path)
        state.data = State(os.devnull).data  # always a fresh start
        state.path = state_path
        state.data["root"] = os.path.normpath(root)
        info = git_info(state)
        state.data["is_git"] = info["is_git"]
        state.data["git"] = info
        files = state.scan()
        state.data["files"] = files
        state.save(force=True)
        out = {
            "algo": "blake2b-128",
            "root": state.data["root"],
            "files": files,
            "git": info,
            "python": sys.version.split()[0],
            "executable": sys.executable,
        }
        reply(out)
        return 0
    state = State(argv[2])
    if not state.data["root"]:
        reply({"error": "helper state missing or not this run's: run init first"})
        return 3
    if cmd == "sign":
        reply({"sigs": dict((k, state.sign(k)) for k in argv[3:])})
        state.save()
        return 0
    if cmd != "post":
        reply({"error": "unknown helper command " + cmd})
        return 2
    args = argv[3:]
    sign_now = []
    show = []
    i = 0
    while i < len(args):
        a = args[i]
        if a == "--seq":
            seq = int(args[i + 1])
            last = read_seq(argv[2])
            if seq <= last:
                reply({"error": "stale call %d (state is at %d)" % (seq, last)})
                return 0
            write_seq(argv[2], seq)
        elif a == "--keep":
            state.keep_limit = int(args[i + 1])
        elif a == "--sign":
            sign_now.append(args[i + 1])
        elif a == "--show":
            show.append(args[i + 1])
        elif a == "--watch":
            p = os.path.normpath(args[i + 1])
            if p not in state.data["extra"]:
                state.data["extra"].append(p)
                state.dirty = True
        i += 2
    before = state.data["files"]
    after = state.scan()
    changes = []
    for p, fs in after.items():
        old = before.get(p)
        if old is None or old[0] != fs[0]:
            changes.append([p, fs])
    for p in before:
        if p not in after:
            changes.append([p, None])
    if changes or len(after) != len(before):
        state.data["files"] = after
        state.dirty = True
    keys = state.data["keys"]
    for k in sign_now:
        if k not in keys and cheap(k):
            keys.append(k)
            state.dirty = True
    sigs = {}
    for k in set(keys) | set(sign_now):
        sigs[k] = state.sign(k)
    kept = {}
    heads = {}
    info = state.data.get("git") or {}
    for p, fs in changes:
        if fs is not None and p in state.kept:
            kept[p] = enc(state.kept[p])
        if p not in state.data["head_sent"] and info.get("head"):
            content = head_content(state, p, info.get("top"), info.get("head"))
            state.data["head_sent"][p] = 1
            state.dirty = True
            if content is not None and len(content) <= max(state.keep_limit, 1):
                heads[p] = enc(content)
    lines = {}
    for k in sign_now:
        if k.startswith("f:"):
            fs = state.file_state(os.path.realpath(k[2:]))
            lines[k[2:]] = fs
    contents = {}
    for p in show:
        data = regular_content(p, max(state.keep_limit, 1))
        if data is not None:
            contents[p] = enc(data)
    state.save()
    reply({"changes": changes, "sigs": sigs, "kept": kept, "heads": heads, "states": lines, "contents": contents})
    return 0


if __name__ == "__main__":
    try:
        sys.exit(main(sys.argv))
    except Exception as e:  # never a traceback into the agent's output: one JSON line saying why
        reply({"error": "%s: %s" % (type(e).__name__, e)})
        sys.exit(1)
