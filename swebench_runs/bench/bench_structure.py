"""The shape of the code: module and function sizes, complexity, and the path of one command.

Figures of issue 29 ("the step as a pipeline"), measured on a checkout of ``ledger_runtime``:

- modules: lines per ``.py`` file of the package (median, max, the biggest);
- functions: lines per function or method (median, max), from the syntax tree;
- complexity: cyclomatic complexity per function (radon's ``cc_visit``; ``pip install radon``), its
  average, and how many functions reach 11 or more;
- one ``cat a.py`` through the real mini-swe-agent adapter (``LedgerEnvironment.execute`` around the
  local environment, after a first read of the file): calls into the package's code, the files they
  run in, calls out of ``runtime.py`` into other files of the package, and calls back into
  ``runtime.py`` from other files (control coming back to it). Where the step is cut into several
  modules (``runtime.py`` the front over ``step/``), the same two figures for the front as a whole
  (``--front``: the modules that form the step; by default ``runtime.py`` and every module of
  ``step/`` the checkout has): a call from one of them into another is inside the step, not out.

Reproduce (from the repository, venv active)::

    pip install radon
    python swebench_runs/bench/bench_structure.py                      # this checkout
    python swebench_runs/bench/bench_structure.py --src /path/to/other/checkout --out /tmp/before.json
    python swebench_runs/bench/bench_structure.py --front runtime.py step/plan.py   # another cut

Results go to ``swebench_runs/bench/results/structure.json`` unless ``--out`` says otherwise.
"""

from __future__ import annotations

import argparse
import ast
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent


def module_sizes(package: Path) -> dict:
    sizes = {str(p.relative_to(package.parent)): len(p.read_text().splitlines()) for p in package.rglob("*.py")}
    biggest = sorted(sizes.items(), key=lambda kv: -kv[1])[:5]
    return {
        "modules": len(sizes),
        "median": statistics.median(sizes.values()),
        "max": max(sizes.values()),
        "biggest": biggest,
    }


def function_sizes(package: Path) -> dict:
    sizes: list[tuple[int, str]] = []
    for p in package.rglob("*.py"):
        tree = ast.parse(p.read_text())
        for node in ast.walk(tree):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                n = (node.end_lineno or node.lineno) - node.lineno + 1
                sizes.append((n, f"{p.relative_to(package.parent)}:{node.name}"))
    lines = [n for n, _ in sizes]
    return {
        "functions": len(sizes),
        "median": statistics.median(lines),
        "max": max(lines),
        "biggest": sorted(sizes, reverse=True)[:5],
    }


def complexity(package: Path) -> dict:
    try:
        from radon.complexity import cc_visit
    except ImportError:
        return {"error": "radon is not installed (pip install radon)"}
    scores: list[tuple[int, str]] = []
    for p in package.rglob("*.py"):
        for block in cc_visit(p.read_text()):
            if block.letter in ("F", "M"):
                scores.append((block.complexity, f"{p.relative_to(package.parent)}:{block.name}"))
            for inner in getattr(block, "closures", []):
                scores.append((inner.complexity, f"{p.relative_to(package.parent)}:{inner.name}"))
    values = [c for c, _ in scores]
    return {
        "functions": len(values),
        "average": round(sum(values) / len(values), 2),
        "at_least_11": sum(c >= 11 for c in values),
        "highest": sorted(scores, reverse=True)[:8],
    }


TRACE = r"""
import json, os, sys, tempfile, subprocess
from pathlib import Path
root = Path(tempfile.mkdtemp()) / "repo"
root.mkdir()
(root / "a.py").write_text("".join(f"def f{i}(x):\n    return x + {i}\n\n" for i in range(40)))
g = ["git", "-c", "user.email=a@b", "-c", "user.name=a"]
subprocess.run(["git", "init", "-q"], cwd=root, check=True)
subprocess.run([*g, "add", "-A"], cwd=root, check=True)
subprocess.run([*g, "commit", "-qm", "i"], cwd=root, check=True)
import ledger_runtime
from ledger_adapters.mini.environment import LedgerEnvironment
pkg = os.path.dirname(ledger_runtime.__file__) + os.sep
adapters = os.path.dirname(__import__("ledger_adapters").__file__) + os.sep
env = LedgerEnvironment(inner_class="local", cwd=str(root), timeout=60, ledger={"run_dir": str(root.parent / "run")})
env.execute({"command": "cat a.py"})
env.execute({"command": "sed -n '1,20p' a.py"})
calls, files, out_of_runtime, into_runtime = 0, set(), 0, 0
RUNTIME = pkg + "runtime.py"
FRONT = {pkg + m for m in json.loads(os.environ["BENCH_FRONT"])}
out_of_front, into_front = 0, 0
def ours(f):
    return f.startswith(pkg) or f.startswith(adapters)
def prof(frame, event, arg):
    global calls, out_of_runtime, into_runtime, out_of_front, into_front
    if event != "call":
        return
    f = frame.f_code.co_filename
    if not ours(f):
        return
    calls += 1
    files.add(f)
    back = frame.f_back
    caller = back.f_code.co_filename if back is not None else ""
    if caller == RUNTIME and f != RUNTIME:
        out_of_runtime += 1
    if f == RUNTIME and caller != RUNTIME and ours(caller):
        into_runtime += 1
    if caller in FRONT and f not in FRONT:
        out_of_front += 1
    if f in FRONT and caller not in FRONT and ours(caller):
        into_front += 1
sys.setprofile(prof)
env.execute({"command": "cat a.py"})
sys.setprofile(None)
print(json.dumps({"calls": calls, "files": len(files), "calls_out_of_runtime_py": out_of_runtime,
                  "calls_back_into_runtime_py": into_runtime, "front": sorted(m[len(pkg):] for m in FRONT),
                  "calls_out_of_front": out_of_front, "calls_back_into_front": into_front}))
"""


def default_front(package: Path) -> list[str]:
    """The modules that form the step: ``runtime.py`` and those of ``step/`` (paths in the package)."""
    step = sorted(str(p.relative_to(package)) for p in (package / "step").glob("*.py") if p.name != "__init__.py")
    return ["runtime.py", *step]


def trace(src: Path, front: list[str]) -> dict:
    """The trace runs in a process of its own, with ``src`` first on the path (another checkout's code);
    ``front``: the modules of the step (paths in the package)."""
    pkgs = Path(tempfile.mkdtemp()) / "pkgs"
    pkgs.mkdir()
    (pkgs / "ledger_adapters").symlink_to(src / "adapters")
    env = {**os.environ, "PYTHONPATH": f"{src}{os.pathsep}{pkgs}", "BENCH_FRONT": json.dumps(front)}
    p = subprocess.run(
        [sys.executable, "-c", TRACE], capture_output=True, text=True, env=env, cwd=tempfile.gettempdir()
    )
    if p.returncode != 0:
        return {"error": p.stderr.strip().splitlines()[-1] if p.stderr.strip() else f"exit {p.returncode}"}
    return json.loads(p.stdout.strip().splitlines()[-1])


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--src", type=Path, default=HERE.parents[1], help="a checkout of the project")
    ap.add_argument("--out", type=Path, default=HERE / "results" / "structure.json")
    ap.add_argument(
        "--front",
        nargs="+",
        help="the modules that form the step, as paths in the package (default: runtime.py and step/*.py)",
    )
    args = ap.parse_args()
    src = args.src.resolve()
    package = src / "ledger_runtime"
    front = [os.path.normpath(m) for m in args.front] if args.front else default_front(package)
    commit = subprocess.run(["git", "-C", str(src), "rev-parse", "--short", "HEAD"], capture_output=True, text=True)
    out = {
        "commit": commit.stdout.strip(),
        "modules": module_sizes(package),
        "functions": function_sizes(package),
        "complexity": complexity(package),
        "cat_through_mini": trace(src, front),
        "command": " ".join(["python", "swebench_runs/bench/bench_structure.py", *sys.argv[1:]]),
    }
    m, f, c, t = out["modules"], out["functions"], out["complexity"], out["cat_through_mini"]
    print(f"ledger_runtime at {out['commit']}")
    print(f"modules: {m['modules']}, lines median {m['median']} / max {m['max']} ({m['biggest'][0][0]})")
    print(f"functions: {f['functions']}, lines median {f['median']} / max {f['max']} ({f['biggest'][0][1]})")
    if "error" in c:
        print(f"complexity: {c['error']}")
    else:
        print(f"complexity: average {c['average']}, {c['at_least_11']} functions of 11 or more; highest:")
        for score, name in c["highest"]:
            print(f"  {score:4} {name}")
    print(f"one cat through the mini adapter: {t}")
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(out, indent=2) + "\n")
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
