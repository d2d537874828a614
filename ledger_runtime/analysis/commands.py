"""What a shell command is, which files it reads and shows lines of, and which it writes.

``analyze`` never touches the file system.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from functools import lru_cache

from ledger_runtime.analysis.patches import file_ops, written_paths
from ledger_runtime.analysis.programs import (
    ANY_FILE,
    COLON_NUMBERS,
    FILE_NUMBERS,
    UNNUMBERED,
    Filter,
    Stream,
    apply,
    effect,
    normpath,
    resolve,
)
from ledger_runtime.analysis.shell import Pipeline, parse
from ledger_runtime.analysis.submission import NO_SUBMISSION, Submission
from ledger_runtime.records import CommandClass

# The escape from dedupe: a command with this comment gets its output in full (bash ignores comments,
# so the command is the same with or without the ledger).
RAW_ESCAPE = "# ledger:raw"
# where the parser cannot read a command line, a # after a separator or a blank is taken for a comment
# (a raw answer is the output as it is: never wrong, only longer)
_RAW = re.compile(r"(?:^|[\s;&|()])#\s*ledger:raw\b")
_RAW_COMMENT = re.compile(r"(?:^|\s)#\s*ledger:raw\b")  # within a comment's text (it starts with #)
__all__ = [
    "ANY_FILE",
    "Analysis",
    "FileView",
    "RAW_ESCAPE",
    "analyze",
    "analyze_edit",
    "analyze_patch",
    "analyze_read",
    "analyze_search",
    "analyze_submission",
    "resolve",
]

_RANK = {
    CommandClass.INSPECT: 0,
    CommandClass.SEARCH: 1,
    CommandClass.OTHER: 2,
    CommandClass.RUN: 3,
    CommandClass.ENV: 4,
    CommandClass.MODIFY: 5,
}
_DEVICES = {"/dev/null", "/dev/stdout", "/dev/stderr", "/dev/tty", "/dev/zero"}
_VOLATILE_TREES = ("/proc/", "/sys/", "/dev/", "/run/")  # files whose content no stat data can vouch for


@dataclass(frozen=True, slots=True)
class FileView:
    """Lines of one file that reach the output, in a ``Stream``'s terms: a claim to check against the file."""

    path: str
    kind: str
    selectors: tuple = ()
    numbered: str = ""


@dataclass(frozen=True, slots=True)
class Analysis:
    """What ``analyze`` found in a command.

    ``cwd`` folds in a leading ``cd DIR &&``; with ``normalized`` it identifies exact repeats. A ``pure`` output is a
    function of ``read_keys`` alone."""

    command: str
    cwd: str
    normalized: str
    command_class: CommandClass
    read_keys: tuple[str, ...] = ()
    views: tuple[FileView, ...] = ()
    writes: tuple[str, ...] = ()
    pure: bool = False
    submits: bool = False
    parsed: bool = True
    problem: str | None = None
    outputs: int = 0  # pipelines whose output reaches the agent
    env_change: bool = False
    origin: str = ""  # the directory the command was given in (``cwd`` folds a leading ``cd DIR &&`` in)
    raw: bool = False  # the command asks for its output in full (RAW_ESCAPE)
    readonly: bool = False  # writes nothing and runs nothing the analysis does not know (pure implies it)
    agent: str = ""  # the subagent that proposes it, set by the runtime ("": the main model); repeats are its own

    @property
    def writes_any(self) -> bool:
        return ANY_FILE in self.writes


def _max(a: CommandClass | None, b: CommandClass | None) -> CommandClass | None:
    if a is None or b is None:
        return a or b
    return a if _RANK[a] >= _RANK[b] else b


@dataclass
class _Pipe:
    cls: CommandClass | None
    reads: list[str]
    writes: list[str]
    pure: bool
    env_change: bool
    views: list[Stream]
    prints: bool
    side_effects: bool = False


def _combine(pipe: Pipeline) -> _Pipe:  # noqa: C901
    """A pipeline's class, reads and writes, and what its last stage shows."""
    out = _Pipe(None, [], [], True, False, [], False)
    current: Stream | tuple | None = None
    for i, stage in enumerate(pipe.stages):
        if stage is None:  # a subshell or loop inside the pipeline: data flow unknown
            out.cls, out.pure, current, out.prints = _max(out.cls, CommandClass.OTHER), False, None, True
            continue
        e = effect(stage)
        stdin_path = None
        for r in stage.redirects:
            if r.dup or r.target is None:
                continue
            v = r.target.value
            path = None if v is None or r.target.glob else _abs(stage.cwd, v)
            if r.op in ("<", "<>") and r.fd in (None, 0):
                if path is None:
                    e.pure = False
                else:
                    e.reads.append("f:" + path)
                    stdin_path = path
                if r.op == "<>":
                    e.writes.append(path or ANY_FILE)
            elif r.op not in ("<", "<<", "<<<", "<<-") and v not in _DEVICES:
                e.writes.append(path or ANY_FILE)
                e.cls, e.pure = CommandClass.MODIFY, False
        out.cls = _max(out.cls, e.cls)
        out.reads += e.reads
        out.writes += e.writes
        out.pure = out.pure and e.pure
        out.side_effects = out.side_effects or e.side_effects
        out.env_change = out.env_change or e.env_change
        if isinstance(e.out, Filter):
            if i == 0:  # reads a redirected file, a heredoc, or nothing
                upstream = Stream("lines", stdin_path) if stdin_path else None
                current = apply(upstream, e.out)
                out.prints = stdin_path is not None or stage.stdin_text
                if stdin_path is not None:
                    out.cls = _max(out.cls, CommandClass.INSPECT)
            else:
                current = apply(current if isinstance(current, Stream) else None, e.out)
        elif e.source or i == 0:
            current = e.out
            out.prints = out.prints or e.source or stage.stdin_text
        else:
            current = None  # a stage that transforms stdin in ways we do not follow
    if isinstance(current, Stream):
        out.views = [current]
    elif isinstance(current, tuple):
        out.views = list(current)
    return out


def _abs(cwd: str | None, value: str) -> str | None:
    if ".." in value.split("/"):
        return None  # resolved through symlinks by the file system, not lexically
    if value.startswith("/"):
        return normpath(value)
    return None if cwd is None else normpath(os.path.join(cwd, value))


@lru_cache(maxsize=8192)
def analyze(command: str, cwd: str, submission: Submission = NO_SUBMISSION) -> Analysis:
    """Classifies ``command`` run in ``cwd``; never raises."""
    submits = submission.named_in(command)
    try:
        return _analyze(command, cwd, submits)
    except Exception as e:  # a fault of ours must never stop the agent: the command just runs
        return _unparsed(command, cwd, f"analysis failed: {type(e).__name__}: {e}", submits)


def _unparsed(command: str, cwd: str, problem: str | None, submits: bool) -> Analysis:
    """A command the analysis cannot read: class other, impure, and it simply runs."""
    return Analysis(
        command,
        cwd,
        command.strip(),
        CommandClass.OTHER,
        parsed=False,
        problem=problem,
        submits=submits,
        raw=bool(_RAW.search(command)),
    )


def _analyze(command: str, cwd: str, submits: bool) -> Analysis:
    script = parse(command, cwd)
    if not script.ok:
        return _unparsed(command, cwd, script.problem, submits)
    raw = any(_RAW_COMMENT.search(c) for c in script.comments)  # the escape is a comment, as bash reads one
    pipelines = list(script.pipelines)
    # `cd DIR && rest` prints what `rest` prints from DIR: fold the cd into the working directory.
    start_cwd = cwd
    start = 0
    reads: list[str] = []
    while (
        len(pipelines) > 1
        and _is_plain_cd(pipelines[0])
        and pipelines[1].stages[0] is not None
        and pipelines[1].stages[0].cwd is not None
        and not pipelines[1].substituted
    ):
        start_cwd = pipelines[1].stages[0].cwd
        reads.append("x:" + start_cwd)  # the directory must exist for the rest to run there
        pipelines = pipelines[1:]
        start = pipelines[0].start
    cls: CommandClass | None = None
    writes: list[str] = []
    views: list[FileView] = []
    pure = not script.complex
    readonly = not script.complex
    env_change = False
    outputs = 0
    for k, pipe in enumerate(pipelines):
        p = _combine(pipe)
        target = _cd_target(pipe)
        if target is not None:
            reads.append("x:" + target)  # whether it exists decides what cd prints and where the rest runs
        cls = _max(cls, p.cls)
        reads += p.reads
        writes += p.writes
        pure = pure and p.pure and not pipe.background
        readonly = readonly and not p.side_effects and not pipe.background and not p.writes and not p.env_change
        env_change = env_change or p.env_change
        if pipe.background:
            cls = _max(cls, CommandClass.RUN)
        shown = not pipe.stdout_redirected and not pipe.substituted
        if shown and p.prints:
            outputs += 1
            views += [FileView(v.path, v.kind, v.selectors, v.numbered) for v in p.views]
    if cls is None:
        cls = CommandClass.OTHER
    if (
        cls not in (CommandClass.INSPECT, CommandClass.SEARCH)
        or any(k.endswith(":") for k in reads)
        or any(k[2:].startswith(_VOLATILE_TREES) for k in reads)
    ):
        pure = False
    return Analysis(
        command=command,
        cwd=start_cwd,
        normalized=script.normalized(start),
        command_class=cls,
        read_keys=tuple(dict.fromkeys(reads)),
        views=tuple(views),
        writes=tuple(dict.fromkeys(writes)),
        pure=pure,
        submits=submits,
        outputs=outputs,
        env_change=env_change,
        origin=cwd,
        raw=raw,
        readonly=readonly and cls in (CommandClass.INSPECT, CommandClass.SEARCH) and not writes,
    )


def analyze_patch(patch: str, cwd: str) -> Analysis:
    """An ``apply_patch`` edit: class modify, writing the files it names; any other text is class other."""
    ops = file_ops(patch)
    normalized = "apply_patch\n" + patch.strip()
    if ops is None:
        return Analysis(patch, cwd, normalized, CommandClass.OTHER, parsed=False, problem="not a patch envelope")
    return Analysis(patch, cwd, normalized, CommandClass.MODIFY, writes=tuple(written_paths(ops, cwd)))


def analyze_read(
    path: str, cwd: str, label: str, *, first: int = 1, last: int | None = None, numbered: bool | str = True
) -> Analysis:
    """A read by an agent's own file tool: lines ``first`` to ``last`` of ``path``, to its end if ``last`` is None.

    ``label`` stands for the command, identifying repeats. ``numbered`` lines start with their number and a tab
    (``"colon"``: the number and ": ", as OpenCode's read shows them). The read is checked against the file like a
    shell read."""
    path = os.path.normpath(os.path.join(cwd, path))
    first = max(1, first)
    selectors: tuple = () if first == 1 and last is None else (("range", first, last),)
    view = FileView(
        path, "lines", selectors, COLON_NUMBERS if numbered == "colon" else FILE_NUMBERS if numbered else UNNUMBERED
    )
    return Analysis(
        label,
        cwd,
        label,
        CommandClass.INSPECT,
        read_keys=("f:" + path,),
        views=(view,),
        pure=True,
        outputs=1,
        origin=cwd,
        readonly=True,
    )


def analyze_edit(paths: tuple[str, ...] | list[str], cwd: str, label: str) -> Analysis:
    """An edit by an agent's own file tool, seen as ``sed -i`` of ``paths``."""
    writes = tuple(dict.fromkeys(os.path.normpath(os.path.join(cwd, p)) for p in paths))
    return Analysis(label, cwd, label, CommandClass.MODIFY, writes=writes, origin=cwd)


def analyze_search(label: str, cwd: str) -> Analysis:
    """A search by an agent's own file tool: read-only, and no claim about lines of a file."""
    return Analysis(label, cwd, label, CommandClass.SEARCH, outputs=1, origin=cwd, readonly=True)


def naming_no_nul(analysis: Analysis, workdir: str) -> Analysis:
    """``analysis``, or, where a path it names (its directory too) holds a NUL byte, the command as one the
    analysis cannot read (in ``workdir`` if its own directory is such a path): no file has such a name, and
    every system call given one raises ValueError, which lost the call's record (an agent's tool call with
    a NUL in its file or directory: a model may write one)."""
    paths = (analysis.cwd, *analysis.writes, *analysis.read_keys, *(v.path for v in analysis.views))
    if not any("\0" in p for p in paths):
        return analysis
    cwd = workdir if "\0" in analysis.cwd else analysis.cwd
    return _unparsed(analysis.command, cwd, "it names a path with a NUL byte, which no file has", analysis.submits)


def analyze_submission(label: str, cwd: str) -> Analysis:
    """A submission that is not a command, such as an agent ending its turn, for the submission policies to judge."""
    return Analysis(label, cwd, label, CommandClass.OTHER, submits=True, origin=cwd)


def _cd_target(pipe: Pipeline) -> str | None:
    """The absolute directory a ``cd`` or ``pushd`` pipeline names, if any."""
    if len(pipe.stages) != 1 or pipe.stages[0] is None:
        return None
    s = pipe.stages[0]
    words = [w.value for w in s.argv]
    while words and words[0] in ("builtin", "command"):
        words = words[1:]
    if not words or words[0] not in ("cd", "pushd"):
        return None
    args = [w for w in words[1:] if w is None or not w.startswith("-")]
    if len(args) != 1 or args[0] is None or s.cwd is None and not args[0].startswith("/"):
        return None
    return normpath(os.path.join(s.cwd or "/", args[0]))


def _is_plain_cd(pipe: Pipeline) -> bool:
    if len(pipe.stages) != 1 or pipe.stages[0] is None or pipe.background or pipe.substituted:
        return False
    s = pipe.stages[0]
    return s.name == "cd" and not s.redirects and len(s.argv) == 2 and s.argv[1].value is not None
