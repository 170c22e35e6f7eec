"""Extending a loaded model past its checkpoint's maximum input size, in place: more positions for text
(``from_pretrained(..., max_length=N)``), larger images for ViT (``from_pretrained(..., image_size=S)``).

Text, Longformer's copy (Beltagy et al. 2020, Sec. 5): the learned position rows are copied in blocks to fill
the larger table. With L the checkpoint's maximum length and ``first`` the first row a token uses
(``pad_token_id + 1`` for RoBERTa positions, whose rows ``0 .. pad_token_id`` are reserved; 0 for BERT's)::

    old rows:  [ reserved | p_0 ... p_{L-1} ]
    new rows:  [ reserved | p_0 ... p_{L-1} | p_0 ... p_{L-1} | ... | p_0 ... ]    (the last block cut)

So a token at position i < L keeps its row, and one at i >= L gets row ``i mod L``; an input that fits the
checkpoint's length is computed exactly as before. Word and token-type embeddings are unchanged. A table that was
extended before, and not trained since, repeats its learned block exactly: ``L`` is then that block's length
(:func:`learned_length`), so that extending twice (512 -> 1,000 -> 2,048) gives the rows of extending once (token
1,000 takes row 488 either way). A table trained after its extension has no exact repeat: all its rows are learned.

Images: the patches' position grid is resized as :meth:`transformers.ViTEmbeddings.interpolate_pos_encoding`
resizes it at run time (bicubic over the grid, the [CLS] row kept), once, so that the model takes images of the
new size without ``interpolate_pos_encoding``.

Weights a mechanism sizes by the maximum length (``needs_max_length``) grow by the mechanism's own rule,
:meth:`~attention_base.EfficientAttention.extend_length_sized_weights`, most of them with :func:`tile_to_length`.
"""

from __future__ import annotations

import math

import torch
from torch import nn

from .attention_base import EfficientAttention


def learned_length(entries: torch.Tensor) -> int:
    """The length of the block that ``entries`` (along dim 0) repeat exactly, the last repeat possibly cut: the
    smallest ``P`` with ``entries[P:] == entries[:-P]``, or all of them where there is no exact repeat."""
    rows = entries.reshape(len(entries), -1)
    for period in (rows == rows[0]).all(dim=1).nonzero()[1:, 0].tolist():  # rows that repeat the first one
        if torch.equal(rows[period:], rows[:len(rows) - period]):
            return period
    return len(rows)


def tile_to_length(table: torch.Tensor, size: int, dim: int = 0, first: int = 0) -> torch.Tensor:
    """``table`` grown to ``size`` entries along ``dim``: entries ``0 .. first-1`` kept, the others repeated in
    blocks of the learned length ``L`` (:func:`learned_length`: all of them, unless an earlier extension repeated
    them): entry ``first + i`` of the result is entry ``first + i mod L``."""
    entries = table.narrow(dim, first, table.shape[dim] - first)
    block = entries.narrow(dim, 0, learned_length(entries.movedim(dim, 0)))
    repeats = [1] * table.dim()
    repeats[dim] = math.ceil((size - first) / block.shape[dim])
    tiled = block.repeat(repeats).narrow(dim, 0, size - first)
    return torch.cat([table.narrow(dim, 0, first), tiled], dim)


def replace_parameter(module: nn.Module, name: str, value: torch.Tensor) -> None:
    """Replace ``module.<name>`` by a parameter holding ``value`` (same ``requires_grad``)."""
    old = getattr(module, name)
    setattr(module, name, nn.Parameter(value.detach(), requires_grad=old.requires_grad))


def tile_position_rows(embedding: nn.Embedding, rows: int, first: int) -> None:
    """Grow a position table ``[R, C]`` to ``[rows, C]`` by Longformer's copy (module docstring)."""
    replace_parameter(embedding, "weight", tile_to_length(embedding.weight, rows, first=first))
    embedding.num_embeddings = rows


def interpolate_patch_positions(embeddings: nn.Module, height: int, width: int) -> None:
    """Resize the position table ``[1, 1 + patches, C]`` of a ``ViTEmbeddings`` to the patch grid of images of
    ``height x width`` pixels, as its ``interpolate_pos_encoding`` does."""
    patches = embeddings.patch_embeddings
    patch_height, patch_width = patches.patch_size
    tokens = 1 + (height // patch_height) * (width // patch_width)
    shape_only = embeddings.position_embeddings[:, :1].expand(1, tokens, -1)  # the method reads only its shape
    table = embeddings.interpolate_pos_encoding(shape_only, height, width)
    replace_parameter(embeddings, "position_embeddings", table)
    patches.image_size = embeddings.image_size = (height, width)
    patches.num_patches = tokens - 1


def extend_positions(model, target) -> list[str]:
    """Grow ``model`` (as loaded, at its checkpoint's size) in place to the input size of config ``target``:
    its position table by the family's rule (``model.extend_position_embeddings``), each mechanism's
    length-sized weights by the mechanism's; ``model.config`` takes ``target``'s size. Returns the names of the
    parameters that were extended."""
    before = dict(model.named_parameters())
    with torch.no_grad():
        model.extend_position_embeddings(target)
        for module in model.modules():
            if isinstance(module, EfficientAttention):
                module.extend_max_length(target.attention_max_length)
    for field in target.size_fields:
        setattr(model.config, field, getattr(target, field))
    model.config.setup_attention()
    return [name for name, parameter in model.named_parameters() if before.get(name) is not parameter]
