"""Run anywhere: every mechanism's model exports to ONNX (``torch.onnx.export``, run with onnxruntime) and compiles
with ``torch.compile(fullgraph=True)``, and both give eager's results.

Each ONNX graph is traced on one unpadded example, a single sequence of one length (what ``tokenizer("hello")``
gives) or a single image, and run on other batch sizes and lengths, padded where the graph takes a mask: nothing of
the example may be baked into the graph, neither its batch size or length (a Python int taken from a shape, a
size-dependent constant; batch 1 is where ``torch.export`` is most tempted to specialise) nor the absence of pads (a
forward that branched on the mask's values would have traced the unpadded kernel and dropped the mask).
``torch.compile`` runs with the ``aot_eager`` backend: it traces the same full graph (any data-dependent branch or
graph break fails ``fullgraph=True``) and the joint forward/backward graph, without Inductor's C++ code generation,
which takes about a minute per model on this machine.

Every model has one layer: the layers run the same code, and tracing costs as much again for each one (a hybrid's
layer takes 10-25 s to export here)."""

from __future__ import annotations

import pytest
import torch

import hf_effattn
from hf_effattn.modeling.kernel_attention import KernelAttention
from helpers.models import HYBRIDS, MECHANISMS, pixel_values, text_config, text_inputs, vision_config

onnxruntime = pytest.importorskip("onnxruntime")
pytest.importorskip("onnxscript")  # torch.onnx.export's exporter writes the graph with it

DYNAMIC = torch.export.Dim.DYNAMIC
# Exporting a local part costs 15-50 s here: each kind of part beside each way of mixing it (one normaliser, a gate
# per head) for texts, and each kind of part once for images, whose attention layers are the texts' own.
TEXT_HYBRIDS = [name for name in HYBRIDS if not name.startswith("psf")]
VISION_HYBRIDS = ["kerformer+window", "dba+blocks"]
# torch.export's own deprecation notice about its tree specs (raised inside the exporter, once per export).
pytestmark = pytest.mark.filterwarnings("ignore:`isinstance\\(treespec, LeafSpec\\)` is deprecated:FutureWarning")

ONE_LAYER = {"num_hidden_layers": 1}
TRACED = dict(batch=1, length=7, seed=3)  # the one example every text graph is traced on
RUNS = [dict(batch=1, length=12, seed=0), dict(batch=3, length=9, seed=1), dict(batch=4, length=14, seed=2)]


class LogitsOf(torch.nn.Module):
    """A model's ``logits`` from positional tensors named ``names`` (what an exported graph takes and returns)."""

    def __init__(self, model: torch.nn.Module, names: list[str]):
        super().__init__()
        self.model, self.names = model, names

    def forward(self, *tensors: torch.Tensor) -> torch.Tensor:
        return self.model(**dict(zip(self.names, tensors))).logits


def text_model(name: str, **overrides) -> torch.nn.Module:
    torch.manual_seed(0)
    config = text_config(name, num_labels=2, **{**ONE_LAYER, **overrides})
    return hf_effattn.EffAttnRobertaForSequenceClassification(config).eval()


def export(model: torch.nn.Module, example: dict[str, torch.Tensor], path) -> None:
    """Export ``model`` traced on ``example``, every axis but the feature axes dynamic."""
    names = list(example)
    shapes = tuple({0: DYNAMIC} if name == "pixel_values" else {0: DYNAMIC, 1: DYNAMIC} for name in names)
    torch.onnx.export(LogitsOf(model, names).eval(), tuple(example.values()), str(path), input_names=names,
                      output_names=["logits"], dynamic_shapes=(shapes,), dynamo=True, verbose=False)


def assert_onnx_equals_eager(path, model: torch.nn.Module, runs: list[dict[str, torch.Tensor]]) -> None:
    """On each of ``runs`` (inputs by name), the exported graph's logits ``[B, num_labels]`` are the eager model's."""
    session = onnxruntime.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    for inputs in runs:
        logits = torch.from_numpy(session.run(None, {name: tensor.numpy() for name, tensor in inputs.items()})[0])
        with torch.no_grad():
            expected = model(**inputs).logits
        torch.testing.assert_close(logits, expected, atol=1e-5, rtol=1e-4)


@pytest.mark.parametrize("name", MECHANISMS + TEXT_HYBRIDS)
def test_onnx_traced_on_one_unpadded_sequence_equals_eager_on_padded_batches(name, tmp_path):
    model = text_model(name)
    export(model, text_inputs(**TRACED), tmp_path / "model.onnx")  # one sequence: no pads, its mask all ones
    assert_onnx_equals_eager(tmp_path / "model.onnx", model, [text_inputs(**run) for run in RUNS])  # 3, 4: padded


def test_onnx_psf_traced_without_mask_equals_eager_on_other_shapes(tmp_path):
    """Without an ``attention_mask`` input PSF runs its own kernel, cyclic shifts over the whole length (every other
    mechanism only leaves the mask out, and the vision test traces each one's mask-less forward, at one length).
    Two factors of three links, fewer shifted slices than the tiny model's default: the export's time grows with
    them."""
    model = text_model("psf", attention_config={"num_factors": 2, "num_links": 3})
    export(model, {"input_ids": text_inputs(**TRACED)["input_ids"]}, tmp_path / "model.onnx")
    runs = [{"input_ids": text_inputs(**run)["input_ids"].clamp(min=3)} for run in RUNS]  # no pad tokens
    assert_onnx_equals_eager(tmp_path / "model.onnx", model, runs)


@pytest.mark.parametrize("traced_length, layers", [(3, 2), (8, 1)], ids=["one-short-block", "two-whole-blocks"])
def test_onnx_of_aligned_blocks_traced_on_one_sequence_serves_every_length(traced_length, layers, tmp_path,
                                                                           monkeypatch):
    """Blocks of 4, traced on one sequence of 3 tokens (one block: torch.export fixes a size of 1, and a graph that
    kept one block failed on batches from its second layer on, so two layers) or of 8 (two whole blocks: eager needs no
    padding to whole blocks, nor a mask, nor a short last block). Kerformer beside the blocks, its summary in chunks of
    4 tokens (``summary_chunk``), with a mask; the blocks alone without one."""
    monkeypatch.setattr(KernelAttention, "summary_chunk", 4)
    settings = {"local_block": 4, "global_tokens": 0, "num_hidden_layers": layers}
    traced = text_inputs(batch=1, length=traced_length, seed=3)
    runs = [text_inputs(**run) for run in RUNS + [dict(batch=2, length=4, seed=4)]]
    model = text_model("kerformer+blocks", **settings)
    export(model, traced, tmp_path / "model.onnx")
    assert_onnx_equals_eager(tmp_path / "model.onnx", model, runs)
    model = text_model("local+blocks", **settings)
    export(model, {"input_ids": traced["input_ids"]}, tmp_path / "unmasked.onnx")
    assert_onnx_equals_eager(tmp_path / "unmasked.onnx", model, [{"input_ids": run["input_ids"].clamp(min=3)}
                                                                 for run in runs])  # no pad tokens


@pytest.mark.parametrize("name", MECHANISMS + VISION_HYBRIDS)
def test_onnx_vision_traced_on_one_image_equals_eager_on_other_batch_sizes(name, tmp_path):
    torch.manual_seed(0)
    model = hf_effattn.EffAttnViTForImageClassification(vision_config(name, num_labels=3, **ONE_LAYER)).eval()
    export(model, {"pixel_values": pixel_values(batch=1)}, tmp_path / "model.onnx")
    runs = [{"pixel_values": pixel_values(batch=batch, seed=1)} for batch in (2, 5)]
    assert_onnx_equals_eager(tmp_path / "model.onnx", model, runs)


def loss_and_gradients(model: torch.nn.Module, inputs: dict) -> tuple[torch.Tensor, list[torch.Tensor]]:
    """Training loss (auxiliary losses included) of a padded batch and the gradient of every parameter."""
    model.zero_grad()
    loss = model(**inputs, labels=torch.tensor([0, 1, 1])).loss
    loss.backward()
    return loss.detach(), [parameter.grad.clone() for parameter in model.parameters()]


@pytest.mark.parametrize("name, masked", [(name, True) for name in MECHANISMS + HYBRIDS] + [("psf", False)])
def test_compile_fullgraph_equals_eager_forward_and_backward(name, masked):
    """With a padded batch, and for PSF also without a mask (its cyclic-shift kernel)."""
    torch._dynamo.reset()  # every test compiles the same forward code for another model: start from an empty cache
    model = text_model(name).train()  # dropout is 0 in the tiny configs: training mode adds the auxiliary losses
    inputs = text_inputs(batch=3, length=9)
    if not masked:
        del inputs["attention_mask"]
        inputs["input_ids"] = inputs["input_ids"].clamp(min=3)  # no pad tokens
    expected_loss, expected_grads = loss_and_gradients(model, inputs)
    compiled = torch.compile(model, fullgraph=True, backend="aot_eager")
    loss, grads = loss_and_gradients(compiled, inputs)
    torch.testing.assert_close(loss, expected_loss, atol=1e-6, rtol=1e-5)
    for grad, expected in zip(grads, expected_grads):
        torch.testing.assert_close(grad, expected, atol=1e-6, rtol=1e-5)
    with torch.no_grad():
        torch.testing.assert_close(compiled.eval()(**inputs).logits, model(**inputs).logits, atol=1e-6, rtol=1e-5)
