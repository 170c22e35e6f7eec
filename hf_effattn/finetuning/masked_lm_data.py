"""Masked-language-modelling data: raw texts -> blocks of token ids, masked at random as BERT was pretrained.

Sources, all through ``datasets.load_dataset``: a Hub dataset (``--dataset_name wikitext --dataset_config_name
wikitext-103-raw-v1``), a local folder laid out as a Hub dataset, or local files (``--train_file``): ``.txt`` (read
as Transformers' ``run_mlm.py`` reads one, by the ``text`` builder: each line is a row), ``.json``/``.jsonl``/
``.csv``/``.parquet`` with a text column. The texts are the ``--text_column_name`` column (default ``text``, or the
dataset's only text column); blank rows carry nothing and are dropped (wikitext separates paragraphs by them).

Examples, as in Transformers' ``run_mlm.py``: by default each text is tokenised whole (with its special tokens), the
token ids of each 1,000 texts are concatenated and cut into blocks of ``--max_seq_length`` tokens, and the remainder
is dropped (``group_texts``), so that documents of any length fill whole blocks; with ``--line_by_line`` each text
is one example, truncated to ``--max_seq_length`` tokens. ``--max_train_samples`` / ``--max_eval_samples`` count
examples (blocks).

Masking follows ``transformers.DataCollatorForLanguageModeling`` (it does the masking): ``--mlm_probability`` of the
tokens, never special ones, become the targets; of those 80% are replaced by the mask token, 10% by a random token,
10% left. Each example is masked with its own generator, a pure function of (seed, epoch, index)
(:func:`~hf_effattn.finetuning.data.example_generator`): a resumed run, or one split over processes or loader
workers, masks exactly what a single uninterrupted run masks. Training examples are masked anew each epoch;
evaluation examples the same way at every evaluation, so that evaluations compare.
"""

from __future__ import annotations

import argparse
import codecs
from pathlib import Path

import torch

from ..options.argument_types import positive_int, probability
from ..block_tokens import content_fitting, framed_blocks, special_tokens_mask
from .data import (
    FILE_LOADERS,
    LabelInfo,
    PreparedData,
    add_dataset_arguments,
    check_truncation,
    example_generator,
    limit_samples,
    load_raw_datasets,
    select_eval_splits,
    split_source,
)
from .metrics import MetricSpec
from .text_pieces import shuffled_pieces

TEXT_FILE_LOADERS = {**FILE_LOADERS, ".txt": "text"}
DEFAULT_TEXT_COLUMN = "text"
GROUPING_BATCH = 1000  # texts concatenated together before cutting blocks, as in Transformers' run_mlm.py
DEFAULT_MAX_SEQ_LENGTH = 512
NUL = b"\0"  # in no text file
# Evaluation reports the mean loss over the masked tokens and its exponential; the best model has the lowest.
PERPLEXITY = MetricSpec(names=("perplexity",), greater_is_better=False)
NO_LABELS = LabelInfo(column="labels", names=None)  # the targets are the input tokens


def add_masked_lm_data_arguments(parser: argparse.ArgumentParser) -> None:
    """The data options of ``run_mlm.py``: the shared source options, the text column, blocks and masking."""
    group = add_dataset_arguments(parser, TEXT_FILE_LOADERS, labels=False)
    group.add_argument("--text_column_name", default=None,
                       help="The column of texts (default: 'text', or the dataset's only text column).")
    group.add_argument("--max_seq_length", type=positive_int, default=DEFAULT_MAX_SEQ_LENGTH,
                       help="Tokens per example: the concatenated texts are cut into blocks of this length (default "
                            f"{DEFAULT_MAX_SEQ_LENGTH}); at most the model's length (extend it with --max_length).")
    group.add_argument("--line_by_line", action="store_true",
                       help="Each text (a line of a .txt file) is one example, truncated to --max_seq_length, "
                            "instead of concatenated blocks.")
    group.add_argument("--block_special_tokens", action="store_true",
                       help="With a model of aligned blocks (--local_block S): lay each example out with [CLS] and "
                            "[SEP] at every block's edges, as the checkpoint read its chunks (documents separated by "
                            "[SEP]), instead of at each document's ends only.")
    group.add_argument("--shuffled_pieces", type=positive_int, default=None, metavar="TOKENS",
                       help="Cut each training text at word starts into pieces of this many tokens and shuffle them "
                            "(with --seed) before the blocks are cut, so that a long block reads pieces of several "
                            "texts drawn apart (e.g. 2048 with --max_seq_length 2048 or 8192); at most "
                            "--max_seq_length.")
    group.add_argument("--mlm_probability", type=probability, default=0.15,
                       help="The fraction of tokens masked and predicted (default 0.15, as BERT).")


class MaskedExamples(torch.utils.data.Dataset):
    """Tokenised examples (rows of ``input_ids``, ``special_tokens_mask`` and the tokenizer's other outputs), each
    masked when read: ``{"input_ids", "labels", ...}`` as 1-D tensors of the example's length, ``labels`` -100 where
    a token is not a target. ``masker`` is a ``DataCollatorForLanguageModeling``. Evaluation examples: the masks of
    epoch 0, always (no ``set_epoch``, which Accelerate's loaders would call at each pass)."""

    def __init__(self, rows, masker, seed: int):
        self.rows = rows.with_format("torch")
        self.masker = masker
        self.seed = seed
        self.epoch = 0

    def __len__(self) -> int:
        return len(self.rows)

    def __getitem__(self, index: int) -> dict:
        row = dict(self.rows[index])
        special = row.pop("special_tokens_mask").bool()
        self.masker.generator = example_generator(self.seed, self.epoch, index)
        row["input_ids"], row["labels"] = self.masker.torch_mask_tokens(row["input_ids"][None].clone(),
                                                                        special_tokens_mask=special[None])
        row["input_ids"], row["labels"] = row["input_ids"][0], row["labels"][0]
        return row


class MaskedTrainingExamples(MaskedExamples):
    """Training examples: masked anew in each epoch."""

    def set_epoch(self, epoch: int) -> None:
        """Mask as in ``epoch`` (the training loop calls it at each epoch's start)."""
        self.epoch = epoch


def text_column(split, override: str | None, source: str) -> str:
    """The column of texts: ``--text_column_name``, else ``text``, else the only column of strings."""
    from datasets import Value

    strings = [name for name, feature in split.features.items()
               if isinstance(feature, Value) and feature.dtype in ("string", "large_string")]
    column = override or (DEFAULT_TEXT_COLUMN if DEFAULT_TEXT_COLUMN in split.column_names else None)
    if column is None and len(strings) == 1:
        column = strings[0]
    if column is None:
        raise ValueError(f"{source}: no column {DEFAULT_TEXT_COLUMN!r} among its columns {split.column_names}: name "
                         "the column of texts with --text_column_name.")
    if column not in split.column_names:
        raise ValueError(f"{source}: no column {column!r} (--text_column_name); its columns: {split.column_names}.")
    if column not in strings:
        raise ValueError(f"{source}: column {column!r} holds {split.features[column]}, not text: name the column of "
                         f"texts with --text_column_name (columns of text: {strings or 'none'}).")
    return column


def check_text_file(option: str, path: str | None) -> None:
    """A ``.txt`` ``--train_file`` / ``--validation_file`` holds UTF-8 text (no NUL bytes): read in 1 MiB pieces."""
    if not path or Path(path).suffix.lower() != ".txt" or not Path(path).is_file():
        return
    decoder, offset = codecs.getincrementaldecoder("utf-8")(), 0
    with open(path, "rb") as file:
        for piece in iter(lambda: file.read(1 << 20), b""):
            try:
                if NUL in piece:
                    raise ValueError(f"a NUL byte at byte {offset + piece.index(NUL)}")
                decoder.decode(piece)
            except ValueError as error:  # UnicodeDecodeError too
                raise ValueError(f"--{option} {path} is not a text file ({error}): give UTF-8 text, one document "
                                 "or paragraph per line.") from None
            offset += len(piece)


def nonblank_texts(split, column: str, source: str):
    """``split`` without its rows of blank text; an error when none is left."""
    kept = split.filter(lambda texts: [bool(text and text.strip()) for text in texts], input_columns=column,
                        batched=True, desc=f"Dropping blank rows of {source}")
    if len(kept) == 0:
        raise ValueError(f"{source} holds no text ({len(split)} rows, every one blank): give texts in column "
                         f"{column!r}.")
    return kept


def group_texts(batch: dict, block_length: int) -> dict:
    """Concatenate every column of a batch of tokenised texts and cut it into blocks of ``block_length`` tokens, the
    remainder dropped (Transformers' ``group_texts``)."""
    concatenated = {name: [token for row in rows for token in row] for name, rows in batch.items()}
    total = len(concatenated["input_ids"]) // block_length * block_length
    return {name: [tokens[start:start + block_length] for start in range(0, total, block_length)]
            for name, tokens in concatenated.items()}


def group_in_framed_blocks(batch: dict, block_length: int, block: int, tokenizer) -> dict:
    """:func:`group_texts` with ``[CLS]``/``[SEP]`` at the edges of every aligned block of ``block`` tokens
    (``hf_effattn.block_tokens``): the texts' content ids, each text ended by ``[SEP]``, concatenated, cut into
    pieces that fill ``block_length`` tokens once framed, and framed; the remainder dropped."""
    sep = tokenizer.sep_token_id
    content = [token for ids in batch["input_ids"] for token in (*ids, sep)]
    piece = content_fitting(block_length, block)
    rows = [framed_blocks(content[start:start + piece], block, tokenizer.cls_token_id, sep)
            for start in range(0, len(content) // piece * piece, piece)]
    return {"input_ids": rows, "attention_mask": [[1] * len(ids) for ids in rows],
            "special_tokens_mask": [special_tokens_mask(ids, tokenizer) for ids in rows]}


def tokenize_split(split, tokenizer, column: str, args: argparse.Namespace, source: str, block: int | None):
    """The examples of one split: token blocks of ``--max_seq_length`` (or, ``--line_by_line``, truncated texts),
    framed at every aligned block of ``block`` tokens (the model's ``local_block``) with ``--block_special_tokens``."""
    length = args.max_seq_length

    def tokenize(batch):
        if args.line_by_line:
            return tokenizer(batch[column], truncation=True, max_length=length, return_special_tokens_mask=True)
        if args.block_special_tokens:
            return {"input_ids": tokenizer(batch[column], add_special_tokens=False, verbose=False)["input_ids"]}
        return tokenizer(batch[column], return_special_tokens_mask=True, verbose=False)  # long texts: cut below

    examples = split.map(tokenize, batched=True, remove_columns=split.column_names, desc=f"Tokenizing {source}")
    if not args.line_by_line:
        tokens = sum(len(ids) for ids in examples["input_ids"])
        grouping = (group_in_framed_blocks, {"block": block, "tokenizer": tokenizer}) \
            if args.block_special_tokens else (group_texts, {})
        examples = examples.map(grouping[0], batched=True, batch_size=GROUPING_BATCH,
                                fn_kwargs={"block_length": length, **grouping[1]},
                                remove_columns=examples.column_names,
                                desc=f"Grouping {source} into blocks of {length}")
        if len(examples) == 0:
            raise ValueError(f"{source} gives {tokens} tokens, not one block of --max_seq_length {length}: give more "
                             "text, a smaller --max_seq_length, or --line_by_line.")
    return examples


def prepare_masked_lm_data(args: argparse.Namespace, tokenizer, model_config=None) -> PreparedData:
    """Load the texts, drop blank rows, hold out an evaluation split where there is none, tokenise into examples
    (framed at the aligned blocks of ``model_config``, the model's, with ``--block_special_tokens``) and wrap them to
    be masked; the result feeds the training loop."""
    from transformers import DataCollatorForLanguageModeling, DataCollatorForTokenClassification

    if args.line_by_line:
        check_truncation("max_seq_length", args.max_seq_length, tokenizer)
    for option in ("train_file", "validation_file"):
        check_text_file(option, getattr(args, option))
    raw = load_raw_datasets(args.dataset_name, args.dataset_config_name, args.train_file, args.validation_file,
                            TEXT_FILE_LOADERS)
    dataset_id = args.train_file or args.dataset_name
    column = text_column(raw["train"], args.text_column_name, split_source(args, "train", dataset_id))
    raw, eval_splits = select_eval_splits(raw, None, args.validation_split_percentage / 100, args.seed,
                                          split_source(args, "train", dataset_id))
    masker = DataCollatorForLanguageModeling(tokenizer, mlm_probability=args.mlm_probability)

    def examples(split: str, count: int | None, kind: type[MaskedExamples] = MaskedExamples) -> MaskedExamples:
        source = split_source(args, split, dataset_id)
        texts = nonblank_texts(raw[split], text_column(raw[split], column, source), source)
        if split == "train" and args.shuffled_pieces:
            texts = shuffled_pieces(texts, column, tokenizer, args.shuffled_pieces, args.seed, source)
        examples = tokenize_split(texts, tokenizer, column, args, source, getattr(model_config, "local_block", None))
        return kind(limit_samples(examples, count), masker, args.seed)

    return PreparedData(
        train=examples("train", args.max_train_samples, MaskedTrainingExamples),
        evaluation={split: examples(split, args.max_eval_samples) for split in eval_splits},
        collate_fn=DataCollatorForTokenClassification(tokenizer),  # pads inputs, and labels with -100
        metrics=PERPLEXITY,
        labels=NO_LABELS,
        dataset_id=dataset_id,
        dataset_config=args.dataset_config_name,
    )
