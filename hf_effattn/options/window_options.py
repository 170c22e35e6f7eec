"""The local-part options that ``hf-effattn convert`` and the fine-tuning scripts share: ``--local_window``,
``--local_block``, ``--global_tokens``, ``--local_window_every``, ``--initial_mechanism_weight`` and
``--shared_normaliser`` (:func:`add_window_arguments`), read as the model config's own settings
(:func:`local_part_options`)."""

from __future__ import annotations

import argparse

from .argument_types import non_negative_int, open_interval, positive_int
from ..modeling.local_settings import LOCAL_PART_SETTINGS, merge_local_settings, split_local_settings

CHECKPOINT_BLOCK = "checkpoint"  # --local_block without S: the checkpoint's own length
BOOLEANS = {"true": True, "false": False}



def block_size(text: str) -> int | str:
    """``--local_block S``: a positive number of tokens, or ``checkpoint`` (:data:`CHECKPOINT_BLOCK`, also what the
    option means without S) for the checkpoint's own length."""
    return CHECKPOINT_BLOCK if text == CHECKPOINT_BLOCK else positive_int(text)


def boolean(text: str) -> bool:
    """``true`` or ``false`` (as in JSON)."""
    if text not in BOOLEANS:
        raise argparse.ArgumentTypeError(f"expected true or false, got {text!r}")
    return BOOLEANS[text]


def local_part_options(options: argparse.Namespace) -> dict:
    """The local part's settings that the parsed ``options`` give (name -> value, the config's keywords), the
    blocks of ``--local_block`` without S resolved to the checkpoint's own length (:func:`checkpoint_block`, of
    ``options.checkpoint`` or ``options.model_name_or_path``); one given with another value inside
    ``--attention_config`` too raises."""
    given = {name: value for name in LOCAL_PART_SETTINGS if (value := getattr(options, name)) is not None}
    if given.get("local_block") == CHECKPOINT_BLOCK:
        given["local_block"] = checkpoint_block(getattr(options, "checkpoint", None) or options.model_name_or_path)
    merge_local_settings(given, split_local_settings(options.attention_config)[1], given_as="--{name} {value}",
                         where="--attention_config")
    return given


def checkpoint_block(checkpoint: str) -> int:
    """The blocks of ``--local_block`` given without S: the checkpoint's own blocks where it has them, else the
    longest input its positions take, L: the period of the positions ``--max_length`` copies, so that each block
    of L tokens is read as the checkpoint read its inputs (``hf_effattn.modeling.local_blocks``)."""
    from transformers import PreTrainedConfig

    from ..models.model_classes import family_of
    from ..modeling.configuration_effattn import saved_attention
    from ..modeling.modeling_effattn_roberta import EffAttnRobertaPreTrainedModel

    source = PreTrainedConfig.get_config_dict(checkpoint)[0]
    own = saved_attention(source)[2].get("local_block")
    if own:
        return own
    if family_of(source.get("model_type"), checkpoint) != "text":
        raise ValueError(f"--local_block without a size takes the length of a text checkpoint's positions, and "
                         f"{checkpoint} has model_type {source.get('model_type')!r}: give the size, --local_block S.")
    return EffAttnRobertaPreTrainedModel.config_from_checkpoint(source, None, None, {})[0].attention_max_length


def add_window_arguments(group) -> None:
    """The local-part options, read by :func:`local_part_options`."""
    group.add_argument("--local_window", type=positive_int, default=None, metavar="W",
                       help="Exact softmax over the tokens at most W // 2 positions away, beside the mechanism (any "
                            "mechanism but softmax; default: none, the mechanism as published).")
    group.add_argument("--local_block", type=block_size, nargs="?", const=CHECKPOINT_BLOCK, default=None,
                       metavar="S",
                       help="Exact softmax inside aligned blocks of S tokens, beside the mechanism, which reads across "
                            "them as a memory (instead of --local_window). Without S: the checkpoint's own length, "
                            "so that with --max_length the converted model starts as the checkpoint reading the "
                            "input in chunks of that length; with attention 'local', it is that chunked reader.")
    group.add_argument("--global_tokens", type=non_negative_int, default=None, metavar="G",
                       help="With --local_window or --local_block: the first G tokens ([CLS]) attend to, and are "
                            "attended by, every token exactly (default 0: none).")
    group.add_argument("--local_window_every", type=positive_int, default=None, metavar="K",
                       help="With --local_window: the window in layers 0, K, 2K, ... only, the others running the "
                            "mechanism alone (default: 1, every layer).")
    group.add_argument("--initial_mechanism_weight", type=open_interval(0, 1, "a weight"), default=None,
                       metavar="SIGMA",
                       help="With --local_window or --local_block: each head's initial weight on the mechanism's "
                            "part, the gate (default: the mechanism's, measured on MiniLM; small beside blocks, so "
                            "that the model starts as the chunked reader).")
    group.add_argument("--shared_normaliser", type=boolean, default=None, metavar="{true,false}",
                       help="With a kernelized mechanism beside --local_window or --local_block: true puts its terms "
                            "under the local part's softmax normaliser (LoLCATs), false mixes it by the gate (default: "
                            "true beside a window, false beside blocks).")
