"""Reading the documents: JSONL objects' texts, or a text file's lines; each bad file refused in one line that names
the file (and the line) and the fix."""

from __future__ import annotations

import json

import pytest

from hf_effattn.evaluation import read_documents


def test_a_jsonl_file_gives_each_objects_text_and_a_text_file_each_line(tmp_path):
    texts = ["A first document.\n\nIts second paragraph.", "A second one."]
    jsonl = tmp_path / "documents.jsonl"
    jsonl.write_text("".join(json.dumps({"text": text, "id": i}) + "\n" for i, text in enumerate(texts)) + "\n")
    assert read_documents(jsonl) == texts
    lines = tmp_path / "documents.txt"
    lines.write_text("  A first document, its paragraphs on one line.\n\n\nA second one.  \n")
    assert read_documents(str(lines)) == ["A first document, its paragraphs on one line.", "A second one."]


@pytest.mark.parametrize("name, content, message", [
    ("empty.txt", "", "empty.txt holds no document (it is empty or blank): give one document a line"),
    ("blank.jsonl", "\n  \n", "blank.jsonl holds no document (it is empty or blank)"),
    ("broken.jsonl", '{"text": "fine"}\n{"text": \n', "broken.jsonl, line 2: not JSON (Expecting value): give one "
                                                       '{"text": ...} object a line.'),
    ("other.jsonl", '{"body": "a document"}\n', 'other.jsonl, line 1: no "text" string in this line\'s object: give '
                                                'each document as {"text": "..."}.'),
    ("latin1.txt", "café".encode("latin-1"), "latin1.txt is not UTF-8 text"),
])
def test_a_file_without_documents_is_refused_in_one_line(tmp_path, name, content, message):
    path = tmp_path / name
    path.write_bytes(content if isinstance(content, bytes) else content.encode())
    with pytest.raises(ValueError, match="^[^\n]*$") as error:
        read_documents(path)
    assert message in str(error.value)


def test_a_missing_file_is_named_with_what_to_give(tmp_path):
    with pytest.raises(FileNotFoundError, match=r"documents='.*absent.jsonl': no such file: give a .jsonl file of "
                                                r'\{"text": ...\} objects or a text file of one document a line.'):
        read_documents(tmp_path / "absent.jsonl")
