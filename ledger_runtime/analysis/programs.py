"""What each program does to files: the per-command knowledge behind command analysis.

A filter of stdin gives a ``Filter``, which commands.py applies to the stream before it.
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

from ledger_runtime.analysis.shell import Simple, Word
from ledger_runtime.records import CommandClass

ANY_FILE = "*"  # in writes: the program may write any file (patch, git checkout)

# A selector narrows a sequence of file lines: ("range", a, b|None), ("head", n), ("head-all-but", n),
# ("tail", n) or ("from", n). Applied in order to lines 1..total they always leave a contiguous run.
Selector = tuple


# How output lines of a stream are numbered: not at all, with the file's own line numbers, or
# with other numbers (nl's default skips blank lines, cat -b, nl -v N, numbering after a selection).
UNNUMBERED, FILE_NUMBERS, OTHER_NUMBERS = "", "file", "other"
# an agent's read tool that shows a line after its file line number and ": " (OpenCode's read), not a tab
COLON_NUMBERS = "colon"


@dataclass(frozen=True, slots=True)
class Stream:
    """Lines of one file in an output: a claim checked against the file before the ledger records it as seen.

    ``kind`` "lines" is those ``selectors`` leave; "matches" is lines a search printed."""

    kind: str
    path: str
    selectors: tuple[Selector, ...] = ()
    numbered: str = UNNUMBERED


@dataclass(frozen=True, slots=True)
class Filter:
    """A stdin filter whose ``action`` is a selector tuple narrowing lines, or a word.

    "matches", "matches-n", "numbered" and "renumbered" are what grep, grep -n, cat -n and nl print; "same" passes lines
    through; "opaque" is not followed."""

    action: object


@dataclass
class Effect:
    """One simple command's effect; a ``cls`` of None, as echo's, sets no class."""

    cls: CommandClass | None = None
    reads: list[str] = field(default_factory=list)
    writes: list[str] = field(default_factory=list)
    pure: bool = True
    out: Stream | Filter | tuple[Stream, ...] | None = None  # a tuple: several whole files (cat a b)
    source: bool = True  # prints output of its own rather than transforming stdin
    env_change: bool = False
    side_effects: bool = False  # may write or run something the analysis does not follow (sed's w and e)


def apply(upstream: Stream | None, f: Filter) -> Stream | None:
    """What a filter leaves of a stream, or None if nothing line-exact."""
    if upstream is None:
        return None
    a = f.action
    if a == "same":  # passes its input through (cat with no file)
        return upstream
    if upstream.kind == "lines":
        if a in ("numbered", "renumbered"):
            if upstream.numbered:  # numbers on numbers: not a form the ledger reads
                return None
            # numbering counts the lines it gets: file line numbers only for the whole file
            exact = a == "numbered" and not upstream.selectors
            return Stream("lines", upstream.path, upstream.selectors, FILE_NUMBERS if exact else OTHER_NUMBERS)
        if a == "matches":  # lines numbered by nl or cat -n keep their numbers
            return Stream("matches", upstream.path, (), upstream.numbered if upstream.numbered == FILE_NUMBERS else "")
        if a == "matches-n":  # grep -n numbers its input lines: file lines only for a whole, unnumbered file
            exact = not upstream.numbered and not upstream.selectors
            return Stream("matches", upstream.path, (), FILE_NUMBERS if exact else UNNUMBERED)
        if isinstance(a, tuple):
            return Stream("lines", upstream.path, upstream.selectors + (a,), upstream.numbered)
        return None
    if isinstance(a, tuple) or a == "matches":  # narrowing matches leaves matches, numbers and all
        return Stream("matches", upstream.path, (), upstream.numbered)
    return None


def resolve(selectors: tuple[Selector, ...], total: int) -> tuple[int, int] | None:
    """The first and last file lines ``selectors`` leave of ``total`` lines, or None."""
    lo, hi = 1, total
    for sel in selectors:
        n = hi - lo + 1
        if n <= 0:
            return None
        kind = sel[0]
        if kind == "range":
            a, b = sel[1], (n if sel[2] is None else min(sel[2], n))
            if a > b:
                return None
            lo, hi = lo + a - 1, lo + b - 1
        elif kind == "head":
            hi = lo + min(sel[1], n) - 1
        elif kind == "head-all-but":
            hi -= sel[1]
        elif kind == "tail":
            lo = max(lo, hi - sel[1] + 1)
        elif kind == "from":
            lo += sel[1] - 1
    return (lo, hi) if hi >= lo else None


# -- argument handling --------------------------------------------------------------------------


def split_opts(  # noqa: C901
    args: list[Word], with_arg: str = "", long_with_arg: tuple[str, ...] = (), numeric: bool = False
) -> tuple[list[tuple[str, str | None]], list[Word]] | None:
    """Options and operands, getopt-style; None if an option's argument is not a literal."""
    opts: list[tuple[str, str | None]] = []
    operands: list[Word] = []
    i = 0
    while i < len(args):
        v = args[i].value
        if v is None or v == "-" or not v.startswith("-"):
            operands.append(args[i])
        elif v == "--":
            operands.extend(args[i + 1 :])
            break
        elif v.startswith("--"):
            name, eq, val = v[2:].partition("=")
            if not eq and name in long_with_arg:
                i += 1
                if i >= len(args) or args[i].value is None:
                    return None
                val = args[i].value
            opts.append(("--" + name, val if (eq or name in long_with_arg) else None))
        elif numeric and v[1:].isdigit():
            opts.append(("-#", v[1:]))
        else:
            for j, ch in enumerate(v[1:], 1):
                if ch in with_arg:
                    val = v[j + 1 :]
                    if not val:
                        i += 1
                        if i >= len(args) or args[i].value is None:
                            return None
                        val = args[i].value
                    opts.append(("-" + ch, val))
                    break
                opts.append(("-" + ch, None))
        i += 1
    return opts, operands


def _has(opts, *names: str) -> bool:
    return any(o in names for o, _ in opts)


def _last(opts, *names: str) -> str | None:
    found = None
    for o, v in opts:
        if o in names:
            found = v
    return found


def normpath(path: str) -> str:
    """``os.path.normpath``, but a leading ``//``, kept by POSIX, becomes ``/`` as Linux reads it."""
    p = os.path.normpath(path)
    return "/" + p.lstrip("/") if p.startswith("//") else p


def _path(cwd: str | None, value: str) -> str | None:
    """The absolute path a program would open for ``value``, or None when the text cannot tell.

    A ``..`` goes through symlinks, so it is not resolved lexically."""
    if ".." in value.split("/"):
        return None
    if value.startswith("/"):
        return normpath(value)
    return None if cwd is None else normpath(os.path.join(cwd, value))


def literal_paths(cwd: str | None, words: list[Word]) -> list[str] | None:
    """Absolute paths of ``words``; None if any is not a literal path."""
    out = []
    for w in words:
        if w.value is None or w.glob:
            return None
        if w.value == "-":
            continue
        p = _path(cwd, w.value)
        if p is None:
            return None
        out.append(p)
    return out


def _count(s: str | None) -> int | None:
    if s is None:
        return None
    s = s.strip().lstrip("+")
    return int(s) if s.isdigit() else None


def _impure(cls: CommandClass | None) -> Effect:
    return Effect(cls, pure=False)


def _file_reader(paths: list[str], selector: Selector | None, numbered: str = UNNUMBERED) -> Effect:
    """The effect of a program that prints lines of the files it names."""
    e = Effect(CommandClass.INSPECT, reads=["f:" + p for p in paths])
    if len(paths) == 1:
        e.out = Stream("lines", paths[0], () if selector is None else (selector,), numbered)
    elif len(paths) > 1 and selector is None:
        e.out = tuple(Stream("lines", p, (), numbered) for p in paths)
    return e


# -- readers ------------------------------------------------------------------------------------


_CAT_EXACT = {"-n", "--number", "-b", "--number-nonblank", "-u"}  # options that keep every line's text


def _cat(s: Simple, args: list[Word]) -> Effect:
    split = split_opts(args)
    if split is None:
        return _impure(CommandClass.INSPECT)
    opts, operands = split
    exact = all(o in _CAT_EXACT for o, _ in opts)  # -A, -v, -T, -E, -e, -t, -s rewrite or drop lines
    numbered = (
        OTHER_NUMBERS
        if _has(opts, "-b", "--number-nonblank")
        else (FILE_NUMBERS if _has(opts, "-n", "--number") else UNNUMBERED)
    )
    if not operands:
        action = (
            "opaque" if not exact else {FILE_NUMBERS: "numbered", OTHER_NUMBERS: "renumbered"}.get(numbered, "same")
        )
        return Effect(None, source=False, out=Filter(action))
    paths = literal_paths(s.cwd, operands)
    if paths is None:
        return _impure(CommandClass.INSPECT)
    if any(w.value == "-" for w in operands) or not exact:
        return Effect(CommandClass.INSPECT, reads=["f:" + p for p in paths])  # not line-exact
    return _file_reader(paths, None, numbered)


def _head_tail(s: Simple, args: list[Word], name: str) -> Effect:  # noqa: C901
    from_line = None
    if name == "tail" and args and args[0].value and re.fullmatch(r"\+\d+", args[0].value):  # tail +N
        from_line = int(args[0].value[1:])
        args = args[1:]
    split = split_opts(args, with_arg="nc", long_with_arg=("lines", "bytes"), numeric=True)
    if split is None:
        return _impure(CommandClass.INSPECT)
    opts, operands = split
    if _has(opts, "-f", "-F", "--follow", "--retry", "--pid"):
        return _impure(CommandClass.RUN)
    raw = _last(opts, "-n", "--lines", "-#")
    sel: Selector | None
    if _has(opts, "-c", "--bytes"):
        sel = None
    elif name == "head":
        if raw is not None and raw.startswith("-"):
            n = _count(raw[1:])
            sel = ("head-all-but", n) if n is not None else None
        else:
            n = 10 if raw is None else _count(raw)
            sel = ("head", n) if n is not None else None
    elif from_line is not None or (raw is not None and raw.startswith("+")):
        n = from_line if from_line is not None else _count(raw)
        sel = ("from", max(n, 1)) if n is not None else None
    else:
        n = 10 if raw is None else _count(raw.lstrip("-"))
        sel = ("tail", n) if n is not None else None
    if not operands:
        return Effect(None, source=False, out=Filter(sel) if sel else None)
    paths = literal_paths(s.cwd, operands)
    if paths is None:
        return _impure(CommandClass.INSPECT)
    if sel is None or len(paths) > 1:  # several files: the output has ==> name <== headers
        return Effect(CommandClass.INSPECT, reads=["f:" + p for p in paths])
    return _file_reader(paths, sel)


def _nl(s: Simple, args: list[Word]) -> Effect:
    split = split_opts(
        args,
        with_arg="bdfhilnpsvw",
        long_with_arg=(
            "body-numbering",
            "section-delimiter",
            "footer-numbering",
            "header-numbering",
            "line-increment",
            "join-blank-lines",
            "number-format",
            "number-separator",
            "starting-line-number",
            "number-width",
        ),
    )
    if split is None:
        return _impure(CommandClass.INSPECT)
    opts = split[0]
    # the file's own line numbers only with every line numbered (-b a), from 1, by 1, tab-separated
    # (nl's default -b t skips blank lines; -v, -i, -s, -l and section markers change the numbers)
    all_lines = _last(opts, "-b", "--body-numbering") == "a"
    plain = all(o in ("-b", "--body-numbering", "-n", "--number-format", "-w", "--number-width") for o, _ in opts)
    exact = all_lines and plain
    if not split[1]:
        return Effect(None, source=False, out=Filter("numbered" if exact else "renumbered"))
    paths = literal_paths(s.cwd, split[1])
    if paths is None:
        return _impure(CommandClass.INSPECT)
    if len(paths) > 1:  # nl numbers the files as one stream
        return Effect(CommandClass.INSPECT, reads=["f:" + p for p in paths])
    return _file_reader(paths, None, FILE_NUMBERS if exact else OTHER_NUMBERS)


_SED_PRINT = re.compile(r"^\s*(\d+)\s*(,\s*(\d+|\$))?\s*p\s*$")


def sed_range(script: str) -> tuple[int, int | None] | None:
    """The lines of a ``sed -n`` script of one ``Ap`` or ``A,Bp`` command, else None."""
    parts = [p for p in re.split(r"[;\n]", script) if p.strip()]
    if len(parts) != 1:
        return None
    m = _SED_PRINT.match(parts[0])
    if not m:
        return None
    a = int(m.group(1))
    if a < 1:
        return None
    if m.group(2) is None:
        return a, a
    b = None if m.group(3) == "$" else int(m.group(3))
    return a, (a if b is not None and b < a else b)


_SED_ADDR = r"(?:\d+|\$|/(?:\\.|[^/\\\n])*/I?)"
_SED_PRINT_ONLY = re.compile(rf"^\s*(?:{_SED_ADDR}\s*(?:,\s*{_SED_ADDR}\s*)?)?p\s*$")


def _sed_script_is_safe(script: str) -> bool:
    """Whether a sed script only prints: ``p`` commands at line or regex addresses."""
    parts = [p for p in re.split(r"[;\n]", script) if p.strip()]
    return bool(parts) and all(_SED_PRINT_ONLY.match(p) for p in parts)


def _sed_in_place(args: list[Word]) -> bool:
    for w in args:
        v = w.value
        if v is None or not v.startswith("-") or v == "--":
            continue
        if v.startswith("--in-place"):
            return True
        if not v.startswith("--"):
            for ch in v[1:]:
                if ch == "i":
                    return True
                if ch in "efl":  # the rest is this option's argument
                    break
    return False


def _sed(s: Simple, args: list[Word]) -> Effect:  # noqa: C901
    if _sed_in_place(args):
        split = split_opts(args, with_arg="efl", long_with_arg=("expression", "file", "line-length"))
        e = Effect(CommandClass.MODIFY, pure=False)
        paths = None
        if split is not None:
            opts, operands = split
            if not _has(opts, "-e", "--expression", "-f", "--file"):
                operands = operands[1:]
            paths = literal_paths(s.cwd, operands)
        e.writes = paths if paths else [ANY_FILE]
        return e
    split = split_opts(args, with_arg="efl", long_with_arg=("expression", "file", "line-length"))
    if split is None:
        return _impure(CommandClass.INSPECT)
    opts, operands = split
    if _has(opts, "-f", "--file"):
        return _impure(CommandClass.INSPECT)
    scripts = [v for o, v in opts if o in ("-e", "--expression")]
    if not scripts:
        if not operands or operands[0].value is None:
            return _impure(CommandClass.INSPECT)
        scripts, operands = [operands[0].value], operands[1:]
    script = "\n".join(s_ for s_ in scripts if s_ is not None)
    safe = _sed_script_is_safe(script)
    rng = sed_range(script) if _has(opts, "-n", "--quiet", "--silent") else None
    if _has(opts, "-z", "--null-data", "-s", "--separate"):
        rng = None
    sel = ("range", rng[0], rng[1]) if rng else None
    # a script that may write (w), run (e) or read another file (r) is not a plain reader
    if not operands:
        return Effect(None, pure=safe, source=False, out=Filter(sel) if sel else None, side_effects=not safe)
    paths = literal_paths(s.cwd, operands)
    if paths is None:
        e = _impure(CommandClass.INSPECT)
    elif sel is None or len(paths) > 1:
        e = Effect(CommandClass.INSPECT, reads=["f:" + p for p in paths], pure=safe)
    else:
        e = _file_reader(paths, sel)
        e.pure = safe
    e.side_effects = not safe
    return e


_AWK_PRINT = r"\s*(\{\s*print(\s+\$0)?\s*;?\s*\})?\s*$"
_AWK_RANGES = [
    (re.compile(r"^\s*NR\s*>=\s*(\d+)\s*&&\s*NR\s*<=\s*(\d+)" + _AWK_PRINT), 0, 0),
    (re.compile(r"^\s*NR\s*==\s*(\d+)\s*,\s*NR\s*==\s*(\d+)" + _AWK_PRINT), 0, 0),
    (re.compile(r"^\s*NR\s*>\s*(\d+)\s*&&\s*NR\s*<\s*(\d+)" + _AWK_PRINT), 1, -1),
]
_AWK_ONE = re.compile(r"^\s*NR\s*==\s*(\d+)" + _AWK_PRINT)
_AWK_UNSAFE = re.compile(
    r"system|getline|fflush|close\s*\(|print[^;{}]*[>|]|printf[^;{}]*[>|]"
    r"|rand|systime|strftime|ENVIRON|PROCINFO"
)  # side effects, or output not from the input


def awk_range(program: str) -> tuple[int, int] | None:
    """Lines selected by an awk program that only prints an ``NR`` range, else None."""
    m = _AWK_ONE.match(program)
    if m:
        return int(m.group(1)), int(m.group(1))
    for rx, da, db in _AWK_RANGES:
        m = rx.match(program)
        if m:
            a, b = int(m.group(1)) + da, int(m.group(2)) + db
            return (a, b) if 1 <= a <= b else None
    return None


def _awk(s: Simple, args: list[Word]) -> Effect:
    split = split_opts(args, with_arg="Fvf", long_with_arg=("field-separator", "assign", "file"))
    if split is None or _has(split[0], "-f", "--file") or not split[1] or split[1][0].value is None:
        return _impure(CommandClass.RUN)
    program, files = split[1][0].value, split[1][1:]
    if _AWK_UNSAFE.search(program) or any(w.value and "=" in w.value for w in files):
        return _impure(CommandClass.RUN)
    # -v assignments (RS=, ORS=, ...) change what a record and a printed line are: not line-exact
    rng = awk_range(program) if not _has(split[0], "-v", "--assign") else None
    sel = ("range", rng[0], rng[1]) if rng else None
    if not files:
        return Effect(None, source=False, out=Filter(sel) if sel else None)
    paths = literal_paths(s.cwd, files)
    if paths is None:
        return _impure(CommandClass.INSPECT)
    if sel is None or len(paths) > 1:
        return Effect(CommandClass.INSPECT, reads=["f:" + p for p in paths])
    return _file_reader(paths, sel)


_GREP_ARG = "efmABCdD"
_GREP_LONG = (
    "regexp",
    "file",
    "max-count",
    "after-context",
    "before-context",
    "context",
    "devices",
    "directories",
    "label",
    "binary-files",
    "include",
    "exclude",
    "exclude-dir",
    "exclude-from",
    "color",
    "colour",
    "type",
    "glob",
    "type-add",
    "max-depth",
    "sort",
)


def _grep(s: Simple, args: list[Word], name: str) -> Effect:  # noqa: C901
    split = split_opts(args, with_arg=_GREP_ARG + ("gtT" if name == "rg" else ""), long_with_arg=_GREP_LONG)
    if split is None:
        return _impure(CommandClass.SEARCH)
    opts, operands = split
    e = Effect(CommandClass.SEARCH)
    for o, v in opts:  # files of patterns, and of names to leave out: what they hold decides the output
        if o in ("-f", "--file", "--exclude-from"):
            p = _path(s.cwd, v or "")
            if p is None:
                return _impure(CommandClass.SEARCH)
            e.reads.append("f:" + p)
    if not _has(opts, "-f", "--file", "-e", "--regexp"):
        if not operands or operands[0].value is None:
            return _impure(CommandClass.SEARCH)
        operands = operands[1:]  # the pattern
    recursive = (
        name == "rg"
        or _has(opts, "-r", "-R", "--recursive", "--dereference-recursive")
        or _last(opts, "-d", "--directories") == "recurse"
    )
    if name == "rg":
        e.pure = False  # obeys .gitignore files above the tree it reads
    if _has(opts, "-R", "--dereference-recursive"):
        e.pure = False  # follows symlinks out of the tree
    if not operands:
        if not recursive:
            n = _has(opts, "-n", "--line-number")
            shows = not _has(opts, "-l", "-L", "-c", "-q", "-o", "--count", "--quiet", "--silent", "--only-matching")
            return Effect(
                None,
                pure=e.pure,
                source=False,
                out=Filter("matches-n" if n else "matches") if shows else Filter("opaque"),
            )
        if s.cwd is None:
            return _impure(CommandClass.SEARCH)
        e.reads.append("r:" + s.cwd)
        return e
    paths = literal_paths(s.cwd, operands)
    if paths is None:
        return _impure(CommandClass.SEARCH)
    e.reads.extend(("r:" if recursive else "f:") + p for p in paths)
    shows_lines = not _has(
        opts,
        "-l",
        "-L",
        "-c",
        "-q",
        "-o",
        "--files-with-matches",
        "--files-without-match",
        "--count",
        "--quiet",
        "--silent",
        "--only-matching",
    )
    if len(paths) == 1 and not recursive and shows_lines and not _has(opts, "-H", "--with-filename"):
        e.out = Stream("matches", paths[0], (), FILE_NUMBERS if _has(opts, "-n", "--line-number") else UNNUMBERED)
    return e


def _wc(s: Simple, args: list[Word]) -> Effect:
    split = split_opts(args, long_with_arg=("files0-from",))
    if split is None or _has(split[0], "--files0-from"):
        return _impure(CommandClass.INSPECT)
    if not split[1]:
        return Effect(None, source=False, out=Filter("opaque"))
    paths = literal_paths(s.cwd, split[1])
    return _impure(CommandClass.INSPECT) if paths is None else Effect(CommandClass.INSPECT, ["f:" + p for p in paths])


_FIND_ACTIONS_RUN = {"-exec", "-execdir", "-ok", "-okdir"}
_FIND_ACTIONS_WRITE = {"-delete", "-fprint", "-fprint0", "-fprintf", "-fls"}
_FIND_CLOCK = {"-newer", "-mmin", "-mtime", "-amin", "-atime", "-cmin", "-ctime", "-used", "-anewer", "-cnewer"}


def _find(s: Simple, args: list[Word]) -> Effect:
    follow = False
    while args and args[0].value in ("-H", "-L", "-P", "-D", "-O") or (args and (args[0].value or "").startswith("-O")):
        opt = args[0].value
        follow = follow or opt in ("-H", "-L")
        args = args[2:] if opt == "-D" else args[1:]
    roots: list[Word] = []
    expr: list[str | None] = []
    for i, w in enumerate(args):
        if w.value is not None and (w.value.startswith("-") or w.value in ("(", "!", ")", ",")):
            expr = [x.value for x in args[i:]]
            break
        roots.append(w)
    e = Effect(CommandClass.SEARCH)
    if any(x in _FIND_ACTIONS_RUN for x in expr):
        e = _impure(CommandClass.RUN)
    if any(x in _FIND_ACTIONS_WRITE for x in expr):
        e = Effect(CommandClass.MODIFY, writes=[ANY_FILE], pure=False)
    if follow or any(
        x is None
        or x in _FIND_CLOCK
        or x.startswith("-newer")
        or x in ("-follow", "-xtype", "-printf", "-fprintf", "-ls", "-fls")
        for x in expr
    ):
        e.pure = False  # follows links out of the tree, depends on the clock, or prints times
    paths = literal_paths(s.cwd, roots) if roots else ([s.cwd] if s.cwd else None)
    if paths is None:
        e.pure = False
        return e
    e.reads.extend("r:" + p for p in paths)
    return e


def _ls_clock(opts) -> bool:
    """Whether ls's output depends on the clock: a long format, with no absolute time style, shows old files' years."""
    long = _has(opts, "-l", "-g", "-o", "-n") or _last(opts, "--format") in ("long", "verbose")
    style = _last(opts, "--time-style") or ""
    return long and not (style in ("full-iso", "long-iso") or style.startswith("+"))


def _listing(s: Simple, args: list[Word], name: str) -> Effect:  # noqa: C901
    """The effect of ls, tree, du, stat, file, readlink or realpath."""
    if name == "ls":
        split = split_opts(
            args,
            with_arg="ITw",
            long_with_arg=(
                "ignore",
                "hide",
                "tabsize",
                "width",
                "sort",
                "time",
                "format",
                "color",
                "block-size",
                "indicator-style",
                "quoting-style",
                "time-style",
            ),
        )
        recursive = split is not None and _has(split[0], "-R", "--recursive") and not _has(split[0], "-d")
        kind = "r:" if recursive else "d:"
        if split is not None and (
            _has(
                split[0],
                "-L",
                "--dereference",
                "-H",
                "--dereference-command-line",
                "--dereference-command-line-symlink-to-dir",
                "-F",
                "--classify",
                "-u",
                "--full-time",
            )
            or _last(split[0], "--time") in ("atime", "access", "use", "birth", "creation")
            or _last(split[0], "--sort") in ("atime", "access", "use")
            or _ls_clock(split[0])
        ):
            return _impure(CommandClass.INSPECT)
    elif name == "tree":
        split = split_opts(args, with_arg="LIPo", long_with_arg=("filelimit", "timefmt", "sort", "charset"))
        if split is not None and _has(split[0], "-o"):
            return Effect(CommandClass.MODIFY, writes=[ANY_FILE], pure=False)
        kind = "r:"
    elif name == "du":
        split = split_opts(
            args,
            with_arg="BdtX",
            long_with_arg=("block-size", "max-depth", "threshold", "exclude-from", "exclude", "time-style"),
        )
        kind = "r:"
        if split is not None and _has(
            split[0], "-L", "--dereference", "-H", "-D", "--dereference-args", "-X", "--exclude-from", "--time"
        ):
            return _impure(CommandClass.INSPECT)  # follows links anywhere, or reads a list of its own
    elif name == "file":
        split = split_opts(
            args, with_arg="fmeFP", long_with_arg=("files-from", "magic-file", "exclude", "separator", "parameter")
        )
        kind = "f:"
    else:  # stat, readlink, realpath: the paths themselves, with their stat data
        split = split_opts(args, with_arg="ct", long_with_arg=("format", "printf", "relative-to", "relative-base"))
        kind = "d:"
        if split is not None and _has(split[0], "-f", "--canonicalize", "-e", "-m", "-L", "--dereference"):
            return _impure(CommandClass.INSPECT)  # follows links anywhere
        if name == "stat" and split is not None:
            fmt = _last(split[0], "-c", "--format", "--printf")
            if fmt is None or re.search(r"%[xXwW]", fmt):
                return _impure(CommandClass.INSPECT)  # shows access or birth times
    if split is None:
        return _impure(CommandClass.INSPECT)
    operands = split[1]
    paths = literal_paths(s.cwd, operands) if operands else ([s.cwd] if s.cwd and name != "stat" else None)
    if paths is None:
        return _impure(CommandClass.INSPECT)
    reads = [kind + p for p in paths]
    if name in ("ls", "tree") and _has(split[0], "-a", "--all"):
        reads += ["m:" + os.path.dirname(p) for p in paths]  # the `..` entry shows the parent's stat data
    return Effect(CommandClass.INSPECT, reads=reads)


_TEST_EXISTS = {"-e", "-f", "-d", "-L", "-h", "-b", "-c", "-p", "-S", "-a"}
_TEST_STAT = {"-s", "-r", "-w", "-x", "-g", "-u", "-k", "-O", "-G", "-N"}


def _test(s: Simple, args: list[Word], name: str) -> Effect:
    """The effect of ``test``, ``[`` and ``[[``: their status depends on the paths tested."""
    words = [w.value for w in args]
    if name in ("[", "[[") and words[-1:] in (["]"], ["]]"]):
        words = words[:-1]
    if any(w is None for w in words) or any(w.glob for w in args):
        return Effect(None, pure=False, source=False)
    reads = []
    for i, w in enumerate(words):
        operand = words[i + 1] if i + 1 < len(words) else None
        if w in _TEST_EXISTS | _TEST_STAT and operand is not None:
            p = _path(s.cwd, operand)
            if p is None:
                return Effect(None, pure=False, source=False)
            reads += ["x:" + p, "m:" + p] if w in _TEST_STAT else ["x:" + p]
        elif w in ("-nt", "-ot", "-ef") and 0 < i and operand is not None:
            for v in (words[i - 1], operand):
                p = _path(s.cwd, v or "")
                if p is None:
                    return Effect(None, pure=False, source=False)
                reads.append("m:" + p)
    return Effect(None, reads=reads, source=False)


def _checksum(s: Simple, args: list[Word]) -> Effect:
    split = split_opts(args, with_arg="lsnN")
    if split is None or _has(split[0], "-c", "--check"):
        return _impure(CommandClass.INSPECT)
    if not split[1]:
        return Effect(None, source=False, out=Filter("opaque"))
    paths = literal_paths(s.cwd, split[1])
    return _impure(CommandClass.INSPECT) if paths is None else Effect(CommandClass.INSPECT, ["f:" + p for p in paths])


def _diff(s: Simple, args: list[Word]) -> Effect:
    split = split_opts(
        args,
        with_arg="CUDFIxXLSn",
        long_with_arg=(
            "context",
            "unified",
            "label",
            "ifdef",
            "ignore-matching-lines",
            "exclude",
            "exclude-from",
            "starting-file",
            "from-file",
            "to-file",
            "color",
            "palette",
            "tabsize",
            "width",
            "horizon-lines",
        ),
    )
    if split is None or _has(split[0], "-X", "--exclude-from", "--from-file", "--to-file"):
        return _impure(CommandClass.INSPECT)
    opts, operands = split
    paths = literal_paths(s.cwd, operands)
    if paths is None or len(paths) != 2:
        return _impure(CommandClass.INSPECT)
    kind = "r:" if _has(opts, "-r", "--recursive", "-N", "--new-file") else "f:"
    return Effect(CommandClass.INSPECT, reads=[kind + p for p in paths])


# -- git ------------------------------------------------------------------------------------------

_GIT_READ = {
    "diff",
    "status",
    "log",
    "show",
    "blame",
    "ls-files",
    "grep",
    "rev-parse",
    "describe",
    "shortlog",
    "ls-tree",
    "cat-file",
    "reflog",
    "whatchanged",
    "help",
    "version",
    "rev-list",
    "name-rev",
    "merge-base",
    "for-each-ref",
    "show-ref",
    "annotate",
    "count-objects",
    "check-ignore",
}
_GIT_LISTS = {"branch", "tag", "remote", "stash", "config", "worktree"}  # read with no operands, else write
_GIT_WORKTREE = {
    "checkout",
    "reset",
    "stash",
    "apply",
    "restore",
    "rm",
    "mv",
    "clean",
    "cherry-pick",
    "revert",
    "merge",
    "rebase",
    "am",
    "switch",
    "pull",
}


def _git(s: Simple, args: list[Word]) -> Effect:
    i = 0
    while i < len(args) and args[i].value is not None and args[i].value.startswith("-"):
        i += 2 if args[i].value in ("-C", "-c", "--git-dir", "--work-tree", "--namespace") else 1
    if i >= len(args) or args[i].value is None:
        return _impure(CommandClass.OTHER)
    sub, rest = args[i].value, args[i + 1 :]
    # git's output depends on .git state that read keys do not capture: never reused for now.
    if sub in _GIT_READ:
        return _impure(CommandClass.SEARCH if sub == "grep" else CommandClass.INSPECT)
    if sub in _GIT_LISTS:
        words = [w.value for w in rest]
        listing = (
            sub == "stash"
            and words[:1] in ([], ["list"], ["show"])
            or sub != "stash"
            and all(
                w is not None
                and w.startswith("-")
                and w in ("-a", "-r", "-v", "-vv", "--list", "-l", "--all", "--show-current", "--get", "--get-all")
                for w in words[:1]
            )
            and (sub != "config" or (words and words[0] in ("--get", "--get-all", "--list", "-l")))
        )
        if listing or not words and sub != "config":
            return _impure(CommandClass.INSPECT)
    if (
        sub in _GIT_WORKTREE
        or sub in _GIT_LISTS
        or sub in ("add", "commit", "init", "clone", "fetch", "update-index", "submodule", "gc", "notes")
    ):
        return Effect(CommandClass.MODIFY, writes=[ANY_FILE] if sub in _GIT_WORKTREE else [], pure=False)
    return _impure(CommandClass.OTHER)


# -- writers, runners, environment -------------------------------------------------------------------

_MODIFIERS = {
    "mv",
    "cp",
    "rm",
    "rmdir",
    "mkdir",
    "touch",
    "ln",
    "chmod",
    "chown",
    "chgrp",
    "truncate",
    "tee",
    "patch",
    "install",
    "dd",
    "ed",
    "ex",
    "shred",
    "unlink",
}


def _modifier(s: Simple, args: list[Word], name: str) -> Effect:  # noqa: C901
    e = Effect(CommandClass.MODIFY, pure=False)
    if name == "tee":
        e.source = False
        split = split_opts(args, long_with_arg=("output-error",))
        operands = split[1] if split else None
    elif name == "patch":
        split = split_opts(
            args,
            with_arg="pdiDoBrVYzFgx",
            long_with_arg=(
                "strip",
                "directory",
                "input",
                "output",
                "reject-file",
                "backup-if-mismatch",
                "prefix",
                "suffix",
            ),
        )
        e.writes.append(ANY_FILE)
        inp = _last(split[0], "-i", "--input") if split else None
        if inp and (p := _path(s.cwd, inp)):
            e.reads.append("f:" + p)
        operands = split[1][:1] if split else None
    elif name == "dd":
        operands = [Word(w.value[3:], w.raw) for w in args if w.value and w.value.startswith("of=")]
    elif name in ("ed", "ex"):
        split = split_opts(args, with_arg="p")
        operands = split[1] if split else None
    else:
        split = split_opts(
            args,
            with_arg="mtSogrZ" if name != "truncate" else "sor",
            long_with_arg=("mode", "target-directory", "suffix", "owner", "group", "reference", "context", "size"),
        )
        if split is None:
            operands = None
        else:
            opts, operands = split
            if name in ("chmod", "chown", "chgrp") and not _has(opts, "--reference"):
                operands = operands[1:]  # the mode or owner
            target = _last(opts, "-t", "--target-directory")
            if target and (p := _path(s.cwd, target)):
                e.writes.append(p)
            if name in ("cp", "install", "ln") and operands:
                sources = operands if target else operands[:-1]
                src = literal_paths(s.cwd, sources)
                if src and name == "cp":
                    e.reads.extend("f:" + p for p in src)
                operands = [] if target else operands[-1:]
    paths = literal_paths(s.cwd, operands) if operands is not None else None
    e.writes.extend([p for p in paths if not p.startswith("/dev/")] if paths is not None else [ANY_FILE])
    return e


def _pip(args: list[Word]) -> Effect:
    sub = next((w.value for w in args if w.value and not w.value.startswith("-")), None)
    if sub in ("install", "uninstall", "download", "wheel"):
        return Effect(CommandClass.ENV, pure=False, env_change=True)
    return _impure(CommandClass.INSPECT)


def _python(args: list[Word]) -> Effect:
    vals = [w.value for w in args]
    if vals[:2] in (["-m", "pytest"], ["-m", "unittest"]):
        return _impure(CommandClass.RUN)
    if vals[:2] == ["-m", "pip"]:
        return _pip(args[2:])
    if vals[:1] == ["setup.py"] and len(vals) > 1 and vals[1] in ("install", "develop"):
        return Effect(CommandClass.ENV, pure=False, env_change=True)
    if vals in (["--version"], ["-V"]):
        return _impure(CommandClass.INSPECT)
    return _impure(CommandClass.RUN)


# Programs that run code of their own: class run, impure. (pytest and xargs are runners with a model
# of their own; perl -i and npm install are caught by _OPTION_GUARDS first.)
_RUNNERS = {
    "tox",
    "nox",
    "make",
    "node",
    "npm",
    "npx",
    "yarn",
    "ruby",
    "perl",
    "php",
    "go",
    "cargo",
    "java",
    "javac",
    "mvn",
    "gradle",
    "bash",
    "sh",
    "zsh",
    "dash",
    "coverage",
    "django-admin",
    "sphinx-build",
    "sphinx-apidoc",
    "pylint",
    "pyreverse",
    "flake8",
    "mypy",
    "ruff",
    "black",
    "isort",
    "sqlite3",
    "psql",
    "mysql",
    "gcc",
    "g++",
    "cc",
    "clang",
    "rustc",
    "ipython",
    "jupyter",
    "nosetests",
    "trial",
    "gdb",
    "valgrind",
    "strace",
    "msgfmt",
    "parallel",
    "watch",
    "docker",
    "curl",
    "wget",
    "ssh",
    "scp",
    "rsync",
    "tar",
    "unzip",
    "zip",
    "gzip",
    "gunzip",
    "bzip2",
    "xz",
    "date",
    "ps",
    "top",
    "kill",
    "pkill",
    "uname",
    "whoami",
    "id",
    "hostname",
    "df",
    "free",
    "lsof",
    "locale",
    "hatch",
    "pdm",
    "http",
}
_ENV = {
    "export",
    "unset",
    "source",
    ".",
    "alias",
    "unalias",
    "conda",
    "mamba",
    "apt",
    "apt-get",
    "dpkg",
    "yum",
    "apk",
    "brew",
    "pipx",
    "poetry",
    "uv",
    "virtualenv",
    "declare",
    "typeset",
    "readonly",
    "local",
    "ulimit",
    "umask",
    "hash",
    "micromamba",
}
# Builtins and trivia: they never set the command's class. Those in _PURE print only their arguments,
# those in _SILENT print nothing. (test and [ are builtins with a model of their own: _test.)
_NEUTRAL = {
    "echo",
    "printf",
    "true",
    "false",
    ":",
    "pwd",
    "sleep",
    "clear",
    "basename",
    "dirname",
    "seq",
    "expr",
    "cd",
    "pushd",
    "popd",
    "exit",
    "return",
    "set",
    "shopt",
    "wait",
}
_PURE = {"echo", "printf", "true", "false", ":", "pwd", "basename", "dirname", "seq", "cd", "pushd", "expr"}
_SILENT = {"cd", "pushd", "popd", "true", "false", ":", "sleep", "exit", "return", "set", "shopt", "wait"}
_TEXT_FILTERS = {
    "sort",
    "uniq",
    "cut",
    "tr",
    "column",
    "rev",
    "fold",
    "fmt",
    "paste",
    "expand",
    "unexpand",
    "tac",
    "comm",
    "join",
    "less",
    "more",
}
_FILTER_ARGS = {
    "sort": "kotSTy",
    "cut": "bcdf",
    "paste": "d",
    "column": "cstoNRWlHEJ",
    "uniq": "fsw",
    "fold": "w",
    "fmt": "wpg",
    "expand": "t",
    "unexpand": "t",
    "join": "12jotae",
    "tac": "s",
}
_CHECKSUMS = {"md5sum", "sha1sum", "sha256sum", "sha512sum", "cksum", "xxd", "hexdump", "od", "strings", "b2sum"}
_WRAPPERS = {"timeout", "time", "nice", "nohup", "sudo", "command", "stdbuf", "ionice", "builtin", "exec", "env"}
_LOCALE_VARS = {
    "PATH",
    "LC_ALL",
    "LC_COLLATE",
    "LC_CTYPE",
    "LANG",
    "GREP_OPTIONS",
    "GREP_COLORS",
    "POSIXLY_CORRECT",
    "LS_COLORS",
    "TZ",
    "COLUMNS",
}


SYSTEM_BIN = ("/bin/", "/usr/bin/", "/usr/local/bin/", "/sbin/", "/usr/sbin/", "/usr/local/sbin/")
_INTERPRETER = re.compile(r"(python|pip)(\d(\.\d+)?)?")  # .venv/bin/python is still python


def _unwrap(argv: list[Word]) -> tuple[list[Word], bool]:
    """The argv without wrappers such as ``timeout 60``, and whether it stays pure."""
    pure = True
    while argv and argv[0].value in _WRAPPERS:
        head, argv = argv[0].value, argv[1:]
        if head == "time":
            pure = False  # prints how long the command took
        if head == "command" and argv and argv[0].value in ("-v", "-V"):
            return [Word("which", "which"), *argv[1:]], False
        with_arg = {
            "timeout": ("-s", "-k", "--signal", "--kill-after"),
            "nice": ("-n",),
            "ionice": ("-c", "-n", "-p"),
            "stdbuf": ("-i", "-o", "-e"),
            "env": ("-u", "-C", "--unset", "--chdir"),
            "sudo": ("-u", "-g"),
        }
        while (
            argv
            and argv[0].value is not None
            and (argv[0].value.startswith("-") or (head == "env" and "=" in argv[0].value))
        ):
            if head == "env":
                pure = False if ("=" in argv[0].value or argv[0].value.startswith("-")) else pure
            if argv[0].value in with_arg.get(head, ()):
                argv = argv[1:]
            argv = argv[1:]
        if head == "timeout" and argv:
            argv = argv[1:]  # the duration
    return argv, pure


def effect(s: Simple) -> Effect:
    """The effect of one simple command."""
    argv, pure = _unwrap(list(s.argv))
    if any(a.split("=", 1)[0] in _LOCALE_VARS for a in s.assigns):
        pure = False
    if not argv:
        return Effect(CommandClass.OTHER if s.assigns else None, pure=not s.assigns, source=False)
    name = argv[0].value
    if name is None:
        return _impure(CommandClass.OTHER)
    base = os.path.basename(name)
    args = argv[1:]
    if "/" in name and not name.startswith(SYSTEM_BIN) and not _INTERPRETER.fullmatch(base):
        # a program of the workspace's own (bin/test, ./runtests.py, scripts/check): a run, whatever
        # its name is; /usr/bin/grep is still grep
        return _impure(CommandClass.RUN)
    e = _dispatch(s, base, name, args)
    if not pure or any(w.glob for w in argv):
        e.pure = False  # an unquoted glob expands against a directory no read key covers
    return e


# -- which model handles a program ---------------------------------------------------------------

# A program's model: its effect, from the simple command, its arguments and the name it was called by
# (``head`` and ``tail`` share one model, and so do ``grep`` and ``rg``).
Model = Callable[[Simple, list[Word], str], Effect]


def _any_name(model: Callable[[Simple, list[Word]], Effect]) -> Model:
    """A model that ignores the name its program was called by."""
    return lambda s, args, name: model(s, args)


def _neutral(s: Simple, args: list[Word], name: str) -> Effect:
    """Builtins such as echo: no class, pure if they print only literal arguments."""
    return Effect(None, pure=name in _PURE and all(w.value is not None for w in args), source=name not in _SILENT)


def _text_filter(s: Simple, args: list[Word], name: str) -> Effect:
    """Text filters such as sort: opaque on stdin, an inspection of the files they name."""
    split = split_opts(args, with_arg=_FILTER_ARGS.get(name, ""))
    operands = [w for w in (split[1] if split else []) if name != "tr"]
    if name == "sort" and split is not None and _has(split[0], "-R", "--random-sort", "--random-source"):
        return _impure(CommandClass.INSPECT)
    if name == "uniq" and len(operands) >= 2:  # uniq IN OUT writes OUT
        out_path = literal_paths(s.cwd, operands[1:2])
        return Effect(CommandClass.MODIFY, writes=out_path or [ANY_FILE], pure=False)
    if not operands:
        return Effect(None, pure=split is not None, source=False, out=Filter("opaque"))
    paths = literal_paths(s.cwd, operands)
    return _impure(CommandClass.INSPECT) if paths is None else Effect(CommandClass.INSPECT, ["f:" + p for p in paths])


def _opaque_inspect(s: Simple, args: list[Word], name: str) -> Effect:
    """Programs such as which or jq that only look, printing what is not modelled."""
    return _impure(CommandClass.INSPECT)


def _env_change(s: Simple, args: list[Word], name: str) -> Effect:
    """Programs such as export that change the environment later commands run in."""
    return Effect(CommandClass.ENV, pure=False, env_change=True)


def _run(s: Simple, args: list[Word], name: str) -> Effect:
    return _impure(CommandClass.RUN)


def _pytest(s: Simple, args: list[Word], name: str) -> Effect:
    return _impure(CommandClass.RUN)


_SEARCHERS = ("grep", "egrep", "fgrep", "rg")


def _xargs(s: Simple, args: list[Word], name: str) -> Effect:
    """xargs: never pure; its command's class if that reads or modifies, else run."""
    at = next((i for i, w in enumerate(args) if not (w.value or "-").startswith("-")), None)
    if at is None:
        return _impure(CommandClass.RUN)
    inner = os.path.basename(args[at].value or "")
    e = _dispatch(s, inner, args[at].value or "", args[at + 1 :])
    cls = e.cls or (
        CommandClass.SEARCH
        if inner in _SEARCHERS
        else CommandClass.INSPECT
        if inner in ("cat", "head", "tail", "wc", "nl", "sed", "ls")
        else None
    )
    return Effect(
        cls if cls in (CommandClass.SEARCH, CommandClass.INSPECT, CommandClass.MODIFY) else CommandClass.RUN,
        writes=e.writes or ([ANY_FILE] if cls is CommandClass.MODIFY else []),
        pure=False,
    )


def _by_name(*groups: tuple[Iterable[str], Model]) -> dict[str, Model]:
    """Models by program name; a name with two models is a mistake, not an override."""
    table: dict[str, Model] = {}
    for names, model in groups:
        for name in names:
            if name in table:
                raise ValueError(f"programs.py: two models for {name!r}")
            table[name] = model
    return table


_PROGRAMS = _by_name(
    (["cat"], _any_name(_cat)),
    (["head", "tail"], _head_tail),
    (["nl"], _any_name(_nl)),
    (["sed"], _any_name(_sed)),
    (["awk", "gawk", "mawk"], _any_name(_awk)),
    (_SEARCHERS, _grep),
    (["wc"], _any_name(_wc)),
    (["find"], _any_name(_find)),
    (["ls", "tree", "du", "stat", "file", "readlink", "realpath"], _listing),
    (_CHECKSUMS, _any_name(_checksum)),
    (["diff", "cmp"], _any_name(_diff)),
    (["git"], _any_name(_git)),
    (_MODIFIERS, _modifier),
    (["pip", "pip3"], lambda s, args, name: _pip(args)),
    (["python"], lambda s, args, name: _python(args)),
    (["test", "[", "[["], _test),
    (_NEUTRAL, _neutral),
    (_TEXT_FILTERS, _text_filter),
    (["which", "type", "whereis", "jq", "yq", "shuf"], _opaque_inspect),
    (_ENV, _env_change),
    (["xargs"], _xargs),
    (["pytest", "py.test"], _pytest),
    (_RUNNERS, _run),
)
"""The model of each program, by name. A program is looked up by the base name of its argv[0] once
wrappers are stripped (``/usr/bin/grep`` and ``timeout 5 grep`` are ``grep``), a versioned interpreter
by its family (_program: ``python3.11`` is ``python``, ``pip3.12`` is ``pip3``). Every name has exactly
one model, so the order of the groups does not matter. Only _OPTION_GUARDS are asked before it; a name
not in it is not modelled (_unmodelled)."""


def _perl_in_place(s: Simple, args: list[Word], name: str) -> Effect | None:
    """Makes ``perl -i`` a modify of any file; other perl is left to the table."""
    if name == "perl" and any(w.value and re.fullmatch(r"-\w*i\S*", w.value) for w in args):
        return Effect(CommandClass.MODIFY, writes=[ANY_FILE], pure=False)
    return None


_INSTALLERS = {"npm", "yarn", "cargo", "gem", "go"}
_INSTALLS = {"install", "add", "i", "uninstall", "remove", "get", "ci"}


def _package_install(s: Simple, args: list[Word], name: str) -> Effect | None:
    """Makes a package install, such as ``npm install``, a change of environment."""
    if name in _INSTALLERS and args and args[0].value in _INSTALLS:
        return Effect(CommandClass.ENV, pure=False, env_change=True)
    return None


def _printf_clock(s: Simple, args: list[Word], name: str) -> Effect | None:
    """Makes a ``printf`` that may print the time impure: ``%(...)T`` or an unknown format."""
    if name == "printf" and any(w.value is None or "%(" in w.value for w in args):
        return Effect(None, pure=False)
    return None


def _sort_output(s: Simple, args: list[Word], name: str) -> Effect | None:
    """``sort -o FILE`` writes FILE: a modify, not the text filter sort otherwise is."""
    if name == "sort" and any(w.value and (w.value.startswith("-o") or w.value.startswith("--output")) for w in args):
        return Effect(CommandClass.MODIFY, writes=[ANY_FILE], pure=False)
    return None


_OPTION_GUARDS: tuple[Callable[[Simple, list[Word], str], Effect | None], ...] = (
    _perl_in_place,
    _package_install,
    _printf_clock,
    _sort_output,
)
"""Decisions that depend on a program's options, not on its name alone: asked in this order before
_PROGRAMS, the first that returns an Effect decides; None leaves the program to the table. Each
concerns programs of its own, so only their place before the table matters: ``perl -i`` is a
modify though perl is a runner, ``printf %(`` impure though printf is neutral, ``sort -o`` a modify
though sort is a filter, ``npm install`` an environment change though npm is a runner."""

_VERSIONED = ((re.compile(r"python(\d(\.\d+)?)?"), "python"), (re.compile(r"pip3\.\d+"), "pip3"))


def _program(base: str) -> str:
    """The name ``base`` has in _PROGRAMS: a versioned interpreter's family, else itself."""
    for pattern, family in _VERSIONED:
        if pattern.fullmatch(base):
            return family
    return base


def _unmodelled(name: str) -> Effect:
    """A program not in the table: a run if named like a script or a path, else other."""
    if "/" in name or name.endswith((".py", ".sh")):
        return _impure(CommandClass.RUN)
    return _impure(CommandClass.OTHER)


def _dispatch(s: Simple, base: str, name: str, args: list[Word]) -> Effect:
    """The effect of program ``name``: the option guards, then the table, then the fallback."""
    for guard in _OPTION_GUARDS:
        if (e := guard(s, args, base)) is not None:
            return e
    model = _PROGRAMS.get(_program(base))
    return model(s, args, base) if model is not None else _unmodelled(name)
