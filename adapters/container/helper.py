"""Ledger helper that runs INSIDE a container, next to the agent's commands: the local workspace's
own scanner (ledger_runtime/workspace/scanning/, shipped beside this script as ``scanning/``), with a
state file between calls and JSON answers.

Installed on first use by ContainerWorkspace (workspace.py), with the scanner's package. Both must
run on any Python 3.6+ with the standard library alone (run with ``python3 -S -E``), so they are
written in that dialect.

    helper.py --run NONCE DIGEST init ROOT STATE      first snapshot, git baseline; JSON on stdout
    helper.py --run NONCE DIGEST post STATE [options] after a command: what changed, signatures
    helper.py --run NONCE DIGEST sign STATE KEY...    signatures only
    helper.py --run NONCE DIGEST state STATE PATH...  file states (as ``cat`` reads them) only

Every call names the run (NONCE) and the digest of what was installed, this script and the package
(DIGEST): a helper that is no longer what was installed refuses to answer, a state file of another
run is not read, and every answer carries the NONCE, so the ledger takes nothing from an old, foreign
or changed helper.

Options of ``post``: ``--seq N`` (calls are numbered; one older than the last taken is ignored:
the late EXIT trap of a command that timed out must not overwrite newer state), ``--keep N`` (send
the content of changed text files up to N bytes),
``--sign KEY`` (sign this read key now and after every later command, when cheap),
``--watch PATH`` (also track this file outside the workspace), ``--show PATH`` (send the content of
this file, a command's output claims to show lines of it, up to the --keep size; not under /proc,
/sys or /dev).

State (the scanner's: stat cache, directory listings, the last snapshot, watched paths; and the
signed keys) lives in the STATE file (marshal), so each call reads only what changed. Content
hashes are blake2b-128 ("b2:" prefix): xxhash is not in the container, and the ledger compares hashes
only with hashes of the same run.
"""

import binascii
import gc
import marshal
import os
import sys

try:  # the C module itself: hashlib would also load OpenSSL, which costs more than the hashing
    from _blake2 import blake2b
except ImportError:  # pragma: no cover
    from hashlib import blake2b
try:  # json's own string escaping, in C: the json package would import re, a third of a call's time
    from _json import encode_basestring_ascii as quoted
except ImportError:  # pragma: no cover
    from json import dumps as quoted

VERSION = 2
MAX_HASH = 64 * 1024 * 1024
NONCE = ""  # the run's, from --run: every answer carries it


def b2(data):
    return "b2:" + blake2b(data, digest_size=16).hexdigest()


def reply(obj):
    obj["nonce"] = NONCE
    sys.stdout.write(to_json(obj) + "\n")


def to_json(value):
    """``value`` (dicts with string keys, lists, tuples, strings, numbers, None) as ``json.dumps`` writes it."""
    if isinstance(value, str):
        return quoted(value)
    if value is None:
        return "null"
    if value is True or value is False:
        return "true" if value else "false"
    if isinstance(value, (int, float)):
        return repr(value)
    if isinstance(value, dict):
        return "{" + ", ".join(quoted(k) + ": " + to_json(v) for k, v in value.items()) + "}"
    return "[" + ", ".join(to_json(v) for v in value) + "]"


def installed_digest(scanning):
    """The digest of this script and the scanner's package as they are now (as ContainerWorkspace
    computed it from what it sent)."""
    with open(os.path.abspath(__file__), "rb") as f:
        own = f.read()
    return b2(scanning.pack_sources([("helper.py", own)] + scanning.scanner_sources()))


class Helper(object):
    """The scanner of one run, restored from and saved to its state file."""

    def __init__(self, modules, path, root=None):
        self.m = modules
        self.path = path
        self.data = None
        if root is None:  # a call after init: the state says where
            try:
                with open(path, "rb") as f:
                    data = marshal.loads(f.read())  # load(f) reads object by object: several times slower
                if isinstance(data, dict) and data.get("version") == VERSION and data.get("nonce") == NONCE:
                    self.data = data
            except Exception:
                self.data = None
            if self.data is None:
                return
            root = self.data["scanner"]["root"]
            git_top = self.data["scanner"]["git_top"]
        else:
            self.data = {"version": VERSION, "nonce": NONCE, "keys": [], "head_sent": {}, "git": {}}
            git_top = ""  # ask git
        digests = modules.filestate.Digests("blake2b-128", lambda: blake2b(digest_size=16), "b2:")
        self.untracked = []  # directories the scanner stopped tracking in this call
        self.scanner = modules.engine.WorkspaceScanner(
            root,
            modules.filestate.HashCache(digests, MAX_HASH),
            on_untracked=self.untracked.append,
            git_top=git_top,
        )
        if "scanner" in self.data:
            modules.persist.restore(self.scanner, self.data["scanner"])
        self.probe = modules.signatures.Probe(self.scanner.cache)

    def save(self):
        self.data["scanner"] = self.m.persist.export(self.scanner)
        tmp = self.path + ".tmp"
        with open(tmp, "wb") as f:
            f.write(marshal.dumps(self.data))
        os.replace(tmp, self.path)

    def states(self, paths):
        return dict((p, self.probe.file_state(p)) for p in paths)


def read_seq(state_path):
    try:
        with open(state_path + ".seq") as f:
            return int(f.read().strip() or 0)
    except (OSError, ValueError):
        return 0


def write_seq(state_path, seq):
    with open(state_path + ".seq", "w") as f:
        f.write(str(seq))


def git_info(root, run_git):
    info = {"is_git": False, "head": None, "branch": None, "dirty": [], "top": None}
    top = run_git(root, ["rev-parse", "--show-toplevel"])
    if not top or not top.strip():
        return info
    info["is_git"] = True
    info["top"] = os.fsdecode(top.strip())
    head = run_git(root, ["rev-parse", "--verify", "-q", "HEAD"])
    info["head"] = os.fsdecode(head.strip()) if head and head.strip() else None
    branch = run_git(root, ["symbolic-ref", "-q", "--short", "HEAD"])
    info["branch"] = os.fsdecode(branch.strip()) if branch and branch.strip() else None
    status = run_git(root, ["status", "--porcelain", "-z", "--untracked-files=no"]) or b""
    info["dirty"] = sorted(os.fsdecode(p[3:]) for p in status.split(b"\0") if len(p) > 3)
    return info


def head_content(path, top, head):
    if not head or not top:
        return None
    rel = os.path.relpath(path, top)
    if rel.startswith(".."):
        return None
    import subprocess

    try:
        p = subprocess.Popen(
            ["git", "-C", top, "cat-file", "blob", head + ":" + rel], stdout=subprocess.PIPE, stderr=subprocess.DEVNULL
        )
        out, _ = p.communicate()
    except OSError:
        return None
    return out if p.returncode == 0 else None


def uncarried(arg):
    """An argument as ContainerWorkspace meant it: "@b64:" and base64 stand for bytes that are not
    UTF-8 (workspace.py, ``carried``)."""
    if arg.startswith("@b64:"):
        return os.fsdecode(binascii.a2b_base64(arg[5:]))
    return arg


def enc(data):
    return binascii.b2a_base64(data, newline=False).decode("ascii")


def cheap(key):
    return not key.startswith("r:")


def ignored_paths(helper):
    """What the snapshot does not hash although it is there (``ignored_entries``), when it changed since
    the last call: with the snapshot, ContainerWorkspace knows what is anywhere in the tree without
    asking (``file_state``)."""
    out = helper.scanner.ignored_entries()
    seen = b2("\0".join(out).encode("utf-8", "surrogateescape"))
    if helper.data.get("ignored_seen") == seen:
        return None
    helper.data["ignored_seen"] = seen
    return out


def untracked_report(helper):
    root = helper.scanner.root
    return [[u.path, u.summary(root)] for u in helper.untracked]


def init(m, root, state_path):
    helper = Helper(m, state_path, os.path.normpath(root))
    info = git_info(helper.scanner.root, m.gitview.run_git)
    helper.scanner.git_top = info["top"]
    helper.data["git"] = info
    snap = helper.scanner.scan()
    ignored = ignored_paths(helper)
    helper.save()
    reply(
        {
            "algo": "blake2b-128",
            "root": helper.scanner.root,
            "files": dict(snap.files.items()),
            "untracked": untracked_report(helper),
            "untracked_dirs": list(snap.untracked),
            "ignored": ignored,
            "git": info,
            "python": sys.version.split()[0],
            "executable": sys.executable,
        }
    )
    return 0


def parse_post(args, state_path):
    """The options of ``post``; None when the call is stale (an answer is given)."""
    opts = {"keep": 0, "sign": [], "show": [], "watch": []}
    i = 0
    while i < len(args):
        a, value = args[i], args[i + 1]
        if a == "--seq":
            last = read_seq(state_path)
            if int(value) <= last:
                reply({"error": "stale call %s (state is at %d)" % (value, last)})
                return None
            write_seq(state_path, int(value))
        elif a == "--keep":
            opts["keep"] = int(value)
        elif a in ("--sign", "--show", "--watch"):
            opts[a[2:]].append(value)
        i += 2
    return opts


def post(m, state_path, args):  # noqa: C901
    opts = parse_post(args, state_path)
    if opts is None:
        return 0
    helper = Helper(m, state_path)
    if helper.data is None:
        reply({"error": "helper state missing or not this run's: run init first"})
        return 3
    scanner = helper.scanner
    scanner.watch(os.path.normpath(p) for p in opts["watch"])
    before = scanner.last_files
    snap = scanner.scan(keep_limit=opts["keep"])
    after = snap.files
    changes = [[p, fs] for p, fs in after.items() if before is None or (before.get(p) or (None,))[0] != fs[0]]
    changes += [[p, None] for p in (before or ()) if p not in after]
    keys = helper.data["keys"]
    for k in opts["sign"]:
        if k not in keys and cheap(k):
            keys.append(k)
    sigs = dict((k, helper.probe.sign(k)) for k in set(keys) | set(opts["sign"]))
    kept, heads = {}, {}
    info = helper.data.get("git") or {}
    for p, fs in changes:
        if fs is not None and p in scanner.cache.kept:
            kept[p] = enc(scanner.cache.kept[p])
        if p not in helper.data["head_sent"] and info.get("head"):
            content = head_content(p, info.get("top"), info.get("head"))
            helper.data["head_sent"][p] = 1
            if content is not None and len(content) <= max(opts["keep"], 1):
                heads[p] = enc(content)
    states = helper.states(k[2:] for k in opts["sign"] if k.startswith("f:"))
    contents = {}
    links = {}  # a shown path that is a symbolic link: its own digest, and the file it resolves to
    for p in opts["show"]:
        data = m.filestate.read_regular(p, max(opts["keep"], 1))
        if data is not None:
            contents[p] = enc(data)
            if os.path.islink(p):
                own = scanner.cache.state(p)
                if own is not None:
                    links[p] = [own.digest, os.path.realpath(p)]
    ignored = ignored_paths(helper)
    helper.save()
    reply(
        {
            "changes": changes,
            "sigs": sigs,
            "kept": kept,
            "heads": heads,
            "states": states,
            "contents": contents,
            "links": links,
            "untracked": untracked_report(helper),
            "untracked_dirs": list(snap.untracked),
            "ignored": ignored,
        }
    )
    return 0


def main(argv):
    global NONCE
    gc.disable()  # one call, then the process ends: a collection while the state loads cost most of its time
    if len(argv) < 5 or argv[1] != "--run":
        reply({"error": "called without --run NONCE DIGEST"})
        return 2
    NONCE, digest = argv[2], argv[3]
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    import scanning
    from scanning import engine, filestate, gitview, persist, signatures

    if installed_digest(scanning) != digest:
        reply({"error": "the helper is not what was installed (changed since)"})
        return 3
    m = Modules(engine, filestate, gitview, persist, signatures)
    argv = [argv[0]] + [uncarried(a) for a in argv[4:]]
    cmd = argv[1]
    if cmd == "init":
        return init(m, argv[2], argv[3])
    if cmd == "post":
        return post(m, argv[2], argv[3:])
    if cmd not in ("sign", "state"):
        reply({"error": "unknown helper command " + cmd})
        return 2
    helper = Helper(m, argv[2])
    if helper.data is None:
        reply({"error": "helper state missing or not this run's: run init first"})
        return 3
    if cmd == "sign":
        reply({"sigs": dict((k, helper.probe.sign(k)) for k in argv[3:])})
    else:
        reply({"states": helper.states(argv[3:])})
    helper.save()
    return 0


class Modules(object):
    """The scanner's modules, imported once the script knows where it is."""

    def __init__(self, engine, filestate, gitview, persist, signatures):
        self.engine, self.filestate, self.gitview, self.persist = engine, filestate, gitview, persist
        self.signatures = signatures


if __name__ == "__main__":
    try:
        sys.exit(main(sys.argv))
    except Exception as e:  # never a traceback into the agent's output: one JSON line saying why
        reply({"error": "%s: %s" % (type(e).__name__, e)})
        sys.exit(1)
