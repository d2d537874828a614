"""No secret in anything the ledger writes (issue 37 item 5): each common credential shape, printed by a
command and written in its command line, is masked in the ledger's blobs and events (the keys an
answer is a re-read's base under too), ``inspect --json``, ``--output``, the page and faults.log; the
hook client and the Codex wrapper write no command or answer to faults.log; the run's page masks the
agent's own record; ``ledger-run claude`` keeps no copy of the user's --settings. And text that holds
no secret is left as it is: the false positives measured on the 106 shared trajectories
(swebench_runs/masking/false_positives.py) stay fixed."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import make_repo
from hypothesis import given, settings
from hypothesis import strategies as st

from ledger_runtime import hook_launcher
from ledger_runtime.cli.html import unpacked
from ledger_runtime.config import LedgerConfig
from ledger_runtime.executor import LocalExecutor
from ledger_runtime.ledger import secret_names
from ledger_runtime.ledger.redact import Redactor
from ledger_runtime.ledger.store import LedgerStore
from ledger_runtime.runtime import LedgerRuntime

# (name, the text a file or command holds, the secret in it)
SHAPES = [
    ("a password named pw", "export DB_PW=Hunter2SecretValue\n", "Hunter2SecretValue"),  # as MY_PWD= is
    (
        "aws credentials",
        "[default]\naws_secret_access_key = wJalrXUtnFEMI/K7MDENG/bPxRfiCYzEXAMPLE9\n",
        "wJalrXUtnFEMI/K7MDENG/bPxRfiCYzEXAMPLE9",
    ),
    (
        "gcp service account",
        '{"type": "service_account", "private_key": "-----BEGIN PRIVATE KEY-----\\nMIIEvQIBADANBgkqhkiG9w0BAQEFAASC'
        'BKcwggSjAgEAAoIBAQC7\\n-----END PRIVATE KEY-----\\n"}\n',
        "MIIEvQIBADANBgkqhkiG9w0BAQEFAASCBKcwggSjAgEAAoIBAQC7",
    ),
    (
        "gcloud adc",
        '{"refresh_token": "1//0gLx7vTNxQ3bRtY8uWvZa-LkJhGfDsA", "type": "authorized_user"}\n',
        "1//0gLx7vTNxQ3",
    ),
    (
        "pypirc",
        "[pypi]\nusername = __token__\npassword = pypi-AgEIcHlwaS5vcmcCJGE4ZjM2ZjE0LTQ5YzgtNGQ1Yi1h\n",
        "AgEIcHlwaS5",
    ),
    ("npmrc", "//registry.npmjs.org/:_authToken=npm_Zq3x9Lm2Pw8Rt5Yv1Nb4Kc7Hd6Gf0Sj2Aa1B\n", "Zq3x9Lm2Pw8Rt5Yv1Nb4"),
    ("netrc", "machine api.example.com login octo password s3cr3tPassw0rd\n", "s3cr3tPassw0rd"),
    ("git-credentials", "https://octo:Xy7pQ2rS9tUv4wZ@github.com\n", "Xy7pQ2rS9tUv4wZ"),
    ("database url", "DATABASE_URL=postgres://app:Sup3rS3cretDb@db.internal:5432/app\n", "Sup3rS3cretDb"),
    (
        "docker config",
        '{"auths": {"https://index.docker.io/v1/": {"auth": "b2N0bzpodW50ZXIyMDI0IQ=="}}}\n',
        "b2N0bzpodW50ZXIyMDI0IQ",
    ),
    (
        "kubeconfig",
        "users:\n- name: me\n  user:\n    client-key-data: LS0tLS1CRUdJTiBSU0EgUFJJVkFURSBLRVktLS0tLQpNSUlFb3d\n",
        "LS0tLS1CRUdJTiBSU0Eg",
    ),
    ("yaml api_key", "service:\n  api_key: 9f8e7d6c5b4a39281706aa\n", "9f8e7d6c5b4a39281706aa"),
    ("stripe", "charge with sk_live_4eC39HqLyjWDarjtT1zdp7dc\n", "4eC39HqLyjWDarjtT1zdp7dc"),
    ("hugging face", "HF hub: hf_AbCdEfGhIjKlMnOpQrStUvWxYz01234567\n", "AbCdEfGhIjKlMnOpQrStUvWxYz0"),
    (
        "slack webhook",
        "https://hooks.slack.com/services/T0A1B2C3D/B0E1F2G3H/abcdefghijklmnopqrstuvwx\n",
        "abcdefghijklmnopqrstuvwx",
    ),
    ("x-api-key header", "curl -H 'X-Api-Key: 7f3c9a1b2d4e5f6071' https://api.example.com\n", "7f3c9a1b2d4e5f6071"),
    ("mysql -p", "mysql -u root -pS3cretPass8 mydb -e 'select 1'\n", "S3cretPass8"),
    ("json API_KEY", '{"API_KEY": "abcdEFGH1234ijklMNOP"}\n', "abcdEFGH1234ijklMNOP"),
]


def everything_stored(run_dir: Path) -> str:
    """Every text the run directory holds: each file as it is, and the ledger's events and blobs
    (decompressed, patches applied)."""
    parts = [p.read_bytes().decode("utf-8", "replace") for p in run_dir.rglob("*") if p.is_file()]
    store = LedgerStore.open(run_dir)
    try:
        parts += [json.dumps(e) for e in store.events()]
        hashes = [h for (h,) in store._conn.execute("SELECT hash FROM blobs")]
        parts += [store.text(h) or "" for h in hashes]
    finally:
        store.close()
    return "\n".join(parts)


def ledger_run(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([*hook_launcher(), *args], capture_output=True, text=True, timeout=120)


def page_text(path: Path) -> str:
    """A run's page and what it carries packed (a big run's page: cli/html.py's Bodies), unpacked."""
    text = path.read_text()
    return text + "".join(part for parts in (unpacked(text) or {}).values() for part in parts)


@pytest.mark.parametrize("name,text,secret", SHAPES, ids=[s[0] for s in SHAPES])
def test_each_credential_shape_is_masked_in_everything_the_ledger_writes(tmp_path: Path, name, text, secret) -> None:
    repo = make_repo(tmp_path / "repo", {"creds.txt": text})
    run_dir = tmp_path / "run"
    rt = LedgerRuntime(repo, run_dir, LedgerConfig())
    line = text.strip().splitlines()[-1]
    try:
        ex = LocalExecutor()
        first = rt.run("cat creds.txt", ex)
        rt.run("cat creds.txt", ex)
        # the secret in the command line itself (its analysis, the keys its answer is kept under)
        rt.run(f"cat creds.txt # {line}", ex)
        rt.report_fault("a fault naming the command", ValueError(line), command=line)
    finally:
        rt.close()
    assert first.output == text, "what the model is shown is not changed"
    stored = everything_stored(run_dir)
    assert secret not in stored, f"{name}: the secret is stored in clear"
    assert secret[:8] not in stored or name in ("gcloud adc",), stored  # not even its start (a cut secret)
    for args in (
        ["--json"],
        ["--step", "3", "--output"],
        ["--step", "3", "--json"],
        ["--html", str(tmp_path / "p.html")],
    ):
        r = ledger_run("inspect", str(run_dir), *args)
        assert r.returncode == 0, r.stderr
        shown = r.stdout + (page_text(tmp_path / "p.html") if "--html" in args else "")
        assert secret not in shown, f"{name}: inspect {args} shows the secret"


NOT_SECRETS = [
    "PASS: Concrete indices correct",
    "PASS: .a/foo.py was ignored",
    "PASS: Docstring found",
    "PASS: __init__ was included.",
    "PASS: test_reset_keeps_every_key",
    'DIMENSION_KEY = "_ARRAY_DIMENSIONS"',
    "tokens = tokenize(source)",
    "password = get_password()",
    "token = self.token",
    "    secret_key: SecretStr",
    "api_key: Optional[str] = None",
    'SECRET_KEY = "AWS_SECRET_ACCESS_KEY"',
    "for key, value in sorted(mapping.items()):",
    "    key = (path, lineno)",
    "the password is required for user admin2024",
    "--secrets HF_TOKEN",
    "pwd = /home/me/src",
    "PWD=/home/me/src OLDPWD=/home/me/src/build2",
    "pw = getpass.getpass()",
    "pwm_duty = 12345678",
    "MAX_PASS_LIMIT_REACHED = 'MAX PASS LIMIT REACHED'",
]


@pytest.mark.parametrize("text", NOT_SECRETS)
def test_text_that_holds_no_secret_is_left_as_it_is(text: str) -> None:
    assert Redactor.for_run({}).mask(text) == text


TRAJECTORIES = Path(__file__).resolve().parents[2] / "shared" / "data" / "trajectories"


@pytest.mark.slow
def test_on_the_shared_trajectories_only_credential_shaped_text_is_masked(tmp_path: Path) -> None:
    """The measurement itself (swebench_runs/masking/false_positives.py): in the 106 public runs every
    masked span is a password in a URL, a value named secret or a header's credential (test data shaped like a
    credential)."""
    if not any(TRAJECTORIES.glob("*/trajs/*.traj.json")):
        pytest.skip(f"no shared trajectories under {TRAJECTORIES} (../shared/data)")
    script = Path(__file__).resolve().parents[1] / "swebench_runs" / "masking" / "false_positives.py"
    out = tmp_path / "fp.json"
    p = subprocess.run([sys.executable, str(script), "--out", str(out)], capture_output=True, text=True, timeout=900)
    assert p.returncode == 0, p.stderr[-2000:]
    result = json.loads(out.read_text())
    assert result["trajectories"] == 106 and result["outputs"]["texts"] > 4000
    lines = [ln for kind in ("outputs", "commands") for hit in result[kind]["masked"] for ln in hit["lines"]]
    header = re.compile(r"Authorization'?\"?[:=] *['\"](?:Basic|Bearer) ⟦")  # a header's credential after its scheme
    odd = [
        ln
        for ln in lines
        if not ("://" in ln and ":⟦" in ln and "⟧@" in ln) and "Secret" not in ln and not header.search(ln)
    ]
    assert not odd, odd
    assert result["outputs"]["rate"] < 0.002


def test_the_wrapper_and_the_hook_client_write_no_command_or_answer_to_faults_log(tmp_path: Path) -> None:
    secret = "ghp_" + "Q7w" * 12
    repo = make_repo(tmp_path / "repo", {"a.txt": "x\n"})
    wrap = [*hook_launcher(), "wrap", "--socket", str(tmp_path / "gone.sock"), "--call", "c0"]
    p = subprocess.run(
        [*wrap, "--run-dir", str(tmp_path), "--", f"echo {secret} >/dev/null; cat a.txt"],
        cwd=repo,
        capture_output=True,
        timeout=60,
    )
    assert p.stdout == b"x\n"
    faults = (tmp_path / "faults.log").read_text()
    assert "gave no key for call 'c0'" in faults and secret not in faults and "echo" not in faults


def test_claude_s_run_keeps_no_copy_of_the_user_s_settings(tmp_path: Path) -> None:
    """The user's --settings (an API key in its env) is merged in while claude runs, and taken out when it
    exits: a stand-in claude checks the merged file, the run directory keeps the ledger's hooks only."""
    from ledger_adapters.claude.cli import run_claude

    key = "sk-ant-api03-" + "Zx9" * 12
    fake = tmp_path / "claude"
    seen = tmp_path / "seen.json"
    fake.write_text(f'#!/bin/sh\ncat "$2" > {seen}\n')  # claude --settings FILE ...
    fake.chmod(0o755)
    repo = make_repo(tmp_path / "repo", {"a.txt": "x\n"})
    run_dir = tmp_path / "run"
    code = run_claude(
        str(fake),
        ["-p", "hi"],
        repo,
        run_dir,
        LedgerConfig(),
        settings={"env": {"ANTHROPIC_API_KEY": key}, "model": "sonnet"},
        env={"HOME": str(tmp_path / "home"), "PATH": "/usr/bin:/bin"},
    )
    assert code == 0
    assert json.loads(seen.read_text())["env"]["ANTHROPIC_API_KEY"] == key, "claude got the user's settings"
    kept = json.loads((run_dir / "claude" / "settings.json").read_text())
    assert "env" not in kept and "model" not in kept and "PreToolUse" in kept["hooks"]
    assert key not in everything_stored(run_dir)


def test_the_page_masks_the_agent_s_own_record_as_the_ledger_masked_the_run(tmp_path: Path, monkeypatch) -> None:
    """The page shows the model's words and commands from the agent's record (Codex's rollout,
    mini-swe-agent's trajectory), which the agent wrote unmasked: a value of the run's environment the
    ledger masked in a command, and a token shape, are masked wherever the record has them, and the
    record's calls still go with their steps."""
    env_secret = "tok-Zr81kq27Lm90Wp"
    monkeypatch.setenv("DEPLOY_TOKEN", env_secret)
    shape = "sk_live_4eC39HqLyjWDarjtT1zdp7dc"
    repo = make_repo(tmp_path / "repo", {"a.txt": "x\n"})
    command = f"echo {env_secret} | wc -c"
    rt = LedgerRuntime(repo, tmp_path / "run", LedgerConfig())
    try:
        rt.run(command, LocalExecutor())
    finally:
        rt.close()
    messages = [
        {"role": "system", "content": "sys"},
        {"role": "user", "content": "task"},
        {"role": "assistant", "content": f"THOUGHT: the token {env_secret} and {shape}\n\n```bash\n{command}\n```"},
        {"role": "user", "content": "<returncode>0</returncode>\n<output>\n19\n</output>"},
        {"role": "assistant", "content": f"THOUGHT: done with {env_secret}"},
    ]
    traj = tmp_path / "run.traj.json"
    traj.write_text(json.dumps({"instance_id": "x", "info": {}, "messages": messages}))
    page = tmp_path / "page.html"
    r = ledger_run("inspect", str(tmp_path / "run"), "--html", str(page), "--trajectory", str(traj))
    assert r.returncode == 0, r.stderr
    html = page_text(page)
    assert env_secret not in html and shape not in html
    step = html.split('id="step-1"')[1].split("</section>")[0]
    assert "the token ******************" in step, "the call goes with its step"


@pytest.mark.parametrize("seed", range(3))
def test_secret_names_found_in_lower_case_are_the_words_ignorecase_finds(seed: int) -> None:
    """The name scan looks for its words in the text's lower case (a long output costs ~1 ms, not
    ~40): over random text of the words in mixed case, glued and apart, with the characters that
    fold differently (Kelvin sign, dotted and dotless i, long s) and others, it finds exactly the
    offsets the IGNORECASE pattern finds, and masks alike."""
    import random

    from ledger_runtime.ledger import secret_names

    rng = random.Random(seed)
    alphabet = ["pass", "PwD", "Secret", "TOKEN", "kEy", "auth", "credential", "DSN", "=", ":", " ", "\n", '"', "x9"]
    alphabet += ["\u212a", "\u0130", "\u0131", "\u017f", "é", "ß", "_", "-", "hunter2abc", "s3cr3tvalue"]
    alphabet += [
        "pa",
        "s",
        "ecret",
        "credent",
        "al",
        "d",
        "n",
        "tok",
        "en",
        "e",
        "y",
        "au",
        "th",
    ]  # words across pieces
    for _ in range(400):
        text = "".join(rng.choice(alphabet) for _ in range(rng.randint(0, 40)))
        fast = secret_names._name_words(text)
        assert fast == [m.span() for m in secret_names.NAME_WORDS.finditer(text)], text
    text = "".join(rng.choice(alphabet[:14]) for _ in range(4000))
    assert text.isascii() and secret_names.named_spans(text), "an ASCII text takes the lower-case path"


def _alternation_spans(text: str, words: tuple[str, ...]) -> list[tuple[int, int]]:
    """The oracle: what the regular expression engine finds of the words' alternation."""
    import re

    return [m.span() for m in re.finditer("|".join(map(re.escape, words)), text)]


def test_no_secret_name_word_begins_another() -> None:
    """``leftmost_words`` needs it: at a place at most one word matches, whatever their order."""
    from ledger_runtime.ledger.secret_names import _LOWER_WORDS

    assert not any(a != b and b.startswith(a) for a in _LOWER_WORDS for b in _LOWER_WORDS)


_NEAR = ["pass", "pas", "pwd", "pw", "secret", "secre", "ecret", "token", "toke", "oken", "key", "ke", "ey", "auth"]
_NEAR += ["aut", "uth", "credential", "credentia", "dsn", "ds", "sn", "s", "p", "a", "k", "x", "\n", " ", "="]


@given(st.lists(st.sampled_from(_NEAR), max_size=60).map("".join))
@settings(max_examples=600, deadline=None)
def test_leftmost_words_is_what_the_alternation_finds(text: str) -> None:
    """The name words found one by one with ``str.find`` (the scan of a long output's lower case) are
    exactly the alternation's matches: over text glued of the words, their parts and their overlaps
    (passecret, keyey, tokenkey), the same spans in the same order."""
    from ledger_runtime.ledger.secret_names import _LOWER_WORDS, leftmost_words

    assert leftmost_words(text, _LOWER_WORDS) == _alternation_spans(text, _LOWER_WORDS)


@given(st.lists(st.text(alphabet="abc", min_size=1, max_size=3), min_size=1, max_size=4), st.text("abc", max_size=40))
@settings(max_examples=400, deadline=None)
def test_leftmost_words_of_any_words_none_beginning_another(words: list[str], text: str) -> None:
    """...and so for any words none of which begins another, over text of their few letters."""
    from hypothesis import assume

    from ledger_runtime.ledger.secret_names import leftmost_words

    words = list(dict.fromkeys(words))
    assume(not any(a != b and b.startswith(a) for a in words for b in words))
    assert leftmost_words(text, tuple(words)) == _alternation_spans(text, tuple(words))


def _spans_every_pattern_run(r: Redactor, text: str) -> list[tuple[int, int]]:
    """The oracle: ``Redactor.spans`` with every pattern run over the whole text (no literal opening
    looked for first), each checked for being a built-in one as it goes."""
    from ledger_runtime.ledger import redact

    found: list[tuple[int, int]] = []
    for v in r.values:
        found += [(i, i + len(v)) for i in range(len(text)) if text.startswith(v, i)]
    if r.names:
        found += secret_names.named_spans(text)
    for rx in r.patterns:
        if rx in redact._BUILTIN:
            word = rx in redact._BUILTIN[: len(redact.TOKEN_SHAPES)]
            for m in rx.finditer(text):
                if not (word and m.start() and text[m.start() - 1] in redact._IN_WORD):
                    found += redact._groups(m)
        else:
            at = 0
            for line in text.split("\n"):
                found += [(a + at, b + at) for m in rx.finditer(line) for a, b in redact._groups(m)]
                at += len(line) + 1
    merged: list[tuple[int, int]] = []
    for a, b in sorted(found):
        if merged and a <= merged[-1][1]:
            merged[-1] = (merged[-1][0], max(b, merged[-1][1]))
        else:
            merged.append((a, b))
    return merged


_SHAPE_PARTS = ["AKIA", "ASIA", "sk-", "sk-ant-", "ghp_", "gho_", "gh", "github_pat_", "xoxb-", "xox", "AIza", "glpat-"]
_SHAPE_PARTS += ["sk_live_", "rk_test_", "whsec_", "hf_", "npm_", "pypi-", "LS0tLS1CRUdJTi", "mysql -uroot -p", "-p"]
_SHAPE_PARTS += ["mariadb-dump ", "sshpass -p ", "curl -u bob:", "Authorization: Bearer ", "eyJ", ".", "://u:", "@"]
_SHAPE_PARTS += ["-----BEGIN PRIVATE KEY-----", "-----END", "hooks.slack.com/services/", "password=", "token: "]
_SHAPE_PARTS += ["A1b2C3d4E5f6G7h8", "0123456789ABCDEF", "abcdefghij", "Z", "_", "-", " ", "\n", "'", '"', "x"]
# whole shapes too, so that each pattern finds something to mask
_SHAPE_PARTS += ["AKIA0123456789ABCDEF ", "ASIA0123456789ABCDEF\n", "sk-" + "a1" * 12, "ghs_" + "b2" * 16]
_SHAPE_PARTS += ["hf_" + "c3" * 16, "github_pat_" + "d4" * 11, "xoxp-1234567890", "AIza" + "e5" * 18]
_SHAPE_PARTS += ["glpat-" + "f6" * 11, "npm_" + "g7" * 18, "sk_test_1234567890", "rk_live_1234567890"]
_SHAPE_PARTS += ["whsec_" + "h8" * 11, "pypi-" + "i9" * 21, " x@y", "LS0tLS1CRUdJTiBQUklWQVRF", "eyJ" + "j" * 10 + "."]
_SHAPE_PARTS += ["mysql -u root -p'pw1' db", "curl -u bob:s3cret http", "Authorization: Bearer abcdefgh12"]
_SHAPE_PARTS += ["https://u:pa55word@host", "hooks.slack.com/services/T0123/B0123/x", "sshpass -p hunter2"]
_SHAPE_PARTS += ["discord.com/api/webhooks/1234/abcdefghijklmnop", "-----BEGIN RSA PRIVATE KEY-----"]


@given(st.lists(st.sampled_from(_SHAPE_PARTS), max_size=40).map("".join), st.booleans())
@settings(max_examples=500, deadline=None)
def test_spans_are_those_of_every_pattern_run_over_the_whole_text(text: str, user: bool) -> None:
    """The masking's shortcuts (a pattern runs only where its literal opening is in the text; each
    pattern's part worked out once, not at each text) change nothing: over text glued of the token
    shapes' openings, near misses and key-like runs, with a user's pattern and an environment value
    or without, the spans are those of every pattern run over the whole text."""
    r = Redactor.for_run({"API_TOKEN": "hunter2hunter2"}, [r"id=(\d{4,})"] if user else [])
    text += "id=12345 hunter2hunter2" if user else ""
    assert r.spans(text) == _spans_every_pattern_run(r, text)


def _masked_afresh(r: Redactor, obj: object) -> object:
    """The oracle of ``mask_obj``: every string masked by its spans, worked out anew (no text known before)."""
    if isinstance(obj, str):
        spans = r.spans(obj)
        return "".join("*" if any(a <= i < b for a, b in spans) and c not in "\r\n" else c for i, c in enumerate(obj))
    if isinstance(obj, dict):
        from ledger_runtime.ledger.redact import STRUCTURAL

        return {k: v if k in STRUCTURAL else _masked_afresh(r, v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [_masked_afresh(r, v) for v in obj]
    return obj


class _Text(str):
    """A string of a subclass: masked as its base."""


_TEXTS = st.lists(st.sampled_from(_SHAPE_PARTS), max_size=12).map("".join)
_EVENT_KEYS = ["command", "path", "reason", "kind", "pieces", "cwd", "x"]  # "path", "cwd": never masked
_VALUES = st.recursive(
    st.one_of(_TEXTS, _TEXTS.map(_Text), st.integers(), st.booleans(), st.none(), st.floats(allow_nan=False)),
    lambda inner: st.one_of(
        st.lists(inner, max_size=4),
        st.lists(inner, max_size=3).map(tuple),
        st.dictionaries(
            st.sampled_from(["command", "path", "reason", "kind", "pieces", "cwd", "x"]), inner, max_size=4
        ),
    ),
    max_leaves=20,
)


@given(st.lists(_VALUES, min_size=1, max_size=6))
@settings(max_examples=300, deadline=None)
def test_an_event_masks_alike_however_often_its_texts_were_masked_before(events: list) -> None:
    """Short texts masked before are looked up, not masked again (an event's fields repeat from step to step):
    each event, masked twice over by one redactor among the others, is masked as afresh; a text with nothing to
    mask comes back as the very object given, as each caller asks (``stored is output``), even where an equal
    text was looked up before; the table, full, starts over and still masks right."""
    from ledger_runtime.ledger import redact

    r = Redactor.for_run({"API_TOKEN": "hunter2hunter2"}, [r"id=(\d{4,})"])
    for _ in range(2):
        for event in events:
            assert r.mask_obj(event) == _masked_afresh(r, event)
    for text in ("RUN", "sk-" + "a1" * 12, "x" * redact.KNOWN_CHARS, "y" * (redact.KNOWN_CHARS + 1)):
        copy = "".join(list(text))
        assert copy is not text
        assert r.mask(text) == r.mask(copy) == _masked_afresh(r, text)
        if r.mask(text) == text:
            assert r.mask(copy) is copy
    for i in range(redact.KNOWN_TEXTS + 10):  # past the table's size
        assert r.mask(f"line {i} sk-{'b2' * 12}") == f"line {i} " + "*" * 27
    assert len(r._known) <= redact.KNOWN_TEXTS


_URL_PARTS = [":", "/", "//", ":/", ": //", "://", "http://", "https://u:pa55word@host", "://u:p@", "x" * 40, "\n"]


@given(st.lists(st.sampled_from(_SHAPE_PARTS + _URL_PARTS), max_size=40).map("".join), st.booleans())
@settings(max_examples=300, deadline=None)
def test_a_long_text_s_spans_are_those_of_every_pattern_run_over_it(text: str, user: bool) -> None:
    """As above, over texts long enough for the compiled search (where this machine builds it), with the near misses
    of a URL's "://" (the opening its password's pattern is looked for by): the same spans as every pattern run."""
    from ledger_runtime.ledger import needles

    needles.library(build=True)
    r = Redactor.for_run({"API_TOKEN": "hunter2hunter2"}, [r"id=(\d{4,})"] if user else [])
    text = "x = 1\n" * (needles.NATIVE_MIN_CHARS // 6 + 1) + text + ("id=12345 hunter2hunter2" if user else "")
    assert r.spans(text) == _spans_every_pattern_run(r, text)


_LONG = st.lists(st.sampled_from(_SHAPE_PARTS + _URL_PARTS + ["y" * 1000]), min_size=1, max_size=30).map("".join)


@given(st.lists(_LONG, min_size=1, max_size=4), st.lists(st.integers(0, 9), min_size=1, max_size=12))
@settings(max_examples=150, deadline=None)
def test_a_long_text_masks_alike_however_often_an_equal_one_was_masked_before(texts: list[str], order: list) -> None:
    """Long texts found with nothing to mask are kept (an edit's blob comes back as the next ``cat``'s output): a
    sequence of long texts, clean and not, equal copies among them, each masked by one redactor as afresh; a clean
    one comes back as the very object given."""
    from ledger_runtime.ledger import redact

    filler = "z" * redact.CLEAN_MIN_CHARS
    r = Redactor.for_run({"API_TOKEN": "hunter2hunter2"})
    for i in order:
        text = "".join(list(filler + texts[i % len(texts)]))  # a new object each time
        masked = r.mask(text)
        assert masked == Redactor.for_run({"API_TOKEN": "hunter2hunter2"}).mask(text)
        if masked == text:
            assert masked is text
    assert len(r._clean) <= redact.CLEAN_KEPT
