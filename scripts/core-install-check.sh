#!/usr/bin/env bash
# The base install (no extra), as a Codex or Claude Code user has it: in a fresh virtualenv,
# `pip install -e .` alone; the core's commands work (help, config, codex, claude, inspect and its
# page of a ledger made by the core itself), `mini` and `demo` name their extra in one line and exit 2.
# Prints the install's size. CI runs it (.ci/run); a failure names what failed.
set -euo pipefail
cd "$(dirname "$0")/.."
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
python3 -m venv "$work/core"
"$work/core/bin/pip" install -q -e . >"$work/pip.log" 2>&1 || { cat "$work/pip.log"; exit 1; }
run() { "$work/core/bin/ledger-run" "$@"; }
fail() { echo "core install: $*" >&2; exit 1; }

"$work/core/bin/python" -c "import minisweagent" 2>/dev/null && fail "mini-swe-agent is in the base install"
for args in "--help" "config" "codex --help" "claude --help" "inspect --help" "replay --help"; do
    # shellcheck disable=SC2086
    run $args >/dev/null 2>"$work/err" || { cat "$work/err"; fail "ledger-run $args failed"; }
done
# the hook client compiled at first use into a cache (the Python one where it cannot be: required by CI)
client=$(LEDGER_HOOK_CACHE="$work/hook-cache" "$work/core/bin/python" -m ledger_runtime.hooks.compiled)
case "$client" in
    compiled:*) ;;
    *) [ -z "${LEDGER_REQUIRE_COMPILED_HOOKS:-}" ] || fail "no compiled hook client: $client" ;;
esac
# a ledger made by the core alone, read back by inspect (text, JSON, the page)
mkdir -p "$work/repo"
git -C "$work/repo" init -q && printf 'x = 1\n' >"$work/repo/a.py"
"$work/core/bin/python" - "$work/repo" "$work/run" <<'PY'
import sys
from ledger_runtime import LedgerConfig, LedgerRuntime, LocalExecutor
with LedgerRuntime(sys.argv[1], sys.argv[2], LedgerConfig(), task="look") as rt:
    for cmd in ("cat a.py", "cat a.py", "sed -i 's/1/2/' a.py"):
        rt.run(cmd, LocalExecutor(timeout=30))
PY
run inspect "$work/run" >/dev/null || fail "inspect of a ledger failed"
run inspect "$work/run" --json >/dev/null || fail "inspect --json failed"
run inspect "$work/run" --html "$work/run.html" >/dev/null || fail "inspect --html failed"
for args in "mini -t x -w $work/repo" "demo"; do
    # shellcheck disable=SC2086
    if run $args >"$work/out" 2>&1; then fail "ledger-run $args ran without mini-swe-agent"; fi
    errors=$(grep -c '^error:' "$work/out" || true)
    [ "$errors" = 1 ] && grep -q "pip install 'ledger-runtime\[mini\]'" "$work/out" && ! grep -q Traceback "$work/out" \
        || { cat "$work/out"; fail "ledger-run $args did not name the [mini] extra in one line"; }
done
packages=$("$work/core/bin/pip" list --format=freeze 2>/dev/null | grep -vc '^pip=')
size=$(du -sm "$work/core" | cut -f1)
echo "core install: ok ($packages packages, $size MB; hook client: ${client%%:*})"
