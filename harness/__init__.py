"""The evaluation harness: replays of recorded runs (``ledger-run replay``), SWE-bench arms
(``ledger-run swebench``) and the tau2-bench gate (``ledger-run tau2-gate``). Built on the runtime
(``ledger_runtime``) and its adapters (``ledger_adapters``); neither imports it: its commands join
``ledger-run`` through the ``ledger_runtime.commands`` entry points."""
