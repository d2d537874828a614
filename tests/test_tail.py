"""The reader of a log an agent appends to (``appended_lines``): what a refresh costs."""

from __future__ import annotations

import tracemalloc

from ledger_runtime import appended_lines


def test_a_refresh_allocates_what_was_appended_not_its_limit(tmp_path):
    # the rollout and the transcripts are refreshed on every hook event: a read of the whole limit
    # (64 MiB) allocated that much each time, for the few lines appended since
    log = tmp_path / "rollout.jsonl"
    log.write_bytes(b'{"type": "event_msg"}\n' * 10 + b'{"type": "respo')
    tracemalloc.start()
    try:
        lines, offset = appended_lines(str(log), 0)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert lines == [b'{"type": "event_msg"}'] * 10 and offset == 220  # the last line, still being written, waits
    assert peak < 64 * 1024
