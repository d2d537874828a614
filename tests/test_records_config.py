"""Records round-trip through their dict form; the config loads TOML and names bad keys."""

from __future__ import annotations

import pytest

from ledger_runtime.config import FLAT, SECTIONS, ConfigError, LedgerConfig, from_mapping, load_config
from ledger_runtime.config_file import toml_inline
from ledger_runtime.records import (
    Attempt,
    Baseline,
    CommandClass,
    LineSpan,
    Modification,
    Observation,
    Verdict,
    VerdictKind,
)


def test_attempt_round_trip_keeps_every_field():
    a = Attempt(
        id=3,
        step=2,
        command="cat a.py",
        normalized="cat a.py",
        cwd="/w",
        command_class=CommandClass.INSPECT,
        verdict=Verdict(
            VerdictKind.NUDGE,
            "same",
            ref_attempt=1,
            ref_step=1,
            rule="repeat-failure",
            evidence={"repeat-failure": {"step": 1}},
        ),
        executed=False,
        exit_code=0,
        output_hash="ab",
        output_chars=10,
        truncated=False,
        duration_s=0.5,
        read_set={"f:/w/a.py": "h"},
        read_set_stable=True,
        write_set=("/w/b",),
        epoch_before=1,
        epoch_after=1,
        env_epoch=0,
        pure=True,
        shown_chars=5,
        applied=False,
    )
    assert Attempt.from_dict(a.to_dict()) == a


def test_a_verdict_of_an_older_ledger_loads_without_the_keys_it_lost():
    # a REUSE as ledgers kept it before REUSE was made no more (issue 28 item 9), with its three dead keys
    old = {
        "evidence": None,
        "kind": "REUSE",
        "reason": "nothing changed",
        "ref_attempt": 1,
        "ref_step": 1,
        "form": "reference",
        "rule": None,
        "covered_by": [1],
        "estimated_chars": 40,
    }
    v = Verdict.from_dict(old)
    assert v == Verdict(VerdictKind.REUSE, "nothing changed", ref_attempt=1, ref_step=1)
    assert v.to_dict() == {k: old[k] for k in ("evidence", "kind", "reason", "ref_attempt", "ref_step", "rule")}


def test_observation_modification_baseline_round_trip():
    o = Observation("/w/a.py", "range", (LineSpan(1, 5), LineSpan(9, 9)), "h", 20, 4, 7)
    assert Observation.from_dict(o.to_dict()) == o
    assert o.span_text() == "1-5,9"
    m = Modification("/w/a.py", None, "h2", 3, 0, 5, 8, True, 3, 0, None)
    assert Modification.from_dict(m.to_dict()) == m and m.change == "created"
    b = Baseline("/w", True, "abc", "main", ("x.py",), 12, "d", task="fix it")
    assert Baseline.from_dict(b.to_dict()) == b


def test_line_span_rejects_nonsense():
    with pytest.raises(ValueError):
        LineSpan(0, 3)
    with pytest.raises(ValueError):
        LineSpan(5, 4)


def test_verdict_kinds_that_execute():
    assert VerdictKind.RUN.executes and VerdictKind.NUDGE.executes
    assert not any(k.executes for k in (VerdictKind.REUSE, VerdictKind.REVISE, VerdictKind.BLOCK))


def test_config_defaults_and_toml(tmp_path):
    assert LedgerConfig().view.budget_tokens == 1200
    f = tmp_path / "ledger.toml"
    f.write_text('[ledger]\ndedupe = "whole"\nview_budget_tokens = 600\n')
    c = load_config(f, shadow=True)
    assert (c.dedupe.mode, c.view.budget_tokens, c.shadow) == ("whole", 600, True)
    f.write_text("reuse_runs = true\n")
    with pytest.raises(ConfigError, match="reuse_runs was removed"):
        load_config(f)
    f.write_text("reuse_runs = false\nreuse_output = 'full'\n")  # an older file, with the option off
    assert load_config(f) == LedgerConfig()


def test_a_ledger_table_in_a_larger_file_is_read_alone(tmp_path):
    # the starter file's header promises it: [ledger] among other tools' settings
    f = tmp_path / "pyproject.toml"
    f.write_text('[project]\nname = "x"\n\n[ledger]\ninform = false\n\n[tool.other]\nkey = 1\n')
    assert load_config(f).inform is False
    f.write_text('[ledger]\ninform = "no"\n[tool.other]\nkey = 1\n')
    with pytest.raises(ConfigError, match="ledger.inform: expected true or false, got 'no'"):
        load_config(f)


@pytest.mark.parametrize(
    "text, needle",
    [
        ("dedup = 'full'\n", "unknown key 'dedup'"),
        ("view_budget_tokens = 'big'\n", "view_budget_tokens: expected an integer >= 1, got 'big'"),
        ("inform = 1\n", "inform: expected true or false, got 1"),
        ("dedupe = 'sometimes'\n", "dedupe: expected 'spans' or 'whole' or 'off', got 'sometimes'"),
        ("view_budget_tokens = 0\n", "view_budget_tokens: expected an integer >= 1, got 0"),
        ("[ledger.dedupe]\nmin_lines = 'abc'\n", "ledger.dedupe.min_lines: expected an integer >= 1, got 'abc'"),
        ("[dedupe]\nmin_line = 3\n", "unknown key 'dedupe.min_line' (known in [ledger.dedupe]: mode, min_lines"),
        ("[ledger.scanning]\nbudget_s = nan\n", "ledger.scanning.budget_s: expected a number > 0, got nan"),
        ("[ledger.context]\npolicy = 'recent'\n", "ledger.context.policy: context must be full, window:M"),
        ("[ledger.redaction]\npatterns = ['x*']\n", "ledger.redaction.patterns: 'x*' matches the empty string"),
        ("[ledger.policies.stale-edt]\n", "ledger.policies: unknown policy 'stale-edt'"),
        ("[ledger]\nview = 3\n", "ledger.view: expected a table ([ledger.view]), got 3"),
        ("this is not toml", "not valid TOML"),
    ],
)
def test_config_errors_name_the_problem(tmp_path, text, needle):
    f = tmp_path / "bad.toml"
    f.write_text(text)
    with pytest.raises(ConfigError) as e:
        load_config(f)
    assert needle in str(e.value) and "\n" not in str(e.value).strip()


def test_config_missing_file(tmp_path):
    with pytest.raises(ConfigError, match="config file not found"):
        load_config(tmp_path / "nope.toml")


def test_with_rejects_unknown_names():
    with pytest.raises(ConfigError, match="unknown key 'nope'"):
        LedgerConfig().with_(nope=1)


def test_a_replay_reports_the_settings_words():
    """The report's settings line quotes each setting as a file gives it, never an enum's repr."""
    from ledger_harness.replay.cli import provenance

    settings = provenance(LedgerConfig().with_(dedupe="whole"))["settings"]
    assert settings["dedupe"] == "whole" and type(settings["dedupe"]) is str
    assert "Dedupe" not in repr(settings)


def _another(value):
    """A value of a setting's kind other than its default (a file setting it changes something)."""
    if isinstance(value, bool):
        return not value
    if isinstance(value, (int, float)):
        return value + 3
    return {"spans": "whole", "full": "validity+window:4", (): ["ACME-[0-9]+"]}.get(value if value != [] else ())


FLAT_KEYS = sorted(FLAT)
NEW_VALUE = {flat: _another(value) for flat, value in LedgerConfig().to_dict().items() if flat != "policies"}
NEW_VALUE["policies"] = {"protected-paths": {"globs": ["tests/*"]}, "stale-edit": {"verdict": "REVISE"}}


def _sectioned(flat: str, value) -> str:
    section, key = FLAT[flat]
    if not section:
        return f"[ledger]\n{key} = {toml_inline(value)}\n"
    if SECTIONS[section].whole:
        return "".join(f"[ledger.{section}.{name}]\n{_lines(table)}" for name, table in value.items())
    return f"[ledger.{section}]\n{key} = {toml_inline(value)}\n"


def _lines(table: dict) -> str:
    return "".join(f"{k} = {toml_inline(v)}\n" for k, v in table.items())


@pytest.mark.parametrize("flat", FLAT_KEYS)
def test_each_flat_key_and_its_section_load_to_the_same_config(tmp_path, flat):
    """Today's flat files still load: ``dedupe_min_lines = 3`` and ``[ledger.dedupe] min_lines = 3``
    are one config, and not the default one."""
    value = NEW_VALUE[flat]
    assert value is not None, f"no other value for {flat}"
    flat_file, top_file, sectioned = tmp_path / "flat.toml", tmp_path / "top.toml", tmp_path / "sectioned.toml"
    flat_file.write_text(f"[ledger]\n{flat} = {toml_inline(value)}\n")
    top_file.write_text(f"{flat} = {toml_inline(value)}\n")  # no [ledger] table: the keys at the top
    sectioned.write_text(_sectioned(flat, value))
    got = load_config(sectioned)
    assert load_config(flat_file) == got == load_config(top_file) != LedgerConfig()
    assert got.to_dict()[flat] == value, "the record keeps the flat name"
    assert from_mapping(got.to_dict()) == got == from_mapping(got.sections()) == LedgerConfig().with_(**{flat: value})


def test_a_key_given_flat_and_in_its_section_must_agree(tmp_path):
    f = tmp_path / "both.toml"
    f.write_text("[ledger]\ndedupe_min_lines = 3\n[ledger.dedupe]\nmin_lines = 3\n")
    assert load_config(f).dedupe.min_lines == 3, "the same value twice is one setting"
    f.write_text("[ledger]\ndedupe_min_lines = 3\n[ledger.dedupe]\nmin_lines = 4\n")
    with pytest.raises(ConfigError) as e:
        load_config(f)
    line = str(e.value)
    assert "ledger.dedupe_min_lines = 3 and ledger.dedupe.min_lines = 4 set the same setting" in line
    assert "\n" not in line
    with pytest.raises(ConfigError, match="view_share = 0.5 and context.view_share = 1.0"):
        from_mapping({"view_share": 0.5, "context": {"view_share": 1.0}})


def test_defaults_of_an_adapter_and_overrides_apply_over_either_form(tmp_path):
    """An adapter's defaults (flat) are changed by a sectioned file, and ``with_`` overrides (the
    command line's) change a file's settings: different sources never conflict, the later wins."""
    f = tmp_path / "ledger.toml"
    f.write_text("[ledger.context]\nsteps = 5\n")
    assert load_config(f, defaults={"context_steps": 2}).context.steps == 5
    assert load_config(f, context_steps=7).context.steps == 7
    assert load_config(f, context="validity").context_policy.validity


def test_sections_check_themselves():
    from ledger_runtime.answers.build import DedupeSettings
    from ledger_runtime.section import SettingError

    with pytest.raises(SettingError, match=r"^ledger.dedupe.min_lines: expected an integer >= 1, got 0$"):
        DedupeSettings(min_lines=0)
    with pytest.raises(ConfigError, match=r"^config: dedupe.min_saving: expected an integer >= 0, got -1$"):
        LedgerConfig().with_(dedupe=DedupeSettings(min_saving=5)).with_(dedupe={"min_saving": -1})
    c = LedgerConfig().with_(dedupe=DedupeSettings(min_lines=4))
    assert c.dedupe == DedupeSettings(min_lines=4) and c.dedupe.mode == "spans"
    assert LedgerConfig().with_(dedupe={"min_lines": 4}) == c == LedgerConfig().with_(dedupe_min_lines=4)


def test_an_attempts_answer_is_a_typed_record_stored_as_the_same_json():
    from ledger_runtime.records import RUN, AnswerRecord

    stored = {
        "kind": "spans",
        "pieces": [["text", 0, 4, None, 0, 0], ["lines", 4, 30, 1, 2, 3]],
        "kept": [10, 20],
        "exact": False,
        "held_from": 3,
        "keys": ["c:/w\0cat a.py"],
        "altered": True,
        "held": False,
    }
    record = AnswerRecord.from_dict(stored)
    assert record.kind == "spans" and record.kept == (10, 20) and record.base_keys == ("c:/w\0cat a.py",)
    assert record.to_dict() == stored and dict(record) == stored and record["held_from"] == 3
    plain = AnswerRecord.from_dict(
        {"kind": "raw", "pieces": [], "kept": None, "exact": True, "held_from": 0, "keys": []}
    )
    assert "altered" not in plain.to_dict() and "held" not in plain.to_dict() and plain.held
    # an older ledger's answer: what it lacks takes its default, what this record does not know is kept
    old = AnswerRecord.from_dict({"kind": "whole", "pieces": [["same", 0, 9, 1, 0, 0]], "shape": 1})
    assert old.exact and old.first_held_step == 0 and old.to_dict()["shape"] == 1
    a = Attempt(
        1, 1, "cat a.py", "cat a.py", "/w", CommandClass.INSPECT, RUN, True, 0, "h", 5, False, 0.0, answer=stored
    )
    assert isinstance(a.answer, AnswerRecord) and Attempt.from_dict(a.to_dict()) == a
    assert a.to_dict()["answer"] == stored and a.answer_kind == "spans"
    # an empty or unreadable answer in a ledger says nothing: the attempt has no answer (its text as it was)
    for unreadable in ({}, "spans", [1, 2]):
        b = Attempt(
            1,
            1,
            "cat a.py",
            "cat a.py",
            "/w",
            CommandClass.INSPECT,
            RUN,
            True,
            0,
            "h",
            5,
            False,
            0.0,
            answer=unreadable,
        )
        assert b.answer is None and b.answer_kind == "raw"


def test_an_answer_record_is_true_without_building_its_stored_object():
    # the state view asks ``a.answer`` of every attempt it shows, on every render: a Mapping's truth is its
    # len, which built the stored object each time; it always has its keys, so it is true as len says
    import tracemalloc

    from ledger_runtime.records import AnswerRecord

    records = [AnswerRecord(), AnswerRecord.from_dict({"kind": "whole", "shape": 1}), AnswerRecord(agent="sub")]
    assert all(len(r) >= 6 for r in records)
    tracemalloc.start()
    try:
        truths = sum(bool(r) for r in records for _ in range(100))
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert truths == 300 and peak < 2048  # building the 300 objects peaked at 16 KiB here
