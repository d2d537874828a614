"""A replay never removes what it did not make (issue 37 item 1): a trajectory's ``instance_id`` is a
plain name wherever it goes (its result, its ledger directory), and a ledger directory is removed
only when an earlier replay left its mark in it."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from test_replay import mirror, settings, traj_file

from ledger_adapters.mini.trajectories import from_traj_json
from ledger_harness.replay.engine import RUN_MARK, Skip, instance_name, replay_one


def victim(path: Path) -> Path:
    """A directory of the user's own, with a file in it."""
    path.mkdir(parents=True)
    (path / "precious.txt").write_text("keep me\n")
    return path


_mirrors: dict[Path, tuple[Path, str]] = {}


def replay(tmp_path: Path, iid: str) -> dict:
    """One command of a trajectory whose id is ``iid`` replayed into ``tmp_path/out``."""
    if tmp_path not in _mirrors:
        _mirrors[tmp_path] = mirror(tmp_path)
    bare, commit = _mirrors[tmp_path]
    t = from_traj_json(traj_file(tmp_path / "t.traj.json", iid, ["cat calc.py"]))
    return replay_one(t, settings(tmp_path, bare, commit, iid))


@pytest.mark.parametrize("kind", ["absolute", "parent"])
def test_an_instance_id_that_names_a_directory_removes_nothing(tmp_path: Path, kind: str) -> None:
    mine = victim(tmp_path / "home" / "project")
    iid = str(mine) if kind == "absolute" else "../../home/project"
    res = replay(tmp_path, iid)
    assert res["instance_id"] == iid and res["commands"] == 1
    assert (mine / "precious.txt").read_text() == "keep me\n", "the directory the id names is untouched"
    ledgers = tmp_path / "out" / "ledgers"
    made = ledgers / instance_name(iid)
    assert [p.name for p in ledgers.iterdir()] == [made.name] and (made / "ledger.sqlite").is_file()
    assert (made / RUN_MARK).is_file()
    assert (tmp_path / "out" / f"{instance_name(iid)}.json").is_file()
    replay(tmp_path, iid)  # replayed again: its own ledger directory is replaced, nothing else
    assert (mine / "precious.txt").read_text() == "keep me\n"


def test_a_ledger_directory_a_replay_did_not_make_is_never_removed(tmp_path: Path) -> None:
    iid = "demo__calc-1"
    ledgers = tmp_path / "out" / "ledgers"
    ledgers.mkdir(parents=True)
    theirs = victim(ledgers / iid)  # someone's own directory where the ledger would go
    with pytest.raises(Skip, match="a replay did not make it") as e:
        replay(tmp_path, iid)
    assert "\n" not in str(e.value)
    assert (theirs / "precious.txt").read_text() == "keep me\n"
    theirs.rename(tmp_path / "moved")
    elsewhere = victim(tmp_path / "elsewhere")
    os.symlink(elsewhere, ledgers / iid)  # a link planted where the ledger goes
    with pytest.raises(Skip, match="symbolic link"):
        replay(tmp_path, iid)
    assert (elsewhere / "precious.txt").read_text() == "keep me\n" and (ledgers / iid).is_symlink()


def test_instance_names_are_plain() -> None:
    for iid in ["/home/you/project", "../../x", "..", ".", "", "a/b\\c", "a\nb\x00c", "x" * 400, "é" * 300]:
        name = instance_name(iid)
        assert name and "/" not in name and "\\" not in name and not name.startswith(".")
        assert all(ord(c) >= 32 for c in name) and len(name.encode()) <= 200
    assert instance_name("demo__calc-1") == "demo__calc-1"  # an ordinary id is its own name
    assert instance_name("x" * 400) != instance_name("x" * 399 + "y"), "long ids stay apart"
