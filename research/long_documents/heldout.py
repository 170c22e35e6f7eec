"""The held-out masked-LM loss every row of the long-document benchmark is measured by: the same masked tokens for
every row, the first ``CONTENT`` word-pieces of each ``mlm_heldout`` document, masked once with BERT's masking and a
fixed generator, read in windows of 512 or 2,048 tokens or framed at every block (``pretrain.py``'s docstring)."""

from __future__ import annotations

import time

from runs import read_jsonl

CONTENT = 2040
MASK_SEED = 0


def mask_tokens(ids, tokenizer, generator):
    """BERT's masking of content ids ``[L]``: ``(input_ids [L], labels [L])``, -100 where not masked."""
    import torch

    chosen = torch.rand(ids.shape, generator=generator) < 0.15
    draw = torch.rand(ids.shape, generator=generator)
    random_ids = torch.randint(len(tokenizer), ids.shape, generator=generator)
    inputs = torch.where(chosen & (draw < 0.8), tokenizer.mask_token_id, ids)
    inputs = torch.where(chosen & (draw >= 0.8) & (draw < 0.9), random_ids, inputs)
    return inputs, torch.where(chosen, ids, -100)


def windows(inputs, labels, tokenizer, content: int):
    """Split content ``[L]`` into windows of ``content`` tokens, each ``[CLS] ... [SEP]``: a list of
    ``(input_ids [1, content + 2], labels [1, content + 2])``."""
    import torch

    cls, sep = torch.tensor([tokenizer.cls_token_id]), torch.tensor([tokenizer.sep_token_id])
    ignore = torch.tensor([-100])
    starts = range(0, len(inputs) - content + 1, content)
    return [(torch.cat([cls, inputs[i:i + content], sep])[None],
             torch.cat([ignore, labels[i:i + content], ignore])[None]) for i in starts]


def framed(inputs, labels, tokenizer, block: int):
    """Content ``[L]`` laid out with [CLS]/[SEP] at the edges of every aligned block of ``block`` tokens
    (``hf_effattn.block_tokens``): one window ``(input_ids [1, N], labels [1, N])``."""
    import torch

    from hf_effattn.block_tokens import framed_blocks

    layout = lambda ids, cls, sep: torch.tensor(framed_blocks(ids.tolist(), block, cls, sep))[None]  # noqa: E731
    return [(layout(inputs, tokenizer.cls_token_id, tokenizer.sep_token_id), layout(labels, -100, -100))]


def heldout_windows(tokenizer, length: int, block: int | None = None):
    """The held-out documents' masked tokens, in windows of ``length`` tokens (512 or 2,048); with ``block``, each
    document one window framed at every block of ``block`` (at 2,048 and 512: the four windows of 512, as one)."""
    import torch

    generator = torch.Generator().manual_seed(MASK_SEED)
    content = CONTENT if length >= CONTENT + 2 else length - 2
    result = []
    for row in read_jsonl("mlm_heldout"):
        ids = torch.tensor(tokenizer(row["text"], add_special_tokens=False, verbose=False)["input_ids"][:CONTENT])
        masked = mask_tokens(ids, tokenizer, generator)
        result += framed(*masked, tokenizer, block) if block else windows(*masked, tokenizer, content)
    return result


def masked_features(model, input_ids, labels):
    """The encoder's last hidden state at the masked positions ``[M, C]`` and their labels ``[M]``."""
    hidden = model.base_model(input_ids.to(model.device)).last_hidden_state
    labels = labels.to(model.device)
    where = labels != -100
    return hidden[where], labels[where]


def heldout_loss(model, tokenizer, length: int, block: int | None = None) -> dict:
    """Mean masked-LM cross-entropy (nats per masked token) over the held-out windows of ``length`` tokens (framed
    at every block of ``block``, where given)."""
    import torch

    model.eval()
    total, count, started = 0.0, 0, time.perf_counter()
    with torch.no_grad():
        for input_ids, labels in heldout_windows(tokenizer, length, block):
            features, targets = masked_features(model, input_ids, labels)
            total += torch.nn.functional.cross_entropy(model.lm_head(features).float(), targets,
                                                       reduction="sum").item()
            count += len(targets)
    return {"loss": total / count, "masked_tokens": count, "window": length,
            "eval_seconds": round(time.perf_counter() - started, 1)}
