"""The inputs of an attention transfer from the shell: texts or images, batched for the model.

``hf-effattn convert SRC --attention_type X --transfer_data SOURCE`` takes as ``SOURCE``:

* a ``.txt`` file: one text per line (empty lines skipped);
* a ``.csv``, ``.json``, ``.jsonl`` or ``.parquet`` file, or a local dataset folder (an image folder too), or a
  Hub dataset id: loaded with ``datasets.load_dataset``; the column is ``--transfer_column``, or else the first
  of :data:`TEXT_COLUMNS` (text models) or :data:`IMAGE_COLUMNS` (vision models) present.

No labels are read. The data is read and checked (the file, its column, the kind of its examples: texts for a
text model, images for an image model) before the model loads, so a bad source fails at once. Texts are
tokenised per batch (padded to the batch's longest, truncated to ``max_length``: by default 128 tokens, or the
model's maximum length if shorter; see :func:`transfer_length`), images go through the checkpoint's image processor.
"""

from __future__ import annotations

from pathlib import Path

from ...options.user_errors import one_line

TEXT_COLUMNS = ("text", "sentence", "content", "document", "question", "sentence1", "premise", "title")
IMAGE_COLUMNS = ("image", "img")
COLUMNS = {"text": TEXT_COLUMNS, "vision": IMAGE_COLUMNS}
EXAMPLES = {"text": "texts", "vision": "images"}  # what a family's model reads
FILE_BUILDERS = {".csv": "csv", ".json": "json", ".jsonl": "json", ".parquet": "parquet"}
MODEL_LENGTH = "model"  # a transfer max_length meaning: the model's own maximum length
DEFAULT_LENGTH = 128  # the transfer max_length by default (the model's maximum length if that is shorter)
SOURCES = ("a .txt file (one text per line), a .csv, .json, .jsonl or .parquet file, a dataset folder or a Hub "
           "dataset id")


def load_rows(source: str, split: str = "train"):
    """The ``datasets.Dataset`` that ``source`` names (see the module docstring); ``ValueError`` naming the file
    when a local one is empty or unreadable."""
    from datasets import load_dataset

    path = Path(source)
    suffix = path.suffix.lower()
    if not path.exists():
        if suffix in (".txt", *FILE_BUILDERS):
            raise FileNotFoundError(f"The transfer data file {source!r} does not exist: give {SOURCES}.")
        return load_dataset(source, split=split)
    if path.is_file() and suffix not in (".txt", *FILE_BUILDERS):
        raise ValueError(f"Unsupported transfer data file {source!r}: give {SOURCES}.")
    if path.is_file() and path.stat().st_size == 0:
        raise ValueError(f"The transfer data file {source!r} is empty: give {SOURCES}.")
    from datasets.exceptions import DatasetsError

    try:
        return read_local(path, split)
    except (ValueError, OSError, DatasetsError) as error:  # pyarrow's, json's, csv's, decoding's: unreadable
        cause = error.__cause__ or error
        raise ValueError(f"Cannot read the transfer data {source!r} ({type(cause).__name__}: {one_line(cause)}): "
                         f"give {SOURCES}.") from None


def read_local(path: Path, split: str):
    """The rows of a local file or dataset folder."""
    from datasets import Dataset, load_dataset

    if path.is_file() and path.suffix.lower() == ".txt":
        text = path.read_text(encoding="utf-8")
        if "\0" in text:  # valid UTF-8, but binary
            raise ValueError(f"a NUL character at character {text.index(chr(0))}: it is not a text file")
        return Dataset.from_dict({"text": [line.strip() for line in text.splitlines() if line.strip()]})
    if path.is_file():
        return load_dataset(FILE_BUILDERS[path.suffix.lower()], data_files=str(path), split="train")
    return load_dataset(str(path), split=split)


def pick_column(column_names: list[str], family: str, column: str | None, source: str = "") -> str:
    """The column of texts (``family="text"``) or images (``"vision"``) to read."""
    if column is not None:
        if column not in column_names:
            raise ValueError(f"--transfer_column {column!r} is not among the columns {column_names} of the transfer "
                             f"data {source!r}: name one of them.")
        return column
    found = next((name for name in COLUMNS[family] if name in column_names), None)
    if found is None:
        raise ValueError(f"The transfer data {source!r} has none of the usual columns of {EXAMPLES[family]} "
                         f"({', '.join(COLUMNS[family])}) among {column_names}: the model reads {EXAMPLES[family]}; "
                         "name their column with --transfer_column.")
    return found


def usable_examples(values: list, family: str, source: str, column: str) -> list:
    """The non-empty texts (text) or the images (vision) of ``column``; ``ValueError`` when it holds something else."""
    from PIL.Image import Image

    kind = str if family == "text" else Image
    wrong = next((value for value in values if value is not None and not isinstance(value, kind)), None)
    if wrong is not None:
        held = "texts" if isinstance(wrong, str) else "images" if isinstance(wrong, Image) else type(wrong).__name__
        raise ValueError(f"Column {column!r} of the transfer data {source!r} holds {held}, but the model reads "
                         f"{EXAMPLES[family]}: give {EXAMPLES[family]} (another --transfer_column or --transfer_data).")
    examples = [value for value in values if isinstance(value, kind) and (kind is not str or value.strip())]
    if not examples:
        raise ValueError(f"The transfer data {source!r} holds no usable {family} examples in column {column!r}: "
                         f"give {SOURCES}, with {EXAMPLES[family]}.")
    return examples


def transfer_loader(source: str, processor, family: str, *, column: str | None = None, split: str = "train",
                    batch_size: int = 16, max_length: int = 128, max_samples: int | None = None, seed: int = 0):
    """A shuffled ``DataLoader`` (its own seeded generator) of model-input batches from ``source``; every example
    is read and checked here, before any training."""
    import torch

    rows = load_rows(source, split)
    column = pick_column(rows.column_names, family, column, source)
    values = usable_examples(list(rows[column]), family, source, column)
    values = values[:max_samples] if max_samples else values

    def collate(examples):
        if family == "text":
            return processor(examples, padding=True, truncation=True, max_length=max_length, return_tensors="pt")
        return processor(images=[image.convert("RGB") for image in examples], return_tensors="pt")

    return torch.utils.data.DataLoader(values, batch_size=batch_size, shuffle=True, collate_fn=collate,
                                       generator=torch.Generator().manual_seed(seed))


def transfer_length(max_length: int | str | None, longest: int) -> int:
    """The length texts are truncated to for a transfer into a model of maximum length ``longest``: ``max_length``,
    or ``longest`` for ``"model"``, or by default (``None``) :data:`DEFAULT_LENGTH` or ``longest`` if shorter.
    Raise when ``max_length`` is longer than ``longest``."""
    if max_length is None:
        return min(DEFAULT_LENGTH, longest)
    if max_length == MODEL_LENGTH:
        return longest
    if isinstance(max_length, bool) or not isinstance(max_length, int) or max_length < 1:
        raise ValueError(f"The transfer max_length {max_length!r} is neither a positive number of tokens nor "
                         f"{MODEL_LENGTH!r} (the model's maximum length).")
    if max_length > longest:
        raise ValueError(
            f"The transfer max_length {max_length} (--transfer_max_length) is longer than the model's maximum "
            f"length {longest} (config.attention_max_length): use at most {longest}, or {MODEL_LENGTH!r} for the "
            f"model's own, or extend the model's positions first (convert with --max_length {max_length})."
        )
    return max_length
