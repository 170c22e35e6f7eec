#!/usr/bin/env bash
# The whole CPU run of the long-document benchmark, in two lanes of one thread each (a 2-core machine), in the order
# that gives the most important rows first. Every step skips a result that exists, so running a lane again continues
# where it stopped (a session's processes end with it):
#
#     bash research/long_documents/run_all.sh A > logs_A.txt 2>&1 &
#     bash research/long_documents/run_all.sh B > logs_B.txt 2>&1 &
#     # when both have ended (the cost needs a quiet machine: one process, the rows taking turns):
#     bash research/long_documents/run_all.sh cost
#     bash research/long_documents/run_all.sh gpu    # on a GPU machine: the cost as users train there
#
# The block rows (the chunked reader with a memory, issue 33), in two more lanes:
#
#     bash research/long_documents/run_all.sh blocks-A > logs_blocks_A.txt 2>&1 &
#     bash research/long_documents/run_all.sh blocks-B > logs_blocks_B.txt 2>&1 &
set -euo pipefail
cd "$(dirname "$0")"
export OMP_NUM_THREADS=1 MKL_NUM_THREADS=1 HF_HUB_OFFLINE=1

readers() {  # "<row>@mlm" for each row of $1, and "<row>@mlm-window-alone" for a hybrid unless $2 is @mlm (a memory
  # added to the chunks, <row>-then-<mechanism>, is one)
  for row in $1; do
    echo "$row@mlm"
    case "$row" in
      *-then-local*) ;;
      *-then-*) [ "${2:-}" = @mlm ] || echo "$row@mlm-window-alone" ;;
      local-*) ;;
      *-w*|*-b*) [ "${2:-}" = @mlm ] || echo "$row@mlm-window-alone" ;;
    esac
  done
}

pretrain_and_read() {  # the rows of $1 extended and pretrained straight away, then read: at 8,192, far and near words,
  # and at 2,048 (each result kept where it exists)
  python pretrain.py --rows $1 --stages extend mlm
  python represent.py --length 8192 --readers $(readers "$1")
  python long_range.py --readers $(readers "$1")
  python represent.py --readers $(readers "$1" @mlm)
}

[ -f data/probe_extra.jsonl ] || python build_corpus.py > /dev/null   # once: both lanes read it
# the MLM head every row starts from: models/ is not committed, so a new checkout trains it again (seeded)
[ -d models/minilm-mlm-512 ] || python pretrain.py --stages head --again
case "${1:-}" in
  A)
    python pretrain.py --rows sdpa --stages extend mlm
    python pretrain.py --stages mlm_512
    python represent.py --readers sdpa-512 sdpa-512-chunks sdpa-512-chunks@mlm sdpa@extend sdpa@mlm
    python long_range.py --readers sdpa-512 sdpa-512@mlm_512 sdpa@extend sdpa@mlm
    python pretrain.py --rows local-w128 local-w128-g1 --stages extend transfer mlm
    python long_range.py --readers local-w128@mlm local-w128-g1@mlm
    python represent.py --readers local-w128@mlm local-w128-g1@mlm
    alone="kerformer singularformer dba psf"
    python pretrain.py --rows $alone --stages extend transfer mlm
    python long_range.py --readers $(readers "$alone")
    python represent.py --readers $(readers "$alone")
    python represent.py --length 8192 --readers sdpa-512-chunks sdpa@mlm local-w128@mlm
    python represent.py --min_tokens 1024 --readers sdpa-512-chunks@mlm sdpa-512-chunks sdpa@mlm local-w128@mlm \
      sdpa-512 local-w128-g1@mlm sdpa@extend $(readers "$alone")
    ;;
  B)
    python pretrain.py --rows kerformer-w128 dba-w128 --stages extend transfer mlm
    python pretrain.py --rows singularformer-w128 psf-w128 --stages extend transfer mlm
    hybrids="kerformer-w128 dba-w128 singularformer-w128 psf-w128"
    python long_range.py --readers $(readers "$hybrids")
    # the levers: no window dropout, the window sweep (each window also alone), four times the transfer steps, and
    # the window in every other layer (Kerformer's and Singularformer's)
    levers="kerformer-w128-no-dropout kerformer-w256 local-w256 kerformer-w64 local-w64 kerformer-w128-transfer600
            kerformer-w128-every2 singularformer-w128-every2"
    python pretrain.py --rows $levers --stages extend transfer mlm
    python long_range.py --readers $(readers "$levers")
    python represent.py --readers $(readers "$hybrids") $(readers "$levers")
    python represent.py --length 8192 --readers $(readers "$hybrids" @mlm)
    python represent.py --min_tokens 1024 --readers $(readers "$hybrids")
    ;;
  blocks-A)
    python gate_start.py
    python pretrain.py --rows local-b512 kerformer-b512 singularformer-b512 --stages extend transfer mlm
    blocks="local-b512 kerformer-b512 singularformer-b512"
    python long_range.py --readers $(readers "$blocks")
    python pretrain.py --rows kerformer-b512-direct singularformer-b512-direct local-b512-plain --stages extend mlm
    python pretrain.py --rows local-b512-seed2 --stages extend mlm   # the chunks' run-to-run noise
    python long_range.py --readers local-b512-seed2@mlm
    python represent.py --readers $(readers "$blocks")
    python represent.py --length 8192 --readers $(readers "$blocks" @mlm)
    python kernel_memory.py   # after kerformer-b512-direct (lane blocks-B)
    ;;
  blocks-B)
    python pretrain.py --rows dba-b512 psf-b512 --stages extend transfer mlm
    blocks="dba-b512 psf-b512"
    python long_range.py --readers $(readers "$blocks")
    python pretrain.py --rows dba-b512-direct psf-b512-direct kerformer-b512-plain --stages extend transfer mlm
    direct="kerformer-b512-direct singularformer-b512-direct dba-b512-direct psf-b512-direct"
    python long_range.py --readers $(readers "$direct")
    python represent.py --readers $(readers "$blocks")
    python represent.py --length 8192 --readers $(readers "$blocks" @mlm)
    levers="kerformer-b512-direct-gate-lr0.1 singularformer-b512-direct-gate-lr0.1"
    python pretrain.py --rows $levers --stages extend mlm
    python long_range.py --readers $(readers "$levers")
    python represent.py --readers $(readers "$direct" @mlm) $(readers "$levers" @mlm)
    python represent.py --length 8192 --readers $(readers "$direct" @mlm)
    # the steps lever: 160 steps each, two seeds (the second's chunks are its control)
    longer="local-b512-mlm160 singularformer-b512-direct-gate-lr0.1-mlm160"
    longer="$longer local-b512-mlm160-seed2 singularformer-b512-direct-gate-lr0.1-mlm160-seed2"
    python pretrain.py --rows $longer --stages extend mlm
    python long_range.py --readers $(readers "$longer")
    python represent.py --readers $(readers "$longer" @mlm)
    python represent.py --length 8192 --readers local-b512-mlm160@mlm singularformer-b512-direct-gate-lr0.1-mlm160@mlm
    # the same lever for Kerformer and DBA (one seed: against local-b512-mlm160)
    longer="kerformer-b512-direct-gate-lr0.1-mlm160 dba-b512-direct-gate-lr0.1-mlm160"
    python pretrain.py --rows $longer --stages extend mlm
    python long_range.py --readers $(readers "$longer")
    python represent.py --readers $(readers "$longer" @mlm)
    python represent.py --length 8192 --readers $(readers "$longer" @mlm)
    # PSF at 160 steps, and Kerformer's second seed (against local-b512-mlm160-seed2)
    longer="psf-b512-direct-gate-lr0.1-mlm160 kerformer-b512-direct-gate-lr0.1-mlm160-seed2"
    python pretrain.py --rows $longer --stages extend mlm
    python long_range.py --readers $(readers "$longer")
    python represent.py --readers $(readers "$longer" @mlm)
    python represent.py --length 8192 --readers $(readers "$longer" @mlm)
    # retrieval at 8,192 with each memory off, and Kerformer's memory held at its pretraining's mass
    at160="kerformer-b512-direct-gate-lr0.1-mlm160 kerformer-b512-direct-gate-lr0.1-mlm160-seed2"
    at160="$at160 singularformer-b512-direct-gate-lr0.1-mlm160 dba-b512-direct-gate-lr0.1-mlm160"
    python represent.py --length 8192 --readers $(for row in $at160 psf-b512-direct-gate-lr0.1-mlm160; do
      echo "$row@mlm-window-alone"; done)
    python memory_mass.py --rows kerformer-b512-direct-gate-lr0.1-mlm160 kerformer-b512-direct-gate-lr0.1-mlm160-seed2
    # second seeds of PSF and DBA at 160 steps (against local-b512-mlm160-seed2)
    longer="psf-b512-direct-gate-lr0.1-mlm160-seed2 dba-b512-direct-gate-lr0.1-mlm160-seed2"
    python pretrain.py --rows $longer --stages extend mlm
    python long_range.py --readers $(readers "$longer")
    python represent.py --readers $(readers "$longer" @mlm)
    python represent.py --length 8192 --readers $(readers "$longer" @mlm)
    python represent.py --length 8192 --readers $(for row in $longer; do echo "$row@mlm-window-alone"; done)
    python kernel_memory.py --row kerformer-b512-direct-gate-lr0.1-mlm160   # at 160 steps
    # pretrained at the length they read (8,192, each step as many tokens): Kerformer's memory, whose weight grows
    # past its pretraining's length, and PSF's blocks, which lose passages at 8,192; against the chunks pretrained so
    # (a training at 8,192 holds about 13 GB for PSF, 10 for Kerformer, 9 for the chunks: on a 24 GB machine PSF's
    # beside Kerformer's, and Kerformer's beside the chunks' and a training at 2,048, were killed for memory and went
    # on from their checkpoints)
    at8192="local-b512-mlm160-at8192 kerformer-b512-direct-gate-lr0.1-mlm160-at8192"
    at8192="$at8192 psf-b512-direct-gate-lr0.1-mlm160-at8192"
    # and second seeds of the chunks and of Kerformer's block hybrid pretrained so
    at8192="$at8192 local-b512-mlm160-seed2-at8192 kerformer-b512-direct-gate-lr0.1-mlm160-seed2-at8192"
    pretrain_and_read "$at8192"
    python memory_mass.py --rows kerformer-b512-direct-gate-lr0.1-mlm160-at8192 \
        kerformer-b512-direct-gate-lr0.1-mlm160-seed2-at8192   # their memory's share, as pretrained
    # the chunks pretrained and read plain ([CLS]/[SEP] at the documents' ends only), against the framed ones
    pretrain_and_read local-b512-mlm160-plain
    # the mixed mechanisms pretrained at 8,192 too (against the chunks pretrained so)
    at8192="singularformer-b512-direct-gate-lr0.1-mlm160-at8192 dba-b512-direct-gate-lr0.1-mlm160-at8192"
    # and the chunks and Kerformer's pretrained at 8,192 on shuffled pieces of the documents (pieces.py): long blocks
    # drawn apart, against the 0.04-0.06 nats that one long block a step cost at 2,048
    at8192="$at8192 local-b512-mlm160-at8192-pieces2048 kerformer-b512-direct-gate-lr0.1-mlm160-at8192-pieces2048"
    pretrain_and_read "$at8192"
    # and their second seeds, on the same pieces; then the memory's share as pretrained on pieces
    seed2="local-b512-mlm160-seed2-at8192-pieces2048 kerformer-b512-direct-gate-lr0.1-mlm160-seed2-at8192-pieces2048"
    pretrain_and_read "$seed2"
    python memory_mass.py --rows kerformer-b512-direct-gate-lr0.1-mlm160-at8192-pieces2048 \
        kerformer-b512-direct-gate-lr0.1-mlm160-seed2-at8192-pieces2048
    # the mixed mechanisms on the same pieces (against the chunks pretrained on them), then their second seeds
    pretrain_and_read "singularformer-b512-direct-gate-lr0.1-mlm160-at8192-pieces2048
                       dba-b512-direct-gate-lr0.1-mlm160-at8192-pieces2048"
    pretrain_and_read "singularformer-b512-direct-gate-lr0.1-mlm160-seed2-at8192-pieces2048
                       dba-b512-direct-gate-lr0.1-mlm160-seed2-at8192-pieces2048"
    # PSF's memory on the same pieces, and Kerformer's normalised on its own, mixed by a gate as theirs are (both
    # seeds of each)
    pretrain_and_read psf-b512-direct-gate-lr0.1-mlm160-at8192-pieces2048
    pretrain_and_read "kerformer-b512-direct-gate-lr0.1-mlm160-at8192-pieces2048-gated
                       kerformer-b512-direct-gate-lr0.1-mlm160-seed2-at8192-pieces2048-gated"
    pretrain_and_read psf-b512-direct-gate-lr0.1-mlm160-seed2-at8192-pieces2048
    # Kerformer's gated memory pretrained at 2,048 too (both seeds, against the shared normaliser's rows there)
    pretrain_and_read "kerformer-b512-direct-gate-lr0.1-mlm160-gated kerformer-b512-direct-gate-lr0.1-mlm160-seed2-gated"
    # the chunks pretrained at 2,048 on the same pieces: whether the pieces or the length made their loss lower
    pretrain_and_read local-b512-mlm160-pieces2048
    # and the block hybrids on those pieces at 2,048, against them
    pretrain_and_read "kerformer-b512-direct-gate-lr0.1-mlm160-pieces2048-gated
                       singularformer-b512-direct-gate-lr0.1-mlm160-pieces2048"
    # and the second seeds of those three
    pretrain_and_read local-b512-mlm160-seed2-pieces2048
    pretrain_and_read "kerformer-b512-direct-gate-lr0.1-mlm160-seed2-pieces2048-gated
                       singularformer-b512-direct-gate-lr0.1-mlm160-seed2-pieces2048"
    # the piece size: the chunks on pieces of 512 (about five pieces in every block of 2,048, against two)
    pretrain_and_read local-b512-mlm160-pieces512
    # the chunks pretrained at their own length, 512 (both seeds); then a memory added to them, 80 steps more on pieces
    # at 2,048, against the chunks continued as many steps at 512 and on the same pieces
    at512="local-b512-mlm160-at512 local-b512-mlm160-seed2-at512"
    pretrain_and_read "$at512"
    for start in $at512; do
      pretrain_and_read "$start-then-local $start-then-kerformer-gated $start-then-singularformer-gated
                         $start-then-local-pieces2048"
    done
    # the steps lever after the chunks (160 steps more), from the chunks at 512 pretrained again on the head trained
    # again on 2026-11-29 (the row declares it: rows.AT_512_AGAIN)
    again=local-b512-mlm160-at512-rerun
    pretrain_and_read $again
    pretrain_and_read "$again-then-local-mlm160 $again-then-singularformer-gated-mlm160"
    pretrain_and_read "$again-then-dba-gated-mlm160 $again-then-psf-gated-mlm160"
    # and the length lever after the chunks: Kerformer's and Singularformer's memories at 8,192 on the same pieces
    pretrain_and_read "$again-then-kerformer-gated-mlm160-at8192 $again-then-singularformer-gated-mlm160-at8192"
    # and another continuation seed (4) of Kerformer's, with the chunks continued with it
    pretrain_and_read "$again-then-local-mlm160-seed4 $again-then-kerformer-gated-mlm160-seed4-at8192"
    # Singularformer's memory after the chunks at 4,096, and its second continuation seed at 2,048
    pretrain_and_read "$again-then-singularformer-gated-mlm160-at4096 $again-then-singularformer-gated-mlm160-seed4"
    # and DBA's and PSF's second continuation seeds at 2,048
    pretrain_and_read "$again-then-dba-gated-mlm160-seed4 $again-then-psf-gated-mlm160-seed4"
    # the gate's start after the chunks: Singularformer's memory starting at 0.01, both continuation seeds
    pretrain_and_read "$again-then-singularformer-gated-gate0.01-mlm160
                       $again-then-singularformer-gated-gate0.01-mlm160-seed4"
    # what PSF's kernels' bfloat16 storage does to the two PSF memories' loss
    python psf_bfloat16.py --rows $again-then-psf-gated-mlm160 $again-then-psf-gated-mlm160-seed4
    # the memories' own control at 160 steps: the chunks continued as blocks at 2,048 on the same pieces and batches
    pretrain_and_read "$again-then-local-pieces2048-mlm160 $again-then-local-pieces2048-mlm160-seed4"
    ;;
  cost)
    python cost.py --length 2048 --repeats 3
    python cost.py --length 2048 --repeats 3 --no_attention_dropout
    python cost.py --length 2048 --masked_lm --rows sdpa kerformer-w128 dba-w128 local-w128
    python cost.py --length 8192 --repeats 2 --no_attention_dropout
    python cost.py --length 8192 --repeats 5 --no_attention_dropout --blocks   # the block rows (issue 33)
    python cost.py --length 8192 --repeats 5 --no_attention_dropout --fast_paths --rows local-b512 psf-b512
    ;;
  gpu)
    rows="sdpa local-w128 local-w128-g1 singularformer kerformer dba psf singularformer-w128 kerformer-w128 dba-w128
          psf-w128 kerformer-w128-every2 singularformer-w128-every2"
    python cost.py --length 2048 --dtype bfloat16 --batch_size 8 --repeats 10 --rows $rows
    python cost.py --length 8192 --dtype bfloat16 --batch_size 2 --repeats 10 --rows $rows
    ;;
  *)
    echo "usage: run_all.sh A|B|blocks-A|blocks-B|cost|gpu" >&2
    exit 2
    ;;
esac
python tables.py > /dev/null
python block_tables.py > /dev/null
