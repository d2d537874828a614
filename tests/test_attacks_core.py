"""Crafted input reaching the core (an attacker's pass, its leftovers): a config file nested past Python's
recursion limit or a link to /dev/zero, a JSON file named to ``inspect`` nested as deep, a FIFO put in place of
a file the agent read or of an agent's session or login file, a setting of 10**20 bytes. Each is one line
naming the problem or a safe fallback: never a traceback, a hang, or a lost record."""

from __future__ import annotations

import os
import threading
import time
from pathlib import Path

import pytest
from conftest import make_repo

from ledger_runtime.config import ConfigError, load_config
from ledger_runtime.executor import LocalExecutor
from ledger_runtime.inspection import find_ledger
from ledger_runtime.ledger.masked_files import keep_masked_jsonl
from ledger_runtime.ledger.redact import Redactor, file_secrets
from ledger_runtime.ledger.store import NotALedger
from ledger_runtime.runtime import LedgerRuntime
from ledger_runtime.seen import file_text

DEEP = 50_000


def _within(seconds: float, fn, *args):
    """``fn(*args)``, which must end within ``seconds`` (a FIFO read would block for ever)."""
    out: list = []

    def call() -> None:
        try:
            out.append((fn(*args), None))
        except BaseException as e:  # raised again in the caller
            out.append((None, e))

    t = threading.Thread(target=call, daemon=True)
    t.start()
    t.join(seconds)
    assert not t.is_alive(), f"{fn.__name__} did not end"
    value, error = out[0]
    if error is not None:
        raise error
    return value


def test_a_config_nested_too_deep_or_endless_is_one_line(tmp_path: Path) -> None:
    deep = tmp_path / "deep.toml"
    deep.write_text("a = " + "[" * DEEP + "]" * DEEP + "\n")
    with pytest.raises(ConfigError, match="not valid TOML: nested deeper than it can be read"):
        load_config(deep)
    endless = tmp_path / "endless.toml"
    endless.symlink_to("/dev/zero")
    with pytest.raises(ConfigError, match="a device that reads on past 4,194,304 bytes, not a settings file"):
        _within(30, load_config, endless)


def test_inspect_of_a_json_file_nested_too_deep_is_not_a_ledger(tmp_path: Path) -> None:
    deep = tmp_path / "deep.traj.json"
    deep.write_text("[" * DEEP + "]" * DEEP)
    with pytest.raises(NotALedger, match="JSON nested deeper than it can be read"):
        find_ledger(deep)


def test_a_fifo_in_place_of_a_file_is_no_text_and_holds_nothing_up(tmp_path: Path) -> None:
    fifo = tmp_path / "edited.py"
    os.mkfifo(fifo)
    assert _within(10, file_text, str(fifo)) is None
    zero = tmp_path / "zero.py"
    zero.symlink_to("/dev/zero")
    assert _within(10, file_text, str(zero)) is None
    fine = tmp_path / "fine.py"
    fine.write_text("x = 1\n")
    assert file_text(str(fine)) == "x = 1\n"


def test_an_agent_s_session_or_login_file_made_a_fifo_or_nested_too_deep_is_left_out(tmp_path: Path) -> None:
    fifo = tmp_path / "s1.jsonl"
    os.mkfifo(fifo)
    deep = tmp_path / "s2.jsonl"
    deep.write_text('{"ok": "sk-' + "a1" * 12 + '"}\n' + "[" * DEEP + "]" * DEEP + "\n")
    out = tmp_path / "kept"
    _within(20, keep_masked_jsonl, {"1": str(fifo), "2": str(deep)}, out, Redactor.for_run({}))
    kept = (out / "s2.jsonl").read_text().splitlines()
    assert len(kept) == 2 and "a1a1" not in kept[0] and not (out / "s1.jsonl").exists()
    assert _within(10, file_secrets, fifo) == []
    login = tmp_path / "auth.json"
    login.write_text('{"token": ' + "[" * DEEP + "]" * DEEP + "}")
    assert file_secrets(login) == []


def test_a_setting_of_more_bytes_than_there_are_loses_no_record(tmp_path: Path) -> None:
    """``max_content_bytes = 10**20`` passes the settings' check: each read asked the allocator for that many bytes
    (an OverflowError), and every command that read a file lost its record."""
    root = make_repo(tmp_path / "proj", {"a.py": "".join(f"a{i} = {i}\n" for i in range(30))})
    config = load_config(max_content_bytes=10**20)  # as [ledger.scanning] max_content_bytes = 10**20 says
    with LedgerRuntime(root, tmp_path / "run", config, task="t") as rt:
        rt.run("echo 'b = 2' >> a.py", LocalExecutor(timeout=30))
        time.sleep(0.01)
        rt.run("cat a.py", LocalExecutor(timeout=30))
        assert rt.faults == 0, (tmp_path / "run" / "faults.log").read_text()
        assert [m.path for m in rt.state.modifications_of(str(root / "a.py"))]
        assert rt.state.observations_of(str(root / "a.py"))
