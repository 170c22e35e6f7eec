"""Which row each block or chunks row of the long-document study is held against: the chunks pretrained as it
was (:func:`control_of`), the same training without its memory (:func:`without_memory`), and the row a gated memory
was made from (:func:`shared_twin`)."""

from __future__ import annotations

from dataclasses import replace

from pretrain import HEAD_RECORD
from rows import ROWS, SHORT, pretrained_at
from tables import mlm

CHUNKS = "local-b512"  # the chunked reader as one model: the control of every block row
CHUNK_ROWS = [name for name, row in ROWS.items() if row.block and row.attention == "local"]
BLOCK_ROWS = [name for name, row in ROWS.items() if row.block and row.attention != "local"]


def control_of(name: str) -> str:
    """Row ``name``'s control: the chunks pretrained with its number of masked-LM steps, and for a block row with its
    seed, at its length and on its pieces too (a chunks row of another seed, length or layout is held against the
    first seed's at 2,048: the run-to-run noise, and what the length or the layout changes); for a row that continues
    another's model (``start``), the chunks continued from it at 512 with its steps and seed (and those,
    against the model they continued); for a rerun on a head trained again (``-rerun``), the row it reruns: what the
    head changed."""
    if name.endswith("-rerun"):
        return name.removesuffix("-rerun")
    row = ROWS[name]
    steps = f"-mlm{row.mlm_steps}" if row.mlm_steps else ""
    if row.start:  # a row that continues another: the chunks continued as they were pretrained, as long, from it
        chunks = next((other.name for other in ROWS.values()
                       if (other.start, other.attention, other.length, other.mlm_steps, other.mlm_seed)
                       == (row.start, "local", SHORT, row.mlm_steps, row.mlm_seed)), f"{row.start}-then-local{steps}")
        return row.start if name == chunks else chunks
    if row.attention == "local":
        return on_the_same_head(name, CHUNKS + steps)
    seed, pieces = (f"-seed{row.mlm_seed}" if row.mlm_seed else ""), (f"-pieces{row.pieces}" if row.pieces else "")
    return on_the_same_head(name, CHUNKS + steps + seed + pretrained_at(row.length)[0] + pieces)


def on_the_same_head(name: str, control: str) -> str:
    """``control``, or its rerun (``-rerun``) where that was pretrained from the MLM head row ``name`` was and
    ``control`` from another (the head's training is not bit-reproducible across machines: ``pretrain.py``)."""
    head, rerun = mlm(name, "mlm", HEAD_RECORD), f"{control}-rerun"
    if head and mlm(control, "mlm", HEAD_RECORD) != head and mlm(rerun, "mlm", HEAD_RECORD) == head:
        return rerun
    return control


def without_memory(name: str) -> str | None:
    """For a memory added to another row's model (``start``), the row trained as it was in every way but the memory:
    the blocks alone continued from the same model at the same length, on the same pieces, with the same steps and
    seed (the same batches); None where none is defined. (A row pretrained from the head has its twin as control.)"""
    row = ROWS[name]
    same = (row.start, row.length, row.pieces, row.mlm_steps, row.mlm_seed)
    return next((other.name for other in ROWS.values() if row.start and other.attention == "local"
                 and (other.start, other.length, other.pieces, other.mlm_steps, other.mlm_seed) == same), None)


def shared_twin(name: str) -> str | None:
    """The row that gated row ``name`` (``rows.gated``) was made from: the same row in every field but its name and
    words, its memory under the shared normaliser (None where ``name`` is not gated or no such row was run: a row that
    continues another's model)."""
    row = ROWS[name]
    if row.settings.get("shared_normaliser") is not False:
        return None
    shared = replace(row, settings={**row.settings, "shared_normaliser": True})
    return next((other.name for other in ROWS.values() if replace(other, name=name, what=row.what) == shared), None)
