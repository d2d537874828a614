"""The history mini-swe-agent's model is sent under the run's context policy (ledger_runtime/context.py).

The agent's messages are never changed: ``sent_history`` returns a copy in which the outputs the
policy leaves out are a stub (or their kept lines). An output is a message whose ``extra`` names
the ledger's attempt (LedgerEnvironment puts it there; mini-swe-agent copies an output's ``extra``
into its message).
"""

from __future__ import annotations

from ledger_runtime import KEEP, ContextPolicy, LedgerRuntime, Said, Sticky, stub_text, to_send


def attempt_of(message: dict) -> int | None:
    """The ledger attempt a history message is the output of, if any."""
    ledger = (message.get("extra") or {}).get("ledger") if isinstance(message, dict) else None
    attempt = ledger.get("attempt") if isinstance(ledger, dict) else None
    return attempt if isinstance(attempt, int) and not isinstance(attempt, bool) else None


def text_of(message: dict) -> str:
    c = message.get("content")
    if isinstance(c, list):
        return "".join(p.get("text", "") for p in c if isinstance(p, dict))
    return c if isinstance(c, str) else ""


def sent_history(messages: list[dict], runtime: LedgerRuntime, policy: ContextPolicy, sticky: Sticky) -> list[dict]:
    """A copy of ``messages`` as the policy sends them (the same list when nothing is left out)."""
    outputs = [(k, m) for k, m in enumerate(messages) if attempt_of(m) is not None]
    if policy.full or not outputs:
        return messages
    texts = [text_of(m) for m in messages]
    saids: list[Said] = []
    for n, (k, m) in enumerate(outputs):
        size = len(texts[k])
        said = runtime.said(attempt_of(m), n, size)
        saids.append(said or Said(n, None, "", "", None, False, (), (), size))
    sent = to_send(saids, policy, runtime.still_true, sticky, texts, [k for k, _ in outputs])
    out = list(messages)
    for (k, m), s, t in zip(outputs, saids, sent):
        if t.kind != KEEP and isinstance(m.get("content"), str):
            out[k] = {**m, "content": stub_text(s, t, texts[k].count("\n") + 1)}
    return out
