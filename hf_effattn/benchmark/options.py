"""What ``hf-effattn bench`` measures: :class:`BenchmarkSettings` (the command line's options, with the same names
and defaults), its checks, and the names of the parts, modes, dtypes, the baseline and the floor."""

from __future__ import annotations

from dataclasses import dataclass, field

import torch

from ..modeling.attentions import list_attentions
from .peers import PEERS

FLOOR = "floor"
BASELINE = "sdpa"
PARTS = ("attention", "layer", "encoder")
MODES = ("fwd", "fwd_bwd")
DTYPES = {"float32": torch.float32, "bfloat16": torch.bfloat16, "float16": torch.float16}


def default_device() -> str:
    return "cuda" if torch.cuda.is_available() else "cpu"


@dataclass
class BenchmarkSettings:
    """What :func:`run_benchmark` measures; the command line's options have the same names and defaults.

    ``attentions``: mechanisms (None: all registered; ``sdpa`` and the floor are always added). ``local_window``:
    also time each of them that takes a window beside an exact window of this many tokens, named
    ``<name>+w<local_window>``; ``local_block``: likewise beside aligned blocks of this many tokens, named
    ``<name>+b<local_block>`` (``local+b512``: the chunked reader in this package's code; see :func:`windowed`).
    ``lengths``: the
    N to run. ``parts``: among ``"attention"``, ``"layer"``, ``"encoder"``. ``batch_size`` (None: 1) sequences a
    call, or ``tokens_per_step``: ``tokens_per_step // N`` sequences at each length N (at least 1), as users train
    with a fixed number of tokens a step. ``intermediate_size`` None: 4 x hidden.
    ``num_layers``: layers of the whole encoder (part ``encoder``). ``peers``: Transformers' encoders timed beside
    ours in part ``encoder`` (True: all of :data:`~.peers.PEERS`, or a list of their keys). ``compile``: also time
    rows compiled with ``torch.compile``, in the same turns, as ``<row>@compiled`` (True: every row, or a list of
    row names), the compilation timed apart (``compile_s``). ``fwd_bwd_only``: time forward and backward only, not
    the forward alone. ``max_length`` None: each model built for the length it runs. ``repeats``: timed calls
    (median reported) after ``warmup`` untimed ones. ``time_limit`` (s) and ``memory_limit_gb`` (None: half the
    free memory): skip a length predicted to exceed them. ``fit_points``: longest lengths of the growth exponent.
    ``threads``: torch CPU threads (None: torch's choice)."""

    attentions: list[str] | None = None
    local_window: int | None = None
    local_block: int | None = None
    lengths: list[int] = field(default_factory=lambda: [256, 512, 1024, 2048, 4096, 8192])
    parts: list[str] = field(default_factory=lambda: list(PARTS))
    batch_size: int | None = None
    tokens_per_step: int | None = None
    hidden_size: int = 768
    num_heads: int = 12
    intermediate_size: int | None = None
    num_layers: int = 2
    peers: bool | list[str] = False
    compile: bool | list[str] = False
    fwd_bwd_only: bool = False
    max_length: int | None = None
    device: str = field(default_factory=default_device)
    dtype: str = "float32"
    repeats: int = 5
    warmup: int = 1
    time_limit: float = 60.0
    memory_limit_gb: float | None = None
    fit_points: int = 3
    threads: int | None = None
    seed: int = 0

    def check(self) -> None:
        """Raise ``ValueError`` naming a setting that cannot be run and how to fix it."""
        if not self.lengths or min(self.lengths) < 1:
            raise ValueError(f"lengths={self.lengths}: give one or more lengths of at least 1 (--lengths).")
        for name, minimum in AT_LEAST.items():
            value = getattr(self, name)
            if value is not None and value < minimum:
                raise ValueError(f"{name}={value}: it must be at least {minimum} (--{name}).")
        if self.hidden_size % self.num_heads:
            raise ValueError(f"hidden_size={self.hidden_size} is not a multiple of num_heads={self.num_heads}: "
                             "change one of them.")
        if self.time_limit <= 0 or (self.memory_limit_gb is not None and self.memory_limit_gb <= 0):
            raise ValueError(f"time_limit={self.time_limit:g} and memory_limit_gb={self.memory_limit_gb} must be "
                             "positive (leave --memory_limit_gb out for half the free memory).")
        unknown = sorted(set(self.attentions or []) - set(list_attentions()))
        if unknown:
            raise ValueError(f"Unknown attention(s) {', '.join(unknown)}: choose from {', '.join(list_attentions())}.")
        if not set(self.parts) <= set(PARTS) or self.dtype not in DTYPES:
            raise ValueError(f"parts={self.parts} dtype={self.dtype!r}: parts must be among {PARTS}, dtype one of "
                             f"{', '.join(DTYPES)}.")
        unknown_peers = sorted(set(self.peers) - set(PEERS)) if isinstance(self.peers, list) else []
        if unknown_peers:
            raise ValueError(f"Unknown peer(s) {', '.join(unknown_peers)}: choose from {', '.join(PEERS)}.")
        if self.peers and "encoder" not in self.parts:
            raise ValueError(f"parts={self.parts}: the peers are whole encoders, add 'encoder' to the parts.")
        if self.local_window is not None and not 2 <= self.local_window <= min(self.lengths):
            raise ValueError(f"local_window={self.local_window}: it must be at least 2 and at most the shortest "
                             f"length {min(self.lengths)} (--local_window, --lengths).")
        if self.local_block is not None and not 1 <= self.local_block <= min(self.lengths):
            raise ValueError(f"local_block={self.local_block}: it must be at least 1 and at most the shortest "
                             f"length {min(self.lengths)} (--local_block, --lengths).")
        if self.max_length and self.max_length < max(self.lengths):
            raise ValueError(f"max_length={self.max_length} is shorter than the longest length {max(self.lengths)}: "
                             "raise it or leave it None.")
        if self.batch_size and self.tokens_per_step:
            raise ValueError(f"batch_size={self.batch_size} and tokens_per_step={self.tokens_per_step}: give one of "
                             "them (--batch_size or --tokens_per_step).")

    def batch_at(self, length: int) -> int:
        """The sequences of a call at ``length``: ``tokens_per_step // length`` (at least 1), else ``batch_size``."""
        if self.tokens_per_step:
            return max(1, self.tokens_per_step // length)
        return self.batch_size or 1

    def batch_description(self) -> str:
        """``Batch 1``, or ``16,384 tokens a step (batch = 16384 // N, at least 1: 8 at N=2048, ...)``."""
        if not self.tokens_per_step:
            return f"Batch {self.batch_size or 1}"
        batches = ", ".join(f"{self.batch_at(n)} at N={n}" for n in sorted(self.lengths))
        return f"{self.tokens_per_step:,} tokens a step (batch = {self.tokens_per_step} // N, at least 1: {batches})"

    def modes(self) -> tuple[str, ...]:
        """The modes timed: ``fwd_bwd`` alone, or both."""
        return ("fwd_bwd",) if self.fwd_bwd_only else MODES

    def compiles(self, row: str) -> bool:
        """Whether ``row`` (a mechanism's or a peer's) is also timed compiled."""
        return self.compile is True or row in (self.compile or [])


LOCAL_PART_SUFFIXES = {"w": "local_window", "b": "local_block"}  # the row name's "+w<W>" or "+b<S>"


def windowed(name: str) -> tuple[str, dict]:
    """A measured mechanism's registered name and its local part (the config's settings): ``"kerformer+w128"`` is
    Kerformer beside a 128-token window (``{"local_window": 128}``), ``"kerformer+b512"`` beside aligned blocks of 512
    (``{"local_block": 512}``); any other name is the mechanism alone."""
    mechanism, _, part = name.partition("+")
    return mechanism, ({LOCAL_PART_SUFFIXES[part[0]]: int(part[1:])} if part else {})


AT_LEAST = {"batch_size": 1, "tokens_per_step": 1, "hidden_size": 1, "num_heads": 1, "repeats": 1, "warmup": 0,
            "fit_points": 2, "intermediate_size": 1, "max_length": 1, "threads": 1}  # smallest values (None: unset)
