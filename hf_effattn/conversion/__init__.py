"""From a pretrained checkpoint to an efficient-attention model: conversion, attention transfer and its data.

* :mod:`.convert`: :func:`convert` loads a RoBERTa, BERT or ViT checkpoint (or one of ours) with another
  mechanism and saves it Hub-ready; :mod:`.command` is ``hf-effattn convert``; where it may write and how it
  writes there without losing anything is :mod:`hf_effattn.output_folders`, the rule of every command.
* :mod:`.transfer`: :func:`transfer_attention` trains the new attention to reproduce the checkpoint's softmax
  attention; :mod:`.transfer_data` turns texts or images into its batches; :mod:`.peak_memory` measures its peak memory.
"""

from .convert import check_found, convert
from .transfer import TransferReport, transfer_attention

__all__ = ["check_found", "convert", "TransferReport", "transfer_attention"]
