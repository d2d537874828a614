"""The compiled hook client and command wrapper (ledger_runtime/hooks/ledger_hook.c, built by
hooks/compiled.py) against the Python ones (client.py and wrapper.py through fasthook.py): the same
arguments, input and server give the same output, exit code, stderr, faults.log lines and flags, and the
server receives the same bytes. Then the build: made once into a private cache and checked before it is
used, refused where another user could change it, and the Python ones serve wherever it cannot be had
(no compiler, a failed build, a binary that does not answer as itself). Real processes and sockets; the
servers here answer from a script, so that each fault can be made to happen (the real server's chain runs
with both clients in test_hook_chain.py and test_hook_channel.py)."""

from __future__ import annotations

import json
import os
import re
import shlex
import shutil
import socket
import stat
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from ledger_runtime import fast_launcher
from ledger_runtime.hooks import compiled, fasthook_script
from ledger_runtime.ledger import native

PYTHON = [sys.executable, "-S", "-E", str(fasthook_script())]
HOLD = "hold"  # a server that reads the call and answers nothing until the client has gone


@pytest.fixture(scope="module")
def binary() -> str:
    """The compiled client of this session's cache (tests/conftest.py), built if need be."""
    build = compiled.found()
    if build.path is None:
        if os.environ.get("LEDGER_REQUIRE_COMPILED_HOOKS") == "1":
            pytest.fail(f"no compiled hook client, and CI requires one: {build.why}")
        pytest.skip(f"no compiled hook client on this machine: {build.why}")
    return build.path


class Scripted:
    """A hook server on a Unix socket that answers its connections in turn from ``answers`` (bytes; None:
    nothing; HOLD: nothing until it closes) and keeps what each call sent (read whole: a refusal before
    that is a reset or a broken pipe, whichever the timing makes it)."""

    def __init__(self, answers: list):
        self.dir = tempfile.mkdtemp(prefix="lh-")
        self.path = os.path.join(self.dir, "s.sock")
        self.received: list[bytes] = []
        self.released = threading.Event()
        self._sock = socket.socket(socket.AF_UNIX)
        self._sock.bind(self.path)
        self._sock.listen(8)
        self._thread = threading.Thread(target=self._serve, args=(list(answers),), daemon=True)
        self._thread.start()

    def _serve(self, answers: list) -> None:
        for answer in answers:
            try:
                conn, _ = self._sock.accept()
            except OSError:
                return
            with conn:
                conn.settimeout(30)
                data = b""
                while chunk := conn.recv(1 << 20):
                    data += chunk
                self.received.append(data)
                if answer == HOLD:
                    self.released.wait(60)
                elif answer is not None:
                    conn.sendall(answer)

    def close(self) -> None:
        self.released.set()
        try:
            self._sock.shutdown(socket.SHUT_RDWR)  # wakes an accept() that waits for a call never made
        except OSError:
            pass
        self._sock.close()
        self._thread.join(10)
        shutil.rmtree(self.dir, ignore_errors=True)


@dataclass
class Seen:
    """What one client did, with the paths of its own run replaced by names."""

    code: int
    stdout: bytes
    stderr: bytes
    faults: list[dict] = field(default_factory=list)
    flag: bool = False
    received: list[bytes] = field(default_factory=list)


def _normal(data: bytes, names: dict[str, str]) -> bytes:
    for path, name in names.items():
        data = data.replace(path.encode(), name.encode())
    data = re.sub(rb'"key": "[0-9a-f]{32}"', b'"key": "KEY"', data)
    data = re.sub(rb'"token": "[0-9a-f]{32}"', b'"token": "KEY"', data)
    return re.sub(rb'"elapsed_s": [0-9.]+', b'"elapsed_s": E', data)


def run(
    client: list[str],
    tmp: Path,
    argv: list,
    stdin: bytes = b"{}",
    answers: list | None = None,
    env: dict | None = None,
    pass_fds: tuple = (),
    shell: bool = False,
) -> Seen:
    """``client`` with ``argv``, where SOCK, RUN, FLAG and TOKENS stand for a server answering
    ``answers`` (none: no server), a run directory, a flag's path and a directory for token files."""
    tmp.mkdir(parents=True, exist_ok=True)
    run_dir, tokens = tmp / "run", tmp / "tokens"
    run_dir.mkdir(exist_ok=True)
    tokens.mkdir(exist_ok=True)
    server = Scripted(answers) if answers is not None else None
    sock = server.path if server else str(tmp / "gone.sock")
    flag = str(tmp / "flag-fault")
    names = {sock: "SOCK", str(run_dir): "RUN", flag: "FLAG", str(tokens): "TOKENS"}

    def fill(a):
        if isinstance(a, bytes):
            return a
        for path, name in names.items():
            a = a.replace(name, path)
        return a

    args = [fill(a) for a in argv]
    try:
        if shell:  # the wrapper as Codex's shell runs it: its line (the last argument shell text as it is)
            line = " ".join([*map(shlex.quote, [*client, *args[:-1]]), args[-1]])
            p = subprocess.run(["bash", "-c", line], input=stdin, capture_output=True, timeout=60, env=env)
        else:
            p = subprocess.run([*client, *args], input=stdin, capture_output=True, timeout=60, env=env)
    finally:
        if server:
            server.close()
    faults = run_dir / "faults.log"
    logged = []
    if faults.exists():
        for line in faults.read_text().splitlines():
            entry = json.loads(line)
            assert isinstance(entry.pop("at"), float)
            logged.append(json.loads(_normal(json.dumps(entry).encode(), names)))
    return Seen(
        p.returncode,
        _normal(p.stdout, names),
        _normal(p.stderr, names),
        logged,
        os.path.exists(flag),
        [_normal(r, names) for r in (server.received if server else [])],
    )


def both(binary: str, tmp: Path, argv: list, **kw) -> Seen:
    """The same run with each client: what they did must be the same; returns it."""
    seen_c = run([binary], tmp / "compiled", argv, **kw)
    seen_py = run(PYTHON, tmp / "python", argv, **kw)
    assert seen_c == seen_py
    return seen_c


HOOK = ["hook", "PreToolUse", "--socket", "SOCK", "--run-dir", "RUN", "--flag-on-fault", "FLAG"]
LINE = b'{"hookSpecificOutput": {"hookEventName": "PreToolUse", "permissionDecision": "deny"}}\n'


@pytest.mark.parametrize(
    "argv,answers,stdout,fault",
    [
        (["hook", "--run-dir", "RUN"], None, b"", "no EVENT given: usage: ledger-run hook EVENT"),
        (["hook", "", "--run-dir", "RUN"], None, b"", "no EVENT given"),
        (["hook", 'Pre"Tool', "--run-dir", "RUN"], None, b"", "EVENT must be a hook event's name, not 'Pre\"Tool'"),
        (["hook", b"Pr\xffe", "--run-dir", "RUN"], None, b"", "not 'Pr\\udcffe'"),
        (["hook", b"P\x7f\x01\t\xc2\x85\xf0\x9f\x98\x80'\"\\", "--run-dir", "RUN"], None, b"", "not 'P\\x7f"),
        (["hook", "PreToolUse", "--run-dir", "RUN"], None, b"", "no hook server: pass --socket"),
        (HOOK, None, b"", "hook server SOCK did not answer: [Errno 2] No such file or directory"),
        (HOOK, [LINE], LINE, None),
        (HOOK, [b"  \n" + LINE.rstrip() + b"  \n"], LINE, None),
        (HOOK, [LINE.rstrip()], b"", f"answer was cut short (no end of line after {len(LINE) - 1} bytes)"),
        (HOOK, [b"[1, 2]\n"], b"", "hook server answered 6 bytes that are not a JSON object"),
        (HOOK, [b"\n"], b"", None),
        (HOOK, [None], b"", None),
        (["hook", "--odd", "PreToolUse", "extra", "--socket", "SOCK", "--run-dir", "RUN"], [LINE], LINE, None),
        ([*HOOK, "--token", "t0k3n"], [LINE], LINE, None),
        ([*HOOK, "--token", "t0-k3n"], [LINE], b"", "hook server SOCK was not asked: a token is letters and digits"),
        ([*HOOK, "--token-file", "TOKENS/none"], [LINE], LINE, None),
    ],
)
def test_the_hook_clients_do_the_same(binary, tmp_path, argv, answers, stdout, fault) -> None:
    seen = both(binary, tmp_path, argv, answers=answers)
    assert (seen.code, seen.stdout, seen.stderr) == (0, stdout, b"")
    assert [fault in f["error"] for f in seen.faults] == ([True] if fault else []), seen.faults
    assert all(r.startswith(b'{"event": "PreToolUse"') for r in seen.received)


def test_the_hook_clients_send_the_same_bytes(binary, tmp_path) -> None:
    """The first line (event, token) and the event's bytes as they came, a large one too."""
    payload = json.dumps({"tool_input": {"command": "x" * 2_000_000}, "bytes": "é\u2028"}).encode() + b"\xff"
    seen = both(binary, tmp_path, [*HOOK, "--token", "t0k3n"], stdin=payload, answers=[LINE])
    assert seen.received == [b'{"event": "PreToolUse", "token": "t0k3n"}\n' + payload]


def test_the_token_file_is_read_as_the_python_client_reads_it(binary, tmp_path) -> None:
    """This user's regular file, owner-only, not a link, at most 256 bytes, stripped; else no token (the
    server refuses the call, the agent goes on)."""
    files = {"good": (" t0k3n \n", 0o600, b', "token": "t0k3n"'), "open": ("t0k3n", 0o644, b"")}
    files |= {"long": ("t" * 300, 0o600, b""), "link": None}
    for name, made in files.items():
        for impl in ("compiled", "python"):
            d = tmp_path / name / impl / "tokens"
            d.mkdir(parents=True)
            if made is None:
                (d / "target").write_text("t0k3n")
                (d / "target").chmod(0o600)
                os.symlink(d / "target", d / name)
            else:
                (d / name).write_text(made[0])
                (d / name).chmod(made[1])
        seen = both(binary, tmp_path / name, [*HOOK, "--token-file", f"TOKENS/{name}"], answers=[LINE])
        token = made[2] if made else b""
        assert seen.received == [b'{"event": "PreToolUse"' + token + b"}\n{}"], name


def test_faults_go_where_the_python_client_puts_them(binary, tmp_path) -> None:
    """No run directory: one line on stderr. A faults.log that is a link: refused, said on stderr. A server
    that never answers: the timeout's fault, the flag set. The socket from the environment."""
    seen = both(binary, tmp_path / "a", ["hook", "PreToolUse", "--socket", "SOCK", "--run-dir", "RUN/nowhere"])
    assert seen.stderr.count(b"\n") == 1 and seen.stderr.startswith(b"ledger-run hook: hook server SOCK did not")
    for impl in ("compiled", "python"):
        (tmp_path / "b" / impl / "run").mkdir(parents=True)
        os.symlink(tmp_path / "elsewhere", tmp_path / "b" / impl / "run" / "faults.log")
    seen = both(binary, tmp_path / "b", HOOK)
    assert seen.stderr.startswith(b"ledger-run hook: hook server SOCK") and not (tmp_path / "elsewhere").exists()
    env = {**os.environ, "LEDGER_HOOK_TIMEOUT": "0.3"}
    seen = both(binary, tmp_path / "c", HOOK, answers=[HOLD], env=env)
    assert [f["error"] for f in seen.faults] == ["hook server SOCK did not answer: timed out"] and seen.flag
    for impl in ("compiled", "python"):
        env = {**os.environ, "LEDGER_HOOK_SOCKET": str(tmp_path / "d" / impl / "none.sock")}
        seen = run(
            [binary] if impl == "compiled" else PYTHON, tmp_path / "d" / impl, HOOK[:2] + ["--run-dir", "RUN"], env=env
        )
        assert "none.sock did not answer" in seen.faults[0]["error"], impl
    assert both(binary, tmp_path / "e", ["hook", "--help"]).stdout.startswith(b"usage: ledger-run hook EVENT")


WRAP = ["wrap", "--socket", "SOCK", "--call", "c0", "--run-dir", "RUN", "--flag-on-fault", "FLAG"]
BEGUN = b'{"ok": true}\n'


@pytest.mark.parametrize(
    "argv,answers,code,stdout,fault,flag",
    [
        ([*WRAP, "--", "echo out; echo err >&2; exit 3"], [BEGUN, b"6\nanswer"], 3, b"answer", None, False),
        ([*WRAP, "--", "echo", "two", "words"], [BEGUN, b"3\nabc"], 0, b"abc", None, False),
        ([*WRAP, "--", "printf raw"], None, 0, b"raw", "gave no key for call 'c0': [Errno 2]", True),
        ([*WRAP, "--", "printf raw"], [None], 0, b"raw", "the call was not taken (0 bytes of answer)", True),
        ([*WRAP, "--", "printf raw"], [b'{"ok": false}\n'], 0, b"raw", "(14 bytes of answer)", True),
        ([*WRAP, "--", "printf raw"], [BEGUN, b"10\nabc"], 0, b"raw", "no whole answer text in its 6 bytes", True),
        ([*WRAP, "--", "printf raw"], [BEGUN, None], 0, b"raw", None, True),
        ([*WRAP, "--", "kill -TERM $$"], [BEGUN, b"0\n"], 143, b"", None, False),
        ([*WRAP, "--token", "t-0", "--", "printf raw"], [BEGUN], 0, b"raw", "a token is letters and digits", True),
        ([*WRAP[:3], "--call", "c 0", *WRAP[5:], "--", "true"], [BEGUN], 0, b"", "not a tool call id: 'c 0'", True),
        (
            ["wrap", "--call", "c0", "--run-dir", "RUN", "--", "printf raw"],
            None,
            0,
            b"raw",
            "no hook server socket",
            False,
        ),
        ([*WRAP, "--login", "0", "--", "shopt -q login_shell && echo login || echo not"], None, 0, b"not\n", "", True),
        ([*WRAP, "--login-status", "0", "--", "shopt -q login_shell && echo login"], None, 0, b"login\n", "", True),
        ([*WRAP, "--shell", "/bin/sh", "--", "echo $0"], None, 0, b"/bin/sh\n", "", True),
        ([*WRAP, "--shell", "fish", "--", "echo ${BASH_VERSION:+bash}"], None, 0, b"bash\n", "", True),
    ],
)
def test_the_wrappers_do_the_same(binary, tmp_path, argv, answers, code, stdout, fault, flag) -> None:
    env = {**os.environ, "SHELL": "/bin/bash"}
    seen = both(binary, tmp_path, argv, answers=answers, env=env)
    assert (seen.code, seen.stdout, seen.stderr, seen.flag) == (code, stdout, b"", flag)
    assert len(seen.faults) == (1 if fault is not None else 0) and all(fault in f["error"] for f in seen.faults)


def test_the_wrappers_send_the_same_calls(binary, tmp_path) -> None:
    """``Begin`` with the call's secret, then ``Answer`` with the key, the call's facts and its output as
    it came; what the shell printed is the server's, what the server answered the model's."""
    output = "".join(f"line {i} é\n" for i in range(2000))
    Path(tmp_path / "out.txt").write_text(output)
    argv = [*WRAP, "--token", "s3cret", "--", f"cat {tmp_path / 'out.txt'}; printf '\\377'; exit 2"]
    seen = both(binary, tmp_path, argv, answers=[BEGUN, b"2\nok"])
    begin = b'{"event": "Begin", "token": "s3cret", "call": "c0"}\n{"tool_use_id": "c0", "key": "KEY"}'
    answer = b'{"event": "Answer", "token": "KEY", "call": "c0", "raw": true}\n'
    facts = b'{"tool_use_id": "c0", "exit_code": 2, "complete": true, "shown_raw": false, "elapsed_s": E}\n'
    assert seen.received == [begin, answer + facts + output.encode() + b"\xff"]
    assert (seen.code, seen.stdout) == (2, b"ok")


def test_the_wrappers_read_the_command_from_the_here_document(binary, tmp_path) -> None:
    """As Codex's shell runs the line the PreToolUse hook gave it: the command verbatim on descriptor 3,
    which the command never inherits; a NUL in it is refused as Python refuses it."""
    command = r"""echo "$0" 'it'"'"'s' "a \\ b" $'\x41'; [ -e /proc/$$/fd/3 ] && echo fd3 || echo no fd3"""
    doc = f"--command-fd 3 3<<'LEDGER_END'\n{command}\nLEDGER_END"
    env = {**os.environ, "SHELL": "/bin/bash"}
    seen = both(binary, tmp_path / "a", [*WRAP, doc], answers=None, shell=True, env=env)
    assert seen.stdout == b"/bin/bash it's a \\ b A\nno fd3\n"
    seen = both(binary, tmp_path / "b", [*WRAP, "--command-fd 3 3< <(printf 'echo a\\0b')"], shell=True, env=env)
    assert seen.code == 127 and seen.stderr.endswith(b": embedded null byte\n")


@pytest.mark.parametrize(
    "argv",
    [[], ["--socket"], ["--socket", "s", "--call", "c"], ["--bogus", "1", "--", "true"], ["--command-fd", "x"]],
)
def test_the_wrappers_say_their_usage_alike(binary, tmp_path, argv) -> None:
    seen = both(binary, tmp_path, ["wrap", *argv])
    assert seen.code == 2 and seen.stderr.startswith(b"usage: ledger-run wrap --socket PATH") and not seen.stdout


def test_the_wrappers_pass_a_long_or_large_output_through_alike(binary, tmp_path) -> None:
    """Past ``--wait`` the output so far goes out, then the rest as it comes (the server records it as
    shown raw and the wrapper prints no answer); past 8 MiB too, marked incomplete."""
    slow = both(
        binary,
        tmp_path / "a",
        [*WRAP, "--wait", "0.3", "--", "echo first; sleep 1; echo second"],
        answers=[BEGUN, b"1\nx"],
    )
    assert slow.stdout == b"first\nsecond\n" and b'"shown_raw": true' in slow.received[1]
    big = [
        run(c, tmp_path / n, [*WRAP, "--", "head -c 9000000 /dev/zero"], answers=[BEGUN, b"1\nx"])
        for n, c in (("c", [binary]), ("py", PYTHON))
    ]
    for seen in big:  # how much past 8 MiB is kept depends on the reads: not compared
        assert (seen.code, seen.stdout, seen.faults) == (0, b"\0" * 9_000_000, [])
        assert b'"complete": false, "shown_raw": true' in seen.received[1].partition(b"\n")[2][:200]


def test_a_background_job_does_not_hold_up_either_wrapper(binary, tmp_path) -> None:
    for client in ([binary], PYTHON):
        t0 = time.monotonic()
        seen = run(client, tmp_path / client[0].rsplit("/", 1)[-1], [*WRAP, "--", "sleep 5 & echo started"])
        assert seen.stdout == b"started\n" and time.monotonic() - t0 < 20


# -- the build ---------------------------------------------------------------------------------------------


def test_the_build_key_is_the_digest_of_what_it_is_made_of() -> None:
    base = compiled.build_key(b"int main;", ("-O2",), "Linux-x86_64")
    assert base == compiled.build_key(b"int main;", ("-O2",), "Linux-x86_64") and len(base) == 24
    for other in (
        compiled.build_key(b"int main; ", ("-O2",), "Linux-x86_64"),
        compiled.build_key(b"int main;", ("-O1",), "Linux-x86_64"),
        compiled.build_key(b"int main;", ("-O2",), "Linux-aarch64"),
        compiled.build_key(b"int main;", ("-O", "2"), "Linux-x86_64"),
    ):
        assert other != base


def _env(tmp: Path, **extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("CC", compiled.MODE_ENV)}
    return {**env, native.CACHE_ENV: str(tmp / "cache"), **extra}


def _compiler_script(tmp: Path, body: str) -> str:
    script = tmp / "fake-cc"
    script.write_text("#!/bin/sh\n" + body)
    script.chmod(0o755)
    return str(script)


def test_it_is_built_once_into_a_private_cache_and_checked_before_use(binary, tmp_path) -> None:
    env = _env(tmp_path)
    built = compiled.compiled_hook(env)
    assert built.why == "built" and built.path is not None
    path = Path(built.path)
    assert path.parent == tmp_path / "cache" and stat.S_IMODE(path.parent.stat().st_mode) == 0o700
    assert stat.S_IMODE(path.stat().st_mode) == 0o700 and os.listdir(path.parent) == [path.name]
    # in the cache: no compiler is needed, nor called (one that fails would say so)
    again = compiled.compiled_hook({**env, "CC": _compiler_script(tmp_path, "exit 1\n")})
    assert again == compiled.Build(str(path), "cached")
    # a binary replaced by something else (a truncated copy, another build) is not used: built again
    path.write_text("#!/bin/sh\necho not-the-key\n")
    assert compiled.compiled_hook(env) == compiled.Build(str(path), "built")
    assert subprocess.run([str(path), "--version"], capture_output=True, text=True).stdout.strip() in path.name


def test_where_it_cannot_be_linked_statically_it_is_linked_as_usual(binary, tmp_path) -> None:
    """A C library without its static archive (macOS, a minimal install): the second build serves."""
    cc = shutil.which("cc") or shutil.which("gcc") or shutil.which("clang")
    no_static = _compiler_script(tmp_path, f'case " $* " in *" -static "*) exit 1;; esac\nexec {cc} "$@"\n')
    got = compiled.compiled_hook(_env(tmp_path, CC=no_static))
    source = compiled.SOURCE.read_bytes()
    machine = f"{os.uname().sysname}-{os.uname().machine}"
    assert got == compiled.Build(
        str(tmp_path / "cache" / f"ledger-hook-{compiled.build_key(source, ('-O2',), machine)}"), "built"
    )
    assert compiled.compiled_hook(_env(tmp_path)).why == "cached", "found again, not built statically now"


def test_without_a_compiler_the_python_client_serves(tmp_path) -> None:
    env = _env(tmp_path, PATH=str(tmp_path / "empty"))
    assert compiled.compiled_hook(env) == compiled.Build(None, "no C compiler: $CC, cc, gcc or clang")
    assert compiled.compiled_hook(_env(tmp_path, LEDGER_HOOK_CLIENT="python")).path is None
    code = (
        "import os, sys; os.environ['PATH'] = sys.argv[1]; os.environ.pop('CC', None); "
        "from ledger_runtime import fast_launcher; print(fast_launcher()[-1])"
    )
    env = _env(tmp_path / "fresh")
    out = subprocess.run([sys.executable, "-c", code, str(tmp_path / "empty")], env=env, capture_output=True, text=True)
    assert out.stdout.strip().endswith("fasthook.py"), out.stderr
    assert fast_launcher(compiled=False)[-1].endswith("fasthook.py")


def test_a_failed_build_falls_back_and_is_not_tried_again_at_once(binary, tmp_path) -> None:
    failing = _compiler_script(tmp_path, "echo 'ledger_hook.c:1: error: no such thing' >&2\nexit 1\n")
    got = compiled.compiled_hook(_env(tmp_path, CC=failing))
    assert got.path is None and "failed (exit 1): ledger_hook.c:1: error: no such thing" in got.why
    marker = next((tmp_path / "cache").glob("ledger-hook-*.failed"))
    assert stat.S_IMODE(marker.stat().st_mode) == 0o600
    assert [p.name for p in (tmp_path / "cache").iterdir()] == [marker.name], "no build directory left behind"
    # within the hour: not tried again, even with a compiler that works
    got = compiled.compiled_hook(_env(tmp_path))
    assert got.path is None and "tried again an hour after" in got.why
    old = time.time() - 2 * native.RETRY_FAILED_AFTER_S
    os.utime(marker, (old, old))
    assert compiled.compiled_hook(_env(tmp_path)).why == "built"
    # a build that does not run here (it prints something else): not kept
    wrong = _compiler_script(tmp_path, 'for a; do o=$n; n=$a; done\nprintf "#!/bin/sh\\necho other\\n" > "$o"\n')
    got = compiled.compiled_hook(_env(tmp_path / "w", CC=wrong))
    assert got == compiled.Build(None, "the build does not run here")
    assert [p.suffix for p in (tmp_path / "w" / "cache").iterdir()] == [".failed"], "nothing else kept"


def test_a_cache_others_could_change_is_not_used(binary, tmp_path) -> None:
    """A cache directory under one that others may write (not sticky), or a link to such a place: the Python
    client serves. A cache that lets others in is made private (it is this user's)."""
    shared = tmp_path / "shared"
    shared.mkdir()
    shared.chmod(0o777)
    got = compiled.compiled_hook({**_env(tmp_path), native.CACHE_ENV: str(shared / "cache")})
    assert got.path is None and f"{shared}: others may write it" in got.why
    os.symlink(shared / "cache", tmp_path / "link")
    got = compiled.compiled_hook({**_env(tmp_path), native.CACHE_ENV: str(tmp_path / "link")})
    assert got.path is None and "others may write it" in got.why
    shared.chmod(0o700)
    (shared / "cache").chmod(0o755)
    assert compiled.compiled_hook({**_env(tmp_path), native.CACHE_ENV: str(shared / "cache")}).why == "built"
    assert stat.S_IMODE((shared / "cache").stat().st_mode) == 0o700
    if os.geteuid() == 0:  # another user's cache directory
        theirs = tmp_path / "theirs"
        theirs.mkdir(mode=0o700)
        os.chown(theirs, 12345, 12345)
        got = compiled.compiled_hook({**_env(tmp_path), native.CACHE_ENV: str(theirs)})
        assert got.path is None and "belongs to uid 12345" in got.why


def test_nothing_compiled_is_in_the_repository() -> None:
    """Builds live in the user's cache, never beside the source (and none is committed)."""
    root = Path(__file__).resolve().parents[1]
    tracked = subprocess.run(["git", "ls-files", "-z"], cwd=root, capture_output=True).stdout.split(b"\0")
    for name in tracked:
        p = root / name.decode()
        if p.is_file() and p.stat().st_size >= 4:
            with open(p, "rb") as f:
                assert f.read(4) != b"\x7fELF", f"{name.decode()} is a compiled binary"
    assert compiled.cache_dir({"HOME": "/home/u"}) == Path("/home/u/.cache/ledger-runtime")
    assert compiled.cache_dir({"HOME": "/home/u", "XDG_CACHE_HOME": "/c"}) == Path("/c/ledger-runtime")
    assert compiled.cache_dir({"HOME": "/home/u", "XDG_CACHE_HOME": "rel"}) == Path("/home/u/.cache/ledger-runtime")


def test_a_wrapper_removed_during_the_run_leaves_the_python_one(binary, tmp_path) -> None:
    """The line Codex's shell runs names both wrappers and runs the compiled one when it is there: a cache
    cleaned during the run (``rm -rf ~/.cache``) never makes a command fail; the Python one answers."""
    from test_hook_chain import Served

    copy = tmp_path / "ledger-hook"
    shutil.copy(binary, copy)
    s = Served(tmp_path)
    s.hooks.wrap_launcher, s.hooks.wrap_fallback = [str(copy)], fast_launcher(compiled=False)
    try:
        shown, _ = s.call("c1", "cat b.txt; exit 0")
        assert shown == "beta\n"
        copy.unlink()
        handled = s.server.handled
        shown, _ = s.call("c2", "cat a.txt")
        assert shown == "alpha\n" * 30
        assert s.server.handled == handled + 3, "PreToolUse, then the Python wrapper's Begin and Answer"
        attempts = s.rt.state.attempts
        assert [(a.command, a.exit_code) for a in attempts] == [("cat b.txt; exit 0", 0), ("cat a.txt", 0)]
        assert s.rt.store.blob(attempts[1].output_hash).decode() == "alpha\n" * 30
    finally:
        s.close()
