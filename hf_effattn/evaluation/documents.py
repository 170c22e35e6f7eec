"""The documents an evaluation reads, from a file: ``.jsonl`` (one JSON object a line, its ``"text"`` the document;
other fields ignored), or any other file as UTF-8 text with one document a line (a document's own line breaks
written as spaces, or use JSONL). Blank lines are skipped; a file with no document is refused."""

from __future__ import annotations

import json
from pathlib import Path

TEXT_FIELD = "text"


def read_documents(path: str | Path) -> list[str]:
    """The documents of the file at ``path``, in order: a ``ValueError`` (or ``FileNotFoundError``) naming the file
    and the fix where there is none, or a line that is not a document."""
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"documents={str(path)!r}: no such file: give a .jsonl file of {{\"text\": ...}} "
                                "objects or a text file of one document a line.")
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except UnicodeDecodeError as error:
        raise ValueError(f"{path} is not UTF-8 text ({error}): give a .jsonl file or a text file of one document "
                         "a line.") from None
    numbered = [(number, line) for number, line in enumerate(lines, start=1) if line.strip()]
    documents = [json_text(path, number, line) for number, line in numbered] if path.suffix == ".jsonl" \
        else [line.strip() for _, line in numbered]
    if not documents:
        raise ValueError(f"{path} holds no document (it is empty or blank): give one document a line (.txt) or "
                         f"one {{\"{TEXT_FIELD}\": ...}} object a line (.jsonl).")
    return documents


def json_text(path: Path, number: int, line: str) -> str:
    """The document on line ``number`` of a JSONL file: its object's non-blank ``"text"``."""
    try:
        row = json.loads(line)
    except json.JSONDecodeError as error:
        raise ValueError(f"{path}, line {number}: not JSON ({error.msg}): give one {{\"{TEXT_FIELD}\": ...}} object "
                         "a line.") from None
    text = row.get(TEXT_FIELD) if isinstance(row, dict) else None
    if not isinstance(text, str) or not text.strip():
        raise ValueError(f"{path}, line {number}: no \"{TEXT_FIELD}\" string in this line's object: give each "
                         f"document as {{\"{TEXT_FIELD}\": \"...\"}}.")
    return text
