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


BIG = {f"big{i}.txt": "".join(f"file {i} line {n:04d} " + "x" * 30 + "\n" for n in range(900)) for i in range(6)}


def cleared(s: OpenCodeSession, call: str) -> bool:
    """Whether OpenCode's database marks the output of ``call`` cleared (its prune)."""
    import sqlite3

    from ledger_adapters.opencode.session import db_path

    try:
        con = sqlite3.connect(f"file:{db_path(s.env)}?mode=ro", uri=True, timeout=2.0)
        rows = con.execute("select data from part where data like ?", (f'%"{call}"%',)).fetchall()
        con.close()
    except sqlite3.Error:
        return False
    return any((json.loads(d).get("state") or {}).get("time", {}).get("compacted") for (d,) in rows)


@pytest.mark.skipif(OPENCODE is None, reason="no opencode binary on PATH or in $LEDGER_OPENCODE_BIN")
def test_opencode_an_output_its_prune_cleared_is_never_referred_to(tmp_path: Path) -> None:
    """With the user's ``"compaction": {"prune": true}``, OpenCode clears old tool outputs from what it sends at the
    end of a turn ("[Old tool result content cleared]", older than the last two turns, past 40,000 tokens), with
    no ``session.compacted``: a later `cat` of the same file came back as "same as step 1's output", an output the
    model no longer held."""
    import signal

    from terminal import Terminal, drawn, visible

    s = OpenCodeSession(tmp_path, [], {**CALC_PROJECT, **BIG})
    s.config.write_text(json.dumps({**s.user_config, "compaction": {"prune": True}}))
    s.fake.steps = [
        *[("bash", f"cat big{i}.txt") for i in range(6)],
        ("say", "Read them."),
        ("say", "Second."),
        ("say", "Third."),
        ("bash", "cat big0.txt"),
        ("say", "Read again."),
    ]
    tui = Terminal(s.argv(), str(s.repo), s.env)
    status = None
    try:
        ready = lambda: drawn(tui.screen, "Ask anything") or drawn(tui.screen, "ctrl+p")  # noqa: E731
        assert tui.until(ready, 90), visible(tui.screen)
        tui.pump(2)
        for prompt, said in ((b"read the files", "Read them."), (b"go on", "Second."), (b"and on", "Third.")):
            tui.ask(prompt, s.fake.requests)
            assert tui.until(lambda: drawn(tui.screen, said), 90), visible(tui.screen)  # noqa: B023
        assert tui.until(lambda: cleared(s, "call_0_0"), 60), "OpenCode prunes after the turn, in the background"
        tui.ask(b"read it again", s.fake.requests)
        assert tui.until(lambda: drawn(tui.screen, "Read again."), 90), visible(tui.screen)
        os.write(tui.fd, b"\x03")
        tui.pump(1)
        os.write(tui.fd, b"\x03")
        status = tui.wait(60)
    finally:
        if status is None:
            os.kill(tui.pid, signal.SIGKILL)
            os.waitpid(tui.pid, 0)
        s.fake.close()
    seen = s.seen()
    assert seen["call_0_0"] == "[Old tool result content cleared]", "OpenCode cleared the first output"
    again = next(v for k, v in seen.items() if k.startswith("call_9_"))
    assert again.startswith(BIG["big0.txt"][:200]), again[:300]
    assert not s.faults(), s.faults()


def test_opencode_an_output_its_prune_cleared_is_not_referred_to_when_the_event_comes_late(tmp_path: Path) -> None:
    """OpenCode's prune marks a part cleared in its database, and its bus event reaches the ledger by the plugin's own
    HTTP call, which may come after the next tool call's: a `cat` of the same file came back as "same as step 1's
    output", an output the model no longer held. The database is read before the call is answered. OpenCode's
    database as it keeps it (a ``part`` table: its session, its JSON); the event never comes here."""
    import sqlite3

    from conftest import make_repo

    from ledger_adapters.opencode.hooks import OpenCodeHooks
    from ledger_runtime import LedgerRuntime

    repo = make_repo(tmp_path / "repo", {"big0.txt": BIG["big0.txt"]})
    db = tmp_path / "opencode.db"
    con = sqlite3.connect(db)
    con.execute("create table part (id, message_id, session_id, data)")
    rt = LedgerRuntime(repo, tmp_path / "run")
    hooks = OpenCodeHooks(rt, db)
    got = []
    try:
        for i in range(2):
            call = {"tool": "bash", "callID": f"c{i}", "sessionID": "ses", "args": {"command": "cat big0.txt"}}
            assert hooks.handle("ToolBefore", {**call, "directory": str(repo)}) is None
            out = BIG["big0.txt"]
            answer = hooks.handle("ToolAfter", {**call, "directory": str(repo), "output": out, "metadata": {"exit": 0}})
            got.append(answer["output"] if answer else out)
            state = {"status": "completed", "output": got[-1], "time": {"start": 1, "end": 2, "compacted": 3}}
            part = {"type": "tool", "callID": f"c{i}", "state": state}  # cleared as soon as it is written
            con.execute("insert into part values (?, 'm', 'ses', ?)", (i, json.dumps(part)))
            con.commit()
        hooks.finish()
    finally:
        con.close()
        rt.close()
    assert got[1].startswith(BIG["big0.txt"][:200]) and "[ledger: same as" not in got[1], got[1][:300]
    assert not (tmp_path / "run" / "faults.log").exists(), (tmp_path / "run" / "faults.log").read_text()[:500]


@pytest.mark.skipif(GEMINI is None, reason="no gemini binary on PATH or in $LEDGER_GEMINI_BIN")
def test_gemini_a_result_it_cuts_is_checked_as_cut_and_never_referred_to(tmp_path: Path) -> None:
    """`seq 1 20000` twice: Gemini CLI sends a result past 40,000 characters cut to its first 8,000 and last 32,000
    (the whole saved to a file). The second run is sent whole (the model never saw the middle); and the session's
    text, the cut one, is what the ledger recorded, cut as Gemini CLI cuts it: no fault, nothing distrusted (each
    record was marked "the session's result is not the text recorded for it", with a line in faults.log)."""
    from ledger_runtime.inspection import load

    s = GeminiSession(tmp_path, [])
    try:
        s.fake.steps = [("bash", "seq 1 20000"), ("bash", "seq 1 20000"), ("say", "Counted.")]
        p = s.run()
        assert p.returncode == 0, p.stderr[-3000:]
        seen = s.seen(2)
        for call in ("call_0_0", "call_1_0"):
            assert seen[call].startswith("Output too large. Showing first 8,000 and last 32,000 characters."), call
            assert "Output: 1\n2\n3\n" in seen[call] and "\n20000\n" in seen[call] and "\n10000\n" not in seen[call]
        assert not s.faults(), s.faults()
        assert not load(s.run_dir).state.distrusted, "each record is what Gemini CLI sent, as it cut it"
    finally:
        s.fake.close()


def test_a_cut_result_is_matched_only_as_gemini_cli_cuts_it() -> None:
    """The check of a cut result: the notice, the head, the count left out (in any locale), the tail; nothing else."""
    from ledger_adapters.gemini.tools import cut_as_sent

    text = "".join(f"{n}\n" for n in range(20000))
    notice = "Output too large. Showing first 8,000 and last 32,000 characters. For full output see: /x\n"
    left = len(text) - 40_000
    cut = f"{text[:8000]}\n\n... [{left:,} characters omitted] ...\n\n{text[-32000:]}"
    assert cut_as_sent(notice + cut, text) and cut_as_sent(notice + cut + "\n\n<hook_context>x</hook_context>", text)
    assert cut_as_sent(notice + cut.replace(f"{left:,}", f"{left:_}".replace("_", ".")), text)  # another locale
    assert not cut_as_sent(cut, text), "no notice"
    assert not cut_as_sent(notice + cut.replace("19999\n", "19998\n"), text), "another tail"
    assert not cut_as_sent(notice + "1" + cut, text), "another head"


# 1,000 lines of 40 characters: 39,999 characters cat prints (under Gemini CLI's 40,000), 40,000 and more in its result
NEAR = {"near.txt": "".join(f"near line {n:04d} " + "y" * 24 + "\n" for n in range(1000))[:-1]}
# 32,000 characters Python counts, 52,000 Gemini CLI (JavaScript) counts: each 😀 is two of its characters (its cut
# after 8,000 falls between the two)
WIDE = {"wide.txt": "".join(f"wide {n:05d} " + "😀" * 20 + "\n" for n in range(1000))}


@pytest.mark.skipif(GEMINI is None, reason="no gemini binary on PATH or in $LEDGER_GEMINI_BIN")
@pytest.mark.parametrize("name", ["near.txt", "wide.txt"])
def test_gemini_an_output_it_cuts_is_never_referred_to(tmp_path: Path, name: str) -> None:
    """Gemini CLI cuts the whole result it sends (``Output: `` and the lines after the output too), past 40,000 of its
    characters, UTF-16 code units: an output just under 40,000 characters was counted as seen whole, and the model,
    which got its first 8,000 and last 32,000, was told lines of its middle "repeat here" (near.txt); one of emoji,
    32,000 characters, 52,000 as Gemini CLI counts, cut, was taken for a fault (wide.txt)."""
    files = {**NEAR, **WIDE}
    s = GeminiSession(tmp_path, [], files)
    try:
        s.fake.steps = [("bash", f"cat {name}"), ("bash", f"sed -n '100,300p' {name}"), ("say", "Read.")]
        p = s.run()
        assert p.returncode == 0, p.stderr[-3000:]
        seen = s.seen(2)
        assert seen["call_0_0"].startswith("Output too large. Showing first 8,000"), seen["call_0_0"][:200]
        assert "[ledger: lines" not in seen["call_1_0"] and "step 1's output" not in seen["call_1_0"], seen["call_1_0"]
        assert "\n".join(files[name].split("\n")[99:300]) in seen["call_1_0"]
        assert not s.faults(), s.faults()
    finally:
        s.fake.close()


def test_a_cut_result_is_matched_as_gemini_cli_counts_and_cuts_it() -> None:
    """Gemini CLI counts and cuts in UTF-16 code units: a 😀 is two, and a cut point may fall between them (its
    halves are what the session holds). A text it does not cut is matched whole however long: a read_file of
    45,000 characters was taken for a cut one, and for a fault."""
    from ledger_adapters.gemini.hooks import same_text
    from ledger_adapters.gemini.tools import cut_as_sent, cuts

    text = "a" * 7_999 + "😀" + "b" * 40_000 + "😀" + "c" * 31_999  # 80,000 characters, 80,002 as it counts
    assert cuts(text) and cuts("😀" * 20_001) and not cuts("😀" * 20_000)
    units = text.encode("utf-16-le", "surrogatepass")
    cut = lambda a, b: units[2 * a : 2 * b].decode("utf-16-le", "surrogatepass")  # noqa: E731
    head, tail = cut(0, 8_000), cut(len(units) // 2 - 32_000, len(units) // 2)
    assert head.endswith("a\ud83d") and tail.startswith("\ude00c")
    sent = f"Output too large. Showing first 8,000 and last 32,000 characters. For full output see: /x\n{head}"
    assert cut_as_sent(f"{sent}\n\n... [40,002 characters omitted] ...\n\n{tail}", text)
    assert not cut_as_sent(f"{sent}\n\n... [40,000 characters omitted] ...\n\n{tail}", text), "another count"
    assert not cut_as_sent(f"{sent}\n\n... [40,002 characters omitted] ...\n\n{tail[1:]}", text), "another tail"
    whole = "line\n" * 9_000  # 45,000 characters read_file shows as they are
    assert same_text(whole + "\n\n<hook_context>x</hook_context>", whole)


def test_a_cut_is_matched_at_the_limit_its_notice_names_and_the_users_settings_set() -> None:
    """Gemini CLI's limit is the user's ``tools.truncateToolOutputThreshold`` (0 or less: no cut), lower when the
    context is nearly full; its notice says how much it kept. The ledger cuts at the lowest the settings set."""
    from ledger_adapters.gemini.hooks import same_text
    from ledger_adapters.gemini.tools import cut_as_sent, cut_limit

    limit = lambda v: {"tools": {"truncateToolOutputThreshold": v}}  # noqa: E731
    assert cut_limit({}, {}) == 40_000 and cut_limit(limit(10_000), {}) == 10_000 and cut_limit(limit(0)) is None
    assert cut_limit(limit(100_000), limit(20_000)) == 20_000 and cut_limit(limit(-1), limit(5_000)) == 5_000
    assert cut_limit({"tools": {"truncateToolOutputThreshold": "9"}}, {"tools": 1}) == 40_000
    text = "".join(f"{n}\n" for n in range(5_000))  # 23,890 characters
    notice = "Output too large. Showing first 2.000 and last 8.000 characters. For full output see: /x\n"
    sent = f"{notice}{text[:2000]}\n\n... [13.890 characters omitted] ...\n\n{text[-8000:]}"
    assert cut_as_sent(sent, text) and same_text(sent, text, 10_000)
    assert not same_text(sent, text, 40_000), "the ledger counted it whole: the model did not get it so"
    assert not same_text(sent, text, None), "the ledger counted it whole: the model did not get it so"
    assert not cut_as_sent(sent.replace("first 2.000", "first 2.001"), text), "a head other than it names"
    assert not cut_as_sent(sent.replace("last 8.000", "last 7.999"), text), "a count other than the text's"


@pytest.mark.skipif(GEMINI is None, reason="no gemini binary on PATH or in $LEDGER_GEMINI_BIN")
def test_gemini_an_output_cut_at_the_users_own_threshold_is_checked_as_cut(tmp_path: Path) -> None:
    """The user's ``tools.truncateToolOutputThreshold`` of 10,000: Gemini CLI cut a result of 16,000 characters to its
    first 2,000 and last 8,000, and the ledger, cutting at 40,000, counted it seen whole: only the check of the
    session, after the call, distrusted it, with a line in faults.log, "the session's result is not the text recorded
    for it", for each such result."""
    from ledger_runtime.inspection import load

    text = "".join(f"mid line {n:04d} " + "z" * 25 + "\n" for n in range(400))
    s = GeminiSession(tmp_path, [], {"mid.txt": text})
    try:
        s.settings["tools"] = {"truncateToolOutputThreshold": 10_000}
        (s.home / ".gemini" / "settings.json").write_text(json.dumps(s.settings))
        s.fake.steps = [("bash", "cat mid.txt"), ("bash", "sed -n '100,300p' mid.txt"), ("say", "Read.")]
        p = s.run()
        assert p.returncode == 0, p.stderr[-3000:]
        seen = s.seen(2)
        assert seen["call_0_0"].startswith("Output too large. Showing first 2,000"), seen["call_0_0"][:200]
        assert "[ledger: lines" not in seen["call_1_0"], seen["call_1_0"]
        assert "\n".join(text.split("\n")[99:300]) in seen["call_1_0"]
        assert not s.faults(), s.faults()
        assert not load(s.run_dir).state.distrusted, "each record is what Gemini CLI sent, as it cut it"
    finally:
        s.fake.close()


@pytest.mark.skipif(GEMINI is None, reason="no gemini binary on PATH or in $LEDGER_GEMINI_BIN")
def test_gemini_a_link_retargeted_since_its_read_is_diffed_from_the_file_it_named_then(tmp_path: Path) -> None:
    """read_file other.py, read_file link.py (-> calc.py), then `sed` of other.py and `ln -sf other.py link.py`: the
    read of link.py said "What changed from the version you saw" with the diff of other.py's change alone (-x + 5
    +x + 55), from the other.py of step 1, where the model held link.py as calc.py (x + 7, not x + 77); and it
    named the command twice (it changed link.py and other.py)."""
    s = GeminiSession(tmp_path, [])
    try:
        os.symlink("calc.py", s.repo / "link.py")
        (s.repo / "other.py").write_text(CALC_PROJECT["calc.py"].replace("x + 7\n", "x + 77\n"))
        retarget = f"{SED.replace('calc.py', 'other.py')} && ln -sf other.py link.py"
        s.fake.steps = [
            ("tool", "read_file", {"file_path": "other.py"}),
            ("tool", "read_file", {"file_path": "link.py"}),
            ("bash", retarget),
            ("tool", "read_file", {"file_path": "link.py"}),
            ("say", "Read it."),
        ]
        p = s.run()
        assert p.returncode == 0, p.stderr[-3000:]
        got = s.seen(4)["call_3_0"]
        flag = "[ledger] link.py (a link to other.py) changed since you saw it at step 2"
        assert f"{flag}: `{retarget}` (step 3) changed it. What changed" in got, got[-1500:]
        assert "-    return x + 7\n+    return x + 77\n" in got, got
        assert "-    return x + 5\n+    return x + 55\n" in got, got
        assert not s.faults(), s.faults()
    finally:
        s.fake.close()


@pytest.mark.skipif(GEMINI is None, reason="no gemini binary on PATH or in $LEDGER_GEMINI_BIN")
def test_gemini_an_edit_of_a_file_read_through_a_link_chain_is_not_told_it_was_never_read(tmp_path: Path) -> None:
    """`cat link.py` (link.py -> mid.py -> calc.py), then a `sed -i` of calc.py: the stale-edit nudge told the model
    "calc.py is edited in place, and no read of it is on record", where it had read it, through the links, on record
    under link.py with calc.py as its target."""
    s = GeminiSession(tmp_path, [])
    try:
        os.symlink("calc.py", s.repo / "mid.py")
        os.symlink("mid.py", s.repo / "link.py")
        s.fake.steps = [("bash", "cat link.py"), ("bash", SED), ("say", "Done.")]
        p = s.run()
        assert p.returncode == 0, p.stderr[-3000:]
        got = s.seen(2)["call_1_0"]
        assert "no read of it is on record" not in got and "stale-edit" not in got, got
        assert (s.repo / "calc.py").read_text().count("x + 55") == 1
        assert not s.faults(), s.faults()
    finally:
        s.fake.close()


@pytest.mark.skipif(GEMINI is None, reason="no gemini binary on PATH or in $LEDGER_GEMINI_BIN")
def test_gemini_a_read_through_another_link_to_a_changed_file_is_flagged(tmp_path: Path) -> None:
    """`cat one.py`, a silent `sed` of calc.py, read_file two.py (one.py and two.py both -> calc.py): the model holds
    calc.py as it read it through one.py, and the read through two.py was not flagged (the ledger looked for reads
    of two.py and calc.py only)."""
    s = GeminiSession(tmp_path, [])
    try:
        os.symlink("calc.py", s.repo / "one.py")
        os.symlink("calc.py", s.repo / "two.py")
        s.fake.steps = [
            ("bash", "cat one.py"),
            ("bash", SED),
            ("tool", "read_file", {"file_path": "two.py"}),
            ("say", "Read it."),
        ]
        p = s.run()
        assert p.returncode == 0, p.stderr[-3000:]
        got = s.seen(3)["call_2_0"]
        flag = "[ledger] two.py (a link to calc.py) changed since you saw it at step 1"
        assert f"{flag}: `{SED}` (step 2) changed it." in got, got[-600:]
        assert not s.faults(), s.faults()
    finally:
        s.fake.close()
