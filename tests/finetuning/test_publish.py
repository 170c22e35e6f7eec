"""Publishing: the model card's content and metadata, the upload (with a stand-in Hub API), the offline and
no-token paths that keep the folder, and loading a fine-tuned folder as remote code without the package."""

import json
import logging
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from helpers.finetuning import one_torch_thread  # noqa: F401 (autouse: one torch thread)
from helpers.finetuning import (
    MAX_LENGTH,
    cifar_mirror,
    glue_mirror,
    load_script,
    tiny_text_checkpoint,
    tiny_vit_checkpoint,
    training_options,
)
from huggingface_hub import ModelCard

import hf_effattn
from hf_effattn.finetuning import publishing
from hf_effattn.model_cards import IMAGE_CLASSIFICATION, TEXT_CLASSIFICATION, CardContent, License, render_model_card


def card_content(**changes) -> CardContent:
    values = dict(kind=TEXT_CLASSIFICATION, repo_id="someone/roberta-kerformer-mrpc", attention_type="kerformer",
                  attention_config={"se_mode": "token", "se_reduction": 4, "eps": 1e-6},
                  base_model="FacebookAI/roberta-base", dataset_id="nyu-mll/glue", dataset_config="mrpc",
                  results={"validation": {"accuracy": 0.875, "f1": 0.9, "combined_score": 0.8875}},
                  hyperparameters={"learning_rate": 2e-5, "num_processes": 2},
                  best={"metric": "combined_score", "value": 0.89, "step": 300}, license=License("apache-2.0"))
    values.update(changes)
    return CardContent(**values)


def test_card_metadata_for_hub_datasets_and_checkpoints():
    card = render_model_card(card_content())
    data = card.data
    assert data.license == "apache-2.0" and data.library_name == "transformers"
    assert data.pipeline_tag == "text-classification"
    assert {"hf_effattn", "kerformer", "roberta"} <= set(data.tags)
    assert data.datasets == ["nyu-mll/glue"] and data.base_model == "FacebookAI/roberta-base"
    assert data.metrics == ["accuracy", "f1"]
    results = {(r.dataset_split, r.metric_type): r.metric_value for r in data.eval_results}
    assert results[("validation", "f1")] == 0.9 and data.eval_results[0].dataset_config == "mrpc"


@pytest.mark.parametrize("framed", [True, False])
def test_a_card_tells_to_frame_long_inputs_in_blocks_only_where_the_model_was_pretrained_so(framed):
    from hf_effattn.finetuning.masked_lm import MASKED_LM
    from hf_effattn.folders.sentence_transformers_folder import SentenceEmbedding

    settings = {"max_seq_length": 2048, "shuffled_pieces": 512, **({"block_special_tokens": True} if framed else {})}
    text = render_model_card(card_content(
        kind=MASKED_LM, attention_type="local", attention_config={}, local_part={"local_block": 512},
        dataset_id="documents.txt",
        dataset_config=None, results={}, hyperparameters=settings, best=None,
        sentence_embedding=SentenceEmbedding(("Transformer", "Pooling"), "mean", False, 2048))).text
    assert "| `shuffled_pieces` | 512 |" in text
    assert ("### Long inputs, framed in blocks" in text) is framed
    assert ("tokenize_in_blocks(processor, texts, block=512, max_length=processor.model_max_length" in text) is framed
    assert ("its `[SEP]` after\nevery 510 tokens" in text) is framed
    assert ("pass the `tokenize_in_blocks`\nencoding above to the model" in text) is framed  # sentence embeddings too


def test_card_body_names_the_mechanism_results_settings_and_loading():
    text = render_model_card(card_content()).text
    assert "Kerformer, Frontiers in Neurorobotics 2023](https://doi.org/10.3389/fnbot.2023.1214203)" in text
    assert '"se_mode": "token"' in text
    assert "| validation | f1 | 0.9000 |" in text and "| `learning_rate` | 2e-05 |" in text
    assert 'AutoModelForSequenceClassification.from_pretrained("someone/roberta-kerformer-mrpc", ' \
           "trust_remote_code=True)" in text
    assert "step 300" in text


@pytest.mark.parametrize("attention_type", hf_effattn.list_attentions())
def test_card_cites_the_mechanism_as_its_class_does(attention_type):
    description = hf_effattn.describe_attention(attention_type)
    text = render_model_card(card_content(attention_type=attention_type, attention_config={})).text
    assert f"| Equations | {description['equations']} |" in text
    assert f"## Citation\n\nThe attention mechanism's paper:\n\n```bibtex\n{description['citation']}\n```" in text
    assert description["citation"].startswith("@") and description["paper"].split(",")[0] in text
    assert (f"]({description['paper_url']})" in text) == (description["paper_url"] is not None)


def test_card_limitations_say_what_trained_the_attention_and_which_versions_load_it():
    def limitations(**changes) -> str:
        text = render_model_card(card_content(**changes)).text
        return text[text.index("## Limitations"):text.index("## Citation")]

    supported = ("Transformers >=5.20,<6 and PyTorch >=2.4. On an older Transformers it refuses with a message naming "
                 "the version")
    fine_tuned = limitations()
    assert "its new parameters started from random values and were trained only on the fine-tuning data " \
           "([nyu-mll/glue (mrpc)]" in fine_tuned and supported in fine_tuned
    transfer = {"steps": 10, "examples_seen": 40, "data": "texts", "train": "attention", "learning_rate": 3e-3,
                "hidden_cosine_before": 0.5, "hidden_cosine_after": 0.9, "layers": []}
    assert "first trained by attention transfer to imitate the original softmax attention (above), then on the " \
           "fine-tuning data" in limitations(transfer=transfer)
    assert "are untrained: fine-tune the model" in limitations(results={})
    assert "trained only by attention transfer (above), with no labels" in limitations(results={}, transfer=transfer)
    assert "trained from scratch (preset `roberta-base/kerformer`" in limitations(base_model="roberta-base/kerformer")
    assert limitations(attention_type="sdpa", attention_config={}).count("\n- ") == 1  # the versions only
    chunks = limitations(attention_type="local", attention_config={}, local_part={"local_block": 512})
    assert "The `local` attention adds no parameters to" in chunks and "new parameters" not in chunks


def test_card_for_local_sources_and_images_has_no_invalid_hub_references(tmp_path):
    card = render_model_card(card_content(kind=IMAGE_CLASSIFICATION, base_model=str(tmp_path), dataset_id=str(tmp_path),
                                          dataset_config=None))
    assert card.data.datasets is None and card.data.base_model is None and card.data.eval_results is None
    assert card.data.pipeline_tag == "image-classification" and "AutoImageProcessor" in card.text


class RecordingHubApi:
    """Stands in for ``huggingface_hub.HfApi``: records the calls instead of making them; a repository name without
    a namespace goes under the user ``someone``, as the Hub puts it under the token's user."""

    calls = []

    def __init__(self, token=None):
        self.token = token

    def create_repo(self, repo_id, private=False, exist_ok=False):
        from huggingface_hub import RepoUrl

        self.calls.append(("create_repo", repo_id, private, exist_ok))
        return RepoUrl(f"https://huggingface.co/{repo_id if '/' in repo_id else 'someone/' + repo_id}")

    def upload_folder(self, **kwargs):
        self.calls.append(("upload_folder", kwargs))

    @classmethod
    def uploaded_files(cls, upload: dict) -> list[str]:
        """The files of the recorded ``upload_folder`` call that would reach the Hub, as ``huggingface_hub`` filters
        them."""
        from huggingface_hub.utils import filter_repo_objects

        folder = Path(upload["folder_path"])
        files = [path.relative_to(folder).as_posix() for path in folder.rglob("*") if path.is_file()]
        return sorted(filter_repo_objects(files, ignore_patterns=upload["ignore_patterns"]))


@pytest.fixture
def recording_hub(monkeypatch):
    monkeypatch.setattr("huggingface_hub.HfApi", RecordingHubApi)
    monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)
    RecordingHubApi.calls.clear()
    return RecordingHubApi


def test_push_creates_the_repository_then_writes_the_card_and_uploads_the_folder(tmp_path, recording_hub):
    for name in ("model.safetensors", "config.json", "checkpoints/step_2/optimizer.bin", "checkpoint-2/rng_state.pth",
                 "training_args.bin", "_private.json"):
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text("x")
    named = []
    url = publishing.publish_folder(tmp_path, "model", named.append, push=True, token="hf_test", private=True)
    assert url == "https://huggingface.co/someone/model" and named == ["someone/model"]  # the card names the Hub repo
    (_, repo_id, private, exist_ok), (_, upload) = recording_hub.calls
    assert (repo_id, private, exist_ok) == ("model", True, True)
    assert upload["repo_id"] == "someone/model" and upload["folder_path"] == str(tmp_path)
    assert recording_hub.uploaded_files(upload) == ["config.json", "model.safetensors"]


def test_push_without_a_token_explains_and_keeps_the_folder(tmp_path, monkeypatch, caplog):
    monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)
    monkeypatch.setattr("huggingface_hub.get_token", lambda: None)
    named = []
    with caplog.at_level(logging.WARNING):
        assert publishing.publish_folder(tmp_path, "model", named.append, push=True) is None
    assert "no Hugging Face token was found" in caplog.text and tmp_path.is_dir() and named == ["model"]
    assert "--hub_model_id user/model" in caplog.text and "--exclude 'checkpoint-*/*'" in caplog.text


def test_trainer_push_uploads_the_hub_ready_folder_only(tmp_path, recording_hub):
    load_script("run_trainer").main([
        "--model_name_or_path", tiny_text_checkpoint(), "--attention_type", "kerformer", "--task_name", "sst2",
        "--dataset_name", glue_mirror(), "--max_length", str(MAX_LENGTH), "--output_dir", str(tmp_path / "run"),
        "--per_device_train_batch_size", "8", "--max_steps", "1", "--save_strategy", "steps", "--save_steps", "1",
        "--report_to", "none", "--use_cpu", "--push_to_hub", "--hub_token", "hf_test", "--license", "mit",
    ])
    assert (tmp_path / "run" / "checkpoint-1" / "optimizer.pt").is_file()  # Trainer's checkpoints are there...
    (_, repo_id, *_), (_, upload) = recording_hub.calls
    assert repo_id == "run" and upload["repo_id"] == "someone/run"
    uploaded = recording_hub.uploaded_files(upload)
    sent_pickles = [name for name in uploaded if "checkpoint" in name or name.endswith((".bin", ".pt", ".pth"))]
    assert not sent_pickles  # ...but not sent
    for name in ("model.safetensors", "config.json", "README.md", "tokenizer.json", "modeling_effattn_roberta.py"):
        assert name in uploaded
    card = ModelCard.load(tmp_path / "run" / "README.md")
    assert card.data.model_name == "someone/run" and card.data.license == "mit"  # as given
    assert 'from_pretrained("someone/run", trust_remote_code=True)' in card.text


def test_offline_push_to_hub_keeps_the_trained_folder_and_says_why(tmp_path, monkeypatch, caplog):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    source = shutil.copytree(tiny_text_checkpoint(), tmp_path.parent / f"{tmp_path.name}-source")
    (source / "README.md").write_text("---\nlicense: cc-by-4.0\n---\n# A checkpoint with a licence\n")
    with caplog.at_level(logging.WARNING):
        outcome = load_script("run_text_classification").main([
            "--model_name_or_path", str(source), "--attention_type", "kerformer", "--task_name", "sst2",
            "--dataset_name", glue_mirror(), "--max_length", str(MAX_LENGTH),
            *training_options(tmp_path, max_train_steps=2, push_to_hub=True, hub_model_id="someone/tiny-sst2"),
        ])
    assert outcome.finished
    assert "Not pushing to the Hub: HF_HUB_OFFLINE is set" in caplog.text
    assert str(tmp_path.resolve()) in caplog.text and "hf upload someone/tiny-sst2" in caplog.text
    for file in ("model.safetensors", "config.json", "README.md", "tokenizer.json"):
        assert (tmp_path / file).is_file()
    card = ModelCard.load(tmp_path / "README.md")
    assert card.data.model_name == "someone/tiny-sst2" and card.data.license == "cc-by-4.0"  # the checkpoint's


RELOAD = """
import json, sys
sys.modules["hf_effattn"] = None  # the package cannot be imported: only the folder's code can serve
import torch
from transformers import AutoImageProcessor, AutoModelForImageClassification
folder, out = sys.argv[1:]
model = AutoModelForImageClassification.from_pretrained(folder, trust_remote_code=True).eval()
processor = AutoImageProcessor.from_pretrained(folder)
torch.manual_seed(0)
pixels = torch.rand(2, 3, 16, 16)
with torch.no_grad():
    logits = model(pixel_values=pixels).logits
size = [processor.size["height"], processor.size["width"]]
json.dump({"module": type(model).__module__, "logits": logits.tolist(), "size": size}, open(out, "w"))
"""


def test_fine_tuned_image_folder_loads_as_remote_code_without_the_package(tmp_path):
    load_script("run_image_classification").main([
        "--model_name_or_path", tiny_vit_checkpoint(), "--attention_type", "kerformer",
        "--dataset_name", cifar_mirror(10), *training_options(tmp_path / "model", max_train_steps=2),
    ])
    env = dict(os.environ, HF_HUB_OFFLINE="1", HF_MODULES_CACHE=str(tmp_path / "modules"))
    result = subprocess.run([sys.executable, "-I", "-c", RELOAD, str(tmp_path / "model"), str(tmp_path / "out.json")],
                            env=env, capture_output=True, text=True, cwd=tmp_path, timeout=300)
    assert result.returncode == 0, result.stderr[-3000:]
    reloaded = json.loads((tmp_path / "out.json").read_text())
    assert reloaded["module"].startswith("transformers_modules") and reloaded["size"] == [16, 16]

    from transformers import AutoModelForImageClassification

    model = AutoModelForImageClassification.from_pretrained(tmp_path / "model").eval()
    torch.manual_seed(0)
    with torch.no_grad():
        expected = model(pixel_values=torch.rand(2, 3, 16, 16)).logits
    torch.testing.assert_close(torch.tensor(reloaded["logits"]), expected, atol=1e-5, rtol=1e-5)
