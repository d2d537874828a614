"""The whole adapter of docs/adapters.md, run as it is written there: its python block, saved to a
file and run as a script, on the toy repository the doc's own setup lines make (a real git
repository, one file committed). What it did is read back from the ledger it wrote, and what it
printed is compared with what the ledger says the agent got. The doc cannot drift from the code."""

from __future__ import annotations

import ast
import os
import re
import runpy
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import xxhash
from conftest import GIT_ENV, git

import ledger_runtime

ROOT = Path(__file__).resolve().parents[1]
DOC = ROOT / "docs" / "adapters.md"
RUN_LINE = "python minimal_adapter.py "  # the doc's setup block runs the script with this line


def blocks(lang: str) -> list[str]:
    return re.findall(rf"^```{lang}\n(.*?)^```$", DOC.read_text(encoding="utf-8"), re.S | re.M)


def example() -> str:
    found = blocks("python")
    assert len(found) == 1, f"docs/adapters.md has {len(found)} python blocks: the example must be the only one"
    return found[0]


def setup_lines() -> str:
    """The doc's shell block that makes the toy repository, up to the line that runs the script."""
    block = next((b for b in blocks("bash") if RUN_LINE in b), None)
    assert block is not None, f"no bash block of docs/adapters.md runs `{RUN_LINE}...`"
    return block.split(RUN_LINE)[0]


def not_public(source: str) -> list[str]:
    """Imports of ``source`` other than the standard library's and ``from ledger_runtime import ...``."""
    bad = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            bad += [a.name for a in node.names if a.name not in sys.stdlib_module_names]
        elif isinstance(node, ast.ImportFrom):
            top = (node.module or "").split(".")[0]
            if node.level or (node.module != "ledger_runtime" and top not in sys.stdlib_module_names):
                bad.append("." * node.level + (node.module or ""))
    return bad


@dataclass
class Ran:
    workdir: Path
    run_dir: Path
    stdout: str
    script: dict[str, Any]  # the example's top-level names (SCRIPT, MARKER, ...)
    start: bytes  # calc.py as committed
    loaded: Any  # ledger_runtime.load(run_dir)


@pytest.fixture(scope="module")
def ran(tmp_path_factory) -> Ran:
    base = tmp_path_factory.mktemp("adapter")
    env = {**os.environ, **GIT_ENV}
    subprocess.run(["bash", "-e", "-c", setup_lines()], cwd=base, env=env, check=True, capture_output=True, timeout=60)
    workdir = base / "toy"
    assert git(workdir, "ls-files").split() == ["calc.py"] and git(workdir, "status", "--porcelain") == ""
    start = (workdir / "calc.py").read_bytes()
    path = base / "minimal_adapter.py"
    path.write_text(example(), encoding="utf-8")
    run_dir = base / "toy-run"
    proc = subprocess.run(
        [sys.executable, str(path), str(workdir), str(run_dir)],
        cwd=base,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stderr
    script = runpy.run_path(str(path), run_name="minimal_adapter")  # its names; main() does not run
    return Ran(workdir, run_dir, proc.stdout, script, start, ledger_runtime.load(run_dir))


def test_the_example_is_one_block_of_30_to_80_short_lines():
    lines = example().splitlines()
    assert 30 <= len(lines) <= 80, len(lines)
    assert [n for n, line in enumerate(lines, 1) if len(line) > 120] == []
    ast.parse(example())


def test_the_example_imports_nothing_but_the_public_api():
    source = example()
    assert not_public(source) == []
    used = [a.name for n in ast.walk(ast.parse(source)) if isinstance(n, ast.ImportFrom) for a in n.names]
    assert {"LedgerRuntime", "LocalExecutor", "Submission"} <= set(used) <= set(ledger_runtime.__all__)
    # the check itself sees what it must refuse
    assert not_public(
        "from ledger_runtime.runtime import LedgerRuntime\nimport minisweagent\nfrom . import x\n"
        "import ledger_runtime.executor\nimport os\nfrom ledger_runtime import load\n"
    ) == ["ledger_runtime.runtime", "minisweagent", ".", "ledger_runtime.executor"]


def test_one_attempt_per_command_with_its_verdict(ran):
    state = ran.loaded.state
    assert [a.command for a in state.attempts] == ran.script["SCRIPT"]
    assert [a.step for a in state.attempts] == list(range(1, len(ran.script["SCRIPT"]) + 1))
    assert [a.verdict.kind.value for a in state.attempts] == ["RUN", "RUN", "RUN", "RUN", "REVISE", "RUN", "RUN"]
    assert state.attempts[1].answer["kind"] == "whole", "the identical output comes back as a reference"
    assert [a.executed for a in state.attempts] == [True, True, True, True, False, True, True]
    assert [a.exit_code for a in state.attempts] == [0, 0, 0, 0, None, 0, 0]
    assert all(a.applied for a in state.attempts)
    assert state.run["agent"] == "toy" and state.baseline.task == ran.script["TASK"]
    assert state.faults == [] and not (ran.run_dir / "faults.log").exists()


def test_a_repeated_read_comes_back_as_a_reference(ran):
    t = ran.loaded.transcript()
    first, again, _, after_edit = ran.loaded.state.attempts[:4]
    assert ran.loaded.text(first.output_hash) == t.shown(first) == ran.start.decode()
    assert again.answer["kind"] == "whole" and again.answer["pieces"][0][:1] == ["same"]
    assert again.verdict.kind.value == "RUN", "it ran: a reference to an identical output is not a reuse"
    shown = t.shown(again)
    assert shown == "[ledger: same as step 1's output (`cat calc.py`, exit 0)]\n"
    assert again.shown_chars == len(shown) < again.output_chars == len(ran.start)
    # the reference stands for exactly what the command printed, and names what the model holds
    assert t.expanded(again) == ran.start.decode()
    assert t.check(again, ran.start.decode()).sound
    # the same read after the edit is a new text: it comes back as it is
    assert after_edit.answer["kind"] == "raw" and t.shown(after_edit) == (ran.workdir / "calc.py").read_text()


def test_the_edit_is_a_modification_with_content_hashes(ran):
    state = ran.loaded.state
    edit = state.attempts[2]
    assert edit.command_class.value == "modify"
    now = (ran.workdir / "calc.py").read_bytes()
    assert now == ran.start.replace(b"return a - b", b"return a + b") != ran.start
    [m] = state.modifications  # nothing else changed a file: not the check, not the submission
    assert (m.attempt, m.step, Path(m.path).name, m.recognised) == (edit.id, 3, "calc.py", True)
    assert m.before_hash == xxhash.xxh3_128_hexdigest(ran.start) == m.baseline_hash
    assert m.after_hash == xxhash.xxh3_128_hexdigest(now)
    assert (m.lines_added, m.lines_removed) == (1, 1)
    assert ran.loaded.text(m.after_hash) == now.decode()
    assert [x.path for x in state.modifications_of_attempt(edit.id)] == [m.path]


def test_the_submission_is_marked_and_its_output_untouched(ran):
    marker = ran.script["MARKER"]
    early, check, final = ran.loaded.state.attempts[4:]
    assert early.submits and not early.executed and early.verdict.rule == "verify-before-submit"
    assert early.answer["kind"] == "refused"
    assert check.command_class.value == "run" and ran.loaded.text(check.output_hash) == "add works\n"
    assert final.submits and final.executed and final.answer["kind"] == "raw"
    assert final.shown_hash == final.output_hash  # the agent got the output byte for byte
    output = ran.loaded.text(final.output_hash)
    assert output.splitlines()[0] == marker and "+    return a + b\n" in output
    assert output == git(ran.workdir, "diff").join([f"{marker}\n", ""])


def test_stdout_is_what_the_agent_got(ran):
    t = ran.loaded.transcript()
    expected = ""
    for a in ran.loaded.state.attempts:
        code = 1 if a.answer["kind"] == "refused" else a.exit_code
        expected += f"$ {a.command}\n[{a.verdict.kind.value}, answer {a.answer['kind']}, exit {code}]\n{t.shown(a)}\n"
    assert ran.stdout == expected


def test_the_doc_shows_what_the_script_prints(ran):
    shown = [b for b in blocks("text") if b.startswith("$ ")]
    assert len(shown) == 1
    printed = ran.stdout.splitlines()
    at = 0
    for line in shown[0].splitlines():  # in order; a line ending " ..." is cut in the doc
        prefix = line.endswith(" ...")
        found = next(
            (
                i
                for i in range(at, len(printed))
                if (printed[i].startswith(line[:-3]) if prefix else printed[i] == line)
            ),
            None,
        )
        assert found is not None, f"the doc shows {line!r}, the script does not print it (after line {at})"
        at = found + 1


def test_ledger_run_inspect_reads_the_run(ran):
    proc = subprocess.run(
        [sys.executable, "-m", "ledger_runtime", "inspect", str(ran.run_dir)],
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "COLUMNS": "120"},
    )
    assert proc.returncode == 0, proc.stderr
    assert "REVISE" in proc.stdout and "REVISE 1, RUN 6" in proc.stdout
