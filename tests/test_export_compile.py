"""Run anywhere: every mechanism's model exports to ONNX (``torch.onnx.export``, run with onnxruntime) and compiles
with ``torch.compile(fullgraph=True)``, and both give eager's results.

The ONNX graph is traced on an unpadded batch (what ``tokenizer("hello")`` gives) and run on padded batches of
other sizes and lengths: a forward that branched on the mask's values would have traced the unpadded kernel and
dropped the mask. ``torch.compile`` runs with the ``aot_eager`` backend: it traces the same full graph (any
data-dependent branch or graph break fails ``fullgraph=True``) and the joint forward/backward graph, without
Inductor's C++ code generation, which takes about a minute per model on this machine."""

from __future__ import annotations

import pytest
import torch

import hf_effattn
from models_helpers import MECHANISMS, pixel_values, text_config, text_inputs, vision_config

onnxruntime = pytest.importorskip("onnxruntime")
pytest.importorskip("onnxscript")  # torch.onnx.export's exporter writes the graph with it

DYNAMIC = torch.export.Dim.DYNAMIC
# torch.export's own deprecation notice about its tree specs (raised inside the exporter, once per export).
pytestmark = pytest.mark.filterwarnings("ignore:`isinstance\\(treespec, LeafSpec\\)` is deprecated:FutureWarning")


class LogitsOf(torch.nn.Module):
    """A model's ``logits`` from positional tensors (what an exported graph takes and returns)."""

    def __init__(self, model: torch.nn.Module):
        super().__init__()
        self.model = model

    def forward(self, *tensors: torch.Tensor) -> torch.Tensor:
        names = ("pixel_values",) if len(tensors) == 1 else ("input_ids", "attention_mask")
        return self.model(**dict(zip(names, tensors))).logits


def text_model(name: str) -> torch.nn.Module:
    torch.manual_seed(0)
    return hf_effattn.EffAttnRobertaForSequenceClassification(text_config(name, num_labels=2)).eval()


def run_onnx(path, names: list[str], inputs: dict[str, torch.Tensor]):
    """The exported graph's logits ``[B, num_labels]`` on ``inputs``."""
    session = onnxruntime.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    return torch.from_numpy(session.run(None, {name: inputs[name].numpy() for name in names})[0])


def export(model: torch.nn.Module, example: dict[str, torch.Tensor], path) -> list[str]:
    """Export ``model`` traced on ``example``, every axis but the feature axes dynamic; returns the input names."""
    names = list(example)
    shapes = tuple({0: DYNAMIC} if name == "pixel_values" else {0: DYNAMIC, 1: DYNAMIC} for name in names)
    torch.onnx.export(LogitsOf(model).eval(), tuple(example.values()), str(path), input_names=names,
                      output_names=["logits"], dynamic_shapes=(shapes,), dynamo=True, verbose=False)
    return names


@pytest.mark.parametrize("name", MECHANISMS)
def test_onnx_traced_unpadded_equals_eager_on_padded_batches(name, tmp_path):
    model = text_model(name)
    unpadded = text_inputs(batch=2, length=5, seed=3)
    unpadded["attention_mask"] = torch.ones_like(unpadded["attention_mask"])
    names = export(model, unpadded, tmp_path / "model.onnx")
    for batch, length, seed in [(3, 9, 0), (4, 14, 1)]:
        inputs = text_inputs(batch=batch, length=length, seed=seed)
        with torch.no_grad():
            expected = model(**inputs).logits
        torch.testing.assert_close(run_onnx(tmp_path / "model.onnx", names, inputs), expected, atol=1e-5, rtol=1e-4)


@pytest.mark.parametrize("name", MECHANISMS)
def test_onnx_vision_equals_eager_on_other_batch_sizes(name, tmp_path):
    torch.manual_seed(0)
    model = hf_effattn.EffAttnViTForImageClassification(vision_config(name, num_labels=3)).eval()
    names = export(model, {"pixel_values": pixel_values(batch=2)}, tmp_path / "model.onnx")
    inputs = {"pixel_values": pixel_values(batch=5, seed=1)}
    with torch.no_grad():
        expected = model(**inputs).logits
    torch.testing.assert_close(run_onnx(tmp_path / "model.onnx", names, inputs), expected, atol=1e-5, rtol=1e-4)


def loss_and_gradients(model: torch.nn.Module, inputs: dict) -> tuple[torch.Tensor, list[torch.Tensor]]:
    """Training loss (auxiliary losses included) of a padded batch and the gradient of every parameter."""
    model.zero_grad()
    loss = model(**inputs, labels=torch.tensor([0, 1, 1])).loss
    loss.backward()
    return loss.detach(), [parameter.grad.clone() for parameter in model.parameters()]


@pytest.mark.parametrize("name, masked", [(name, True) for name in MECHANISMS] + [("psf", False)])
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
