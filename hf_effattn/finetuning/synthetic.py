"""A built-in text classification task, a word-level tokenizer and a random RoBERTa checkpoint, all made in
code (no download); the demo uses them, and the tests build their tiny checkpoints with them.

The task, "majority of markers": a sequence of filler words (``w0 .. w{n-1}``) holds three marker words at
random positions, each from group ``a`` (``a0 .. a3``) or group ``b`` (``b0 .. b3``); the label names the
group that has the majority. The evidence lies anywhere in the sequence, usually far from the first
token that the classifier reads, so the attention must gather it across the whole length.
"""

from __future__ import annotations

import random

SPECIAL_TOKENS = ("<s>", "<pad>", "</s>", "<unk>", "<mask>")  # RoBERTa's ids: 0, 1, 2, 3, 4
MARKERS = {"a": [f"a{i}" for i in range(4)], "b": [f"b{i}" for i in range(4)]}


def build_word_tokenizer(words: list[str], model_max_length: int):
    """A RoBERTa-style fast tokenizer (``<s> A </s>``, pairs ``<s> A </s></s> B </s>``) over whitespace words."""
    from tokenizers import Tokenizer, models, pre_tokenizers, processors
    from transformers import PreTrainedTokenizerFast

    vocab = {token: i for i, token in enumerate(dict.fromkeys([*SPECIAL_TOKENS, *words]))}
    backend = Tokenizer(models.WordLevel(vocab, unk_token="<unk>"))
    backend.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    backend.post_processor = processors.TemplateProcessing(
        single="<s> $A </s>", pair="<s> $A </s> </s> $B </s>",
        special_tokens=[("<s>", vocab["<s>"]), ("</s>", vocab["</s>"])],
    )
    return PreTrainedTokenizerFast(
        tokenizer_object=backend, model_max_length=model_max_length, bos_token="<s>", eos_token="</s>",
        cls_token="<s>", sep_token="</s>", pad_token="<pad>", unk_token="<unk>", mask_token="<mask>",
    )


def save_random_roberta(folder, tokenizer, hidden_size: int, dropout: float = 0.1):
    """Save a randomly initialised 2-layer RoBERTa masked-LM checkpoint with ``tokenizer`` into ``folder``, laid out
    as ``FacebookAI/roberta-base`` is, with positions for ``tokenizer.model_max_length`` tokens."""
    from transformers import RobertaConfig, RobertaForMaskedLM

    config = RobertaConfig(
        vocab_size=len(tokenizer), hidden_size=hidden_size, num_hidden_layers=2, num_attention_heads=4,
        intermediate_size=2 * hidden_size, max_position_embeddings=tokenizer.model_max_length + 2, type_vocab_size=1,
        pad_token_id=tokenizer.pad_token_id, bos_token_id=tokenizer.bos_token_id, eos_token_id=tokenizer.eos_token_id,
        hidden_dropout_prob=dropout, attention_probs_dropout_prob=dropout,
    )
    RobertaForMaskedLM(config).save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    return folder


def filler_words(count: int) -> list[str]:
    """The task's filler vocabulary: ``w0 .. w{count-1}``."""
    return [f"w{i}" for i in range(count)]


def task_vocabulary(num_fillers: int) -> list[str]:
    """Every word of the task: fillers, then markers."""
    return filler_words(num_fillers) + MARKERS["a"] + MARKERS["b"]


def majority_example(rng: random.Random, length: int, num_fillers: int) -> dict:
    """One example: ``{"text": "w12 a3 w7 ... b1 w40", "label": "a" or "b", the group with two or three markers}``."""
    words = [f"w{rng.randrange(num_fillers)}" for _ in range(length)]
    groups = [rng.choice("ab") for _ in range(3)]
    for position, group in zip(rng.sample(range(length), 3), groups):
        words[position] = rng.choice(MARKERS[group])
    return {"text": " ".join(words), "label": max("ab", key=groups.count)}


def majority_dataset(num_examples: int, length: int, num_fillers: int, seed: int) -> list[dict]:
    """``num_examples`` examples of the task, reproducible from ``seed``."""
    rng = random.Random(seed)
    return [majority_example(rng, length, num_fillers) for _ in range(num_examples)]
