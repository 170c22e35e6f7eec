#!/usr/bin/env bash
# One GPU session of issue 34: the device lane (tests/cuda), then `hf-effattn bench` as users train, on one
# H100/H200 with PyTorch, Triton and Transformers installed and no network. Run from the repository root:
#
#     OUT=/some/folder bash benchmarks/gpu/run_gpu_checks.sh    # OUT defaults to ./gpu_checks
#     STAGES="train long" bash benchmarks/gpu/run_gpu_checks.sh  # some stages (default: all six, in this order:
#                                                                # lane-exact lane-fast train train-exact long
#                                                                # compiled)
#     LIMIT_lane_fast=500 STAGES=lane-fast bash ...              # a stage's limit in seconds, raised
#     DRY_RUN=1 bash benchmarks/gpu/run_gpu_checks.sh            # the same stages on a CPU at tiny sizes, to try
#                                                                # the script (one compiled row: Inductor's C++ is
#                                                                # slow to compile on a CPU)
#     LANE_ONLY=blocks COMPILED_AT=16384 STAGES="lane-exact blocks blocks-compiled profile" bash ...
#                                                                # issue 33's session: the block hybrids' lane, their
#                                                                # table eager, compiled at 16,384 tokens, and where
#                                                                # their steps' time goes (stages 5-7: 500 s at most)
#     STAGES="psf-kernels psf-tiles psf-kernels-bench" bash ... # PSF's Triton kernels: tested, their tiles timed
#                                                                # (and the bench on the best), then the kernels
#                                                                # timed in the bench on their own tiles (stage 8)
#
# pytest is the lane's one need beyond PyTorch and Transformers. Where the machine lacks it, carry its wheels:
#     pip download --no-deps --only-binary :all: -d benchmarks/gpu/wheels pytest pluggy iniconfig pygments \
#         exceptiongroup tomli    # benchmarks/gpu/wheels/ is git-ignored; installed here with --no-index
#
# Under $OUT, each stage's files as soon as it ends (none in a subfolder):
#   run_gpu_checks.log   the machine, everything printed, each stage's start, end, seconds and status, each bench's
#                        main tables, the summary
#   lane-exact.xml, lane-fast.xml   the lane's JUnit reports (every test, its time, each failure's message)
#   train.tar.gz, train-exact.tar.gz, long.tar.gz, compiled.tar.gz, blocks.tar.gz, blocks-compiled-<N>.tar.gz
#                        each bench's results.csv, .md and .png
#   profile.md           benchmarks/gpu/profile_steps.py's report (stage profile)
#   lane-psf-kernels.xml, psf-tiles.md, psf-best-tiles.tar.gz, psf-kernels.tar.gz   PSF's kernels: the lane's
#                        fast-path tests of PSF, each tile's time (benchmarks/gpu/chord_kernel_tiles.py), the bench's
#                        table on the best tiles and on chord_kernels.py's own
#
# Time (each stage is interrupted at its limit, pytest then still reporting what ran, and the next stage runs; the
# defaults add up to 520 s, within one 600 s command): install 20 s. lane-exact (the exact paths against the float64
# references on the CPU; 105 s on a 2-core CPU) limit 70 s. lane-fast (the fast paths): each mechanism's fast path
# compiles once per dtype, mask (or none) and shape, some 180 graphs at a few seconds each, so it needs several
# minutes: limit 110 s, the rest in a command of its own (LIMIT_lane_fast=540 STAGES=lane-fast). train (19 rows x 3
# lengths, with the fast paths, each series predicted from probes at 64-1,024 tokens first, the fast paths compiled
# per row and shape) limit 150 s. train-exact (the blocks and the mechanisms alone on the exact paths at the longest
# length) limit 50 s. long (5 rows at 65,536 tokens) limit 40 s. compiled (2 models at 16,384 tokens, ~40 s of
# compiling each as the issue measured, beside the same rows eager) limit 100 s.
set -o pipefail
export PYTHONUNBUFFERED=1 HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 TOKENIZERS_PARALLELISM=false
cd "$(dirname "$0")/../.."
OUT="${OUT:-$PWD/gpu_checks}"
mkdir -p "$OUT"
LOG="$OUT/run_gpu_checks.log"
BENCH="$(mktemp -d)"
SUMMARY=()
STAGES="${STAGES:-lane-exact lane-fast train train-exact long compiled}"

log() { echo "[$(date +%H:%M:%S)] $*" | tee -a "$LOG"; }

# stage NAME LIMIT_S COMMAND...: where STAGES names it, runs COMMAND with its output in the log, interrupted
# (SIGINT: pytest then still writes its summary and report) after LIMIT_S seconds (or $LIMIT_<name>, "-" as "_"),
# killed 20 s later; a failure is logged and the next stage runs.
stage() {
    local name="$1" limit="$2" start status override
    shift 2
    [[ " $STAGES " == *" $name "* ]] || return 0
    override="LIMIT_${name//-/_}"
    limit="${!override:-$limit}"
    log "== $name: $* (limit ${limit} s)"
    start=$SECONDS
    timeout -s INT -k 20 "$limit" "$@" 2>&1 | tee -a "$LOG"
    status=$?
    [ "$status" -eq 124 ] && log "== $name: interrupted at its limit of ${limit} s"
    log "== $name: exit status $status after $((SECONDS - start)) s"
    SUMMARY+=("$name: exit status $status, $((SECONDS - start)) s")
}

# keep NAME: a bench stage's folder as $OUT/NAME.tar.gz, and its training-step times, times over the chunked
# reader's and compile times in the log.
keep() {
    [ -f "$BENCH/$1/results.md" ] || return 0
    tar -czf "$OUT/$1.tar.gz" -C "$BENCH" "$1"
    awk '/^(forward\+backward time|time over the chunked|compile time)/ {show = 1} show && /^$/ && table {show = 0;
         table = 0; print} show {print; if (/^\|/) table = 1}' "$BENCH/$1/results.md" | tee -a "$LOG"
}

if [ "${DRY_RUN:-0}" = 1 ]; then
    DEVICE=cpu
    SIZES=(--hidden_size 32 --num_heads 2 --intermediate_size 64 --num_layers 1 --dtype float32 --threads 2)
    TOKENS=1024; LENGTHS=(128 256 512); LONG=1024; COMPILED_LENGTH=512; COMPILED=(kerformer); BLOCK=64
    BLOCK_LENGTHS=(512 256); BLOCK_COMPILED=(kerformer+b64); COMPILED_AT="${COMPILED_AT:-512}"
    LANE_ONLY="${LANE_ONLY:-kerformer and holes}"  # a -k expression that each lane stage's own is narrowed by
    PSF_KERNELS=exact  # no CUDA: PSF's kernels run only in the tests (Triton's interpreter)
else
    DEVICE=cuda
    # The issue's setting: BERT-base width, 4 layers, bfloat16.
    SIZES=(--hidden_size 768 --num_heads 12 --intermediate_size 3072 --num_layers 4 --dtype bfloat16)
    TOKENS=16384; LENGTHS=(2048 8192 16384); LONG=65536; COMPILED_LENGTH=16384
    COMPILED=(kerformer peer:roberta-chunks512); BLOCK=512
    BLOCK_LENGTHS=(16384 8192)
    COMPILED_AT="${COMPILED_AT:-16384 8192}"  # the lengths of stage 6, one compiled stage each
    BLOCK_COMPILED=(singularformer+b512 kerformer+b512 dba+b512 local+b512 peer:roberta-chunks512)
    LANE_ONLY="${LANE_ONLY:-}"
    PSF_KERNELS=fast
fi
# Whole encoders, the training step alone (forward and backward), median of 5 after 2 warm-ups.
BENCH_COMMAND=(python3 -m hf_effattn.commands.main bench --device "$DEVICE" --parts encoder "${SIZES[@]}"
               --fwd_bwd_only --warmup 2 --repeats 5)

{
    nvidia-smi
    python3 --version
    python3 -c "import torch, transformers; print('torch', torch.__version__, 'cuda', torch.version.cuda, \
'transformers', transformers.__version__)"
    python3 -c "import triton; print('triton', triton.__version__)"
} 2>&1 | tee -a "$LOG"

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
    stage lane-exact 70 "${LANE_COMMAND[@]}" --junitxml="$OUT/lane-exact.xml" -k "not fast$narrowed"
    stage lane-fast 110 "${LANE_COMMAND[@]}" --junitxml="$OUT/lane-fast.xml" -k "fast$narrowed"
else
    log "pytest is not installed: the lane is skipped (carry its wheels: see the top of this script)"
    SUMMARY+=("lane: skipped, no pytest")
fi

# 2. The issue's table, eager (with the fast paths, the default on CUDA): 16,384 tokens a step, the four seeds'
#    mechanisms alone, beside a 128-token window and beside aligned blocks of 512 (issue 33's block hybrids), the
#    window alone (local+w128), the blocks alone (local+b512: the chunked reader in this package's code), sdpa (ours
#    and Transformers' RoBERTa), the floor and Transformers' RoBERTa reading 512-token chunks.
stage train 150 "${BENCH_COMMAND[@]}" --tokens_per_step "$TOKENS" --lengths "${LENGTHS[@]}" \
    --attentions singularformer kerformer dba psf local --local_window 128 --local_block "$BLOCK" \
    --peers roberta-sdpa roberta-chunks512 --output_dir "$BENCH/train"
keep train

# 2b. The same rows beside blocks and alone on the exact paths at the longest length: what the fast paths buy.
stage train-exact 50 env HF_EFFATTN_FAST_PATHS=exact "${BENCH_COMMAND[@]}" --tokens_per_step "$TOKENS" \
    --lengths "${LENGTHS[-1]}" --attentions singularformer kerformer dba psf local --local_block "$BLOCK" \
    --output_dir "$BENCH/train-exact"
keep train-exact

# 3. One sequence of 65,536 tokens a step: the three fast mechanisms against sdpa (target: 10x faster), eager.
stage long 40 "${BENCH_COMMAND[@]}" --batch_size 1 --lengths "$LONG" --attentions singularformer kerformer dba \
    --output_dir "$BENCH/long"
keep long

# 4. Compiled against compiled at 16,384 tokens, beside the same rows eager: the chunked reader and the three
#    mechanisms whose target is 1.1x its step. (PSF, the hybrids and the window: eager above; each compiled model
#    costs about 40 s.)
stage compiled 100 "${BENCH_COMMAND[@]}" --tokens_per_step "$TOKENS" --lengths "$COMPILED_LENGTH" \
    --attentions singularformer kerformer dba --peers roberta-chunks512 --compile "${COMPILED[@]}" \
    --output_dir "$BENCH/compiled"
keep compiled

# 5. Issue 33's table: each mechanism beside aligned blocks of 512 (the chunks with a memory) against the chunked
#    reader (Transformers' RoBERTa reading 512-token chunks, and the blocks alone), eager, at 8,192 and 16,384 tokens
#    a step of 16,384.
stage blocks 150 "${BENCH_COMMAND[@]}" --tokens_per_step "$TOKENS" --lengths "${BLOCK_LENGTHS[@]}" \
    --attentions singularformer kerformer dba psf local --local_block "$BLOCK" --peers roberta-chunks512 \
    --output_dir "$BENCH/blocks"
keep blocks

# 6. The same compiled against compiled (PSF's model takes minutes to compile: eager above), one length a stage
#    ($COMPILED_AT), each compiled model 10-60 s.
for length in $COMPILED_AT; do
    stage blocks-compiled 220 "${BENCH_COMMAND[@]}" --tokens_per_step "$TOKENS" --lengths "$length" \
        --attentions singularformer kerformer dba local --local_block "$BLOCK" --peers roberta-chunks512 \
        --compile "${BLOCK_COMPILED[@]}" --output_dir "$BENCH/blocks-compiled-$length"
    keep "blocks-compiled-$length"
done

# 7. Where the block hybrids' steps spend their time, eager (torch.profiler), at the longest length.
stage profile 50 python3 benchmarks/gpu/profile_steps.py --rows peer:roberta-chunks512 local+b$BLOCK \
    kerformer+b$BLOCK singularformer+b$BLOCK dba+b$BLOCK --length "${BLOCK_LENGTHS[0]}" --tokens_per_step "$TOKENS" \
    --device "$DEVICE" "${SIZES[@]}" --output "$OUT/profile.md"

# 8. PSF's own kernels (modeling/chord_kernels.py, its fast path): their tests and the lane's fast-path tests of PSF on
#    the GPU; each kernel's tiles timed on one factor of bfloat16 values (CUDA only; the tiles chord_kernels.py uses
#    were chosen so, on float32 values), then PSF beside blocks of 512 on the best of them (psf-best-tiles); then PSF
#    alone and beside blocks of 512 on the tiles chord_kernels.py sets, against the chunked reader, eager (issue 33:
#    at most 2x).
PSF_BENCH=("${BENCH_COMMAND[@]:4}" --tokens_per_step "$TOKENS" --lengths "${BLOCK_LENGTHS[@]}" --attentions psf
           --local_block "$BLOCK" --peers roberta-chunks512)
stage psf-kernels 200 bash -c "python3 -m pytest -q -p no:cacheprovider tests/mechanisms/test_chord_kernels.py \
    && ${LANE_COMMAND[*]} --junitxml=$OUT/lane-psf-kernels.xml -k 'fast and psf'"
if [ "$DEVICE" = cuda ]; then
    stage psf-tiles 180 env HF_EFFATTN_FAST_PATHS="$PSF_KERNELS" python3 benchmarks/gpu/chord_kernel_tiles.py \
        --output "$OUT/psf-tiles.md" --bench "${PSF_BENCH[@]}" --output_dir "$BENCH/psf-best-tiles"
    keep psf-best-tiles
elif [[ " $STAGES " == *" psf-tiles "* ]]; then
    log "== psf-tiles: skipped, it times Triton's kernels and needs CUDA"
    SUMMARY+=("psf-tiles: skipped (no CUDA)")
fi
stage psf-kernels-bench 120 env HF_EFFATTN_FAST_PATHS="$PSF_KERNELS" "${BENCH_COMMAND[@]:0:4}" "${PSF_BENCH[@]}" \
    --output_dir "$BENCH/psf-kernels"
keep psf-kernels

log "== summary"
for line in "${SUMMARY[@]}"; do log "$line"; done
