"""Attention transfer (``hf_effattn.conversion.transfer``): it lowers every layer's error for every mechanism, text and
vision; pads never enter it; its report agrees with an explicit computation; it trains only what it says and
hands the model back as it was; and ``convert`` runs it end to end on text files and image folders, reading the
checkpoint's config and tokenizer once (before fine-tuning: ``tests/finetuning/test_transfer_before_finetuning.py``)."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
import torch
import transformers
from helpers.finetuning import one_torch_thread  # noqa: F401 (autouse: one torch thread)
from helpers.finetuning import (
    saved_weights,
    tiny_images,
    tiny_text_checkpoint,
    tiny_tokenizer,
    tiny_vit_checkpoint,
)
from huggingface_hub import ModelCard
from helpers.conversion import run_convert
from helpers.models import assert_loads_as_remote_code, pixel_values, source_config, text_inputs

import hf_effattn
from hf_effattn import (EffAttnRobertaModel, EffAttnViTForImageClassification, EffAttnViTModel, TransferReport,
                        conversion)
from hf_effattn.conversion.transfer import REPORT_FILE, transfer_attention
from hf_effattn.conversion.transfer.data import transfer_loader
from hf_effattn.conversion.transfer.losses import masked_mse

EFFICIENT = ["singularformer", "kerformer", "dba", "psf", "linear", "performer", "nystromformer", "linformer",
             "cosformer"]


def save_peaked_source(model_class, kind: str, folder) -> str:
    """A tiny source checkpoint with weights wide enough (std 0.4) that its softmax attention is far from
    uniform, as a trained model's is (at the usual std 0.02 every mechanism already matches it)."""
    torch.manual_seed(0)
    model_class(source_config(kind, initializer_range=0.4)).save_pretrained(folder)
    return str(folder)


@pytest.fixture(scope="module")
def roberta_source(tmp_path_factory):
    return save_peaked_source(transformers.RobertaModel, "roberta", tmp_path_factory.mktemp("roberta"))


@pytest.fixture(scope="module")
def vit_source(tmp_path_factory):
    return save_peaked_source(transformers.ViTModel, "vit", tmp_path_factory.mktemp("vit"))


def text_batches(count: int = 4) -> list[dict]:
    return [text_inputs(batch=4, length=9, seed=seed) for seed in range(count)]


def image_batches(count: int = 4) -> list[dict]:
    return [{"pixel_values": pixel_values(batch=3, seed=seed)} for seed in range(count)]


def pair(model_class, source: str, attention_type: str, seed: int = 0):
    torch.manual_seed(seed)
    return model_class.from_pretrained(source), model_class.from_pretrained(source, attention_type=attention_type)


@pytest.mark.parametrize("attention_type", EFFICIENT)
@pytest.mark.parametrize("family", ["text", "vision"])
def test_transfer_lowers_every_layers_error(family, attention_type, roberta_source, vit_source):
    model_class, source, data = {
        "text": (EffAttnRobertaModel, roberta_source, text_batches()),
        "vision": (EffAttnViTModel, vit_source, image_batches()),
    }[family]
    teacher, model = pair(model_class, source, attention_type)
    report = transfer_attention(model, teacher, data, steps=60, learning_rate=1e-2, progress=False)
    assert len(report.layers) == model.config.num_hidden_layers and report.steps == 60
    for layer in report.layers:
        assert layer.mse_after < 0.7 * layer.mse_before, layer
        assert layer.cosine_after > layer.cosine_before, layer
    assert report.losses[-1] < report.losses[0]


def reference_layer_errors(model, teacher, batch):
    """Per layer (MSE, cosine) of the attention-block outputs, written out: the teacher's hidden states as each
    layer's input (RoBERTa is post-LN: the layer input is the mechanism's input), real tokens picked by
    boolean indexing, state handed from layer to layer."""
    mask = batch["attention_mask"].bool()
    with torch.no_grad():
        hidden_states = teacher(**batch, output_hidden_states=True).hidden_states
        errors, state = [], None
        for i, (mine, theirs) in enumerate(zip(model.encoder.layer, teacher.encoder.layer)):
            target = theirs.attention.output.dense(theirs.attention.self(hidden_states[i], mask).context)
            attention = mine.attention.self(hidden_states[i], mask, state)
            output, state = mine.attention.output.dense(attention.context), attention.state
            difference = (output - target)[mask]
            cosine = torch.nn.functional.cosine_similarity(output[mask], target[mask], dim=-1)
            errors.append((difference.pow(2).mean().item(), cosine.mean().item()))
        last = torch.nn.functional.cosine_similarity(model(**batch).last_hidden_state[mask],
                                                     hidden_states[-1][mask], dim=-1).mean().item()
    return errors, last


@pytest.mark.parametrize("attention_type", ["kerformer", "dba", "singularformer"])
def test_the_report_agrees_with_an_explicit_computation(attention_type, roberta_source):
    teacher, model = pair(EffAttnRobertaModel, roberta_source, attention_type)
    report_batch = text_inputs(batch=3, length=9, seed=99)
    before, hidden_before = reference_layer_errors(model.eval(), teacher.eval(), report_batch)
    report = transfer_attention(model, teacher, text_batches(), steps=5, learning_rate=1e-2,
                                report_data=[report_batch], progress=False)
    after, hidden_after = reference_layer_errors(model, teacher, report_batch)
    for layer, (mse_before, cos_before), (mse_after, cos_after) in zip(report.layers, before, after):
        assert layer.mse_before == pytest.approx(mse_before, rel=1e-4)
        assert layer.cosine_before == pytest.approx(cos_before, rel=1e-4)
        assert layer.mse_after == pytest.approx(mse_after, rel=1e-4)
        assert layer.cosine_after == pytest.approx(cos_after, rel=1e-4)
    assert report.hidden_cosine_before == pytest.approx(hidden_before, rel=1e-4)
    assert report.hidden_cosine_after == pytest.approx(hidden_after, rel=1e-4)
    assert report.examples_seen == 5 * 4


def test_masked_mse_ignores_pads():
    prediction, target = torch.randn(2, 5, 4), torch.randn(2, 5, 4)
    mask = torch.tensor([[1, 1, 1, 0, 0], [0, 1, 1, 1, 1]], dtype=torch.bool)
    expected = (prediction - target)[mask].pow(2).mean()
    torch.testing.assert_close(masked_mse(prediction, target, mask), expected)
    prediction[~mask] = 1e6
    torch.testing.assert_close(masked_mse(prediction, target, mask), expected)


def with_other_pads(batch: dict, seed: int) -> dict:
    """The same right-padded batch with random tokens (still masked) where the pads were: RoBERTa positions of
    real tokens do not change, but the pad positions' embeddings do."""
    generator = torch.Generator().manual_seed(seed)
    noise = torch.randint(3, 40, batch["input_ids"].shape, generator=generator)
    pads = batch["attention_mask"] == 0
    return {**batch, "input_ids": torch.where(pads, noise, batch["input_ids"])}


@pytest.mark.parametrize("attention_type", ["kerformer", "psf"])
def test_pads_never_enter_the_transfer(attention_type, roberta_source):
    def right_padded(seed):
        batch = text_inputs(batch=4, length=9, seed=seed)
        lengths = torch.tensor([9, 6, 4, 7])
        batch["attention_mask"] = (torch.arange(9) < lengths[:, None]).long()
        batch["input_ids"] = batch["input_ids"].masked_fill(batch["attention_mask"] == 0, 1)
        return batch

    data = [right_padded(seed) for seed in range(3)]
    results = []
    for variant in (data, [with_other_pads(batch, seed) for seed, batch in enumerate(data)]):
        teacher, model = pair(EffAttnRobertaModel, roberta_source, attention_type)
        report = transfer_attention(model, teacher, variant, steps=8, learning_rate=1e-2, progress=False)
        results.append((model.state_dict(), report))
    (weights_a, report_a), (weights_b, report_b) = results
    for name in weights_a:
        torch.testing.assert_close(weights_a[name], weights_b[name], atol=1e-6, rtol=1e-5, msg=name)
    assert report_a.losses == pytest.approx(report_b.losses, rel=1e-5)


@pytest.mark.parametrize("train, trained", [
    ("mechanism", {"se_"}),
    ("attention", {"se_", "query", "key", "value"}),
    ("attention_block", {"se_", "query", "key", "value", "attention.output.dense"}),
])
def test_only_the_chosen_parameters_train_and_the_model_comes_back_as_it_was(train, trained, roberta_source):
    teacher, model = pair(EffAttnRobertaModel, roberta_source, "kerformer")
    model.train()
    model.embeddings.word_embeddings.weight.requires_grad_(False)
    flags = {name: p.requires_grad for name, p in model.named_parameters()}
    before = {name: p.detach().clone() for name, p in model.named_parameters()}
    transfer_attention(model, teacher, text_batches(), steps=3, learning_rate=1e-2, train=train, progress=False)
    assert model.training and flags == {name: p.requires_grad for name, p in model.named_parameters()}
    for name, parameter in model.named_parameters():
        changed = not torch.equal(parameter, before[name])
        should = ".attention." in name and any(part in name for part in trained) and "LayerNorm" not in name
        assert changed == should, name


def test_clear_errors(roberta_source, vit_source, tmp_path):
    teacher, model = pair(EffAttnRobertaModel, roberta_source, "sdpa")
    with pytest.raises(ValueError, match="no parameters of its own"):
        transfer_attention(model, teacher, text_batches(), steps=1, train="mechanism", progress=False)
    with pytest.raises(ValueError, match="train='everything' is not one of"):
        transfer_attention(model, teacher, text_batches(), steps=1, train="everything", progress=False)
    with pytest.raises(ValueError, match="at least one step"):
        transfer_attention(model, teacher, text_batches(), steps=0, progress=False)
    with pytest.raises(ValueError, match="yielded no batch"):
        transfer_attention(model, teacher, [], steps=1, progress=False)
    wider = EffAttnRobertaModel.from_pretrained(roberta_source, hidden_size=32, num_attention_heads=2,
                                                ignore_mismatched_sizes=True)
    with pytest.raises(ValueError, match="teacher has hidden_size=32"):
        transfer_attention(model, wider, text_batches(), steps=1, progress=False)
    moved = r"The teacher is on meta but the model on cpu: move it with teacher.to\('cpu'\)"
    with pytest.raises(ValueError, match=moved):
        transfer_attention(model, EffAttnRobertaModel(teacher.config).to("meta"), text_batches(), steps=1,
                           progress=False)
    EffAttnRobertaModel.from_pretrained(roberta_source, attention_type="kerformer").save_pretrained(tmp_path / "ker")
    with pytest.raises(ValueError, match="not softmax, so it cannot teach"):  # (an output inside it: refused first)
        conversion.convert(str(tmp_path / "ker"), "dba", tmp_path / "out", convert_attention=True,
                           transfer={"data": "unused.txt", "steps": 1})


def write_texts(folder, fmt: str) -> str:
    from datasets import Dataset

    texts = [f"w{i} w{i + 3} a{i % 4} w{(7 * i) % 40}" for i in range(24)] + [""]
    path = folder / f"texts.{fmt}"
    if fmt == "txt":
        path.write_text("\n".join(texts))
    else:
        rows = Dataset.from_dict({"sentence": texts, "label": [i % 2 for i in range(len(texts))]})
        {"csv": rows.to_csv, "jsonl": rows.to_json, "parquet": rows.to_parquet}[fmt](str(path))
    return str(path)


@pytest.mark.parametrize("fmt", ["txt", "csv", "jsonl", "parquet"])
def test_convert_with_transfer_reads_text_files(fmt, tmp_path, capsys):
    data = write_texts(tmp_path, fmt)
    out = tmp_path / "out"
    assert run_convert([tiny_text_checkpoint(), "--attention_type", "dba", "--output_dir", str(out),
                        "--transfer_data", data, "--transfer_steps", "4", "--transfer_batch_size", "8"]) == 0
    printed = capsys.readouterr().out
    assert "Attention transfer to 'dba': 4 steps, 32 examples" in printed and "last hidden state" in printed
    report = json.loads((out / REPORT_FILE).read_text())
    assert report["data"] == data and len(report["layers"]) == 2 and len(report["losses"]) == 4
    card = ModelCard.load(out / "README.md")
    assert "converted and not fine-tuned" in card.text and "## Attention transfer" in card.text
    assert "4 steps on\n32 examples" in card.text and "## Results" not in card.text
    assert card.data.pipeline_tag == "fill-mask" and "dba" in card.data.tags
    query = "roberta.encoder.layer.0.attention.self.query.weight"
    assert not torch.equal(saved_weights(out)[query], saved_weights(tiny_text_checkpoint())[query])


def test_the_teachers_load_is_not_reported_as_a_second_conversion(tmp_path, caplog):
    """The teacher of a masked-LM checkpoint is its bare encoder, whose pooler the checkpoint lacks: reading it is not
    a conversion, so the only load report is the model's own (its new mechanism's parameters)."""
    caplog.set_level("INFO")
    conversion.convert(tiny_text_checkpoint(), "dba", tmp_path / "out",
                       transfer={"data": write_texts(tmp_path, "txt"), "steps": 1})
    reports = [record.getMessage() for record in caplog.records if "New parameters" in record.getMessage()]
    assert len(reports) == 1 and reports[0].startswith("EffAttnRobertaForMaskedLM (attention_type='dba')")
    assert "pooler" not in reports[0]
    assert f"The softmax teacher: {tiny_text_checkpoint()}, read with its own attention (sdpa)." in caplog.messages


def test_a_transferred_folder_loads_as_remote_code(tmp_path):
    out = tmp_path / "out"
    model, report = conversion.convert(tiny_text_checkpoint(), "psf", out, output_transfer_report=True,
                                       transfer={"data": write_texts(tmp_path, "txt"), "steps": 3})
    model.eval()
    assert report == TransferReport.read(out) and report.steps == 3  # the report convert returns is the one saved
    assert conversion.convert(tiny_text_checkpoint(), "psf", tmp_path / "plain", output_transfer_report=True)[1] is None
    inputs = dict(transformers.AutoTokenizer.from_pretrained(out)(["w1 w2 a3", "w5 a1 w9 w9 w10"], padding=True,
                                                                   return_tensors="pt"))
    with torch.no_grad():
        logits = model(**inputs).logits
    assert_loads_as_remote_code(out, "AutoModelForMaskedLM", inputs, logits)


def test_convert_reads_the_checkpoints_config_once_and_loads_its_tokenizer_once(tmp_path, monkeypatch):
    """The pre-flight check, the model, the teacher and the transfer share one read of ``config.json`` by this
    package (Transformers' own AutoTokenizer reads it too), and the transfer's batches and the saved folder one
    tokenizer."""
    ours = [Path(module.__file__).parent for module in (hf_effattn, hf_effattn.modeling)]  # two folders, editable
    reads, tokenizers = [], []
    get_config_dict = transformers.PreTrainedConfig.get_config_dict.__func__
    from_pretrained = transformers.AutoTokenizer.from_pretrained.__func__

    def counted_read(cls, path, *args, **kwargs):
        caller = Path(sys._getframe(1).f_code.co_filename).resolve()
        reads.extend([caller] if any(caller.is_relative_to(folder) for folder in ours) else [])
        return get_config_dict(cls, path, *args, **kwargs)

    def counted_load(cls, *args, **kwargs):
        tokenizers.append(args[0])
        return from_pretrained(cls, *args, **kwargs)

    monkeypatch.setattr(transformers.PreTrainedConfig, "get_config_dict", classmethod(counted_read))
    monkeypatch.setattr(transformers.AutoTokenizer, "from_pretrained", classmethod(counted_load))
    conversion.convert(tiny_text_checkpoint(), "dba", tmp_path / "out",
                       transfer={"data": write_texts(tmp_path, "txt"), "steps": 1})
    assert [path.name for path in reads] == ["convert.py"] and tokenizers == [tiny_text_checkpoint()]
    assert (tmp_path / "out" / "tokenizer_config.json").is_file() and (tmp_path / "out" / REPORT_FILE).is_file()


def test_transfer_data_errors_name_the_problem(tmp_path):
    with pytest.raises(FileNotFoundError, match="transfer data file 'missing.csv' does not exist"):
        transfer_loader("missing.csv", None, "text")
    with pytest.raises(ValueError, match="--transfer_column 'body' is not among"):
        transfer_loader(write_texts(tmp_path, "csv"), None, "text", column="body")
    (tmp_path / "empty.txt").write_text("\n  \n")
    with pytest.raises(ValueError, match="holds no usable text examples"):
        transfer_loader(str(tmp_path / "empty.txt"), None, "text")
    (tmp_path / "data.yaml").write_text("a: 1")
    with pytest.raises(ValueError, match="Unsupported transfer data file"):
        transfer_loader(str(tmp_path / "data.yaml"), None, "text")


def test_convert_with_transfer_reads_an_image_folder(tmp_path):
    folder = tmp_path / "images"
    folder.mkdir()
    for i, image in enumerate(tiny_images(10, 2, seed=0)[0]):
        image.save(folder / f"{i}.png")
    model = conversion.convert(tiny_vit_checkpoint(), "kerformer", tmp_path / "out", task="image-classification",
                               num_labels=2, transfer={"data": str(folder), "steps": 3, "batch_size": 4})
    assert isinstance(model, EffAttnViTForImageClassification)
    report = json.loads((tmp_path / "out" / REPORT_FILE).read_text())
    assert report["examples_seen"] == 4 + 4 + 2 and report["attention_type"] == "kerformer"


def test_tokenizer_batches_feed_the_transfer():
    """The inputs a tokenizer and a Transformers collator give (with labels and token types) are accepted."""
    tokenizer = tiny_tokenizer()
    collator = transformers.DataCollatorWithPadding(tokenizer)
    rows = [{**tokenizer(f"w{i} a{i % 4} w{i + 1}"), "labels": i % 2} for i in range(8)]
    loader = torch.utils.data.DataLoader(rows, batch_size=4, collate_fn=collator)
    source = tiny_text_checkpoint()
    teacher, model = pair(EffAttnRobertaModel, source, "kerformer")
    report = transfer_attention(model, teacher, loader, steps=2, progress=False)
    assert report.examples_seen == 8
