"""``hf-effattn bench``: time and peak memory of the mechanisms against SDPA, alone and in an encoder layer.

For every mechanism and length it measures, on batches of random inputs ``[B, N, C]``:

* ``part = attention``: the mechanism alone (its projections and token mixing, before the output projection);
* ``part = layer``: one full post-LN encoder layer (``EffAttnRobertaLayer``) built around it;
* ``part = encoder``: a whole ``EffAttnRobertaModel`` of ``--num_layers`` layers (embeddings, no pooler) on token
  ids ``[B, N]`` and an all-ones attention mask; with ``--peers``, Transformers' own encoders beside it
  (:mod:`.peers`: RoBERTa with sdpa and eager, Nystromformer, BigBird, Longformer);

each in two modes: ``fwd`` (eval mode, no autograd) and ``fwd_bwd`` (train mode, forward and backward of the
output's mean plus the mechanism's auxiliary loss). Times are the median of ``--repeats`` calls after
``--warmup`` calls; the mechanisms of a part and length take turns, one call each per round (round-robin), so
that a busy stretch of a shared machine slows them alike. Peak memory is the most memory held at once during one
call, above what was held before it: on CUDA ``torch.cuda.max_memory_allocated`` after a reset; on CPU the
running sum of the allocations and frees that PyTorch's CPU allocator reports to ``torch.profiler``
(``profile_memory=True``).

The ``floor`` is the same layer without token mixing (``context = V``, only the value projection): what every
mechanism must pay anyway. It is local to the benchmark and not registered.

Each model is built for the length it runs (``max_length = N``, as the papers configure their models) unless
``--max_length`` fixes one for all. A length whose predicted time or memory (extrapolated from the shorter
lengths) exceeds ``--time_limit`` or ``--memory_limit_gb``, or that runs out of memory, is skipped with a
note, and so are the longer ones. No length runs unpredicted: the first one of a series is approached by
single unreported calls at 64, 128, ... tokens below it, each predicted from those before, and any length
whose input and output alone would pass the memory limit is refused from the shapes.

Writes ``results.csv``, ``results.md`` and ``results.png`` into ``--output_dir`` and prints, for each
mechanism, the length from which it beats ``sdpa`` and the log-log slope of its time over the longest lengths.

From Python, :func:`run_benchmark` takes the same settings as keyword arguments (see :class:`BenchmarkSettings`)
and returns the :class:`Row` s that the command prints, writes and plots; :func:`write_results` writes them::

    from hf_effattn.benchmark import run_benchmark, write_results
    rows = run_benchmark(attentions=["kerformer"], lengths=[256, 512], parts=["attention"], threads=1)
    slowest = max(rows, key=lambda row: row.fwd_bwd_ms or 0)
    write_results(rows, "bench_results")

The modules, one idea each:

* :mod:`.options`: :class:`BenchmarkSettings`, what is measured (the command's options), and its checks;
* :mod:`.subjects`: the measured modules (mechanism, layer, encoder, floor, peer) on their inputs, and their steps;
* :mod:`.peers`: Transformers' encoders timed beside ours (``--peers``);
* :mod:`.measuring`: wall time and peak memory of a call, several subjects timed in turns;
* :mod:`.guard`: lengths predicted from shorter ones (extrapolation, probes) and refused past the limits;
* :mod:`.runner`: :func:`run_benchmark`, every mechanism, part and length;
* :mod:`.rows`: :class:`Row`, one line of the results, and reading rows back;
* :mod:`.summary`: where each mechanism beats sdpa (and the peers), and how its time grows;
* :mod:`.tables`, :mod:`.plots`: ``results.csv`` and ``results.md``, ``results.png``;
* :mod:`.machine`: the machine's description in the results;
* :mod:`.results`: :func:`write_results`, the three files and the printed summaries.

Its command line, ``hf-effattn bench``, is :mod:`hf_effattn.commands.bench`.
"""

from .options import BenchmarkSettings
from .results import write_results
from .rows import Row
from .runner import run_benchmark
from .summary import Summary

__all__ = ["BenchmarkSettings", "Row", "Summary", "run_benchmark", "write_results"]
