#!/usr/bin/env bash
# The README's test command: the whole suite, in ./.venv. pytest's exit 5 (no test collected) fails. The log ends
# with the 25 slowest tests (setup, call and teardown apart), which is where CI's time goes.
set -uo pipefail
cd "$(dirname "$0")/.."
. .venv/bin/activate
python -m pytest -q --durations=25 "$@"
rc=$?
if [ "$rc" -eq 5 ]; then
  echo "pytest collected no tests: failing on purpose" >&2
  exit 1
fi
exit "$rc"
