"""The inputs of an attention transfer from the shell: texts or images, batched for the model.

``hf-effattn convert SRC --attention_type X --transfer_data SOURCE`` takes as ``SOURCE``:

* a ``.txt`` file: one text per line (empty lines skipped);
* a ``.csv``, ``.json``, ``.jsonl`` or ``.parquet`` file, or a local dataset folder (an image folder too), or a
  Hub dataset id: loaded with ``datasets.load_dataset``; the column is ``--transfer_column``, or else the first
  of :data:`TEXT_COLUMNS` (text models) or :data:`IMAGE_COLUMNS` (vision models) present.

No labels are read. Texts are tokenised per batch (padded to the batch's longest, truncated to ``max_length``),
images go through the checkpoint's image processor.
"""

from __future__ import annotations

from pathlib import Path

TEXT_COLUMNS = ("text", "sentence", "content", "document", "question", "sentence1", "premise", "title")
IMAGE_COLUMNS = ("image", "img")
FILE_BUILDERS = {".csv": "csv", ".json": "json", ".jsonl": "json", ".parquet": "parquet"}


def load_rows(source: str, split: str = "train"):
    """The ``datasets.Dataset`` that ``source`` names (see the module docstring)."""
    from datasets import Dataset, load_dataset

    path = Path(source)
    if not path.exists() and path.suffix.lower() in (".txt", *FILE_BUILDERS):
        raise FileNotFoundError(f"The transfer data file {source!r} does not exist: give an existing file, a dataset "
                                "folder or a Hub dataset id.")
    if path.is_file() and path.suffix.lower() == ".txt":
        return Dataset.from_dict({"text": [line.strip() for line in path.read_text().splitlines() if line.strip()]})
    if path.is_file():
        builder = FILE_BUILDERS.get(path.suffix.lower())
        if builder is None:
            raise ValueError(f"Unsupported transfer data file {source!r}: use a .txt, "
                             f"{', '.join(FILE_BUILDERS)} file, a dataset folder or a Hub dataset id.")
        return load_dataset(builder, data_files=str(path), split="train")
    return load_dataset(source, split=split)


def pick_column(column_names: list[str], family: str, column: str | None) -> str:
    """The column of texts (``family="text"``) or images (``"vision"``) to read."""
    if column is not None:
        if column not in column_names:
            raise ValueError(f"--transfer_column {column!r} is not among the data's columns {column_names}.")
        return column
    known = TEXT_COLUMNS if family == "text" else IMAGE_COLUMNS
    found = next((name for name in known if name in column_names), None)
    if found is None:
        raise ValueError(f"None of the usual {family} columns ({', '.join(known)}) is among {column_names}: "
                         "name one with --transfer_column.")
    return found


def transfer_loader(source: str, processor, family: str, *, column: str | None = None, split: str = "train",
                    batch_size: int = 16, max_length: int = 128, max_samples: int | None = None, seed: int = 0):
    """A shuffled ``DataLoader`` (its own seeded generator) of model-input batches from ``source``."""
    import torch

    rows = load_rows(source, split)
    values = list(rows[pick_column(rows.column_names, family, column)])
    if family == "text":
        values = [text for text in values if isinstance(text, str) and text.strip()]
    values = values[:max_samples] if max_samples else values
    if not values:
        raise ValueError(f"The transfer data {source!r} holds no usable {family} examples.")

    def collate(examples):
        if family == "text":
            return processor(examples, padding=True, truncation=True, max_length=max_length, return_tensors="pt")
        return processor(images=[image.convert("RGB") for image in examples], return_tensors="pt")

    return torch.utils.data.DataLoader(list(values), batch_size=batch_size, shuffle=True, collate_fn=collate,
                                       generator=torch.Generator().manual_seed(seed))
