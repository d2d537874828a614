"""Benchmark of the mini-swe-agent adapter: the time the ledger adds to each command, locally and in Docker.

What it measures (times in ms; each figure is the median (p50) and 95th percentile over the commands):

1. Per command, for each executor, the wall time of ``env.execute({"command": cmd})`` (no agent
   loop, no model) with mini-swe-agent's own environment ("plain") and with ``LedgerEnvironment``
   wrapped around the same environment class:

   - local: ``LocalEnvironment(cwd=TREE, timeout=60)`` versus ``LedgerEnvironment(inner_class="local",
     cwd=TREE, timeout=60, ledger={"run_dir": ..., "shadow": True})``;
   - docker: ``DockerEnvironment(image=IMG, cwd="/testbed", timeout=60, interpreter=["bash", "-c"])``
     versus ``LedgerEnvironment(inner_class="docker", <the same>, ledger={..., "shadow": True})``.

   Shadow mode executes every command and returns its real output, so plain and ledger do the same
   work; "added" is the per-command difference ledger - plain, paired by command. A third
   environment, ``LedgerEnvironment`` with default settings (govern on), runs in the same loop:
   its commands that the ledger answers without running them (REUSE) are counted and timed apart
   from the ones it executes.
   Every environment works on its OWN copy of the tree (local: a directory copy; docker: its own
   container of one image), so edits apply to each, and each command runs in all environments
   back to back, in an order that cycles through every permutation, so noise hits all alike.
   The ledger's time is also split (by timing the inner environment's ``execute`` the ledger calls):
   host-side (ledger time outside the command's exec: analysis, local scans, the SQLite commit...)
   and in-exec (the ledger's exec of the command minus the plain exec of the same command: in
   Docker, the EXIT trap that runs the snapshot helper inside the same ``docker exec``).
2. First use: constructing the environment (local: the ledger's first snapshot of the tree, with a
   fresh scanner, page cache warm, its git baseline and the SQLite store; docker: starting the
   container, plus for the ledger installing the helper and taking its first snapshot in it), in
   ``--first-use-repeat`` interleaved repetitions, each on a fresh environment.
3. Docker only: round trips the ledger makes to the container beyond the command's own ``docker
   exec`` (``ContainerWorkspace.round_trips`` after construction; 0 is the design), checked by
   counting the helper transport's ``docker exec`` calls directly (``DockerExec.__call__`` wrapped in
   this process; at construction too), and reports that came back in-band with the command's output
   (``reports_in_band``). Then, on the shadow
   ledger's container, what one snapshot helper call costs, in layers, each its own ``docker exec``
   (``--anatomy-repeat`` times, interleaved): an empty exec, the helper's Python starting, its
   imports, loading its state file, and the whole ``helper.py post`` with nothing changed.
4. When the local shadow ledger adds more than 10 ms per command at the median (or with
   ``--profile``), a separate cProfile pass of the same session on a fresh copy shows where the
   ledger's time goes (cumulative ms per command of its main steps, and the top functions by own time).

The command mix is what SWE-bench agents issue, generated (seeded) over a few "focus" files:
``cat FILE``, ``nl -ba FILE | sed -n 'A,Bp'``, ``grep -n PATTERN FILE``, ``grep -rn PATTERN DIR``,
``ls -la DIR``, ``find . -name '*.py' | head``, ``python3 -c 'print(1)'``, a reproduction script
written with a heredoc at the first step and run with ``python3 reproduce.py``, ``sed -i`` edits
that change a file (a different number each time), ``echo ... > new file`` and ``git diff``; about
a sixth of the commands are exact repeats of earlier reads (others repeat by nature: ``python3 -c``,
the script, ``git diff``). The session is the same for both executors.

The tree is bench_core.py's sympy-shaped tree (about 2,000 committed files, ~34 MB, generated with
its generator) unless ``--tree`` names another; the source tree is never modified (every
environment gets a copy). Copies get identical mtimes one hour in the past (outside the 2 s racy
window of the hash caches) and a refreshed git index, so no environment pays a first git refresh
that another does not. The docker image is built from local/bookworm:py with the tree at /testbed
as a git repository (``DOCKER_BUILDKIT=0 docker build``, nothing pulled) and cached under
``ledger-bench/tree:<hash of the Dockerfile and the tree's content>``. Every container started is
removed at the end (``env.cleanup()``, then checked with ``docker ps``; removed by force only if
mini-swe-agent's background stop has not removed it within 20 s). Commands run back to back, so a
file an edit just changed is inside the racy window for the next ~2 s and is re-hashed by the
ledger's scans (an agent waiting seconds for its model would not pay that).

Reproduce (from /work/main, with the venv active)::

    python swebench_runs/bench/bench_adapter.py                       # temp tree, removed at the end
    python swebench_runs/bench/bench_adapter.py --repeat 300 --out /tmp/adapter.json
    python swebench_runs/bench/bench_adapter.py --tree /tmp/sympy-like   # reuse (copy) a tree; generated if missing
    python swebench_runs/bench/bench_adapter.py --skip-docker --profile

Results go to ``swebench_runs/bench/results/adapter.json`` unless ``--out`` says otherwise.
These machines are noisy: compare the paired differences and the ratios within one run.
"""

from __future__ import annotations

import argparse
import cProfile
import gc
import hashlib
import itertools
import json
import logging
import os
import platform
import pstats
import random
import re
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

os.environ.setdefault("MSWEA_SILENT_STARTUP", "1")  # mini-swe-agent's banner on import

from rich.console import Console  # noqa: E402
from rich.table import Table  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parent))
import bench_core  # noqa: E402  (the tree generator and the statistics helpers)
import minisweagent  # noqa: E402
from bench_core import WORDS, pct, summary  # noqa: E402
from minisweagent.environments.docker import DockerEnvironment  # noqa: E402
from minisweagent.environments.local import LocalEnvironment  # noqa: E402

from ledger_adapters.container.workspace import DockerExec  # noqa: E402
from ledger_adapters.mini.environment import LedgerEnvironment  # noqa: E402
from ledger_runtime import __version__ as ledger_version  # noqa: E402
from ledger_runtime.workspace.scanner import WorkspaceScanner  # noqa: E402

SEED = 4242
DEFAULT_REPEAT = 150
DEFAULT_OUT = Path(__file__).resolve().parent / "results" / "adapter.json"
BASE_IMAGE = "local/bookworm:py"
IMAGE_REPO = "ledger-bench/tree"
TIMEOUT = 60
PROFILE_THRESHOLD_MS = 10.0
AGE_S = 3600.0
DOCKER_CWD = "/testbed"
INTERPRETER = ["bash", "-c"]
DOCKERFILE = f"""FROM {BASE_IMAGE}
COPY tree {DOCKER_CWD}
WORKDIR {DOCKER_CWD}
RUN if [ ! -d .git ]; then git init -q && git add -A \\
      && git -c user.email=bench@example.invalid -c user.name=bench commit -qm tree; fi \\
    && git status --porcelain > /dev/null
"""
# The kinds of commands and how often each comes (the first command, writing the script, is fixed).
MIX = [
    ("nl|sed", 0.17),
    ("cat", 0.07),
    ("grep -n", 0.10),
    ("grep -rn", 0.08),
    ("ls -la", 0.05),
    ("find|head", 0.04),
    ("python3 -c", 0.04),
    ("python3 script", 0.10),
    ("sed -i", 0.10),
    ("echo >", 0.04),
    ("git diff", 0.04),
    ("repeat", 0.17),
]
READ_KINDS = ("nl|sed", "cat", "grep -n", "grep -rn", "ls -la", "find|head")
PLAIN, SHADOW, GOVERN = "plain", "shadow", "govern"


# -- the tree and its copies ----------------------------------------------------------------------------


def prepare_source(args: argparse.Namespace, work: Path, console: Console) -> tuple[Path, str, bool]:
    """The source tree (never modified), its origin, and whether bench_core generated it."""
    if args.tree:
        root = Path(args.tree).resolve()
        if root.exists() and any(root.iterdir()):
            generated = (root / ".git" / bench_core.MARKER).exists()
            return root, f"{'generated' if generated else 'existing'} tree {root} (copied, never modified)", generated
        console.print(f"generating the sympy-shaped tree in {root} (kept)...")
        bench_core.generate_tree(root)
        return root, f"generated in {root}", True
    root = work / "source" / "sympy"
    console.print(f"generating the sympy-shaped tree in {root}...")
    bench_core.generate_tree(root)
    return root, "generated (temporary)", True


def copy_tree(src: Path, dst: Path, mtime: float) -> Path:
    """A copy of ``src`` with every mtime (outside .git) set to ``mtime`` and the git index refreshed."""
    shutil.copytree(src, dst, symlinks=True)
    for dirpath, dirnames, filenames in os.walk(dst):
        dirnames[:] = [d for d in dirnames if d != ".git"]
        for name in filenames:
            os.utime(os.path.join(dirpath, name), (mtime, mtime), follow_symlinks=False)
        os.utime(dirpath, (mtime, mtime))
    if (dst / ".git").exists():  # the copied index's stat data are stale: refresh it once, untimed, everywhere
        subprocess.run(["git", "-C", str(dst), "status", "--porcelain"], capture_output=True, check=False)
    return dst


def tree_hash(root: Path) -> str:
    """Content hash of the tree (not .git) and of its HEAD tree: names the docker image. Files git
    ignores count by name only: bench_core writes the tree's own path into its build/ files, so their
    bytes differ with every temporary directory while nothing a command here reads does."""
    h = hashlib.blake2b(digest_size=8)
    h.update(DOCKERFILE.encode())
    head = subprocess.run(["git", "-C", str(root), "rev-parse", "HEAD^{tree}"], capture_output=True, text=True)
    h.update(head.stdout.encode())
    listed = subprocess.run(
        ["git", "-C", str(root), "ls-files", "-z", "--others", "--ignored", "--exclude-standard"], capture_output=True
    )
    ignored = set(os.fsdecode(listed.stdout).split("\0")) if listed.returncode == 0 else set()
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames[:] = sorted(d for d in dirnames if d != ".git")
        for name in sorted(filenames):
            p = os.path.join(dirpath, name)
            rel = os.path.relpath(p, root)
            h.update(rel.encode() + b"\0")
            if rel not in ignored:
                h.update(os.readlink(p).encode() if os.path.islink(p) else Path(p).read_bytes())
    return h.hexdigest()


# -- the session ---------------------------------------------------------------------------------------


@dataclass
class Command:
    index: int
    kind: str
    command: str
    repeat: bool  # the exact same text ran earlier in the session


def build_session(root: Path, n: int, rng: random.Random, generated: bool) -> list[Command]:
    """``n`` commands an agent fixing something in the tree would issue (see the module docstring)."""
    snap = WorkspaceScanner(str(root)).scan()
    lines = {
        os.path.relpath(p, root): fs.lines
        for p, fs in snap.files.items()
        if fs.lines and p.endswith(".py") and fs.size > 2000
    }
    pool = sorted(lines)
    core = sorted(p for p in pool if p.startswith("sympy/core/") and "/tests/" not in p) or pool
    focus = rng.sample(core, min(3, len(core))) + rng.sample(pool, min(3, len(pool)))
    if generated and "sympy/core/numbers.py" in lines and "sympy/core/numbers.py" not in focus:
        focus[0] = "sympy/core/numbers.py"
    others = sorted(set(pool) - set(focus)) or pool
    marked = {f for f in focus if re.search(r"^_BENCH_MARK = ", (root / f).read_text(errors="replace"), re.M)}
    script = (
        f"import pathlib\nimport re\n\ntext = pathlib.Path({focus[0]!r}).read_text()\n"
        'm = re.search(r"^_BENCH_MARK = (\\d+)", text, re.M)\n'
        'print("mark:", m.group(1) if m else None, "lines:", text.count("\\n"))\n'
    )
    out = [Command(0, "heredoc script", f"cat > reproduce.py <<'EOF'\n{script}EOF", False)]
    seen = {out[0].command}
    edits = 0
    kinds, weights = zip(*MIX)

    def window(f: str) -> tuple[int, int]:
        total = max(lines[f], 1)
        size = min(rng.randint(20, 90), total)
        start = rng.randint(1, max(1, total - size + 1))
        return start, start + size - 1

    def word() -> str:
        return rng.choice(("def ", "class ", "return ", "is None", "evaluate=False", rng.choice(WORDS)))

    for i in range(1, n):
        kind = rng.choices(kinds, weights)[0]
        f = rng.choice(focus) if rng.random() < 0.8 else rng.choice(others)
        d = os.path.dirname(f) or "."
        if kind == "repeat":
            reads = [c for c in out if c.kind in READ_KINDS]
            if reads:
                c = rng.choice(reads)
                out.append(Command(i, c.kind, c.command, True))
                continue
            kind = "nl|sed"
        if kind == "nl|sed":
            a, b = window(f)
            cmd = f"nl -ba {f} | sed -n '{a},{b}p'"
        elif kind == "cat":
            cmd = f"cat {f}"
        elif kind == "grep -n":
            cmd = f"grep -n '{word()}' {f}"
        elif kind == "grep -rn":
            where = "sympy" if rng.random() < 0.2 and (root / "sympy").is_dir() else d
            cmd = f"grep -rn '{rng.choice(WORDS)}_{rng.choice(WORDS)}' {where}"
        elif kind == "ls -la":
            cmd = f"ls -la {d}"
        elif kind == "find|head":
            cmd = (
                "find . -name '*.py' | head -n 20"
                if rng.random() < 0.5
                else f"find {d} -name '*.py' -type f | head -20"
            )
        elif kind == "python3 -c":
            cmd = "python3 -c 'print(1)'"
        elif kind == "python3 script":
            cmd = "python3 reproduce.py"
        elif kind == "sed -i":
            edits += 1
            f = rng.choice(focus)
            cmd = (
                f"sed -i 's/^_BENCH_MARK = .*/_BENCH_MARK = {edits}/' {f}"
                if f in marked
                else f"sed -i '1s/$/ # ledger bench {edits}/' {f}"
            )
        elif kind == "echo >":
            cmd = f"echo 'bench note {i}' > bench_note_{i}.txt"
        else:
            cmd = "git diff"
        out.append(Command(i, kind, cmd, cmd in seen))
        seen.add(cmd)
    return out


# -- environments ------------------------------------------------------------------------------------


class ExecCounter:
    """Counts the ``docker exec`` calls the ledger's helper transport makes (DockerExec), independently
    of ContainerWorkspace.round_trips, by wrapping the class's ``__call__`` in this process."""

    def __init__(self) -> None:
        self.n = 0
        self._orig: Any = None

    def __enter__(self) -> ExecCounter:
        self._orig = orig = DockerExec.__call__
        counter = self

        def counted(transport: DockerExec, argv: list[str], stdin: bytes | None, timeout: float) -> bytes:
            counter.n += 1
            return orig(transport, argv, stdin, timeout)

        DockerExec.__call__ = counted  # type: ignore[method-assign]
        return self

    def __exit__(self, *exc: Any) -> None:
        if self._orig is not None:
            DockerExec.__call__ = self._orig  # type: ignore[method-assign]
            self._orig = None


COUNTER = ExecCounter()


class Timed:
    """Times the inner environment's ``execute`` as the ledger calls it (the command's own exec)."""

    def __init__(self, fn: Callable[..., dict]):
        self.fn = fn
        self.last = 0.0
        self.calls = 0

    def __call__(self, *args: Any, **kwargs: Any) -> dict:
        t0 = time.perf_counter()
        try:
            return self.fn(*args, **kwargs)
        finally:
            self.last = time.perf_counter() - t0
            self.calls += 1


@dataclass
class Handle:
    """One environment of the loop and what is counted about it."""

    name: str
    env: Any
    timer: Timed | None = None  # set for ledger environments

    @property
    def ledger(self) -> bool:
        return isinstance(self.env, LedgerEnvironment)

    @property
    def container_id(self) -> str | None:
        inner = self.env.inner if self.ledger else self.env
        return getattr(inner, "container_id", None)

    def trips(self) -> tuple[int, int]:
        ws = self.env.container if self.ledger else None
        return (ws.round_trips, ws.reports_in_band) if ws is not None else (0, 0)


def make_ledger(inner_class: str, run_dir: Path, shadow: bool, **inner: Any) -> LedgerEnvironment:
    settings: dict[str, Any] = {"run_dir": str(run_dir)}
    if shadow:
        settings["shadow"] = True
    env = LedgerEnvironment(inner_class=inner_class, ledger=settings, **inner)
    if env.runtime is None:  # the adapter falls back to no ledger on a fault; that would measure nothing
        raise RuntimeError(f"LedgerEnvironment({inner_class}) came up without a ledger (see the log above)")
    return env


def wrap_inner(env: LedgerEnvironment) -> Timed:
    timer = Timed(env.inner.execute)
    env.inner.execute = timer  # instance attribute: LedgerEnvironment calls self.inner.execute
    return timer


def run_session(handles: list[Handle], session: list[Command], console: Console, label: str) -> dict[str, list[dict]]:
    """Every command in every environment, back to back, the order cycling through the permutations."""
    orders = list(itertools.permutations(handles))
    recs: dict[str, list[dict]] = {h.name: [] for h in handles}
    gc.collect()
    t_start = time.perf_counter()
    for c in session:
        for h in orders[c.index % len(orders)]:
            trips0 = h.trips()
            execs0 = COUNTER.n
            if h.timer is not None:
                h.timer.calls, h.timer.last = 0, 0.0
            t0 = time.perf_counter()
            out = h.env.execute({"command": c.command})
            dt = time.perf_counter() - t0
            trips1 = h.trips()
            info = (out.get("extra") or {}).get("ledger") or {}
            recs[h.name].append(
                {
                    "s": dt,
                    "inner_s": h.timer.last if h.timer is not None and h.timer.calls else 0.0,
                    "executed": info.get("executed", True),
                    "verdict": info.get("verdict", "RUN"),
                    "output": out.get("output", ""),
                    "returncode": out.get("returncode"),
                    "extra_trips": trips1[0] - trips0[0],
                    "in_band": trips1[1] - trips0[1],
                    "helper_execs": COUNTER.n - execs0,
                }
            )
        if (c.index + 1) % 50 == 0:
            console.print(f"  {label}: {c.index + 1}/{len(session)} commands ({time.perf_counter() - t_start:.0f} s)")
    return recs


# -- docker ------------------------------------------------------------------------------------------


def docker_problem() -> str | None:
    """Why there is no usable engine, or None."""
    if shutil.which("docker") is None:
        return "no docker client on PATH (scripts/docker-engine.sh up installs one and starts an engine)"
    try:
        r = subprocess.run(
            ["docker", "version", "--format", "{{.Server.Version}}"], capture_output=True, text=True, timeout=15
        )
    except subprocess.TimeoutExpired:
        return "the docker engine did not answer within 15 s"
    if r.returncode != 0:
        last = r.stderr.strip().splitlines()[-1] if r.stderr.strip() else "no answer"
        return f"no docker engine reachable ({last}); run scripts/docker-engine.sh up"
    if subprocess.run(["docker", "image", "inspect", BASE_IMAGE], capture_output=True).returncode != 0:
        return f"base image {BASE_IMAGE} missing; scripts/docker-engine.sh up builds it"
    return None


def docker_version() -> str:
    r = subprocess.run(["docker", "version", "--format", "{{.Server.Version}}"], capture_output=True, text=True)
    return r.stdout.strip()


def build_image(source: Path, work: Path, console: Console) -> dict:
    """The image with the tree at /testbed (built unless cached under its content hash)."""
    t0 = time.perf_counter()
    tag = f"{IMAGE_REPO}:{tree_hash(source)}"
    inspect = subprocess.run(["docker", "image", "inspect", "--format", "{{.Id}}", tag], capture_output=True, text=True)
    if inspect.returncode == 0:
        console.print(f"docker image {tag} cached")
        return {"tag": tag, "id": inspect.stdout.strip(), "built": False, "seconds": round(time.perf_counter() - t0, 2)}
    ctx = work / "docker-context"
    console.print(f"building docker image {tag} (FROM {BASE_IMAGE}, tree at {DOCKER_CWD})...")
    shutil.copytree(source, ctx / "tree", symlinks=True)
    (ctx / "Dockerfile").write_text(DOCKERFILE)
    r = subprocess.run(
        ["docker", "build", "-q", "-t", tag, str(ctx)],
        capture_output=True,
        text=True,
        env={**os.environ, "DOCKER_BUILDKIT": "0"},
        timeout=1200,
    )
    shutil.rmtree(ctx, ignore_errors=True)
    if r.returncode != 0:
        raise RuntimeError(f"building {tag} failed: {r.stderr[-800:]}")
    image_id = subprocess.run(
        ["docker", "image", "inspect", "--format", "{{.Id}}", tag], capture_output=True, text=True
    ).stdout.strip()
    return {"tag": tag, "id": image_id, "built": True, "seconds": round(time.perf_counter() - t0, 2)}


def present_containers(ids: list[str]) -> list[str]:
    out = subprocess.run(["docker", "ps", "-a", "-q", "--no-trunc"], capture_output=True, text=True).stdout.split()
    return [i for i in ids if any(o.startswith(i) or i.startswith(o) for o in out)]


def force_remove(ids: list[str]) -> None:
    if ids:
        subprocess.run(["docker", "rm", "-f", *ids], capture_output=True, check=False)


def refresh_index(container_id: str) -> None:
    """Refresh the git index in a container (untimed, in every container alike: the helper's git
    baseline would otherwise do it in the ledger's containers only)."""
    subprocess.run(
        ["docker", "exec", container_id, "git", "-C", DOCKER_CWD, "status", "--porcelain"],
        capture_output=True,
        check=False,
    )


def helper_anatomy(env: LedgerEnvironment, repeat: int) -> dict:
    """What one snapshot helper call costs inside a container, in layers, each a ``docker exec`` of its
    own (interleaved, order alternating): an empty exec, the helper's Python starting, its imports, its
    state file loaded, and the whole ``helper.py post`` with nothing changed. Run after the session (the
    calls carry sequence numbers above any the ledger used), on the shadow ledger's container."""
    ws = env.container
    cid = env.inner.container_id
    py = [ws.python, "-S", "-E"]
    imports = "import base64, hashlib, json, marshal, os, stat, subprocess, sys, time"
    seq = [ws.seq + 10_000]

    def post() -> list[str]:
        seq[0] += 1
        return ws.helper_argv("post", ws.state_file, "--seq", str(seq[0]), "--keep", str(2 * 1024 * 1024))

    layers: dict[str, Callable[[], list[str]]] = {
        "docker exec true": lambda: ["true"],
        "+ python3 -S -E starts": lambda: [*py, "-c", "pass"],
        "+ the helper's imports": lambda: [*py, "-c", imports],
        "+ loading its state file": lambda: [*py, "-c", f"{imports}; marshal.load(open({ws.state_file!r}, 'rb'))"],
        "helper.py post, no change": post,
    }
    samples: dict[str, list[float]] = {k: [] for k in layers}
    for rep in range(repeat):
        for name in list(layers) if rep % 2 == 0 else list(reversed(layers)):
            argv = ["docker", "exec", cid, *layers[name]()]
            t0 = time.perf_counter()
            subprocess.run(argv, capture_output=True, check=False)
            samples[name].append(time.perf_counter() - t0)
    size = subprocess.run(
        ["docker", "exec", cid, "stat", "-c", "%s", ws.state_file], capture_output=True, text=True
    ).stdout.strip()
    out: dict[str, Any] = {
        "layers": {k: summary(v) for k, v in samples.items()},
        "state_file_bytes": int(size) if size.isdigit() else None,
    }
    names = list(layers)
    out["increments_p50_ms"] = {
        names[i]: round(pct(samples[names[i]], 50) * 1000 - (pct(samples[names[i - 1]], 50) * 1000 if i else 0.0), 3)
        for i in range(len(names))
    }
    return out


# -- measurements --------------------------------------------------------------------------------------


def first_use(
    make_plain: Callable[[int], Any],
    make_ledger_env: Callable[[int], LedgerEnvironment],
    repeat: int,
    dispose: Callable[[Any], None],
) -> dict:
    """Construction times of fresh plain and ledger environments, interleaved, order alternating."""
    plain_s, ledger_s, trips, execs = [], [], [], []
    for rep in range(repeat):
        for which in (PLAIN, SHADOW) if rep % 2 == 0 else (SHADOW, PLAIN):
            gc.collect()
            execs0 = COUNTER.n
            t0 = time.perf_counter()
            env = make_plain(rep) if which == PLAIN else make_ledger_env(rep)
            dt = time.perf_counter() - t0
            if which == SHADOW:
                execs.append(COUNTER.n - execs0)
            (plain_s if which == PLAIN else ledger_s).append(dt)
            if which == SHADOW and env.container is not None:
                trips.append(env.container.round_trips)
            dispose(env)
    out = {
        "plain": summary(plain_s),
        "ledger": summary(ledger_s),
        "added_paired": summary([b - a for a, b in zip(plain_s, ledger_s)]),
        "added_p50_ms": round((pct(ledger_s, 50) - pct(plain_s, 50)) * 1000, 3),
    }
    if trips:
        out["ledger_round_trips_at_construction"] = max(trips)
        out["ledger_helper_docker_execs_at_construction"] = max(execs)
    return out


def compare_outputs(plain: list[dict], other: list[dict], session: list[Command]) -> dict:
    """Whether the shadow ledger handed back exactly what the plain environment did."""
    same = reordered = 0
    differ: list[dict] = []
    for c, p, o in zip(session, plain, other):
        if p["output"] == o["output"] and p["returncode"] == o["returncode"]:
            same += 1
        elif (
            sorted(p["output"].splitlines()) == sorted(o["output"].splitlines()) and p["returncode"] == o["returncode"]
        ):
            reordered += 1  # find / grep -r list directories in readdir order, which differs between copies
        else:
            differ.append(
                {
                    "index": c.index,
                    "kind": c.kind,
                    "command": c.command[:100],
                    "plain_rc": p["returncode"],
                    "ledger_rc": o["returncode"],
                    "plain_head": p["output"][:160],
                    "ledger_head": o["output"][:160],
                }
            )
    return {
        "n": len(session),
        "identical": same,
        "same_lines_other_order": reordered,
        "different": len(differ),
        "differences": differ[:10],
    }


def analyse(session: list[Command], recs: dict[str, list[dict]], docker: bool) -> dict:
    """Summaries of one executor's loop: per environment, paired differences, by kind."""
    plain, shadow = recs[PLAIN], recs[SHADOW]
    p = [r["s"] for r in plain]
    s = [r["s"] for r in shadow]
    out: dict[str, Any] = {
        "plain": summary(p),
        SHADOW: summary(s),
        "shadow_added": summary([b - a for a, b in zip(p, s)]),
        "shadow_ratio_p50": round(pct(s, 50) / pct(p, 50), 4),
        "shadow_host_side": summary([r["s"] - r["inner_s"] for r in shadow]),
        "shadow_in_exec": summary([r["inner_s"] - a for a, r in zip(p, shadow)]),
        "shadow_not_executed": sum(not r["executed"] for r in shadow),
        "verdicts_shadow": _count(r["verdict"] for r in shadow),
        "outputs_shadow_vs_plain": compare_outputs(plain, shadow, session),
        "totals_s": {PLAIN: round(sum(p), 3), SHADOW: round(sum(s), 3)},
    }
    if docker:
        out["round_trips"] = {
            SHADOW: {
                "extra_round_trips_during_session": sum(r["extra_trips"] for r in shadow),
                "helper_docker_execs_during_session": sum(r["helper_execs"] for r in shadow),
                "reports_in_band": sum(r["in_band"] for r in shadow),
                "commands_executed": sum(r["executed"] for r in shadow),
                "commands_with_extra_round_trips": [
                    {"index": c.index, "kind": c.kind, "command": c.command[:100], "round_trips": r["extra_trips"]}
                    for c, r in zip(session, shadow)
                    if r["extra_trips"]
                ][:20],
            }
        }
    if GOVERN in recs:
        g = recs[GOVERN]
        ex = [i for i, r in enumerate(g) if r["executed"]]
        ru = [i for i, r in enumerate(g) if not r["executed"]]
        out["govern_executed"] = summary([g[i]["s"] for i in ex]) if ex else None
        out["govern_executed_added"] = summary([g[i]["s"] - p[i] for i in ex]) if ex else None
        out["govern_executed_ratio_p50"] = (
            round(pct([g[i]["s"] for i in ex], 50) / pct([p[i] for i in ex], 50), 4) if ex else None
        )
        out["govern_reused"] = summary([g[i]["s"] for i in ru]) if ru else None
        out["govern_reused_vs_plain"] = summary([g[i]["s"] - p[i] for i in ru]) if ru else None
        out["govern_reused_plain_same_commands"] = summary([p[i] for i in ru]) if ru else None
        out["govern_counts"] = {"executed": len(ex), "reused_not_executed": len(ru)}
        out["verdicts_govern"] = _count(r["verdict"] for r in g)
        out["totals_s"][GOVERN] = round(sum(r["s"] for r in g), 3)
        if docker:
            out["round_trips"][GOVERN] = {
                "extra_round_trips_during_session": sum(r["extra_trips"] for r in g),
                "helper_docker_execs_during_session": sum(r["helper_execs"] for r in g),
                "reports_in_band": sum(r["in_band"] for r in g),
                "commands_executed": len(ex),
            }
    by_kind: dict[str, dict] = {}
    groups: dict[str, list[int]] = {}
    for c in session:
        groups.setdefault(c.kind, []).append(c.index)
    groups["(exact repeats)"] = [c.index for c in session if c.repeat]
    for kind, idx in groups.items():
        if not idx:
            continue
        row = {
            "n": len(idx),
            "exact_repeats": sum(session[i].repeat for i in idx),
            "plain": summary([p[i] for i in idx]),
            SHADOW: summary([s[i] for i in idx]),
            "shadow_added": summary([s[i] - p[i] for i in idx]),
            "shadow_host_side": summary([shadow[i]["s"] - shadow[i]["inner_s"] for i in idx]),
            "shadow_in_exec": summary([shadow[i]["inner_s"] - p[i] for i in idx]),
        }
        if docker:
            row["extra_round_trips"] = sum(shadow[i]["extra_trips"] for i in idx)
        if GOVERN in recs:
            g = recs[GOVERN]
            gex = [i for i in idx if g[i]["executed"]]
            row["govern_reused"] = len(idx) - len(gex)
            row["govern_executed_added"] = summary([g[i]["s"] - p[i] for i in gex]) if gex else None
            row["govern_verdicts"] = _count(g[i]["verdict"] for i in idx)
        by_kind[kind] = row
    out["by_kind"] = by_kind
    rows = []
    for c in session:
        row = {
            "i": c.index,
            "kind": c.kind,
            "repeat": c.repeat,
            "plain_ms": _ms(plain[c.index]["s"]),
            "shadow_ms": _ms(shadow[c.index]["s"]),
            "shadow_inner_ms": _ms(shadow[c.index]["inner_s"]),
        }
        if GOVERN in recs:
            g = recs[GOVERN][c.index]
            row.update(
                {
                    "govern_ms": _ms(g["s"]),
                    "govern_inner_ms": _ms(g["inner_s"]),
                    "govern_verdict": g["verdict"],
                    "govern_executed": g["executed"],
                }
            )
        if docker:
            row["shadow_extra_round_trips"] = shadow[c.index]["extra_trips"]
        rows.append(row)
    out["per_command"] = rows
    return out


def _ms(s: float) -> float:
    return round(s * 1000, 3)


def _count(items) -> dict[str, int]:
    out: dict[str, int] = {}
    for x in items:
        out[x] = out.get(x, 0) + 1
    return dict(sorted(out.items()))


def measure_local(source: Path, work: Path, session: list[Command], args: argparse.Namespace, console: Console) -> dict:
    mtime = time.time() - AGE_S
    trees = {
        name: copy_tree(source, work / f"local-{name}", mtime)
        for name in ([PLAIN, SHADOW] + ([GOVERN] if args.govern else []))
    }
    runs = work / "runs"
    console.print(f"local: first use x{args.first_use_repeat} (construction, interleaved)...")
    fu = first_use(
        lambda rep: LocalEnvironment(cwd=str(trees[SHADOW]), timeout=TIMEOUT),
        lambda rep: make_ledger(
            "local", runs / f"local-first-use-{rep}", True, cwd=str(trees[SHADOW]), timeout=TIMEOUT
        ),
        args.first_use_repeat,
        lambda env: env.cleanup() if hasattr(env, "cleanup") else None,
    )
    handles = [Handle(PLAIN, LocalEnvironment(cwd=str(trees[PLAIN]), timeout=TIMEOUT))]
    for name in [SHADOW] + ([GOVERN] if args.govern else []):
        env = make_ledger("local", runs / f"local-{name}", name == SHADOW, cwd=str(trees[name]), timeout=TIMEOUT)
        handles.append(Handle(name, env, wrap_inner(env)))
    try:
        console.print(f"local: {len(session)} commands x {len(handles)} environments...")
        recs = run_session(handles, session, console, "local")
        faults = {h.name: h.env.runtime.faults for h in handles if h.ledger}
    finally:
        for h in handles:
            if h.ledger:
                h.env.cleanup()
    out = analyse(session, recs, docker=False)
    out["first_use"] = fu
    out["ledger_faults"] = faults
    out["trees"] = {k: str(v) for k, v in trees.items()}
    return out


def measure_docker(image: str, work: Path, session: list[Command], args: argparse.Namespace, console: Console) -> dict:
    kwargs = {"image": image, "cwd": DOCKER_CWD, "timeout": TIMEOUT, "interpreter": INTERPRETER}
    runs = work / "runs"
    started: list[str] = []  # every container this benchmark started
    handles: list[Handle] = []

    def track(env: Any) -> Any:
        inner = env.inner if isinstance(env, LedgerEnvironment) else env
        if getattr(inner, "container_id", None):
            started.append(inner.container_id)
        return env

    def dispose_now(env: Any) -> None:  # first-use environments: gone before the timed loop starts
        env.cleanup()
        inner = env.inner if isinstance(env, LedgerEnvironment) else env
        force_remove([inner.container_id])

    removal: dict[str, Any] = {}
    try:
        COUNTER.__enter__()
        console.print(
            f"docker: first use x{args.first_use_repeat} (construction, interleaved; each a fresh container)..."
        )
        fu = first_use(
            lambda rep: track(DockerEnvironment(**kwargs)),
            lambda rep: track(make_ledger("docker", runs / f"docker-first-use-{rep}", True, **kwargs)),
            args.first_use_repeat,
            dispose_now,
        )
        handles.append(Handle(PLAIN, track(DockerEnvironment(**kwargs))))
        for name in [SHADOW] + ([GOVERN] if args.govern else []):
            env = track(make_ledger("docker", runs / f"docker-{name}", name == SHADOW, **kwargs))
            handles.append(Handle(name, env, wrap_inner(env)))
        trips_at_start = {h.name: h.trips() for h in handles if h.ledger}
        for h in handles:
            refresh_index(h.container_id)
        console.print(f"docker: {len(session)} commands x {len(handles)} environments...")
        recs = run_session(handles, session, console, "docker")
        faults = {h.name: h.env.runtime.faults for h in handles if h.ledger}
        console.print(f"docker: the snapshot helper's cost in layers x{args.anatomy_repeat}...")
        anatomy = helper_anatomy(next(h.env for h in handles if h.name == SHADOW), args.anatomy_repeat)
    finally:
        COUNTER.__exit__()
        t0 = time.perf_counter()
        for h in handles:
            h.env.cleanup()  # mini-swe-agent: `docker stop` in the background; --rm then removes it
        main_ids = [h.container_id for h in handles if h.container_id]
        left = present_containers(main_ids)
        while left and time.perf_counter() - t0 < 20:
            time.sleep(0.5)
            left = present_containers(main_ids)
        removal["removed_by_cleanup_s"] = round(time.perf_counter() - t0, 2) if not left else None
        removal["forced"] = len(left)
        force_remove(left)
        still = present_containers(started)
        removal.update({"containers_started": len(started), "still_present": len(still)})
        console.print(
            f"docker: {len(started)} containers started; after cleanup, `docker ps -a` shows "
            f"{len(still)} of them" + (f" ({len(left)} removed by force)" if left else "")
        )
    out = analyse(session, recs, docker=True)
    out["first_use"] = fu
    out["ledger_faults"] = faults
    out["round_trips"]["at_construction"] = {k: v[0] for k, v in trips_at_start.items()}
    out["round_trips"]["helper_docker_execs_at_construction"] = fu.get("ledger_helper_docker_execs_at_construction")
    out["containers"] = removal
    out["helper_anatomy"] = anatomy
    return out


# -- profile ---------------------------------------------------------------------------------------------

KEY_FUNCS = [
    ("LedgerEnvironment.execute (whole call)", "adapters/mini/environment.py", "execute"),
    ("  LedgerRuntime.run", "ledger_runtime/runtime.py", "run"),
    ("    the command: LocalEnvironment.execute", "minisweagent/environments/local.py", "execute"),
    ("    _plan (before the command)", "ledger_runtime/runtime.py", "_plan"),
    ("      analyze", "ledger_runtime/analysis/commands.py", "analyze"),
    ("      govern", "ledger_runtime/decide/govern.py", "govern"),
    ("    _record_ran (after the command)", "ledger_runtime/runtime.py", "_record_ran"),
    ("      observations", "ledger_runtime/ledger/observe.py", "observations"),
    ("      _record_between", "ledger_runtime/runtime.py", "_record_between"),
    ("        file at the baseline (git cat-file)", "ledger_runtime/workspace/baseline.py", "get"),
    ("        line_delta", "ledger_runtime/ledger/observe.py", "line_delta"),
    ("    workspace scans (before + after)", "ledger_runtime/workspace/scanner.py", "scan"),
    ("      git calls in scans", "ledger_runtime/workspace/scanner.py", "_run_git"),
    ("      listing refresh", "ledger_runtime/workspace/scanner.py", "_refresh_listing"),
    ("      file hashing (HashCache.state)", "ledger_runtime/workspace/hashing.py", "state"),
    ("    probe sign_many", "ledger_runtime/workspace/signatures.py", "sign_many"),
    ("    store put_blob (zlib)", "ledger_runtime/ledger/store.py", "put_blob"),
    ("    store commit (SQLite)", "ledger_runtime/ledger/store.py", "commit"),
]


def profile_local(source: Path, work: Path, session: list[Command], console: Console) -> dict:
    """The local shadow ledger under cProfile, the same session on a fresh copy, without the others."""
    tree = copy_tree(source, work / "local-profile", time.time() - AGE_S)
    env = make_ledger("local", work / "runs" / "local-profile", True, cwd=str(tree), timeout=TIMEOUT)
    prof = cProfile.Profile()
    wall = 0.0
    try:
        gc.collect()
        for c in session:
            t0 = time.perf_counter()
            prof.enable()
            env.execute({"command": c.command})
            prof.disable()
            wall += time.perf_counter() - t0
    finally:
        env.cleanup()
    st = pstats.Stats(prof)
    n = len(session)
    keyed: list[dict] = []
    for label, suffix, func in KEY_FUNCS:
        hits = [
            (v[1], v[3])
            for (file, _line, name), v in st.stats.items()  # type: ignore[attr-defined]
            if name == func and file.replace(os.sep, "/").endswith(suffix)
        ]
        if hits:
            calls, cum = sum(h[0] for h in hits), sum(h[1] for h in hits)
            keyed.append({"step": label, "ms_per_command": round(cum / n * 1000, 3), "calls": calls})
    top = sorted(st.stats.items(), key=lambda kv: kv[1][2], reverse=True)[:15]  # type: ignore[attr-defined]
    own = [
        {
            "function": f"{os.path.basename(file)}:{line}({name})" if line else name,
            "own_ms_per_command": round(v[2] / n * 1000, 3),
            "calls_per_command": round(v[1] / n, 2),
        }
        for (file, line, name), v in top
    ]
    return {
        "commands": n,
        "wall_ms_per_command_profiled": round(wall / n * 1000, 3),
        "steps": keyed,
        "top_own_time": own,
    }


# -- report ----------------------------------------------------------------------------------------------


def _f(x: float | None, digits: int = 1) -> str:
    return "-" if x is None else f"{x:.{digits}f}"


def print_report(console: Console, report: dict) -> None:
    env, res = report["environment"], report["results"]
    tree = env["tree"]
    console.print(
        f"[bold]Ledger adapter benchmark[/bold]  python {env['python']}, {env['cpu_count']} CPUs, "
        f"mini-swe-agent {env['mini_swe_agent']}, docker {env.get('docker_server') or '-'}"
    )
    console.print(
        f"tree: {tree['origin']}: {tree['files']} files, {tree['bytes'] / 1e6:.1f} MB; session of "
        f"{report['settings']['commands']} commands ({report['settings']['exact_repeats']} exact repeats)"
    )
    t = Table(title="Time per command (ms): plain mini-swe-agent environment vs LedgerEnvironment, paired by command")
    for col, just in (
        ("executor", "left"),
        ("environment", "left"),
        ("n", "right"),
        ("p50", "right"),
        ("p95", "right"),
        ("added p50", "right"),
        ("added p95", "right"),
        ("ratio p50", "right"),
        ("notes", "left"),
    ):
        t.add_column(col, justify=just, overflow="fold")
    for ex in ("local", "docker"):
        r = res.get(ex)
        if r is None:
            continue
        if "skipped" in r:
            t.add_row(ex, f"skipped: {r['skipped']}", *[""] * 7)
            continue
        p, s, a = r["plain"], r[SHADOW], r["shadow_added"]
        t.add_row(
            ex,
            "plain",
            str(p["n"]),
            _f(p["p50_ms"]),
            _f(p["p95_ms"]),
            "",
            "",
            "1.00",
            f"total {r['totals_s'][PLAIN]:.1f} s",
        )
        o = r["outputs_shadow_vs_plain"]
        note = (
            f"host-side p50 {r['shadow_host_side']['p50_ms']:.1f}, in-exec p50 {r['shadow_in_exec']['p50_ms']:.1f}; "
            f"outputs = plain {o['identical']}/{o['n']}"
            + (f" (+{o['same_lines_other_order']} same lines reordered)" if o["same_lines_other_order"] else "")
            + (f", {o['different']} differ" if o["different"] else "")
        )
        if ex == "docker":
            rt = r["round_trips"][SHADOW]
            note += (
                f"; extra round trips {rt['extra_round_trips_during_session']} (helper docker execs counted: "
                f"{rt['helper_docker_execs_during_session']}), in-band reports "
                f"{rt['reports_in_band']}/{rt['commands_executed']}"
            )
        t.add_row(
            "",
            "ledger, shadow",
            str(s["n"]),
            _f(s["p50_ms"]),
            _f(s["p95_ms"]),
            _f(a["p50_ms"]),
            _f(a["p95_ms"]),
            f"{r['shadow_ratio_p50']:.2f}",
            note,
        )
        if r.get("govern_executed"):
            g, ga = r["govern_executed"], r["govern_executed_added"]
            vc = ", ".join(f"{k} {v}" for k, v in r["verdicts_govern"].items())
            t.add_row(
                "",
                "ledger, govern: executed",
                str(g["n"]),
                _f(g["p50_ms"]),
                _f(g["p95_ms"]),
                _f(ga["p50_ms"]),
                _f(ga["p95_ms"]),
                f"{r['govern_executed_ratio_p50']:.2f}",
                f"verdicts {vc}; total {r['totals_s'][GOVERN]:.1f} s vs plain {r['totals_s'][PLAIN]:.1f} s",
            )
        if r.get("govern_reused"):
            g, gv, gp = r["govern_reused"], r["govern_reused_vs_plain"], r["govern_reused_plain_same_commands"]
            t.add_row(
                "",
                "ledger, govern: reused (not run)",
                str(g["n"]),
                _f(g["p50_ms"]),
                _f(g["p95_ms"]),
                _f(gv["p50_ms"]),
                _f(gv["p95_ms"]),
                f"{g['p50_ms'] / gp['p50_ms']:.2f}",
                f"the same commands plain: p50 {gp['p50_ms']:.1f}",
            )
        fu = r["first_use"]
        fnote = f"plain construction p50 {fu['plain']['p50_ms']:.1f} ms"
        if "ledger_round_trips_at_construction" in fu:
            fnote += (
                f"; ledger round_trips {fu['ledger_round_trips_at_construction']}, helper docker execs counted "
                f"{fu['ledger_helper_docker_execs_at_construction']} (install + first snapshot, interpreter path)"
            )
        t.add_row(
            "",
            "first use (construction)",
            str(fu["ledger"]["n"]),
            _f(fu["ledger"]["p50_ms"]),
            _f(fu["ledger"]["p95_ms"]),
            _f(fu["added_paired"]["p50_ms"]),
            _f(fu["added_paired"]["p95_ms"]),
            f"{fu['ledger']['p50_ms'] / max(fu['plain']['p50_ms'], 1e-6):.0f}" if ex == "docker" else "-",
            fnote,
        )
    console.print(t)
    for ex in ("local", "docker"):
        r = res.get(ex)
        if r is None or "skipped" in r:
            continue
        k = Table(title=f"{ex}: by command kind (ms; added = ledger shadow - plain, paired)")
        cols = ["kind", "n", "rep", "plain p50", "shadow p50", "added p50", "added p95", "host-side p50", "in-exec p50"]
        if ex == "docker":
            cols.append("extra trips")
        cols += ["govern reused", "govern added p50"]
        for col in cols:
            k.add_column(col, justify="left" if col == "kind" else "right")
        for kind, row in sorted(r["by_kind"].items(), key=lambda kv: (kv[0].startswith("("), -kv[1]["n"])):
            cells = [
                kind,
                str(row["n"]),
                str(row["exact_repeats"]),
                _f(row["plain"]["p50_ms"]),
                _f(row[SHADOW]["p50_ms"]),
                _f(row["shadow_added"]["p50_ms"]),
                _f(row["shadow_added"]["p95_ms"]),
                _f(row["shadow_host_side"]["p50_ms"]),
                _f(row["shadow_in_exec"]["p50_ms"]),
            ]
            if ex == "docker":
                cells.append(str(row["extra_round_trips"]))
            ga = row.get("govern_executed_added")
            cells += [str(row.get("govern_reused", "-")), _f(ga["p50_ms"]) if ga else "-"]
            k.add_row(*cells)
        console.print(k)
    anat = (res.get("docker") or {}).get("helper_anatomy")
    if anat:
        at = Table(
            title=f"docker: one snapshot helper call in layers, each its own docker exec (ms; state file "
            f"{(anat['state_file_bytes'] or 0) / 1024:.0f} KiB)"
        )
        for col in ("layer", "n", "p50", "p95", "increment p50"):
            at.add_column(col, justify="left" if col == "layer" else "right")
        for name, sm in anat["layers"].items():
            at.add_row(name, str(sm["n"]), _f(sm["p50_ms"]), _f(sm["p95_ms"]), _f(anat["increments_p50_ms"][name]))
        console.print(at)
    prof = res.get("local", {}).get("profile") if isinstance(res.get("local"), dict) else None
    if prof:
        pt = Table(
            title=f"local shadow ledger under cProfile ({prof['commands']} commands, "
            f"{prof['wall_ms_per_command_profiled']:.1f} ms per command profiled): cumulative ms per command"
        )
        pt.add_column("step")
        pt.add_column("ms/cmd", justify="right")
        pt.add_column("calls", justify="right")
        for s in prof["steps"]:
            pt.add_row(s["step"], f"{s['ms_per_command']:.2f}", str(s["calls"]))
        console.print(pt)
        ot = Table(title="top functions by own time (ms per command, profiled)")
        ot.add_column("function", overflow="fold")
        ot.add_column("own ms/cmd", justify="right")
        ot.add_column("calls/cmd", justify="right")
        for s in prof["top_own_time"]:
            ot.add_row(s["function"], f"{s['own_ms_per_command']:.2f}", f"{s['calls_per_command']:.1f}")
        console.print(ot)
    for note in report["notes"]:
        console.print(f"[dim]- {note}[/dim]")


def environment(source: Path, origin: str, docker: str | None) -> dict:
    snap = WorkspaceScanner(str(source)).scan()
    git_version = subprocess.run(["git", "--version"], capture_output=True, text=True).stdout.strip()
    repo = Path(__file__).resolve().parents[2]
    head = subprocess.run(["git", "-C", str(repo), "rev-parse", "HEAD"], capture_output=True, text=True).stdout.strip()
    dirty = subprocess.run(
        ["git", "-C", str(repo), "status", "--porcelain", "--", "ledger_runtime", "adapters"],
        capture_output=True,
        text=True,
    ).stdout.split("\n")
    return {
        "python": sys.version.split()[0],
        "implementation": platform.python_implementation(),
        "project_commit": head,
        "project_uncommitted": [line[3:] for line in dirty if line.strip()],
        "platform": platform.platform(),
        "machine": platform.machine(),
        "cpu_count": os.cpu_count(),
        "git": git_version,
        "ledger_runtime": ledger_version,
        "mini_swe_agent": minisweagent.__version__,
        "docker_server": docker,
        "tree": {
            "origin": origin,
            "root": str(source),
            "files": len(snap.files),
            "bytes": sum(fs.size for fs in snap.files.values()),
        },
    }


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument(
        "--repeat",
        "-n",
        type=int,
        default=DEFAULT_REPEAT,
        help=f"commands in the session, run in every environment of both executors (default {DEFAULT_REPEAT})",
    )
    ap.add_argument(
        "--first-use-repeat",
        type=int,
        default=3,
        help="fresh constructions of each environment for the first-use cost (default 3)",
    )
    ap.add_argument("--tree", help="use this tree (copied, never modified); generated there first if missing or empty")
    ap.add_argument("--out", type=Path, default=DEFAULT_OUT, help=f"JSON results (default {DEFAULT_OUT})")
    ap.add_argument("--skip-docker", action="store_true", help="measure the local executor only")
    ap.add_argument("--skip-local", action="store_true", help="measure the docker executor only")
    ap.add_argument(
        "--no-govern",
        dest="govern",
        action="store_false",
        help="leave out the third environment (ledger with govern on)",
    )
    ap.add_argument(
        "--profile",
        action="store_true",
        help=f"profile the local ledger even when it adds less than {PROFILE_THRESHOLD_MS:g} ms at p50",
    )
    ap.add_argument(
        "--anatomy-repeat",
        type=int,
        default=15,
        help="docker: repetitions of each layer of the helper's cost (default 15)",
    )
    ap.add_argument("--keep", action="store_true", help="keep the temporary trees and ledgers (prints the path)")
    ap.add_argument("--seed", type=int, default=SEED, help="seed of the session's commands")
    args = ap.parse_args(argv)
    if args.repeat < 2 or args.first_use_repeat < 1:
        ap.error("--repeat must be at least 2 and --first-use-repeat at least 1")
    logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(name)s: %(message)s")
    logging.getLogger("minisweagent").setLevel(logging.WARNING)
    console = Console(width=None if sys.stdout.isatty() else 160)
    work = Path(tempfile.mkdtemp(prefix="ledger-bench-adapter-"))
    try:
        t0 = time.perf_counter()
        source, origin, generated = prepare_source(args, work, console)
        session = build_session(source, args.repeat, random.Random(args.seed), generated)
        console.print(
            f"tree ready in {time.perf_counter() - t0:.1f} s; session of {len(session)} commands, "
            f"{sum(c.repeat for c in session)} exact repeats"
        )
        docker_skip = "--skip-docker" if args.skip_docker else docker_problem()
        results: dict[str, Any] = {}
        if not args.skip_local:
            results["local"] = measure_local(source, work, session, args, console)
        image: dict | None = None
        if docker_skip:
            console.print(f"[yellow]SKIP docker: {docker_skip}[/yellow]")
            results["docker"] = {"skipped": docker_skip}
        else:
            image = build_image(source, work, console)
            results["docker"] = measure_docker(image["tag"], work, session, args, console)
            results["docker"]["image"] = image
        local = results.get("local")
        if local is not None and (args.profile or local["shadow_added"]["p50_ms"] > PROFILE_THRESHOLD_MS):
            console.print(
                f"local: profiling the shadow ledger (added p50 {local['shadow_added']['p50_ms']:.1f} ms"
                f"{' > ' + format(PROFILE_THRESHOLD_MS, 'g') + ' ms' if not args.profile else ''})..."
            )
            local["profile"] = profile_local(source, work, session, console)
        report = {
            "benchmark": "ledger-adapter",
            "version": 1,
            "when": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
            "command": " ".join([os.path.basename(sys.argv[0]), *(argv if argv is not None else sys.argv[1:])]),
            "environment": environment(source, origin, None if docker_skip else docker_version()),
            "settings": {
                "commands": len(session),
                "exact_repeats": sum(c.repeat for c in session),
                "first_use_repeat": args.first_use_repeat,
                "seed": args.seed,
                "govern_row": args.govern,
                "timeout": TIMEOUT,
                "docker_interpreter": INTERPRETER,
                "docker_cwd": DOCKER_CWD,
                "mix": dict(MIX),
                "mtime_age_s": AGE_S,
            },
            "session": [{"i": c.index, "kind": c.kind, "repeat": c.repeat, "command": c.command} for c in session],
            "results": results,
            "notes": [
                "Each command ran in every environment back to back (order cycling through the permutations), "
                "each environment on its own copy of the tree (docker: its own container of one image).",
                "added = ledger - plain for the same command, paired; ratio p50 = p50(ledger) / p50(plain). "
                "host-side = ledger call minus its inner execute; in-exec = the ledger's inner execute minus the "
                "plain execute of the same command (docker: the snapshot helper in the command's own exec).",
                "govern rows: the third environment (default settings); 'reused' commands were answered from the "
                "ledger without running (their added time is negative: time saved).",
                "first use: environment construction (local ledger: first snapshot with a fresh scanner, git "
                "baseline, SQLite store; docker: container start, plus for the ledger the helper install and its "
                "first snapshot). Page cache warm.",
                "Commands run back to back: a file just edited stays inside the hash caches' 2 s racy window "
                "for the next commands and is re-hashed by the ledger's scans.",
            ],
        }
        print_report(console, report)
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(json.dumps(report, indent=2) + "\n", encoding="utf-8")
        console.print(f"wrote {args.out}")
    finally:
        if args.keep:
            console.print(f"trees and ledgers kept in {work}")
        else:
            shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
