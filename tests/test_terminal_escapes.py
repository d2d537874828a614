r"""What a person reads never drives the terminal: commands, file names and outputs reach
``ledger-run inspect`` (the timeline, --step, --output, --expand) and the HTML page with their control
and bidi characters as visible escapes (``\x1b``, ``\u202e``); ``--output --raw`` keeps the exact
bytes for pipes, and ``--json`` is escaped JSON."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import unicodedata
from pathlib import Path

import pytest
from conftest import make_repo

from ledger_runtime.cli.printable import visible, visible_data
from ledger_runtime.config import LedgerConfig
from ledger_runtime.executor import LocalExecutor
from ledger_runtime.runtime import LedgerRuntime

# each sequence a terminal acts on, and how it must read instead
SEQUENCES = {
    "\x1b]0;pwned\x07": "\\x1b]0;pwned\\x07",  # OSC: the window title
    "\x1b]52;c;aGk=\x07": "\\x1b]52;c;aGk=\\x07",  # OSC 52: a clipboard write
    "\x1b[2J": "\\x1b[2J",  # clear the screen
    "\u009b31m": "\\x9b31m",  # C1 CSI, as the character U+009B
    "\u202eevil": "\\u202eevil",  # RLO: what follows reads reversed
    "\u2066x\u2069": "\\u2066x\\u2069",  # an isolate
    "a\u200bb": "a\\u200bb",  # zero width space
    "\x7f": "\\x7f",  # DEL
    "\x08": "\\x08",  # backspace
    "CR\rover": "CR\\rover",  # a carriage return inside a line
}
NASTY = " ".join(SEQUENCES)
FORMAT_CONTROLS = "\u200e\u200f\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069\u061c"


def raw_controls(text: str, *, allow: str = "") -> list[str]:
    """The characters in ``text`` a terminal or a bidi renderer would act on (newline and tab, and a
    carriage return ending a line, are fine)."""
    bad = []
    for i, c in enumerate(text):
        if c in "\n\t" or c in allow or (c == "\r" and text[i + 1 : i + 2] == "\n"):
            continue
        n = ord(c)
        if n < 0x20 or n == 0x7F or 0x80 <= n <= 0x9F or unicodedata.category(c) in ("Cf", "Cs", "Zl", "Zp"):
            bad.append(c)
    return bad


def test_visible_escapes_each_sequence_and_keeps_the_rest():
    for raw, shown in SEQUENCES.items():
        assert visible(raw) == shown, raw
    for c in FORMAT_CONTROLS:
        assert visible(c) == f"\\u{ord(c):04x}"
    assert visible("\x00\x1f") == "\\x00\\x1f" and visible("\u0085") == "\\x85"
    assert visible("\udc9b") == "\\udc9b"  # a byte that was not UTF-8 (surrogateescape): never sent raw
    assert visible("\U000e0041") == "\\U000e0041"  # a tag character
    kept = "plain text\n\tindented, ünïcödé, 日本語, emoji 🙂, a line\r\nwith CRLF, back\\slash [red]x[/red]"
    assert visible(kept) == kept
    assert visible_data({"a": ["\x1b", ("\u202e",)], "n": 3}) == {"a": ["\\x1b", ("\\u202e",)], "n": 3}


def test_every_unicode_format_character_is_escaped():
    # the module lists them (one regex pass over a long output): the list must be unicodedata's
    missed = [
        f"U+{n:04X}"
        for n in range(0x110000)
        if unicodedata.category(chr(n)) in ("Cf", "Cc", "Zl", "Zp") and chr(n) not in "\n\t\r" and not raw_shown(n)
    ]
    assert not missed, missed


def raw_shown(n: int) -> bool:
    return visible(chr(n)) != chr(n)


def cli(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "ledger_runtime", *args],
        capture_output=True,
        timeout=120,
        env={**os.environ, "COLUMNS": "200"},
    )


COMMAND = (
    # the command holds the sequences, makes a file whose name holds them, and prints them
    f"printf '%s' '{NASTY}' > \"$(printf 'f\\033[2Jx\\342\\200\\256.txt')\"; cat f*; echo; "
    "echo '[/] [link=http://example.invalid]markup[/link]'"
)


@pytest.fixture(scope="module")
def nasty_run(tmp_path_factory) -> Path:
    base = tmp_path_factory.mktemp("nasty")
    repo = make_repo(base / "repo", {"a.py": "x = 1\n"})
    rt = LedgerRuntime(repo, base / "run", LedgerConfig())
    try:
        rt.run(COMMAND, LocalExecutor())
    finally:
        rt.close()
    return base


@pytest.mark.parametrize(
    "args", [[], ["--step", "1"], ["--step", "1", "--output"], ["--step", "1", "--expand"]], ids=repr
)
def test_inspect_shows_the_sequences_escaped_never_raw(nasty_run, args):
    r = cli("inspect", str(nasty_run / "run"), *args)
    assert r.returncode == 0, r.stderr.decode(errors="replace")[-2000:]
    out = r.stdout.decode("utf-8")
    assert not raw_controls(out), sorted(set(raw_controls(out)))
    if args:  # the whole text: every sequence as its escape (the view cuts a command at its first line end)
        for shown in SEQUENCES.values():
            assert shown in out or (args == ["--step", "1"] and shown == "CR\\rover"), (shown, out)
    else:  # the timeline: the command cut to its cell, the file name whole in the summary
        assert "\\x1b]0;pwned\\x07" in out and "f\\x1b[2Jx\\u202e.txt" in out, out
    if args[-1:] in (["--output"], ["--expand"]):
        assert "[/] [link=http://example.invalid]markup[/link]" in out  # text, not markup


def test_output_raw_gives_the_exact_bytes(nasty_run):
    printed = subprocess.run(["bash", "-c", COMMAND], cwd=nasty_run / "repo", capture_output=True).stdout
    for what in ("--output", "--expand"):
        r = cli("inspect", str(nasty_run / "run"), "--step", "1", what, "--raw")
        assert r.returncode == 0, r.stderr
        assert r.stdout == printed, what
    help_text = cli("inspect", "--help").stdout.decode()
    assert "--raw" in help_text and "byte for byte" in help_text
    refused = cli("inspect", str(nasty_run / "run"), "--raw")
    assert refused.returncode == 2 and b"--raw goes with --step" in refused.stderr


def test_json_is_escaped_and_exact(nasty_run):
    r = cli("inspect", str(nasty_run / "run"), "--json")
    assert r.returncode == 0, r.stderr
    text = r.stdout.decode("utf-8")
    assert not raw_controls(text, allow="\x7f"), "JSON escapes all but DEL, which terminals ignore"
    assert json.loads(text)["timeline"][0]["command"] == COMMAND
    step = json.loads(cli("inspect", str(nasty_run / "run"), "--step", "1", "--json").stdout)
    assert NASTY in step["commands"][0]["shown"]


def test_the_html_page_shows_bidi_and_controls_as_escapes(nasty_run, tmp_path):
    page = tmp_path / "page.html"
    r = cli("inspect", str(nasty_run / "run"), "--html", str(page))
    assert r.returncode == 0, r.stderr
    source = page.read_text(encoding="utf-8")
    assert not raw_controls(source), sorted(set(raw_controls(source)))
    assert "\\u202eevil" in source and "\\x1b]52;c;aGk=\\x07" in source and "f\\x1b[2Jx\\u202e.txt" in source
    assert "[link=http://example.invalid]" in source and "&gt; &quot;$(printf" in source  # HTML-escaped as before


def test_markup_in_a_command_or_a_path_is_text_and_never_a_traceback(tmp_path):
    repo = make_repo(tmp_path / "repo", {"a.py": "x = 1\n"})
    rt = LedgerRuntime(repo, tmp_path / "run", LedgerConfig())
    try:
        rt.run("echo '[/]' '[link=http://example.invalid]x[/link]' > '[/]odd.txt'", LocalExecutor())
    finally:
        rt.close()
    r = cli("inspect", str(tmp_path / "run"))
    out, err = r.stdout.decode(), r.stderr.decode()
    assert r.returncode == 0 and "Traceback" not in err, err[-2000:]
    assert "[/]odd.txt" in out and "\x1b]8;" not in out  # no OSC 8 hyperlink
    missing = cli("inspect", str(tmp_path / "no[/]such\x1b[2J"))
    assert missing.returncode == 2 and b"Traceback" not in missing.stderr and b"\x1b" not in missing.stderr
    assert len(missing.stderr.decode().strip().splitlines()) == 1
