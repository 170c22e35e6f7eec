"""From a pretrained checkpoint to an efficient-attention model: conversion, attention transfer and its data.

* :mod:`.convert`: :func:`convert` loads a RoBERTa, BERT or ViT checkpoint (or one of ours) with another
  mechanism and saves it Hub-ready. Its command line, ``hf-effattn convert``, is
  :mod:`hf_effattn.commands.convert`; where it may write and how it writes there without losing anything is
  :mod:`hf_effattn.folders.output_folders`, the rule of every command.
* :mod:`.transfer`: :func:`transfer_attention` trains the new attention to reproduce the checkpoint's softmax
  attention: its report, its teacher, its losses, its training, its data (texts or images into batches) and its
  peak memory, one module each.
"""

from .convert import check_found, convert
from .transfer import TransferReport, transfer_attention

__all__ = ["check_found", "convert", "TransferReport", "transfer_attention"]
