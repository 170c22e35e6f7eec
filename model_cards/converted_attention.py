"""What the card of a model converted and not yet trained says about its attention: what reads exactly as the source
checkpoint read (the ``local`` attention, which adds no parameters; aligned blocks, at the checkpoint's own length its
chunked reader) and what is new and untrained (a mechanism's parameters, mixed in beside the blocks by gates that
start small), rather than calling the whole attention untrained; and the architecture tag of the source."""

from __future__ import annotations


def source_architecture(source: dict) -> str:
    """The architecture tag of a model made from the checkpoint whose ``config.json`` is ``source``: its model type
    (``bert``, ``roberta``, ``vit``); for one of this package's, the one whose positions it keeps (``bert`` without
    RoBERTa's, ``roberta_positions`` False)."""
    model_type = source.get("model_type")
    if model_type == "effattn_roberta":
        return "roberta" if source.get("roberta_positions", True) else "bert"
    return "vit" if model_type == "effattn_vit" else model_type


def gates_start(window_weights: list[list[float]]) -> str:
    """Where the gates (each head's weight on the mechanism, per layer) stand: ``at 0.1``, or ``between 0.01 and
    0.1`` where they differ."""
    values = sorted({float(f"{weight:.3g}") for layer in window_weights for weight in layer})
    return f"at {values[0]:g}" if len(values) == 1 else f"between {values[0]:g} and {values[-1]:g}"


def block_reading(local_part: dict, extension: dict | None) -> str | None:
    """What a model's aligned blocks (``local_block``) read exactly, or ``None`` without blocks: at the checkpoint's
    own length (the input size it was extended ``from``), its chunked reader."""
    block = local_part.get("local_block")
    if block is None:
        return None
    if extension and extension["from"] == block:
        return (f"its blocks of {block} tokens, the checkpoint's own length, are read exactly as the checkpoint reads an "
                f"input of {block} tokens, as its chunked reader reads them (`hf_effattn.tokenize_in_blocks` frames "
                "every block with `[CLS]` and `[SEP]`, as the checkpoint's inputs were)")
    return f"its blocks of {block} tokens are read exactly by the checkpoint's own softmax attention"


def converted_purpose(content) -> str:
    """The card's sentence on a model only converted (a :class:`~.card.CardContent` without transfer or results):
    what is exact, and what is new and untrained."""
    blocks = block_reading(content.local_part, content.extension)
    if content.attention_type == "local":
        exact = blocks or "each token reads its window exactly with the checkpoint's own softmax attention"
        return f"converted and not fine-tuned, with no new parameters: {exact}"
    if blocks is None:
        return "converted and not fine-tuned: the new attention is untrained; fine-tune it before use"
    return (f"converted and not fine-tuned: {blocks}. New and untrained is the `{content.attention_type}` memory "
            f"across the blocks, which each head's gate mixes in, starting {gates_start(content.window_weights)} "
            "(below), so that the model starts near its blocks alone")


def untrained_note(content, origin: str) -> str:
    """The limitation of a converted model whose mechanism is new and untrained (``origin`` names it): beside
    aligned blocks, what training it takes; else fine-tuning before use."""
    if content.local_part.get("local_block") is None or not content.window_weights:
        return f"{origin} are untrained: fine-tune the model before relying on its outputs."
    return (f"{origin} are untrained, mixed in by gates starting {gates_start(content.window_weights)}, so that the "
            "model starts near its blocks alone: train it by masked-LM continued pretraining on long texts "
            "(`finetune/run_mlm.py`) before relying on what the memory carries.")
