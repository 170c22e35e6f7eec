"""Documents cut into shuffled pieces: long blocks that read several documents drawn apart.

Masked-LM pretraining concatenates its texts and cuts blocks of ``--max_seq_length`` tokens, so a block of 8,192
reads one long document or a few neighbours, where four blocks of 2,048 a step read four stretches drawn apart. On
the long-document benchmark that layout, not the length, cost a model pretrained at 8,192 0.04-0.06 nats of
masked-LM loss at 2,048 (the chunked reader's and Kerformer's block hybrid's alike); pretrained on shuffled pieces of
2,048 tokens, so that each block of 8,192 read pieces of about four documents, the same models ended below the
chunks pretrained at 2,048 (``docs/local-blocks.md``). ``run_mlm.py --shuffled_pieces 2048`` does it to the training
texts: each text cut at word starts into pieces of ``size`` tokens or a few more (its last piece what is left), every
piece a text of its own, the pieces of all texts shuffled with the run's seed, then grouped into blocks as any texts
are.
"""

from __future__ import annotations


def cut_at_word_starts(text: str, tokenizer, size: int) -> list[str]:
    """``text`` cut into pieces that join back into it, each beginning at a word's first token once ``size`` tokens
    have passed since the last cut (``tokenizer``: a fast one, for its offsets and words; no special tokens
    counted)."""
    encoding = tokenizer(text, add_special_tokens=False, return_offsets_mapping=True, verbose=False)
    words, offsets = encoding.word_ids(), encoding["offset_mapping"]
    cuts, since = [0], 0
    for index in range(len(words)):
        if since >= size and words[index] != words[index - 1]:
            cuts.append(offsets[index][0])
            since = 0
        since += 1
    return [text[start:end] for start, end in zip(cuts, cuts[1:] + [len(text)])]


def shuffled_pieces(split, column: str, tokenizer, size: int, seed: int, source: str):
    """The rows of ``split`` (a ``datasets.Dataset``) as pieces of their ``column`` (:func:`cut_at_word_starts`),
    one row each with column ``column`` only, shuffled with ``seed``."""
    if not tokenizer.is_fast:
        raise ValueError(f"--shuffled_pieces cuts texts at word starts with a fast tokenizer's offsets, and "
                         f"{type(tokenizer).__name__} is not one: load the model's fast tokenizer, or drop the option.")
    pieces = split.map(lambda texts: {column: [piece for text in texts for piece in
                                               cut_at_word_starts(text, tokenizer, size)]},
                       input_columns=column, batched=True, remove_columns=split.column_names,
                       desc=f"Cutting {source} into pieces of {size} tokens")
    return pieces.shuffle(seed=seed).flatten_indices()
