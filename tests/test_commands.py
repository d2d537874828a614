"""Command analysis: classes, read keys, the lines a command shows, writes, and purity."""

from __future__ import annotations

import gzip
import json

import pytest
from conftest import SHARED

from ledger_adapters.mini.format import SUBMISSION  # the agent whose marker these commands use
from ledger_runtime.analysis.commands import ANY_FILE, analyze
from ledger_runtime.analysis.programs import awk_range, resolve, sed_range
from ledger_runtime.analysis.shell import parse
from ledger_runtime.records import CommandClass

W = "/testbed"


def a(cmd: str, cwd: str = W):
    return analyze(cmd, cwd, SUBMISSION)


def views(x):
    return [(v.path, v.kind, v.selectors, v.numbered) for v in x.views]


@pytest.mark.parametrize(
    "cmd, cls, keys, pure",
    [
        ("cat foo.py", "inspect", ["f:/testbed/foo.py"], True),
        ("cat -n /abs/x.py", "inspect", ["f:/abs/x.py"], True),
        ("head -n 30 a.py", "inspect", ["f:/testbed/a.py"], True),
        ("tail -20 a.py", "inspect", ["f:/testbed/a.py"], True),
        ("tail -f log.txt", "run", [], False),
        ("nl -ba src/x.py | sed -n '10,20p'", "inspect", ["f:/testbed/src/x.py"], True),
        ("sed -n '5,10p' < f.py", "inspect", ["f:/testbed/f.py"], True),
        ("awk 'NR>=5 && NR<=9' f.py", "inspect", ["f:/testbed/f.py"], True),
        ("awk '{print > \"out\"}' f.py", "run", [], False),
        ("wc -l f.py", "inspect", ["f:/testbed/f.py"], True),
        ("grep -n 'def foo' a.py", "search", ["f:/testbed/a.py"], True),
        ("grep -rn foo src", "search", ["r:/testbed/src"], True),
        ("grep -rn foo", "search", ["r:/testbed"], True),
        ("grep -n foo $FILE", "search", [], False),
        ("find . -name '*.py' | head", "search", ["r:/testbed"], True),
        ("find . -name '*.pyc' -delete", "modify", [], False),
        ("find . -exec cat {} +", "run", [], False),
        ("ls -la", "inspect", [], False),  # the long format's times depend on the clock
        ("ls -la --time-style=long-iso", "inspect", ["d:/testbed", "m:/"], True),
        ("ls", "inspect", ["d:/testbed"], True),
        ("ls -R src", "inspect", ["r:/testbed/src"], True),
        ("cat *.py", "inspect", [], False),
        ("cat ~/notes", "inspect", [], False),
        ("git status", "inspect", [], False),
        ("git diff HEAD~1", "inspect", [], False),
        ("git checkout -- a.py", "modify", [], False),
        ("python -m pytest tests/test_x.py -x", "run", [], False),
        ("./tests/runtests.py foo", "run", [], False),
        ("pip install -e .", "env-change", [], False),
        ("python -m pip install requests", "env-change", [], False),
        ("export FOO=1", "env-change", [], False),
        ("sed -i 's/a/b/' x.py", "modify", [], False),
        ("echo hi", "other", [], False),
        ("frobnicate --all", "other", [], False),
        ("timeout 10 cat a.py", "inspect", ["f:/testbed/a.py"], True),
        ("LC_ALL=C grep -n x a.py", "search", ["f:/testbed/a.py"], False),
        ("for f in a b; do cat $f; done", "inspect", [], False),
        ("cat x | (grep a; grep b)", "other", ["f:/testbed/x"], False),
        ("cat a.py &", "run", ["f:/testbed/a.py"], False),
        ("diff a.py b.py", "inspect", ["f:/testbed/a.py", "f:/testbed/b.py"], True),
        ("sed -n '1,5w out.txt' a.py", "inspect", ["f:/testbed/a.py"], False),
        ("sed 's/x/y/e' a.py", "inspect", ["f:/testbed/a.py"], False),
    ],
)
def test_class_keys_purity(cmd, cls, keys, pure):
    x = a(cmd)
    assert x.parsed, x.problem
    assert x.command_class.value == cls
    assert list(x.read_keys) == keys or (not pure and not keys)
    assert x.pure is pure


@pytest.mark.parametrize(
    "cmd, expected",
    [
        ("cat foo.py", [("/testbed/foo.py", "lines", (), "")]),
        ("cat -n foo.py", [("/testbed/foo.py", "lines", (), "file")]),
        ("nl -ba src/x.py | sed -n '10,20p'", [("/testbed/src/x.py", "lines", (("range", 10, 20),), "file")]),
        ("sed -n '7p' a.py", [("/testbed/a.py", "lines", (("range", 7, 7),), "")]),
        ("sed -n '40,$p' a.py", [("/testbed/a.py", "lines", (("range", 40, None),), "")]),
        ("head -n 30 a.py", [("/testbed/a.py", "lines", (("head", 30),), "")]),
        ("head a.py", [("/testbed/a.py", "lines", (("head", 10),), "")]),
        ("tail -n +5 a.py", [("/testbed/a.py", "lines", (("from", 5),), "")]),
        ("cat -n a.py | head -n 50 | tail -n 10", [("/testbed/a.py", "lines", (("head", 50), ("tail", 10)), "file")]),
        ("grep -n foo a.py", [("/testbed/a.py", "matches", (), "file")]),
        ("grep foo a.py b.py", []),
        ("cat a.py > b.py", []),
        ("cat a b", [("/testbed/a", "lines", (), ""), ("/testbed/b", "lines", (), "")]),
        ("cat a.py | sort", []),
        ("wc -l a.py", []),
    ],
)
def test_views(cmd, expected):
    assert views(a(cmd)) == expected


@pytest.mark.parametrize(
    "cmd, writes",
    [
        ("sed -i 's/a/b/' x.py y.py", ["/testbed/x.py", "/testbed/y.py"]),
        ("sed -i.bak -e 's/a/b/' x.py", ["/testbed/x.py"]),
        ("cat <<'EOF' > r.py\nprint(1)\nEOF\npython r.py", ["/testbed/r.py"]),
        ("echo x >> /tmp/log.txt 2>/dev/null", ["/tmp/log.txt"]),
        ("python run.py > out.txt 2>&1", ["/testbed/out.txt"]),
        ("echo hi | tee a.txt b.txt", ["/testbed/a.txt", "/testbed/b.txt"]),
        ("mv a.py b.py", ["/testbed/a.py", "/testbed/b.py"]),
        ("cp a.py /tmp/b.py", ["/tmp/b.py"]),
        ("rm -rf build dist", ["/testbed/build", "/testbed/dist"]),
        ("patch -p1 < fix.patch", [ANY_FILE]),
        ("git apply fix.patch", [ANY_FILE]),
        ("touch $X", [ANY_FILE]),
        ("cd src && sed -i 's/a/b/' m.py", ["/testbed/src/m.py"]),
    ],
)
def test_writes(cmd, writes):
    x = a(cmd)
    assert x.command_class.value == "modify"
    assert list(x.writes) == writes


def test_cd_is_followed_and_folded():
    x = a("cd /testbed/src && grep -n foo m.py")
    assert x.cwd == "/testbed/src" and x.normalized == "grep -n foo m.py"
    assert list(x.read_keys) == ["x:/testbed/src", "f:/testbed/src/m.py"]
    assert a("grep -n foo m.py", "/testbed/src").normalized == x.normalized
    y = a("(cd sub && cat a.py); cat b.py")
    assert "f:/testbed/sub/a.py" in y.read_keys and "f:/testbed/b.py" in y.read_keys
    z = a("cd nowhere || cat a.py")
    assert not z.pure, "after `cd X ||` the directory is unknown"


def test_normalization_keeps_quoted_text_and_line_breaks():
    assert a("cat   foo.py").normalized == "cat foo.py"
    assert a("grep -n 'a  b' f").normalized != a("grep -n 'a b' f").normalized
    assert a("cat a\ncat b").normalized != a("cat a cat b").normalized
    heredoc = "cat <<'EOF' > f.py\n  indented   text\nEOF"
    assert "  indented   text" in a(heredoc).normalized


def test_submission_is_flagged_and_never_pure():
    x = a("echo COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT && git add -A && git diff --cached")
    assert x.submits and not x.pure and x.command_class.value == "modify"


def test_unparseable_commands_are_other_and_run():
    x = a("cat <<EOF\nunterminated (")
    assert x.command_class.value in ("other", "inspect")
    y = a("if then fi ((")
    assert not y.parsed and y.command_class.value == "other" and not y.pure and y.problem


def test_helpers():
    assert sed_range("10,20p") == (10, 20) and sed_range("7p") == (7, 7) and sed_range("5,$p") == (5, None)
    assert sed_range("1,3p;5p") is None and sed_range("s/a/b/p") is None
    assert awk_range("NR>=3 && NR<=9") == (3, 9) and awk_range("NR==4") == (4, 4)
    assert awk_range("NR>2 && NR<6 {print}") == (3, 5) and awk_range("{print $1}") is None
    assert resolve((("range", 10, 20),), 15) == (10, 15)
    assert resolve((("head", 50), ("tail", 10)), 200) == (41, 50)
    assert resolve((("tail", 10),), 4) == (1, 4)
    assert resolve((("from", 5),), 4) is None
    assert resolve((("range", 3, 6), ("range", 2, 3)), 100) == (4, 5)


def test_parse_never_raises_on_garbage():
    for junk in ["", "\0\0", "((((((", "'", '"', "$(", "`", "\udcff", "a" * 100000, "|" * 50, "<<" * 30]:
        x = analyze(junk, W)
        assert x.command_class is not None
    assert parse("echo $((", W).ok is False


TRAJ = SHARED / "data" / "trajectories"


def _real_commands() -> list[str]:
    cmds = []
    for f in sorted(TRAJ.glob("*/actions.jsonl.gz")):
        with gzip.open(f, "rt") as fh:
            for line in fh:
                row = json.loads(line)
                if isinstance(row.get("command"), str) and row["command"].strip():
                    cmds.append(row["command"])
    return cmds


@pytest.mark.shared
@pytest.mark.skipif(not TRAJ.exists(), reason=f"shared trajectories not found at {TRAJ}")
def test_parse_coverage_on_real_commands():
    cmds = _real_commands()
    assert len(cmds) > 10000
    parsed = sum(1 for c in cmds if analyze(c, W).parsed)
    assert parsed / len(cmds) >= 0.99, f"parse coverage {parsed / len(cmds):.4f}"


@pytest.mark.parametrize(
    "cmd",
    [
        "time cat f.py",  # prints timings
        "cat /proc/uptime",  # no stat data vouches for /proc
        "head -c 16 /dev/urandom | xxd",
        "awk '{print rand()}' f.py",
        "awk '{print ENVIRON[\"HOME\"]}' f.py",
        "sort -R f.py",
        "cat f.py | sort -R",
        "find src -name *.py",  # the glob expands against the working directory
        "grep -rn foo* src",
        "ls src && echo *.py",
        "ls src/{a..c}",
        "cat fi\\\nle",  # bash joins the word; the parser splits it
        "stat f.py",  # shows the access time
        "ls -lu src",
        "ls -l --time=atime src",
        "find . -printf '%A@ %p\\n'",
        "jq now f.json",
        "find . -follow -name x",
        "find -L . -name x",
        "cd sub && rg foo",
        "sed -n '/s/w/x/p' f.py",
        "sed 's/a/b/w out' f.py",
        "cat a | grep x | head -5\nrm -rf build && echo ok",
    ],
)
def test_commands_whose_output_can_change_without_their_reads_changing_are_impure(cmd):
    assert not a(cmd).pure


def test_misparses_are_caught_and_run_as_other():
    for cmd in ["cat a | grep x | head -5\nrm -rf build && echo ok", "cat <<'EOF' > f.py\n\\first\nx = 1\nEOF"]:
        x = a(cmd)
        assert not x.parsed and x.command_class.value == "other"


def test_smaller_analysis_fixes():
    assert list(a("chmod +x run.sh").writes) == ["/testbed/run.sh"]
    assert list(a("chown root:root f").writes) == ["/testbed/f"]
    assert a("uniq a b").command_class.value == "modify" and list(a("uniq a b").writes) == ["/testbed/b"]
    assert list(a("cat f | tee /dev/null").writes) == []
    assert list(a("paste -d ' ' a b").read_keys) == ["f:/testbed/a", "f:/testbed/b"]
    assert a("find tests -name '*.py' | xargs grep -l foo").command_class.value == "search"
    assert views(a("nl -ba f.py | grep -C 3 foo")) == [("/testbed/f.py", "matches", (), "file")]
    assert views(a("nl -ba f.py | sed -n '5,9p' | grep -n foo")) == [("/testbed/f.py", "matches", (), "")]
    assert views(a("cat f.py | grep -n foo")) == [("/testbed/f.py", "matches", (), "file")]
    assert a("sed -n '/def get_choices/,/return/p' f.py").pure
    assert a('ls -R | grep ":$" | head').pure
    x = a("cat f.py && ls > out.txt")
    assert views(x) == [("/testbed/f.py", "lines", (), "")], "the redirection belongs to ls alone"
    assert a("stat -c '%s %Y' f.py").pure


def test_apply_patch_envelope_is_an_edit_of_the_files_it_names(tmp_path) -> None:
    from ledger_runtime.analysis.commands import analyze_patch

    patch = (
        "*** Begin Patch\n*** Update File: pkg/a.py\n*** Move to: pkg/b.py\n@@\n-x\n+y\n"
        "*** Add File: new.txt\n+hello\n*** Delete File: old.txt\n*** End Patch\n"
    )
    a = analyze_patch(patch, "/w")
    assert a.command_class is CommandClass.MODIFY and not a.pure and a.parsed
    assert a.writes == ("/w/pkg/a.py", "/w/pkg/b.py", "/w/new.txt", "/w/old.txt")
    bad = analyze_patch("not a patch", "/w")
    assert bad.command_class is CommandClass.OTHER and not bad.parsed and bad.writes == ()


@pytest.mark.parametrize(
    "cmd, readonly",
    [
        ("ls -la", True),
        ("cat *.py", True),
        ("git status", True),
        ("find . -newer a.py", True),
        ("time cat f", True),
        ("sed -n '1,5w out.txt' a.py", False),
        ("cat a | sed 's/x/y/w o'", False),
        ("cat a > b", False),
        ("python x.py", False),
        ("cat a &", False),
        ("echo $(rm x)", False),
        ("for f in *; do cat $f; done", False),
    ],
)
def test_readonly_is_about_writing_not_about_a_deterministic_output(cmd, readonly):
    """A reader (nothing written, nothing run) needs no workspace scan around it, however its output
    depends on the clock or on links; purity is the stricter claim that its output is a function of
    its read keys."""
    x = a(cmd)
    assert x.readonly is readonly and (not x.pure or x.readonly)


def _word_by_regex(node):
    """shell.word_of as written before its fast paths: every regex run on every word."""
    import re

    from ledger_runtime.analysis.shell import _BRACE, _DQ_ESCAPE, _ESCAPE, _GLOB, Word

    raw = node.text.decode("utf-8", "surrogateescape")
    if node.type in ("word", "number"):
        if raw.startswith("~") or _BRACE.search(raw):
            return Word(None, raw)
        return Word(_ESCAPE.sub(r"\1", raw).replace("\\\n", ""), raw, bool(_GLOB.search(raw)))
    if node.type == "raw_string":
        return Word(raw[1:-1], raw)
    if node.type == "string":
        parts = []
        for c in node.children:
            if c.type == '"':
                continue
            if c.type == "string_content":
                text = c.text.decode("utf-8", "surrogateescape")
                parts.append(_DQ_ESCAPE.sub(lambda m: "" if m.group(1) == "\n" else m.group(1), text))
            elif c.type == "$":
                parts.append("$")
            else:
                return Word(None, raw)
        return Word("".join(parts), raw)
    if node.type == "concatenation":
        words = [_word_by_regex(c) for c in node.children]
        if any(w.value is None for w in words) or re.search(_BRACE, raw):
            return Word(None, raw)
        return Word("".join(w.value for w in words), raw, any(w.glob for w in words))
    return Word(None, raw)


def test_words_and_blanks_skip_only_regexes_that_cannot_match():
    # word_of and _squeeze skip a regex where the text lacks the character it needs ("{", a glob character, a
    # backslash, a line break, a tab or two blanks): on random commands of those characters they give the same
    import random

    from ledger_runtime.analysis.shell import _BLANKS, _BREAKS, _comments, _parser, _squeeze, parse, word_of

    pieces = [
        "a",
        "b.py",
        "~",
        "{",
        "}",
        ",",
        "..",
        "*",
        "?",
        "[",
        "]",
        "\\",
        "\\\n",
        "\n",
        "\t",
        " ",
        "  ",
        '"',
        "'",
        "#",
        " #x",
    ]
    rng = random.Random(7)
    compared = 0
    for _ in range(3000):
        command = "echo " + "".join(rng.choice(pieces) for _ in range(rng.randint(1, 10)))
        source = command.encode()
        assert _squeeze(source) == _BLANKS.sub(b" ", _BREAKS.sub(b"\n", source)), repr(command)
        root = _parser().parse(source).root_node
        script = parse(command, W)  # it reads the comments only where the command has a "#"
        if script.ok:
            assert script.comments == _comments(root, source), repr(command)
        stack = [root]
        while stack:
            n = stack.pop()
            stack.extend(n.children)
            if n.type in ("word", "number", "raw_string", "string", "concatenation"):
                assert word_of(n) == _word_by_regex(n), repr(command)
                compared += 1
    assert compared > 3000
