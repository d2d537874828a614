"""A reviewer's pass on "every sentence the model reads is true" through the real Gemini CLI and OpenCode
(the pinned npm packages) against scripted model servers on loopback: sequences a real model makes, each
note or answer the model got read from the next request the scripted server received and checked against
what happened. Without a binary these tests skip and say why."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from conftest import CALC_PROJECT
from test_gemini_e2e import GEMINI
from test_gemini_e2e import Session as GeminiSession
from test_opencode_e2e import OPENCODE
from test_opencode_e2e import Session as OpenCodeSession

FLAG = "[ledger] link.py (a link to calc.py) changed since you saw it"
SED = "sed -i 's/x + 5/x + 55/' calc.py"  # prints nothing: the model's output never shows the change


@pytest.mark.skipif(GEMINI is None, reason="no gemini binary on PATH or in $LEDGER_GEMINI_BIN")
def test_gemini_a_read_through_a_link_names_the_command_that_changed_its_file(tmp_path: Path) -> None:
    """`cat link.py` (link.py -> calc.py), read_file calc.py, a silent `sed` of calc.py, read_file link.py: the
    note said "link.py changed since you saw it at step 1: changed outside the commands the ledger saw", with
    no diff: the change was on record under calc.py, the read the model last made of the file (step 2) too."""
    s = GeminiSession(tmp_path, [])
    try:
        os.symlink("calc.py", s.repo / "link.py")
        s.fake.steps = [
            ("bash", "cat link.py"),
            ("tool", "read_file", {"file_path": "calc.py"}),
            ("bash", SED),
            ("tool", "read_file", {"file_path": "link.py"}),
            ("say", "Read it."),
        ]
        p = s.run()
        assert p.returncode == 0, p.stderr[-3000:]
        got = s.seen(4)["call_3_0"]
        assert "outside the commands the ledger saw" not in got, got
        assert f"{FLAG} at step 2: `{SED}` (step 3) changed it." in got
        assert "-    return x + 5\n+    return x + 55\n" in got, got
        assert not s.faults(), s.faults()
    finally:
        s.fake.close()


@pytest.mark.skipif(OPENCODE is None, reason="no opencode binary on PATH or in $LEDGER_OPENCODE_BIN")
def test_opencode_a_read_through_a_link_of_a_file_changed_since_it_was_read_is_flagged(tmp_path: Path) -> None:
    """read calc.py, a silent `sed` of calc.py, read link.py (link.py -> calc.py): the model holds calc.py as it
    read it, and the read of its other name was not flagged (the ledger looked for reads of link.py only)."""
    s = OpenCodeSession(tmp_path, [])
    try:
        os.symlink("calc.py", s.repo / "link.py")
        s.fake.steps = [
            ("tool", "read", {"filePath": s.path("calc.py")}),
            ("bash", SED),
            ("tool", "read", {"filePath": s.path("link.py")}),
            ("say", "Read it."),
        ]
        p = s.run()
        assert p.returncode == 0, p.stderr[-3000:]
        got = s.seen(3)["call_2_0"]
        assert f"{FLAG} at step 1: `{SED}` (step 2) changed it." in got
        assert "-    return x + 5\n+    return x + 55\n" in got, got
        assert not s.faults(), s.faults()
    finally:
        s.fake.close()
