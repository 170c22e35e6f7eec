"""The peers of ``hf-effattn bench --peers``: whole encoders that Transformers users would pick instead.

Each peer is a Transformers model class built, like our encoder at that length, with the benchmark's hidden
size, layers (``--num_layers``), heads and feed-forward width, RoBERTa's vocabulary (50,265 tokens), dropout
off and position embeddings for as many tokens as ours (``--max_length``, else N); its mechanism's own settings
are its library's defaults:

* ``roberta-sdpa``, ``roberta-eager``: ``RobertaModel`` with ``attn_implementation="sdpa"`` / ``"eager"``;
* ``roberta-chunks512``: the chunked reader, what a user does instead of a long-input encoder: the same
  ``RobertaModel`` with ``sdpa`` reading the input in 512-token chunks (``[B, N]`` reshaped to ``[B N / 512, 512]``,
  N padded to a multiple of 512; an input of at most 512 tokens is one chunk), its outputs put back in order;
* ``nystromformer``: ``NystromformerModel``, 64 landmarks, a depthwise convolution of kernel 65 on the values,
  ``segment_means_seq_len = N`` (its segment means need the input length; N must be a multiple of 64, and at
  N = 64 it computes exact softmax attention);
* ``bigbird``: ``BigBirdModel`` with ``attention_type="block_sparse"``, ``block_size=64``,
  ``num_random_blocks=3``; inputs are padded to a multiple of 64, and for N <= (5 + 2 x 3) x 64 = 704 the
  model itself switches to full attention (``original_full``);
* ``longformer``: ``LongformerModel`` with ``attention_window=512`` in every layer (256 tokens each side, no
  global tokens); inputs are padded to a multiple of 512.

None has a pooler (``add_pooling_layer=False`` where the class has one). Every peer gets the same ``input_ids``
and all-ones ``attention_mask`` as our encoders. A peer that cannot run at a length is reported with a note
and no times; one that runs something else than its sparse mechanism there (full attention, padding) is
measured and its row carries a note that says so.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Callable

import torch
from torch import nn
from transformers.modeling_outputs import BaseModelOutput

from .rows import eager_name

PEER_PREFIX = "peer:"
CANNOT_RUN = "cannot run"  # how the note of a peer that cannot run at a length starts
VOCAB_SIZE = 50265  # RoBERTa's, as our encoder's config defaults to
NUM_LANDMARKS = 64
BIGBIRD_BLOCK_SIZE = 64
BIGBIRD_RANDOM_BLOCKS = 3
LONGFORMER_WINDOW = 512
CHUNK = 512  # the chunked reader's chunks: RoBERTa's and BERT's 512 positions


@dataclass(frozen=True)
class Peer:
    """A Transformers encoder class and how the benchmark builds it.

    ``settings``: its mechanism's settings, as the results' header names them. ``build(args, length)`` builds the
    model (``nn.Module``) for inputs ``[B, N]``. ``cannot_run(length)``: why it cannot run at N, starting with
    :data:`CANNOT_RUN` ("" if it can).
    ``runs_otherwise(model, length)``: after the model has run, what it ran instead of its sparse mechanism at N,
    e.g. full attention or padded inputs ("" if nothing)."""

    key: str
    class_name: str
    settings: str
    build: Callable[..., nn.Module]
    cannot_run: Callable[[int], str] = lambda length: ""
    runs_otherwise: Callable[[nn.Module, int], str] = lambda model, length: ""

    @property
    def label(self) -> str:
        """The name of the peer's rows in the results: ``peer:<key>``."""
        return PEER_PREFIX + self.key


def shared_config(args, length: int, extra_positions: int = 0, multiple: int = 1) -> dict:
    """The settings every peer shares with our encoder: width, depth, heads, feed-forward, vocabulary, no dropout,
    and positions for as many tokens as ours (``--max_length`` or N), plus the class's offset
    (``extra_positions``), rounded up to its padding ``multiple``."""
    return dict(
        vocab_size=VOCAB_SIZE,
        hidden_size=args.hidden_size,
        num_hidden_layers=args.num_layers,
        num_attention_heads=args.num_heads,
        intermediate_size=args.intermediate_size or 4 * args.hidden_size,
        max_position_embeddings=padded(args.max_length or length, multiple) + extra_positions,
        hidden_dropout_prob=0.0,
        attention_probs_dropout_prob=0.0,
    )


def padded(length: int, multiple: int) -> int:
    return math.ceil(length / multiple) * multiple


def padding_note(length: int, multiple: int, setting: str) -> str:
    if length % multiple == 0:
        return ""
    return f"inputs padded from N={length} to {padded(length, multiple)} (a multiple of {setting}={multiple})"


def roberta(attn_implementation: str) -> Callable[..., nn.Module]:
    def build(args, length: int) -> nn.Module:
        from transformers import RobertaConfig, RobertaModel

        # RoBERTa numbers positions from pad_token_id + 1 = 2.
        config = RobertaConfig(**shared_config(args, length, extra_positions=2),
                               attn_implementation=attn_implementation)
        return RobertaModel(config, add_pooling_layer=False)

    return build


class ChunkedReader(nn.Module):
    """``model`` reading its input in chunks of ``chunk`` tokens: ``input_ids`` and ``attention_mask`` ``[B, N]``,
    padded to a multiple of ``chunk`` (``pad_token_id``, mask 0), read as ``[B N / chunk, chunk]``; returns its
    ``last_hidden_state`` put back as ``[B, N, C]``."""

    def __init__(self, model: nn.Module, chunk: int):
        super().__init__()
        self.model, self.chunk, self.config = model, chunk, model.config

    def forward(self, input_ids: torch.Tensor, attention_mask: torch.Tensor):
        batch, length = input_ids.shape
        pad = padded(length, self.chunk) - length
        input_ids = nn.functional.pad(input_ids, (0, pad), value=self.config.pad_token_id)
        attention_mask = nn.functional.pad(attention_mask, (0, pad), value=0)
        chunks = self.model(input_ids=input_ids.view(-1, self.chunk),
                            attention_mask=attention_mask.view(-1, self.chunk)).last_hidden_state
        return BaseModelOutput(last_hidden_state=chunks.reshape(batch, length + pad, -1)[:, :length])


def build_roberta_chunks(args, length: int) -> nn.Module:
    chunk = min(CHUNK, length)
    return ChunkedReader(roberta("sdpa")(args, chunk), chunk)


def roberta_chunks_runs_otherwise(model: nn.Module, length: int) -> str:
    return padding_note(length, model.chunk, "chunk")


def build_nystromformer(args, length: int) -> nn.Module:
    from transformers import NystromformerConfig, NystromformerModel

    config = NystromformerConfig(**shared_config(args, length), segment_means_seq_len=length,
                                 num_landmarks=NUM_LANDMARKS)
    return NystromformerModel(config)


def nystromformer_cannot_run(length: int) -> str:
    if length % NUM_LANDMARKS:
        return (f"{CANNOT_RUN}: NystromformerModel averages N={length} tokens into num_landmarks={NUM_LANDMARKS} "
                "segments, so N must be a multiple of it")
    return ""


def nystromformer_runs_otherwise(model: nn.Module, length: int) -> str:
    if model.config.segment_means_seq_len == model.config.num_landmarks:
        return f"exact softmax attention: NystromformerModel computes it when N = num_landmarks = {length}"
    return ""


def build_bigbird(args, length: int) -> nn.Module:
    from transformers import BigBirdConfig, BigBirdModel

    config = BigBirdConfig(**shared_config(args, length, multiple=BIGBIRD_BLOCK_SIZE), attention_type="block_sparse",
                           block_size=BIGBIRD_BLOCK_SIZE, num_random_blocks=BIGBIRD_RANDOM_BLOCKS)
    return BigBirdModel(config, add_pooling_layer=False)


def bigbird_runs_otherwise(model: nn.Module, length: int) -> str:
    """BigBirdModel switches itself to ``original_full`` at its first call on too short an input."""
    if model.attention_type != "block_sparse":
        config = model.config
        limit = (5 + 2 * config.num_random_blocks) * config.block_size
        return (f"ran full attention: BigBirdModel falls back from block_sparse to {model.attention_type} "
                f"for N <= (5 + 2 x num_random_blocks) x block_size = {limit}")
    return padding_note(length, model.config.block_size, "block_size")


def build_longformer(args, length: int) -> nn.Module:
    from transformers import LongformerConfig, LongformerModel

    # Positions from pad_token_id + 1 = 2, as RoBERTa; the padding tokens take the padding position.
    config = LongformerConfig(**shared_config(args, length, extra_positions=2), attention_window=LONGFORMER_WINDOW)
    return LongformerModel(config, add_pooling_layer=False)


def longformer_runs_otherwise(model: nn.Module, length: int) -> str:
    return padding_note(length, model.config.attention_window[0], "attention_window")

PEERS = {peer.key: peer for peer in (
    Peer("roberta-sdpa", "RobertaModel", 'attn_implementation="sdpa"', roberta("sdpa")),
    Peer("roberta-eager", "RobertaModel", 'attn_implementation="eager"', roberta("eager")),
    Peer("roberta-chunks512", "RobertaModel", f'attn_implementation="sdpa", reading {CHUNK}-token chunks',
         build_roberta_chunks, runs_otherwise=roberta_chunks_runs_otherwise),
    Peer("nystromformer", "NystromformerModel",
         f"num_landmarks={NUM_LANDMARKS}, conv_kernel_size=65, segment_means_seq_len=N", build_nystromformer,
         nystromformer_cannot_run, nystromformer_runs_otherwise),
    Peer("bigbird", "BigBirdModel",
         f"block_sparse, block_size={BIGBIRD_BLOCK_SIZE}, num_random_blocks={BIGBIRD_RANDOM_BLOCKS}",
         build_bigbird, runs_otherwise=bigbird_runs_otherwise),
    Peer("longformer", "LongformerModel", f"attention_window={LONGFORMER_WINDOW}, no global tokens",
         build_longformer, runs_otherwise=longformer_runs_otherwise),
)}


def peer_of(label: str) -> Peer | None:
    """The peer whose rows are named ``label`` (``peer:<key>``, or its compiled twin), None for our mechanisms."""
    key = eager_name(label).removeprefix(PEER_PREFIX)
    return PEERS.get(key) if label.startswith(PEER_PREFIX) else None


def selected_peers(peers) -> list[Peer]:
    """``peers``: False/None (none), True (all) or a list of keys."""
    if peers is True:
        return list(PEERS.values())
    return [PEERS[key] for key in peers or []]


def describe_peers(peers: list[Peer]) -> str:
    """One line for the results' header: which class each peer row is, and with which settings."""
    return "; ".join(f"`{peer.label}` = Transformers' {peer.class_name} ({peer.settings})" for peer in peers)
