"""``hf-effattn evaluate``: the table on the terminal and the JSON file hold the report that ``evaluate`` returns;
a bad input is one line and exit status 2, before any document is read; an existing output file is kept."""

from __future__ import annotations

import json

import pytest
from helpers.evaluation import BLOCK, LENGTH, PASSAGE, block_model, random_documents
from helpers.models import MINILM

from hf_effattn.commands import main as cli
from hf_effattn.evaluation import evaluate


@pytest.fixture()
def hybrid_folder(checkpoint, tmp_path):
    """A block hybrid saved with its tokenizer."""
    from transformers import AutoTokenizer

    folder = tmp_path / "hybrid"
    block_model(checkpoint, "kerformer", initial_mechanism_weight=0.5).save_pretrained(folder)
    AutoTokenizer.from_pretrained(checkpoint).save_pretrained(folder)
    return folder


def test_the_command_prints_the_table_and_writes_the_json_of_the_report(hybrid_folder, documents_file, tmp_path,
                                                                        capsys):
    output = tmp_path / "results.json"
    assert cli.main(["evaluate", str(hybrid_folder), "--documents", str(documents_file), "--passage_length",
                     str(PASSAGE), "--output", str(output)]) == 0
    printed = capsys.readouterr().out
    report = evaluate(str(hybrid_folder), documents_file, passage_length=PASSAGE, progress=False)
    assert printed == report.table() + f"\nWrote {output}\n"
    assert json.loads(output.read_text()) == report.as_dict()
    lines = printed.splitlines()
    assert lines[0] == f"{hybrid_folder} on 5 documents, each read up to {LENGTH} tokens (± one standard error over " \
                       "documents)"
    assert lines[1].split() == ["measure", "count", "model", "chunks", "of", str(BLOCK), "model", "-", "chunks"]
    loss = report.measures["masked_lm_loss"]
    assert lines[2].startswith("masked-LM loss (nats)") and f"{loss.count} masked tokens" in lines[2]
    assert f"{loss.model.value:.3f} ± {loss.model.standard_error:.3f}" in lines[2]
    assert lines[3].startswith("loss on long-context words (nats)")
    assert lines[4].startswith("passage retrieval (recall@1)") and "5 passages" in lines[4]


def one_line_error(capsys, argv: list[str]) -> str:
    """The error of ``hf-effattn ARGV``, which must exit with status 2 and end stderr with it, on one line (after
    Transformers' loading bar, where the model was loaded)."""
    with pytest.raises(SystemExit) as exit_:
        cli.main(argv)
    assert exit_.value.code == 2
    errors = [line for line in capsys.readouterr().err.splitlines() if "error" in line]
    assert len(errors) == 1 and errors[0].startswith("hf-effattn evaluate: error: ")
    return errors[0]


@pytest.fixture()
def no_reading(monkeypatch):
    def read(*args, **kwargs):
        raise AssertionError("a document was read")

    monkeypatch.setattr("hf_effattn.evaluation.readers.Reader.hidden_states", read)


def test_a_missing_or_empty_documents_file_and_a_short_document_are_one_line(hybrid_folder, tmp_path, capsys,
                                                                               no_reading):
    folder = str(hybrid_folder)
    assert "no such file" in one_line_error(capsys, ["evaluate", folder, "--documents", str(tmp_path / "none.txt")])
    (tmp_path / "empty.txt").write_text("\n")
    assert "holds no document" in one_line_error(capsys, ["evaluate", folder, "--documents",
                                                          str(tmp_path / "empty.txt")])
    (tmp_path / "short.txt").write_text("\n".join([*random_documents(2, 40), "w1 w2"]) + "\n")
    assert "document 3 has 2 tokens, fewer than one chunk and a passage past it" in one_line_error(
        capsys, ["evaluate", folder, "--documents", str(tmp_path / "short.txt"), "--passage_length", str(PASSAGE)])


def test_an_existing_output_file_is_kept_and_refused_before_work(hybrid_folder, documents_file, tmp_path, capsys,
                                                                  no_reading):
    (tmp_path / "results.json").write_text("kept")
    error = one_line_error(capsys, ["evaluate", str(hybrid_folder), "--documents", str(documents_file), "--output",
                                    str(tmp_path / "results.json")])
    assert "exists: give a new file's path (the existing one is kept)" in error
    assert (tmp_path / "results.json").read_text() == "kept"


@pytest.mark.skipif(MINILM is None, reason="the MiniLM package (the test extra) is not installed")
def test_the_real_minilm_as_it_ships_has_no_masked_lm_head(documents_file, capsys, no_reading):
    error = one_line_error(capsys, ["evaluate", str(MINILM), "--documents", str(documents_file)])
    assert f"{MINILM} has no masked-LM head (it lacks lm_head." in error and "--train_head_only" in error
