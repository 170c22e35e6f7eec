"""Long attention transfer (``hf_effattn.conversion.transfer``): the teacher's softmax attention, computed in
chunks of queries, equals the plain teacher's and never holds an ``h x N x N`` tensor, even when ``sdpa`` falls
back to its math kernel; the teacher of a model with extended positions is extended the same way; texts are
read up to the model's maximum length and no further; the report gives the longest input and the peak memory,
and old reports still load."""

from __future__ import annotations

import importlib
import json

import pytest
import torch
from helpers.finetuning import one_torch_thread  # noqa: F401 (autouse: one torch thread)
from huggingface_hub import ModelCard
from helpers.memory import LargestTensor
from helpers.conversion import run_convert
from torch.nn.attention import SDPBackend, sdpa_kernel
from transformers import PreTrainedConfig

from hf_effattn import EffAttnRobertaModel, TransferReport
from hf_effattn.conversion.transfer import REPORT_FILE, load_teacher, transfer_attention, transfer_length
from hf_effattn.conversion.transfer import teacher as transfer_teacher
from hf_effattn.conversion.transfer.peak_memory import CUDA_METHOD, RSS_METHOD
from hf_effattn.conversion.transfer.teacher import teacher_targets
from hf_effattn.conversion.transfer.training import trainable_parameters, transfer_step
from hf_effattn.finetuning.synthetic import build_word_tokenizer, save_random_roberta

WORDS = [f"w{i}" for i in range(40)]
LONG, HEADS = 2048, 4  # the tiny checkpoint's maximum length and heads (hidden 16)


@pytest.fixture(scope="module")
def long_source(tmp_path_factory) -> str:
    """A tiny RoBERTa masked-LM checkpoint (hidden 16, 4 heads, 2 layers) with positions for 2,048 tokens and
    a word-level tokenizer: a long checkpoint made directly, with no extension."""
    torch.manual_seed(0)
    folder = tmp_path_factory.mktemp("long-roberta")
    save_random_roberta(folder, build_word_tokenizer(WORDS, LONG), hidden_size=16, dropout=0.0)
    return str(folder)


def token_batch(batch: int, length: int, seed: int = 0) -> dict:
    """Random ids, the second sequence right-padded by a quarter."""
    generator = torch.Generator().manual_seed(seed)
    input_ids = torch.randint(5, 40, (batch, length), generator=generator)
    attention_mask = torch.ones(batch, length, dtype=torch.long)
    attention_mask[1:, length - length // 4:] = 0
    return {"input_ids": input_ids.masked_fill(attention_mask == 0, 1), "attention_mask": attention_mask}


def plain_targets(teacher, inputs: dict):
    """Each layer's attention-block output and the last hidden state of the teacher as it runs unchanged."""
    outputs = []
    handles = [layer.attention.output.dense.register_forward_hook(lambda module, args, output: outputs.append(output))
               for layer in teacher.encoder.layer]
    with torch.no_grad():
        last = teacher(**inputs).last_hidden_state
    for handle in handles:
        handle.remove()
    return outputs, last


@pytest.mark.parametrize("attention_type", ["sdpa", "eager"])
def test_the_chunked_teacher_equals_the_plain_teacher_and_never_holds_the_score_matrix(
        attention_type, long_source, monkeypatch):
    """In chunks of 5 queries (of 40, padded), under sdpa's math kernel (which writes out the scores): the same
    outputs as the teacher run whole, and no tensor as large as ``h x N x N``, which the plain run has."""
    length = 40
    teacher = EffAttnRobertaModel.from_pretrained(long_source, attention_type=attention_type).eval()
    inputs = token_batch(2, length)
    monkeypatch.setattr(transfer_teacher, "TEACHER_CHUNK_SCORES", 2 * HEADS * 5 * length)
    with sdpa_kernel(SDPBackend.MATH), LargestTensor() as plain:
        expected, expected_last = plain_targets(teacher, inputs)
    with sdpa_kernel(SDPBackend.MATH), LargestTensor() as chunked:
        _, _, outputs, last = teacher_targets(teacher, inputs)
    for output, target in zip(outputs, expected, strict=True):
        torch.testing.assert_close(output, target, atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(last, expected_last, atol=1e-5, rtol=1e-5)
    assert plain.numel >= HEADS * length**2 > chunked.numel
    assert chunked.numel >= 2 * HEADS * 5 * length  # a chunk's scores: [B, h, 5, N]
    attention = teacher.encoder.layer[0].attention.self
    assert attention.max_chunk_scores is None  # the chunking is undone after the call


def test_only_a_softmax_teacher_is_chunked(long_source):
    teacher = EffAttnRobertaModel.from_pretrained(long_source, attention_type="kerformer").eval()
    with pytest.raises(ValueError, match="The teacher's attention is KerformerAttention, not softmax: load the "
                                         "teacher with attention_type='sdpa'"):
        teacher_targets(teacher, token_batch(2, 16))


def test_a_long_transfer_step_never_holds_an_n_by_n_tensor(long_source):
    """A whole transfer step (teacher, Kerformer forward and backward) at 2,048 tokens with the default chunks,
    sdpa forced onto its math kernel: no tensor reaches ``h x N x N`` elements, while the plain teacher's does."""
    teacher = EffAttnRobertaModel.from_pretrained(long_source).eval()
    model = EffAttnRobertaModel.from_pretrained(long_source, attention_type="kerformer")
    inputs = token_batch(1, LONG)
    parameters = trainable_parameters(model, "attention")
    with sdpa_kernel(SDPBackend.MATH), LargestTensor() as step:
        loss, length = transfer_step(model, teacher, inputs, parameters, max_grad_norm=1.0)
    assert length == LONG and loss.item() > 0 and all(p.grad is not None for p in parameters)
    assert step.numel < HEADS * LONG**2
    with sdpa_kernel(SDPBackend.MATH), LargestTensor() as plain:
        plain_targets(teacher, inputs)
    assert plain.numel >= HEADS * LONG**2


def long_texts(folder, count: int = 4, words: int = 3000) -> str:
    """A .jsonl file of ``count`` texts of ``words`` words (longer than the checkpoint's 2,048 positions)."""
    generator = torch.Generator().manual_seed(0)
    path = folder / "documents.jsonl"
    rows = [{"text": " ".join(WORDS[i] for i in torch.randint(0, 40, (words,), generator=generator).tolist())}
            for _ in range(count)]
    path.write_text("\n".join(json.dumps(row) for row in rows))
    return str(path)


def test_convert_transfers_on_long_texts_up_to_the_models_length(long_source, tmp_path, capsys):
    out = tmp_path / "out"
    assert run_convert([long_source, "--attention_type", "kerformer", "--output_dir", str(out),
                        "--transfer_data", long_texts(tmp_path), "--transfer_max_length", "model",
                        "--transfer_steps", "2", "--transfer_batch_size", "2"]) == 0
    report = TransferReport.from_dict(json.loads((out / REPORT_FILE).read_text()))
    assert report.longest_input == LONG and report.examples_seen == 4
    assert report.peak_memory_method == RSS_METHOD and report.peak_memory_bytes > 0
    printed = capsys.readouterr().out
    assert f"longest input: {LONG} tokens" in printed
    assert f"peak memory: {report.peak_memory_bytes / 2**30:.2f} GiB ({RSS_METHOD})" in printed
    card = " ".join(ModelCard.load(out / "README.md").text.split())
    assert f"The longest input was {LONG} tokens, and the transfer's peak memory" in card and RSS_METHOD in card


def test_the_card_of_an_extended_model_names_the_long_transfer_as_what_trained_beyond_the_old_length(long_source,
                                                                                                    tmp_path):
    out = tmp_path / "out"
    assert run_convert([long_source, "--attention_type", "kerformer", "--output_dir", str(out),
                        "--max_length", str(2 * LONG), "--transfer_data", long_texts(tmp_path, count=1),
                        "--transfer_max_length", "model", "--transfer_steps", "1", "--transfer_batch_size", "1"]) == 0
    longest = TransferReport.from_dict(json.loads((out / REPORT_FILE).read_text())).longest_input
    assert LONG < longest <= 2 * LONG
    card = " ".join(ModelCard.load(out / "README.md").text.split())
    assert (f"Beyond the original size, only the attention transfer below has trained on inputs (of up to {longest} "
            "tokens); the rest of the model has not been trained on them.") in card
    assert "Inputs beyond the original size have not been trained on" not in card


def test_a_transfer_length_above_the_models_is_refused_before_anything_runs(long_source, tmp_path, capsys,
                                                                            monkeypatch):
    def no_teacher(*args, **kwargs):
        raise AssertionError("the length is checked before the teacher loads")

    monkeypatch.setattr(importlib.import_module("hf_effattn.conversion.convert"), "load_teacher", no_teacher)
    out = tmp_path / "out"
    refused = (rf"The transfer max_length 4096 \(--transfer_max_length\) is longer than the model's maximum length "
               rf"{LONG} .*use at most {LONG}, or 'model'.*--max_length 4096")
    with pytest.raises(ValueError, match=refused):
        run_convert([long_source, "--attention_type", "kerformer", "--output_dir", str(out),
                     "--transfer_data", "unused.jsonl", "--transfer_max_length", "4096"])
    assert not out.exists()
    with pytest.raises(SystemExit):
        run_convert([long_source, "--attention_type", "kerformer", "--output_dir", str(out),
                     "--transfer_data", "unused.jsonl", "--transfer_max_length", "longest"])
    assert "expected a positive integer or 'model', got 'longest'" in capsys.readouterr().err


def test_a_max_length_below_the_checkpoints_is_named_before_the_transfer_length(long_source, tmp_path):
    out = tmp_path / "out"
    with pytest.raises(ValueError, match=rf"^max_length=100 is below the {LONG} of {long_source}: .*never cut"):
        run_convert([long_source, "--attention_type", "kerformer", "--output_dir", str(out), "--max_length", "100",
                     "--transfer_data", "unused.jsonl", "--transfer_max_length", "200"])
    assert not out.exists()


@pytest.mark.parametrize("positions, requested, length", [
    (LONG + 2, None, 128), (20, None, 18), (LONG + 2, "model", LONG), (LONG + 2, LONG, LONG), (LONG + 2, 300, 300),
])
def test_the_transfer_length(positions, requested, length, long_source):
    """By default 128 tokens, or the model's maximum length if shorter; ``"model"``: the model's; a number up to
    it as given (RoBERTa: the maximum length is ``max_position_embeddings - 2``)."""
    config = EffAttnRobertaModel.config_class.from_pretrained(long_source, max_position_embeddings=positions)
    assert transfer_length(requested, config.attention_max_length) == length


def test_the_teacher_is_extended_exactly_when_the_student_is(long_source, monkeypatch):
    """``load_teacher`` asks ``from_pretrained`` for ``max_length=`` the student's maximum length when that is
    longer than the checkpoint's, and for nothing more otherwise."""
    calls = []
    monkeypatch.setattr(EffAttnRobertaModel, "from_pretrained",
                        classmethod(lambda cls, source, **kwargs: calls.append(kwargs) or torch.nn.Identity()))
    student = EffAttnRobertaModel(EffAttnRobertaModel.config_class.from_pretrained(long_source))
    load_teacher(student, long_source)
    student.config.max_position_embeddings = 4096 + 2
    load_teacher(student, long_source)
    source = PreTrainedConfig.get_config_dict(long_source)[0]  # read once, handed on: from_pretrained reads it no more
    assert calls == [{"config_dict": source}, {"config_dict": source, "max_length": 4096}]


def test_the_teacher_of_an_extended_model_is_extended_the_same_way(long_source, tmp_path):
    """A checkpoint of 2,048 positions extended to 4,096: the teacher has the student's position embeddings and
    a transfer step at 4,096 tokens runs."""
    student = EffAttnRobertaModel.from_pretrained(long_source, attention_type="kerformer", max_length=2 * LONG)
    teacher = load_teacher(student, long_source)
    assert teacher.config.attention_max_length == student.config.attention_max_length == 2 * LONG
    torch.testing.assert_close(teacher.embeddings.position_embeddings.weight,
                               student.embeddings.position_embeddings.weight, atol=0, rtol=0)
    report = transfer_attention(student, teacher, [token_batch(1, 2 * LONG)], steps=1, progress=False)
    assert report.longest_input == 2 * LONG


class WithBuffer:
    """Batches whose iteration holds a buffer of ``size`` bytes, touched, while it lasts."""

    def __init__(self, batches: list[dict], size: int):
        self.batches, self.size = batches, size

    def __iter__(self):
        buffer = torch.ones(self.size // 4)  # noqa: F841 (held while the batches are read)
        yield from self.batches


def test_the_peak_memory_is_the_transfers_own(long_source):
    """A 256 MiB buffer held during one transfer raises its peak by that much above the next transfer's: the
    peak is reset at each start, not carried over from earlier work."""
    size, batches = 256 * 2**20, [token_batch(2, 32, seed) for seed in range(2)]
    peaks = []
    for data in (WithBuffer(batches, size), batches):
        teacher = EffAttnRobertaModel.from_pretrained(long_source)
        model = EffAttnRobertaModel.from_pretrained(long_source, attention_type="kerformer")
        report = transfer_attention(model, teacher, data, steps=2, report_data=batches, progress=False)
        peaks.append(report.peak_memory_bytes)
    assert peaks[0] - peaks[1] > 0.9 * size


def test_reports_without_the_new_fields_still_load():
    old = {"attention_type": "dba", "train": "attention", "steps": 3, "learning_rate": 3e-3, "examples_seen": 12,
           "hidden_cosine_before": 0.5, "hidden_cosine_after": 0.8, "data": "texts.txt", "losses": [1.0, 0.5, 0.2],
           "layers": [{"layer": 0, "mse_before": 1.0, "mse_after": 0.1, "cosine_before": 0.5, "cosine_after": 0.9}]}
    report = TransferReport.from_dict(old)
    assert (report.longest_input, report.peak_memory_bytes, report.peak_memory_method) == (None, None, None)
    assert "longest input" not in report.format() and "peak memory" not in report.format()
    new = TransferReport.from_dict({**old, "longest_input": 4096, "peak_memory_bytes": 3 * 2**30,
                                    "peak_memory_method": CUDA_METHOD})
    assert TransferReport.from_dict(json.loads(json.dumps(new.to_dict()))) == new
    assert new.format().endswith(f"longest input: 4096 tokens\npeak memory: 3.00 GiB ({CUDA_METHOD})")
