#!/usr/bin/env bash
# The README's test command: the whole suite, in ./.venv. pytest's exit 5 (no test collected) fails.
set -uo pipefail
cd "$(dirname "$0")/.."
. .venv/bin/activate
python -m pytest -q "$@"
rc=$?
if [ "$rc" -eq 5 ]; then
  echo "pytest collected no tests: failing on purpose" >&2
  exit 1
fi
exit "$rc"
