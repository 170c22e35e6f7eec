"""The target run, on the real MiniLM and real text (the Python documentation's topics, which every Python ships in
``pydoc_data``): a masked-LM head trained alone (one step: the numbers are not the point), converted to its own
512-token blocks with Kerformer as a memory, then ``hf-effattn evaluate``: the three measures beside the chunks of
512. Converted to the blocks alone, the same checkpoint reads as its chunks to the last digit printed, and the
hybrid's chunks are those blocks."""

from __future__ import annotations

import json

import pytest
from helpers.conversion import run_convert
from helpers.models import MINILM

from hf_effattn.commands import main as cli
from hf_effattn.evaluation import evaluate

pytestmark = pytest.mark.skipif(MINILM is None, reason="the MiniLM package (the test extra) is not installed")
TOPICS = ("specialnames", "compound", "types")  # three of the longest, over 9,000 word-pieces each
LENGTH = 1024


@pytest.fixture(scope="module")
def minilm_with_a_head(tmp_path_factory) -> str:
    from pydoc_data.topics import topics

    from hf_effattn.finetuning import masked_lm

    folder = tmp_path_factory.mktemp("minilm")
    (folder / "texts.txt").write_text("\n".join(topics[name].replace("\n", " ") for name in ("if", "while", "for")))
    masked_lm.train(model_name_or_path=str(MINILM), new_mlm_head=True, train_head_only=True, max_train_steps=1,
                    train_file=str(folder / "texts.txt"), per_device_train_batch_size=2, max_seq_length=32,
                    output_dir=folder / "head")
    return str(folder / "head")


@pytest.fixture(scope="module")
def documents(tmp_path_factory):
    from pydoc_data.topics import topics

    path = tmp_path_factory.mktemp("documents") / "topics.jsonl"
    path.write_text("".join(json.dumps({"text": topics[name]}) + "\n" for name in TOPICS))
    return path


def test_the_converted_minilm_prints_the_three_measures_beside_its_chunks(minilm_with_a_head, documents, tmp_path,
                                                                         capsys):
    blocks, hybrid = tmp_path / "blocks", tmp_path / "hybrid"
    for folder, mechanism in ((blocks, "local"), (hybrid, "kerformer")):
        run_convert([minilm_with_a_head, "--attention_type", mechanism, "--convert_attention", "--local_block", "512",
                     "--max_length", str(LENGTH), "--output_dir", str(folder)])
    capsys.readouterr()
    assert cli.main(["evaluate", str(hybrid), "--documents", str(documents), "--output",
                     str(tmp_path / "results.json")]) == 0
    table = capsys.readouterr().out.splitlines()
    assert table[0] == f"{hybrid} on 3 documents, each read up to 1,024 tokens (± one standard error over documents)"
    assert "chunks of 512" in table[1]
    assert [line.split("  ")[0] for line in table[2:5]] == [
        "masked-LM loss (nats)", "loss on long-context words (nats)", "passage retrieval (recall@1)"]
    measures = json.loads((tmp_path / "results.json").read_text())["measures"]
    assert measures["masked_lm_loss"]["count"] > 3 * 100 and measures["retrieval_recall_at_1"]["count"] == 3
    assert measures["long_context_loss"]["count"] > 0
    alone = evaluate(str(blocks), documents, progress=False).as_dict()["measures"]
    for name, measure in alone.items():
        assert measure["model"]["value"] == pytest.approx(measure["chunks"]["value"], abs=5e-4), name
        assert measures[name]["chunks"]["value"] == pytest.approx(measure["chunks"]["value"], abs=5e-4), name
