"""Records round-trip through their dict form; the config loads TOML and names bad keys."""

from __future__ import annotations

import pytest

from ledger_runtime.config import ConfigError, LedgerConfig, load_config
from ledger_runtime.records import (
    Attempt,
    Baseline,
    CommandClass,
    LineSpan,
    Modification,
    Observation,
    ReuseForm,
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
            VerdictKind.REUSE,
            "same",
            ref_attempt=1,
            ref_step=1,
            form=ReuseForm.REFERENCE,
            covered_by=(1,),
            estimated_chars=40,
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
    assert (c.dedupe, c.view_budget_tokens, c.shadow) == ("whole", 600, True)
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
    with pytest.raises(ConfigError, match="'inform' must be bool"):
        load_config(f)


@pytest.mark.parametrize(
    "text, needle",
    [
        ("dedup = 'full'\n", "unknown key 'dedup'"),
        ("view_budget_tokens = 'big'\n", "'view_budget_tokens' must be int"),
        ("inform = 1\n", "'inform' must be bool"),
        ("dedupe = 'sometimes'\n", "dedupe must be"),
        ("view_budget_tokens = 0\n", "view_budget_tokens must be positive"),
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
    from ledger_runtime.cli.replay import provenance

    settings = provenance(LedgerConfig(dedupe="whole"))["settings"]
    assert settings["dedupe"] == "whole" and type(settings["dedupe"]) is str
    assert "Dedupe" not in repr(settings)
