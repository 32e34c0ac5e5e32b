#!/usr/bin/env bash
# The README's test command: the whole suite, in ./.venv. pytest's exit 5 (no test collected) fails. The log ends
# with the 25 slowest tests (setup, call and teardown apart), which is where CI's time goes.
# Then, where the vLLM CPU venv exists (bash tools/install.sh --vllm; .ci/run builds it), the tests that run real
# vLLM (marked vllm; skipped in ./.venv) run there, where a missing vLLM fails instead of skipping. Given arguments,
# only pytest in ./.venv runs, with them.
set -uo pipefail
cd "$(dirname "$0")/.."
. .venv/bin/activate
python -m pytest -q --durations=25 "$@"
rc=$?
if [ "$rc" -eq 5 ]; then
  echo "pytest collected no tests: failing on purpose" >&2
  exit 1
fi
if [ "$#" -eq 0 ]; then
  if [ -x .venv-vllm/bin/python ]; then
    PROVER_REQUIRE_VLLM=1 .venv-vllm/bin/python -m pytest -q -m vllm --durations=10
    vrc=$?
    if [ "$vrc" -eq 5 ]; then
      echo "pytest collected no vllm tests in .venv-vllm: failing on purpose" >&2
      exit 1
    fi
    [ "$rc" -ne 0 ] || rc=$vrc
  else
    echo "the tests marked vllm were skipped: no .venv-vllm (bash tools/install.sh --vllm builds it)" >&2
  fi
fi
exit "$rc"
