"""Benchmark of the ledger on SWE-ReX's protocol (the path of ``--environment-class swerex_modal``): the time
it adds to each command, against a real ``swerex-remote`` in a container on the local engine.

One ``LedgerEnvironment(inner_class="swerex_docker", ledger={"shadow": True})`` on the Docker tests' SWE-ReX
image (tests/swerex_support.py: the small repository at /testbed, swe-rex from PyPI, built with no
network; nothing pulled). Each command of a SWE-bench-like mix runs twice in a row, in alternating
order: through the SWE-ReX environment alone ("plain": ``env.inner.execute``) and through the ledger
("ledger": ``env.execute``, shadow mode, so both do the same work), on the same server. Reported per
command, in ms: median (p50) and p95 of each, the paired difference, the ratio of the medians; the
start-up (the deployment's start, then the ledger's: its store and the helper's install, one request);
the requests beyond the commands' own (0 is the design: each snapshot rides in its command's request);
and, with ``docker exec``, what the snapshot helper costs inside the container: an empty exec, the
helper's Python starting, and ``helper.py post`` with nothing changed (a whole call: its scan included).

    python swebench_runs/bench/bench_swerex.py [--repeat 20] [--out swebench_runs/bench/results/swerex.json]

On Modal each request also crosses the tunnel to the sandbox; the helper's time is spent in the sandbox.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[1]
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(REPO / "tests"))
os.environ.setdefault("MSWEA_SILENT_STARTUP", "1")

import conftest  # noqa: E402,F401  (mini-swe-agent offline and quiet, as in the tests)
from bench_core import summary  # noqa: E402
from swerex_support import build_swerex_image, swerex_version  # noqa: E402

from ledger_adapters.mini.environment import LedgerEnvironment  # noqa: E402

COMMANDS = [
    "cat calc.py",
    "nl -ba calc.py | sed -n '1,20p'",
    "grep -n 'def ' calc.py | head",
    "grep -rn add .",
    "ls -la",
    "git status --short",
    "python3 -m unittest -q test_calc",
    "sed -i 's/return x + 1$/return x + 1/' calc.py",
    "git diff",
]


def in_container(name: str, command: str, repeat: int) -> dict:
    """Milliseconds ``command`` takes inside the container, timed there (no exec round trip)."""
    times = []
    for _ in range(repeat):
        script = f"s=$(date +%s%N); {command} >/dev/null 2>&1; e=$(date +%s%N); echo $((e - s))"
        r = subprocess.run(["docker", "exec", name, "sh", "-c", script], capture_output=True, text=True, timeout=60)
        times.append(int(r.stdout.strip()) / 1e9)
    return summary(times)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--repeat", type=int, default=20, help="rounds of the command mix")
    ap.add_argument("--out", type=Path, default=HERE / "results" / "swerex.json")
    args = ap.parse_args(argv)
    image = build_swerex_image()
    run_dir = Path(tempfile.mkdtemp(prefix="bench-swerex-"))
    cfg = {"cwd": "/testbed", "timeout": 60, "deployment_extra_kwargs": {"pull": "never"}}
    t0 = time.perf_counter()
    env = LedgerEnvironment(
        inner_class="swerex_docker", image=image, **cfg, ledger={"run_dir": str(run_dir), "shadow": True}
    )
    construction = time.perf_counter() - t0
    started = env.container.round_trips
    plain: list[float] = []
    ledger: list[float] = []
    added: list[float] = []
    try:
        for i in range(args.repeat):
            for n, cmd in enumerate(COMMANDS):
                first, second = ("plain", "ledger") if (i + n) % 2 == 0 else ("ledger", "plain")
                took = {}
                for who in (first, second):
                    t = time.perf_counter()
                    (env.inner.execute if who == "plain" else env.execute)({"command": cmd})
                    took[who] = time.perf_counter() - t
                plain.append(took["plain"])
                ledger.append(took["ledger"])
                added.append(took["ledger"] - took["plain"])
        extra_requests = env.container.round_trips - started
        in_band = env.container.reports_in_band
        name = env.inner.deployment.container_name
        ws = env.container
        # a call number of its own each time ($(date +%s%N) grows): a fixed one would be a stale call after the
        # first, answered before any scan
        post = " ".join(ws.helper_argv("post", ws.state_file, "--seq", "SEQ", "--keep", "0")).replace(
            "SEQ", "$(date +%s%N)"
        )
        anatomy = {
            "empty": in_container(name, "true", args.repeat),
            "python_start": in_container(name, "python3 -S -E -c pass", args.repeat),
            "helper_post": in_container(name, post, args.repeat),
        }
    finally:
        env.cleanup()
    head = subprocess.run(["git", "-C", str(REPO), "rev-parse", "HEAD"], capture_output=True, text=True).stdout.strip()
    dirty = subprocess.run(
        ["git", "-C", str(REPO), "status", "--porcelain", "--", "ledger_runtime", "adapters"],
        capture_output=True,
        text=True,
    ).stdout.split("\n")
    p, q = summary(plain), summary(ledger)
    report = {
        "benchmark": "swerex",
        "command": "bench_swerex.py " + " ".join(argv if argv is not None else sys.argv[1:]),
        "environment": {
            "project_commit": head,
            "project_uncommitted": [line[3:] for line in dirty if line.strip()],
            "python": sys.version.split()[0],
            "platform": platform.platform(),
            "cpu_count": os.cpu_count(),
            "load_average": os.getloadavg(),
            "swe_rex": swerex_version(),
            "image": image,
        },
        "results": {
            "plain": p,
            "ledger": q,
            "added": summary(added),
            "ratio_p50": round(q["p50_ms"] / p["p50_ms"], 2),
            "construction_s": round(construction, 2),
            "requests_at_construction": started,
            "requests_beyond_the_commands": extra_requests,
            "reports_in_band": in_band,
            "commands": len(plain),
            "helper_in_container": anatomy,
        },
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(report, indent=1) + "\n")
    print(f"{'per command (ms)':<28}{'p50':>9}{'p95':>9}")
    for label, s in (("SWE-ReX alone", p), ("through the ledger", q), ("added (paired)", summary(added))):
        print(f"{label:<28}{s['p50_ms']:>9.1f}{s['p95_ms']:>9.1f}")
    for label, s in anatomy.items():
        print(f"{'in the container: ' + label:<28}{s['p50_ms']:>9.1f}{s['p95_ms']:>9.1f}")
    print(
        f"ratio of medians {report['results']['ratio_p50']}; start-up {construction:.2f} s; "
        f"requests beyond the commands' own: {extra_requests} (in band: {in_band}/{len(plain)}); "
        f"load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores -> {args.out}"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
