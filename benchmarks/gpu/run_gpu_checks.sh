#!/usr/bin/env bash
# One GPU session of issue 34: the device lane (tests/cuda), then `hf-effattn bench` as users train, on one
# H100/H200 with PyTorch, Triton and Transformers installed and no network. Run from the repository root:
#
#     OUT=/some/folder bash benchmarks/gpu/run_gpu_checks.sh    # OUT defaults to ./gpu_checks
#     STAGES="lane-exact lane-fast" bash benchmarks/gpu/run_gpu_checks.sh   # some stages (default: all five)
#     DRY_RUN=1 bash benchmarks/gpu/run_gpu_checks.sh            # the same stages on a CPU at tiny sizes, to try
#                                                                  # the script (one compiled row: Inductor's C++ is
#                                                                  # slow to compile on a CPU)
#
# pytest is the lane's one need beyond PyTorch and Transformers. Where the machine lacks it, carry its wheels:
#     pip download --no-deps --only-binary :all: -d benchmarks/gpu/wheels pytest pluggy iniconfig pygments \
#         exceptiongroup tomli    # benchmarks/gpu/wheels/ is git-ignored; installed here with --no-index
#
# It writes at most 8 files, none in a subfolder, under $OUT:
#   run_gpu_checks.log  everything printed, each stage's start, end, seconds and status, the summary
#   environment.txt     nvidia-smi, python, torch, triton, transformers
#   lane-exact.xml, lane-fast.xml   the lane's JUnit reports (every test, its time, each failure's message)
#   train.md, long.md, compiled.md   each bench stage's results.md
#   bench.tar.gz        the bench stages' folders (results.csv, results.md, results.png)
#
# Time on an H200 (estimates: compiling, which dominates, was not measured here; each stage is cut at its limit,
# pytest still reporting what ran, and the next stage runs): install 20 s; lane-exact (336 tests on the exact paths,
# the float64 references on the CPU) 40-70 s, cut at 90 s; lane-fast (504 tests on the fast paths: each mechanism's
# fast path compiles once per dtype, mask or none, and model shape, some 140 graphs of a few seconds each) 100-300
# s, cut at 150 s; train (14 rows x 3 lengths, eager, each length predicted from probes at 64-1,024 tokens first,
# the fast paths compiled per row) 70-100 s, cut at 110 s; long (5 rows at 65,536 tokens, eager) 30-45 s, cut at
# 50 s; compiled (4 models at 16,384 tokens, ~40 s of compiling each as the issue measured, beside the same rows
# eager) 150-170 s, cut at 170 s. 6-9 minutes in all, 9.8 at worst: within one 600 s command, or two
# (STAGES="lane-exact lane-fast", then STAGES="train long compiled").
set -o pipefail
export PYTHONUNBUFFERED=1 HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 TOKENIZERS_PARALLELISM=false
cd "$(dirname "$0")/../.."
OUT="${OUT:-$PWD/gpu_checks}"
mkdir -p "$OUT"
LOG="$OUT/run_gpu_checks.log"
BENCH="$(mktemp -d)"
SUMMARY=()
STAGES="${STAGES:-lane-exact lane-fast train long compiled}"

log() { echo "[$(date +%H:%M:%S)] $*" | tee -a "$LOG"; }

# stage NAME LIMIT_S COMMAND...: runs COMMAND with its output in the log, interrupted (SIGINT: pytest then still
# writes its summary and report) after LIMIT_S seconds, killed 20 s later; a failure is logged and the next stage
# runs.
stage() {
    local name="$1" limit="$2" start status
    shift 2
    [[ " $STAGES " == *" $name "* ]] || return 0
    log "== $name: $* (limit ${limit} s)"
    start=$SECONDS
    timeout -s INT -k 20 "$limit" "$@" 2>&1 | tee -a "$LOG"
    status=$?
    [ "$status" -eq 124 ] && log "== $name: cut at its limit of ${limit} s"
    log "== $name: exit status $status after $((SECONDS - start)) s"
    SUMMARY+=("$name: exit status $status, $((SECONDS - start)) s")
}

if [ "${DRY_RUN:-0}" = 1 ]; then
    DEVICE=cpu
    SIZES=(--hidden_size 32 --num_heads 2 --intermediate_size 64 --num_layers 1 --dtype float32 --threads 2)
    TOKENS=1024; LENGTHS=(128 256 512); LONG=1024; COMPILED_LENGTH=512; COMPILED=(kerformer)
    LANE_ONLY="kerformer and holes"  # a -k expression that each lane stage's own is narrowed by
else
    DEVICE=cuda
    # The issue's setting: BERT-base width, 4 layers, bfloat16.
    SIZES=(--hidden_size 768 --num_heads 12 --intermediate_size 3072 --num_layers 4 --dtype bfloat16)
    TOKENS=16384; LENGTHS=(2048 8192 16384); LONG=65536; COMPILED_LENGTH=16384
    COMPILED=(singularformer kerformer dba peer:roberta-chunks512)
    LANE_ONLY=""
fi
# Whole encoders, the training step alone (forward and backward), median of 5 after 2 warm-ups.
BENCH_COMMAND=(python3 -m hf_effattn.commands.main bench --device "$DEVICE" --parts encoder "${SIZES[@]}"
               --fwd_bwd_only --warmup 2 --repeats 5)

{
    nvidia-smi 2>&1
    python3 --version 2>&1
    python3 -c "import torch, transformers; print('torch', torch.__version__, 'cuda', torch.version.cuda, \
'transformers', transformers.__version__)" 2>&1
    python3 -c "import triton; print('triton', triton.__version__)" 2>&1
} > "$OUT/environment.txt"
cat "$OUT/environment.txt" | tee -a "$LOG"

# The package: an editable install without dependencies (setup.cfg maps modeling/ to hf_effattn.modeling at
# install time); where that cannot build offline, the same layout assembled in a folder on PYTHONPATH.
install_package() {
    if python3 -m pip install --no-deps --no-build-isolation -e . >> "$LOG" 2>&1; then
        return 0
    fi
    log "the editable install failed; hf_effattn assembled on PYTHONPATH instead"
    local site
    site="$(mktemp -d)"
    cp -r hf_effattn "$site/hf_effattn" && cp -r modeling "$site/hf_effattn/modeling" \
        && cp -r model_cards "$site/hf_effattn/model_cards" || return 1
    export PYTHONPATH="$site${PYTHONPATH:+:$PYTHONPATH}"
}
install_package
python3 -c "import hf_effattn.modeling.fast_paths, hf_effattn.benchmark" 2>&1 | tee -a "$LOG" \
    && log "hf_effattn imports" || log "hf_effattn does not import: the stages below will fail"
if ! python3 -c "import pytest" 2>/dev/null && ls benchmarks/gpu/wheels/*.whl > /dev/null 2>&1; then
    python3 -m pip install --no-deps --no-index benchmarks/gpu/wheels/*.whl >> "$LOG" 2>&1
fi

# 1. The device lane: every mechanism and model against the float64 references, on the exact paths, then on the
#    fast paths (and fast against exact). -v: each test's result in the log as it ends, should the stage be cut.
LANE_COMMAND=(python3 -m pytest -v -ra --tb=short -p no:cacheprovider --durations=15 --maxfail=200 tests/cuda
              --device "$DEVICE")
if python3 -c "import pytest" 2>/dev/null; then
    narrowed="${LANE_ONLY:+ and ($LANE_ONLY)}"
    stage lane-exact 90 "${LANE_COMMAND[@]}" --junitxml="$OUT/lane-exact.xml" -k "not fast$narrowed"
    stage lane-fast 150 "${LANE_COMMAND[@]}" --junitxml="$OUT/lane-fast.xml" -k "fast$narrowed"
else
    log "pytest is not installed: the lane is skipped (carry its wheels: see the top of this script)"
    SUMMARY+=("lane: skipped, no pytest")
fi

# 2. The issue's table, eager: 16,384 tokens a step, the four seeds' mechanisms alone and beside a 128-token window,
#    the window alone (local+w128), sdpa (ours and Transformers' RoBERTa), the floor and the chunked reader.
stage train 110 "${BENCH_COMMAND[@]}" --tokens_per_step "$TOKENS" --lengths "${LENGTHS[@]}" \
    --attentions singularformer kerformer dba psf local --local_window 128 --peers roberta-sdpa roberta-chunks512 \
    --output_dir "$BENCH/train"

# 3. One sequence of 65,536 tokens a step: the three fast mechanisms against sdpa (target: 10x faster), eager.
stage long 50 "${BENCH_COMMAND[@]}" --batch_size 1 --lengths "$LONG" --attentions singularformer kerformer dba \
    --output_dir "$BENCH/long"

# 4. Compiled against compiled at 16,384 tokens, beside the same rows eager: the chunked reader and the three
#    mechanisms whose target is 1.1x its step. (PSF, the hybrids and the window: eager above; each compiled model
#    costs about 40 s.)
stage compiled 170 "${BENCH_COMMAND[@]}" --tokens_per_step "$TOKENS" --lengths "$COMPILED_LENGTH" \
    --attentions singularformer kerformer dba --peers roberta-chunks512 --compile "${COMPILED[@]}" \
    --output_dir "$BENCH/compiled"

for name in train long compiled; do
    [ -f "$BENCH/$name/results.md" ] && cp "$BENCH/$name/results.md" "$OUT/$name.md"
done
tar -czf "$OUT/bench.tar.gz" -C "$BENCH" . 2>> "$LOG"

log "== summary"
for line in "${SUMMARY[@]}"; do log "$line"; done
# Each bench's training-step times and times over the chunked reader's, for the reply's tail.
for name in train long compiled; do
    [ -f "$OUT/$name.md" ] || continue
    log "== $name.md"
    awk '/^(forward\+backward time|time over the chunked|compile time)/ {show = 1} show && /^$/ && table {show = 0;
         table = 0} show {print; if (/^\|/) table = 1}' "$OUT/$name.md" | tee -a "$LOG"
done
