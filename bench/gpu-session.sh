#!/usr/bin/env bash
# The GPU session in a few prepared device calls (issue 32): on a bare GPU machine (no Node,
# no network; python3 with PyTorch and its CUDA 13 libraries), install what
# bench/gpu-session-pack.sh packed here, then measure and check, writing everything under $OUT.
#
#   bash bench/gpu-session-pack.sh          here, first: builds .gpu-session/call-1 … call-N
#                                           (git-ignored; each fits one 64 MiB call beside the
#                                           working tree) and prints the calls below
#   run(carry=[".gpu-session/call-K"], command="bash bench/gpu-session.sh stash")     K < N
#   run(carry=[".gpu-session/call-N"], command="bash bench/gpu-session.sh setup profile blocking", timeout_s=590)
#   run(command="bash bench/gpu-session.sh checks tests decode", timeout_s=540)
#
# Budget (15 minutes of device time, start-up included): the machine's start 1–2 min, four
# stash calls of some 20 s, setup ~1 min, profile (the training step: 6 Hindsight rows, two of
# them with the optimizer on the host, and PyTorch's, the 0.6B model written first) ~4 min,
# blocking ~1 min, checks and tests ~2 min on an H200 by the 2026-11-26 session's timings, decode
# ~2 min (estimated: six processes, each loading the 0.6B model): some 13 minutes, so little room
# to rerun a call. Where a call must be rerun, leave out `blocking` (the least needed) and run
# `decode` only if time is left.
#
# Files a call carried and /tmp stay on the machine while it is warm (30 s after a call, so
# make the calls back to back), which is how the parts add up. The stages, in the order given:
#   stash     keeps this call's parts in /tmp/hindsight-gpu/ (GPU_SESSION_WORK) and says which are there
#   setup     stash; with every part there: node and node_modules (a link in place of the
#             folder), the Vulkan loader if the machine has none, the CUDA provider through
#             `setup:gpu --from FOLDER` and its `--check` (both as scripts/setup-gpu.mjs: there
#             is no npm there)                                              → $OUT/setup.txt
#   profile   bench:gpu with BENCH_PROFILE=1 on cuda and webgpu in fp32 and fp16 beside PyTorch
#             CUDA: each row's table line and where its last timed repetition went
#             (bench/ort-profile.ts); the CUDA rows' traces  → $OUT/profile.txt, profiles.tar.xz
#   timing    the profile stage's rows without the profiler: the figures to quote (not in the
#             calls above; add it where time is left)                        → $OUT/timing.txt
#   blocking  the same for the CUDA training step alone with CUDA_LAUNCH_BLOCKING=1, so each
#             node's time is its kernels' GPU time  → $OUT/blocking.txt, blocking-profiles.tar.xz
#   checks    the CLI checks issue 32 lists: `generate --device cuda` (fp32, fp16; webgpu fp32)
#             against the demo model's golden story, their log-probs against the CPU's (and
#             with TF32 allowed), `train` on the demo data: the first step's loss and gradient
#             norm on cuda and webgpu against the CPU's; the GPU as the memory check reads it
#             (src-main/model/gpu-memory.ts, about a second) and the CUDA runs' `memory:`
#             lines, the estimate to set beside nvidia-smi's figures          → $OUT/checks.txt
#   tests     test/model/device-gpu.test.ts, precision.test.ts, test/api/app-words.test.ts,
#             chunk-decode.test.ts, webgpu-fusions.test.ts (WebGPU's fused graphs against the
#             CPU's), device-kv-cache.test.ts (bench/gpu-session.vitest.config.ts: no renderer build)
#                                                                          → $OUT/tests.txt
#   decode    bench:gpu's greedy decode on CUDA fp32 after prompts of 32 and 2,048 tokens, in
#             chunks (the default) and token by token, beside PyTorch: what sending the host
#             cache once a chunk instead of once a token gains                → $OUT/decode.txt
#   fusions   bench/fusions.ts on WebGPU: decoding with fused norms, RoPE and attention (each
#             alone, and all three) beside standard ops, the demo model, a small random Qwen3
#             and bench:gpu's 0.6B model (written by the profile stage); not in the calls
#             above, add it where time is left                               → $OUT/fusions.txt
# Each stage runs under a timeout of its own (GPU_SESSION_STAGE_S, 400 s), so one that hangs
# leaves the others their time. bench:gpu's BENCH_* settings pass through; the defaults here:
# the training step alone (GPU_SESSION_PARTS=train; add score or generate where time allows),
# BENCH_REPEATS=2, no CPU rows (BENCH_CPU_PARTS=none: the CPU's step is 11.6 s at 16 threads).
# Without a GPU (a test of this script), the CUDA rows and checks fail in one line each and the
# WebGPU ones run wherever Vulkan has an adapter (Mesa's lavapipe on a CPU).
set -uo pipefail
cd "$(dirname "$0")/.."
W=${GPU_SESSION_WORK:-/tmp/hindsight-gpu}
OUT=${OUT:-$W/out}
STAGE_S=${GPU_SESSION_STAGE_S:-400}
mkdir -p "$W/parts" "$OUT"
say() { echo "gpu-session: $*"; }

stash() {
  for d in .gpu-session/call-*; do
    [ -d "$d" ] && cp -n "$d"/payload.tar.part* "$d"/MANIFEST "$W/parts/" 2>/dev/null
  done
  have=$(ls "$W"/parts/payload.tar.part* 2>/dev/null | wc -l)
  need=$(sed -n 's/^parts=//p' "$W/parts/MANIFEST" 2>/dev/null)
  say "parts on this machine: $have of ${need:-?} ($(du -sh "$W/parts" | cut -f1))"
  missing=""
  for k in $(seq 1 "${need:-0}"); do
    [ -f "$W/parts/payload.tar.part$(printf %02d $((k - 1)))" ] || missing="$missing .gpu-session/call-$k"
  done
  # A machine given back between calls (30 s idle) starts bare: the earlier parts are gone.
  [ -z "$missing" ] || say "still to carry:$missing"
  nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader 2>/dev/null || say "no nvidia-smi: no NVIDIA GPU here"
  if [ "$have" = 1 ]; then # the first call: what the machine has, while the other parts travel
    python3 -c 'import sys, torch; print("gpu-session: python", sys.version.split()[0], "torch", torch.__version__, "cuda", torch.cuda.is_available())' 2>&1 | tail -1
    say "Vulkan loader: $(ldconfig -p 2>/dev/null | grep -c 'libvulkan.so.1 ') found; free disk in /tmp: $(df -h /tmp | awk 'NR==2 {print $4}')"
  fi
}

unpack() {
  [ -x "$W/node/nodebin/node" ] && [ -f "$W/provider/libonnxruntime_providers_cuda.so" ] && return 0
  [ -n "${need:-}" ] && [ -z "$missing" ] || { say "parts missing:${missing:- all} (a machine given back between calls loses them; bash bench/gpu-session-pack.sh lists the calls)"; return 1; }
  say "assembling and unpacking the payload…"
  want=$(sed -n 's/^sha256=//p' "$W/parts/MANIFEST")
  rm -rf "$W/payload" && mkdir -p "$W/payload"
  cat "$W"/parts/payload.tar.part* > "$W/payload.tar"
  got=$(sha256sum "$W/payload.tar" | cut -d' ' -f1)
  [ "$got" = "$want" ] || { say "the payload's sha256 is $got, not $want: a part is damaged or from another pack"; return 1; }
  tar -xf "$W/payload.tar" -C "$W/payload" && rm -f "$W/payload.tar"
  # Python's lzma: the machine may have no xz.
  python3 - "$W" <<'EOF' || return 1
import lzma, os, shutil, sys, tarfile
w = sys.argv[1]
tarfile.open(os.path.join(w, 'payload/node.tar.xz')).extractall(os.path.join(w, 'node'))
shutil.copytree(os.path.join(w, 'payload/provider'), os.path.join(w, 'provider'), dirs_exist_ok=True)
xz = os.path.join(w, 'provider/libonnxruntime_providers_cuda.so.xz')
with lzma.open(xz) as src, open(xz[:-3], 'wb') as dst:
    shutil.copyfileobj(src, dst, 1 << 20)
os.remove(xz)
EOF
  rm -f "$W/payload/node.tar.xz"
}

setup() {
  stash
  unpack || return 1
  if [ -e node_modules ] && [ ! -L node_modules ]; then
    say "node_modules is a folder here: this script replaces it with a link to the bundle's, so run it on the GPU machine or in a copy"; return 1
  fi
  ln -sfn "$W/node/node_modules" node_modules
  export PATH="$W/node/nodebin:$PATH"
  say "node $(node --version)"
  if ! ldconfig -p 2>/dev/null | grep -q 'libvulkan.so.1 '; then
    say "no Vulkan loader: unpacking Debian's (WebGPU needs it)"
    for f in "$W"/payload/gl/*.deb; do dpkg -x "$f" /; done
    ldconfig
  fi
  local icd=/usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json
  node scripts/setup-gpu.mjs --from "$W/provider" 2>&1
  # setup:gpu prints the LD_LIBRARY_PATH line to run when the loader does not find CUDA's libraries.
  local ld
  ld=$(node scripts/setup-gpu.mjs --check 2>&1 | tee /dev/stderr | sed -n 's/.*run: \(export LD_LIBRARY_PATH=.*\)$/\1/p' | head -1)
  {
    echo "export PATH='$W/node/nodebin':\"\$PATH\""
    echo "export HINDSIGHT_GRAPH_CACHE='$W/graph-cache'"
    [ -f "$icd" ] && echo "export VK_DRIVER_FILES=$icd"
    [ -n "$ld" ] && echo "$ld"
  } > "$W/env.sh"
  if [ -n "$ld" ]; then
    # shellcheck disable=SC1091
    . "$W/env.sh"
    node scripts/setup-gpu.mjs --check 2>&1
  fi
  say "environment for the next stages ($W/env.sh):"; cat "$W/env.sh"
}

ready() {
  [ -f "$W/env.sh" ] || { say "run the setup stage first"; return 1; }
  # shellcheck disable=SC1091
  . "$W/env.sh"
}

# bench:gpu; $1: where its output goes, the rest: VAR=value settings.
bench() {
  local out=$1; shift
  env BENCH_PRECISIONS="${BENCH_PRECISIONS:-fp32,fp16}" BENCH_NEW_TOKENS="${BENCH_NEW_TOKENS:-32}" "$@" \
    timeout "$STAGE_S" node node_modules/tsx/dist/cli.mjs bench/gpu.ts 2>&1 | grep -v 'artificially reduced' | tee "$out"
}

# The CUDA training rows' traces, for reading at leisure (a file the device tool brings back: ≤ 16 MiB).
keep_traces() {
  local archive=$1
  (cd bench/output && ls -d gpu-profile/train-cuda-* >/dev/null 2>&1 && tar -cJf "$archive" gpu-profile/train-cuda-*) || return 0
  if [ "$(stat -c %s "$archive")" -gt $((15 * 1024 * 1024)) ]; then rm -f "$archive"; say "the training rows' traces are over 15 MiB compressed: left in bench/output/gpu-profile/"; fi
}

# The rows of the profile and timing stages.
rows() {
  bench "$@" BENCH_DEVICES="${BENCH_DEVICES:-cuda,webgpu}" BENCH_PARTS="${GPU_SESSION_PARTS:-train}" \
    BENCH_CPU_PARTS="${BENCH_CPU_PARTS:-none}" BENCH_REPEATS="${BENCH_REPEATS:-2}"
}

profile() {
  ready || return 1
  rows "$OUT/profile.txt" BENCH_PROFILE=1
  keep_traces "$OUT/profiles.tar.xz"
}

timing() {
  ready || return 1
  rows "$OUT/timing.txt" BENCH_PROFILE=0
}

blocking() {
  ready || return 1
  local STAGE_S=${GPU_SESSION_BLOCKING_S:-150} # two rows; it shares its call with setup and profile
  bench "$OUT/blocking.txt" BENCH_PROFILE=1 CUDA_LAUNCH_BLOCKING=1 BENCH_DEVICES=cuda BENCH_PARTS=train BENCH_CPU_PARTS=none BENCH_TORCH_DEVICE=none BENCH_REPEATS=1
  keep_traces "$OUT/blocking-profiles.tar.xz"
}

checks() {
  ready || return 1
  local H="node bin/hindsight.mjs" S=resources/models/stories260K T=$W/checks
  rm -rf "$T" && mkdir -p "$T"
  # The golden story: 195 greedy tokens after the 5-token prompt, as the reference has them.
  for d in "cpu fp32" "cuda fp32" "cuda fp16" "webgpu fp32" "cuda-tf32 fp32"; do
    set -- $d
    local device=${1%-tf32} env=()
    [ "$1" = cuda-tf32 ] && env=(NVIDIA_TF32_OVERRIDE=1)
    env ${env[@]+"${env[@]}"} timeout 120 $H generate --model $S --prompt 'Once upon a time' --no-chat-template --max-new-tokens 195 \
      --device "$device" --precision "$2" --json > "$T/g-$1-$2.json" 2> "$T/g-$1-$2.err" || say "generate on $1 $2: $(tail -1 "$T/g-$1-$2.err")"
  done
  node - "$T" "$S" <<'EOF'
const fs = require('fs'), [dir, model] = process.argv.slice(2);
const ref = JSON.parse(fs.readFileSync(`${model}/reference_greedy.json`, 'utf8')).bos_greedy_200_ids.slice(5);
const read = (f) => { try { return JSON.parse(fs.readFileSync(`${dir}/${f}`, 'utf8')); } catch { return undefined; } };
const cpu = read('g-cpu-fp32.json');
for (const run of ['cpu-fp32', 'cuda-fp32', 'cuda-fp16', 'webgpu-fp32', 'cuda-tf32-fp32']) {
  const g = read(`g-${run}.json`);
  if (!g) { console.log(`GOLDEN ${run}: no reply`); continue; }
  const n = Math.min(g.tokens.length, ref.length), same = g.tokens.slice(0, n).filter((t, i) => t === ref[i]).length;
  let worst = 0;
  if (cpu) for (let i = 0; i < Math.min(g.logprobs.length, cpu.logprobs.length); i++) worst = Math.max(worst, Math.abs(g.logprobs[i] - cpu.logprobs[i]));
  console.log(`GOLDEN ${run} (ran on ${g.execution_provider} ${g.precision}): ${same}/${n} tokens as the reference; log-probs within ${worst.toExponential(2)} of the CPU's`);
}
EOF
  # The GPU as the memory check reads it (nvidia-smi for CUDA's device 0; null: not read).
  say "GPU for the memory check: $(timeout 30 node node_modules/tsx/dist/cli.mjs -e "import('./src-main/model/gpu-memory.ts').then(async (m) => console.log(JSON.stringify(await m.gpuMemory())))" 2>&1 | tail -1)"
  # The first training step on the demo data: loss and gradient norm against the CPU's.
  timeout 120 $H demo --db "$T/demo.db" > "$T/demo.log" 2>&1 || say "demo: $(tail -1 "$T/demo.log")"
  for d in "cpu fp32" "cuda fp32" "cuda fp16" "webgpu fp32"; do
    set -- $d
    timeout 180 $H train --model $S --db "$T/demo.db" --out "$T/t-$1-$2" --method combine --steps 2 --device "$1" --precision "$2" > "$T/t-$1-$2.log" 2>&1
    say "train on $1 $2: $(tail -1 "$T/t-$1-$2.log")"
  done
  grep -H '^memory:' "$T"/t-cuda-*.log
  node - "$T" <<'EOF'
const fs = require('fs'), dir = process.argv[2];
const stepOf = (run, step) => { try { return fs.readFileSync(`${dir}/t-${run}/trainer_log.jsonl`, 'utf8').split('\n').filter(Boolean).map(JSON.parse).find((l) => l.step === step && l.loss !== undefined); } catch { return undefined; } };
const first = (run) => stepOf(run, 1);
const c = first('cpu-fp32');
for (const run of ['cuda-fp32', 'cuda-fp16', 'webgpu-fp32']) {
  const g = first(run);
  if (!c || !g) { console.log(`TRAIN ${run}: no first step (${c ? 'this device' : 'the CPU'})`); continue; }
  const dLoss = Math.abs(g.loss - c.loss), dNorm = Math.abs(g.grad_norm - c.grad_norm) / c.grad_norm;
  const verdict = run.endsWith('fp32') ? (dLoss <= 1e-5 && dNorm <= 1e-4 ? 'within issue 32\'s 1e-5 / 1e-4' : 'OUTSIDE issue 32\'s 1e-5 / 1e-4') : 'fp16: no bound';
  console.log(`TRAIN ${run} on ${g.execution_provider}: loss ${g.loss} vs ${c.loss} (|Δ| ${dLoss.toExponential(2)}), gradient norm ${g.grad_norm} vs ${c.grad_norm} (relative ${dNorm.toExponential(2)}): ${verdict}`);
  // The second step's loss follows the first update (in the graph on a GPU, on the host on the CPU).
  const c2 = stepOf('cpu-fp32', 2), g2 = stepOf(run, 2);
  if (c2 && g2) console.log(`TRAIN ${run} step 2 (after the first update): loss ${g2.loss} vs ${c2.loss} (|Δ| ${Math.abs(g2.loss - c2.loss).toExponential(2)})`);
}
EOF
}

tests() {
  ready || return 1
  timeout "$STAGE_S" node node_modules/vitest/vitest.mjs run --config bench/gpu-session.vitest.config.ts \
    test/model/device-gpu.test.ts test/model/precision.test.ts test/api/app-words.test.ts test/model/chunk-decode.test.ts \
    test/model/webgpu-fusions.test.ts test/model/device-kv-cache.test.ts 2>&1 | grep -v 'artificially reduced'
}

decode() {
  ready || return 1
  local STAGE_S=${GPU_SESSION_DECODE_S:-240}
  bench "$OUT/decode.txt" BENCH_DEVICES=cuda BENCH_PRECISIONS=fp32 BENCH_PARTS=generate BENCH_PROMPT_LENS=32,2048 \
    BENCH_CPU_PARTS=none BENCH_REPEATS=2 BENCH_NEW_TOKENS=64
}

fusions() {
  ready || return 1
  BENCH_DEVICE=webgpu BENCH_NEW_TOKENS=32 BENCH_REPEATS=${BENCH_REPEATS:-3} BENCH_MODEL=bench/output/qwen3-0.6b \
    timeout "$STAGE_S" node node_modules/tsx/dist/cli.mjs bench/fusions.ts 2>&1 | grep -v 'artificially reduced' | tee "$OUT/fusions.txt"
}

[ $# -gt 0 ] || { sed -n '2,/^set -uo/p' "$0"; exit 2; }
status=0
for stage in "$@"; do
  case $stage in
    stash) stash ;;
    setup) setup 2>&1 | tee "$OUT/setup.txt"; [ "${PIPESTATUS[0]}" = 0 ] || status=1 ;;
    profile) profile || status=1 ;;
    timing) timing || status=1 ;;
    blocking) blocking || status=1 ;;
    checks) checks 2>&1 | tee "$OUT/checks.txt" ;;
    tests) tests | tee "$OUT/tests.txt" ;;
    decode) decode || status=1 ;;
    fusions) fusions || status=1 ;;
    *) say "unknown stage '$stage' (stash, setup, profile, timing, blocking, checks, tests, decode, fusions)"; exit 2 ;;
  esac
done
ls -la "$OUT"
exit $status
