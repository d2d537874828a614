"""How often the masking of secrets changes text that holds none: every command and every output of
the 106 shared mini-swe-agent trajectories (public SWE-bench repositories, where a masked span is a
false positive, or test data shaped like a credential), masked by the built-in rules alone (no
environment values, no patterns of one's own), as the ledger would store them.

    python swebench_runs/masking/false_positives.py                 # this checkout's masking
    python swebench_runs/masking/false_positives.py --at dea7960    # the masking of another commit

Prints a table (per kind of text: how many, how many had anything masked, the characters masked) and
every masked line, and writes the figures with each masked line to swebench_runs/masking/results.json
(--out to write elsewhere).
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import re
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
TRAJS = ROOT.parent / "shared" / "data" / "trajectories"
OUTPUT = re.compile(r"<output>\n?(.*?)\n?</output>", re.DOTALL)
COMMAND = re.compile(r"```(?:bash|mswea_bash_command)\n(.*?)\n```", re.DOTALL)


def masking(at: str | None):
    """The Redactor class of this checkout, or of ``redact.py`` at commit ``at``."""
    if at is None:
        from ledger_runtime.ledger.redact import Redactor

        return Redactor
    source = subprocess.run(
        ["git", "-C", str(ROOT), "show", f"{at}:ledger_runtime/ledger/redact.py"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    path = Path(tempfile.mkdtemp()) / "redact_at.py"
    path.write_text(source)
    spec = importlib.util.spec_from_file_location("redact_at", path)
    module = importlib.util.module_from_spec(spec)  # type: ignore[arg-type]
    sys.modules["redact_at"] = module
    spec.loader.exec_module(module)  # type: ignore[union-attr]
    return module.Redactor


def texts(trajectories: list[Path]) -> dict[str, list[tuple[str, str]]]:
    """(instance, text) of every output and every command of the trajectories, by kind."""
    out: dict[str, list[tuple[str, str]]] = {"outputs": [], "commands": []}
    for path in trajectories:
        data = json.loads(path.read_text())
        iid = data.get("instance_id") or path.name
        for m in data.get("messages", []):
            content = m.get("content")
            if not isinstance(content, str):
                continue
            if m.get("role") == "user":
                out["outputs"] += [(iid, t) for t in OUTPUT.findall(content)]
            elif m.get("role") == "assistant":
                out["commands"] += [(iid, t) for t in COMMAND.findall(content)]
    return out


def masked_lines(text: str, spans: list[tuple[int, int]]) -> list[str]:
    """Each line with something masked, the masked part between ⟦ ⟧."""
    lines = []
    for a, b in spans:
        start, end = text.rfind("\n", 0, a) + 1, text.find("\n", b)
        end = len(text) if end < 0 else end
        lines.append((text[start:a] + "⟦" + text[a:b] + "⟧" + text[b:end])[:200])
    return lines


def measure(redactor, found: dict[str, list[tuple[str, str]]]) -> dict:
    result: dict = {}
    for kind, items in found.items():
        hits = []
        chars = masked = 0
        for iid, text in items:
            chars += len(text)
            spans = redactor.spans(text)
            if spans:
                masked += sum(b - a for a, b in spans)
                hits.append({"instance": iid, "lines": masked_lines(text, spans)})
        result[kind] = {
            "texts": len(items),
            "masked_texts": len(hits),
            "rate": round(len(hits) / len(items), 6) if items else 0.0,
            "chars": chars,
            "masked_chars": masked,
            "masked": hits,
        }
    return result


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--at", help="measure the masking of this commit (default: this checkout)")
    ap.add_argument("--trajectories", type=Path, default=TRAJS, help="where the .traj.json files are")
    ap.add_argument("--out", type=Path, default=Path(__file__).with_name("results.json"))
    args = ap.parse_args()
    files = sorted(args.trajectories.glob("*/trajs/*.traj.json"))
    if not files:
        sys.exit(f"no .traj.json under {args.trajectories}/*/trajs/")
    redactor = masking(args.at).for_run({})
    result = measure(redactor, texts(files))
    print(f"{len(files)} trajectories, masking of {args.at or 'this checkout'}")
    print(f"{'':10} {'texts':>7} {'masked':>7} {'rate':>8} {'chars':>11} {'masked chars':>13}")
    for kind, r in result.items():
        figures = f"{r['texts']:>7} {r['masked_texts']:>7} {r['rate']:>8.3%}"
        print(f"{kind:10} {figures} {r['chars']:>11,} {r['masked_chars']:>13,}")
    args.out.write_text(
        json.dumps({"at": args.at or "checkout", "trajectories": len(files), **result}, indent=1) + "\n"
    )
    print(f"wrote {args.out}; every masked line:")
    for kind, r in result.items():
        for hit in r["masked"]:
            for line in hit["lines"]:
                print(f"  {kind[:-1]} {hit['instance']}: {line}")


if __name__ == "__main__":
    main()
