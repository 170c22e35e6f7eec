"""The papers' baselines beyond what every mechanism is tested for (tests/mechanisms/test_references.py, test_padding.py,
test_memory.py, test_mixed_precision.py): Performer's random features (what they estimate, how they are drawn,
saved, converted and redrawn, and its stabiliser), pretrained checkpoints converting into the baselines, and the
command line listing, benchmarking and training them."""

from __future__ import annotations

import argparse
import csv
import logging
import math

import pytest
import torch
import transformers
from helpers.threads import restore_torch_threads  # noqa: F401 (an autouse fixture)

import hf_effattn
from hf_effattn.commands import bench as bench_command
from hf_effattn.commands import list as listing
from hf_effattn.commands import train_task as train_task_command
from hf_effattn.modeling.attention_performer import orthogonal_gaussian_features
from hf_effattn.synthetic_tasks import training
from helpers.mechanisms import build, mixed_batch, random_batch
from helpers.models import enable_checkpointing, save_source, text_config, text_inputs
from helpers.references import performer_reference
from helpers.tolerances import assert_float64_close


def test_performer_features_estimate_the_softmax_kernel():
    """Lemma 1: ``E[phi(q) . phi(k)] = exp(q . k / sqrt(d))``; with many features the estimate is close."""
    attn = build("performer", {"num_features": 20000}, hidden=8, heads=1)
    query, key = 0.5 * torch.randn(2, 5, 8, dtype=torch.float64, generator=torch.Generator().manual_seed(0))
    phi_query, phi_key = (torch.exp(attn.exponents(x)) / math.sqrt(20000) for x in (query, key))
    estimate = phi_query @ phi_key.T
    exact = torch.exp(query @ key.transpose(-1, -2) / math.sqrt(8))
    torch.testing.assert_close(estimate, exact, rtol=0.05, atol=0)


def test_performer_features_are_orthogonal_gaussian_blocks():
    features = orthogonal_gaussian_features(20, 8, torch.Generator().manual_seed(0))
    assert features.shape == (20, 8)
    for block in (features[:8], features[8:16], features[16:]):
        gram = block @ block.T
        assert_float64_close(gram, torch.diag(torch.diagonal(gram)), precision=1e-12)
    rows = orthogonal_gaussian_features(4000, 8, torch.Generator().manual_seed(1))
    # Rows marginally N(0, I_8): mean 0 (QR's own signs would bias the directions: 0.12 here), E|w|^2 = d.
    assert rows.mean(0).abs().max() < 0.06
    assert abs(rows.square().sum(1).mean().item() - 8) < 0.4


def test_performer_features_are_fixed_by_seed_and_layer():
    first, again = build("performer", layer_idx=2), build("performer", layer_idx=2)
    assert torch.equal(first.random_features, again.random_features)
    assert not torch.equal(first.random_features, build("performer", layer_idx=3).random_features)
    assert not torch.equal(first.random_features, build("performer", {"feature_seed": 1}, layer_idx=2).random_features)


def test_performer_stabiliser_keeps_float32_finite_where_the_papers_exp_underflows():
    """Inputs so large that every ``exp(W x' - |x'|^2 / 2)`` of some rows underflows to 0 in float32 (the paper's
    form would give 0 / 0): the stabilised fast path stays finite and equals the unstabilised float64 reference."""
    attn = build("performer", dtype=torch.float32, std=1.0)
    x, mask = random_batch([9, 5], ["right", "left"], 9, dtype=torch.float32)
    x = 3 * x
    assert (torch.exp(attn.exponents(attn.project(x)[0])).amax(-1) == 0).any()
    out = attn(x, mask).context
    assert torch.isfinite(out).all()
    attn64 = attn.double()
    for b in range(2):
        expected = performer_reference(attn64, x[b][mask[b]].double()).context
        torch.testing.assert_close(out[b][mask[b]].double(), expected, atol=1e-4, rtol=1e-4)


def test_performer_output_ignores_a_batch_mate_with_huge_activations():
    """The keys' stabiliser is taken per sequence (and head): another sequence of the batch, however large, changes
    nothing (one maximum over the whole batch, as in the authors' code, would underflow this sequence's keys)."""
    attn = build("performer", dtype=torch.float32)
    x, mask = mixed_batch(dtype=torch.float32)
    alone = attn(x[:1], mask[:1]).context
    loud = x.clone()
    loud[1:] *= 30
    torch.testing.assert_close(attn(loud, mask).context[:1], alone, atol=1e-6, rtol=0)


def performer_model(**attention_config) -> hf_effattn.EffAttnRobertaForSequenceClassification:
    torch.manual_seed(0)
    config = text_config("performer", num_labels=2, attention_config={"num_features": 16, **attention_config})
    return hf_effattn.EffAttnRobertaForSequenceClassification(config)


def layer_features(model) -> list[torch.Tensor]:
    return [layer.attention.self.random_features.clone() for layer in model.roberta.encoder.layer]


def train_step(model, batch: dict) -> None:
    model.zero_grad()
    model(**batch, labels=torch.tensor([0, 1, 1])).loss.backward()


def test_performer_redraws_every_interval_training_steps_only():
    model = performer_model(redraw_interval=2).train()
    batch = text_inputs()
    initial = layer_features(model)
    history = []
    for _ in range(5):
        train_step(model, batch)
        history.append(layer_features(model))
    with torch.no_grad():
        model(**batch)  # no gradients: not a training step
    model.eval()(**batch)  # evaluation: not a training step
    # Steps 1-2 use the initial draw, steps 3-4 a second one, step 5 a third: redraws happen before steps 3 and 5.
    changed = [not torch.equal(a[0], b[0]) for a, b in zip([initial] + history, history)]
    assert changed == [False, False, True, False, True]
    assert all(layer.attention.self.training_steps == 5 for layer in model.roberta.encoder.layer)
    assert all(torch.equal(a, b) for a, b in zip(layer_features(model), history[-1]))


def test_performer_fixed_features_never_change_in_training():
    model = performer_model().train()
    initial = layer_features(model)
    for _ in range(3):
        train_step(model, text_inputs())
    assert all(torch.equal(a, b) for a, b in zip(layer_features(model), initial))


def test_performer_redraw_skips_the_recomputation_of_gradient_checkpointing():
    """A redraw between the forward and its recomputation would give gradients of other features than the loss."""
    batch = text_inputs()
    gradients = []
    for checkpointing in (False, True):
        model = performer_model(redraw_interval=1).train()
        if checkpointing:
            enable_checkpointing(model)
        train_step(model, batch)  # step 1: the initial features
        train_step(model, batch)  # step 2: redrawn before its forward, not again before its recomputation
        assert all(layer.attention.self.training_steps == 2 for layer in model.roberta.encoder.layer)
        gradients.append({name: p.grad for name, p in model.named_parameters()})
    for name, gradient in gradients[0].items():
        torch.testing.assert_close(gradients[1][name], gradient, msg=name)


def test_performer_save_and_reload_restores_redrawn_features(tmp_path):
    model = performer_model(redraw_interval=1).train()
    for _ in range(2):
        train_step(model, text_inputs())
    seeded = layer_features(performer_model(redraw_interval=1))
    assert not torch.equal(layer_features(model)[0], seeded[0])
    model.eval().save_pretrained(tmp_path)
    reloaded = hf_effattn.EffAttnRobertaForSequenceClassification.from_pretrained(tmp_path)
    assert all(torch.equal(a, b) for a, b in zip(layer_features(reloaded), layer_features(model)))
    with torch.no_grad():
        torch.testing.assert_close(reloaded(**text_inputs()).logits, model(**text_inputs()).logits, atol=0, rtol=0)


def test_roberta_converts_into_performer_with_seeded_features(tmp_path, caplog):
    reference = save_source(transformers.RobertaForSequenceClassification, "roberta", tmp_path)
    with caplog.at_level(logging.WARNING, logger="hf_effattn"):
        model = hf_effattn.EffAttnRobertaForSequenceClassification.from_pretrained(tmp_path, attention_type="performer")
    message = next(r.getMessage() for r in caplog.records if "New parameters" in r.getMessage())
    assert "New parameters, initialised: roberta.encoder.layer.*.attention.self.random_features." in message
    assert message.endswith("Dropped from the checkpoint: none.")
    for i, features in enumerate(layer_features(model)):
        expected = orthogonal_gaussian_features(256, 8, torch.Generator().manual_seed(i)).float()
        torch.testing.assert_close(features, expected, atol=0, rtol=0)
    shared = reference.state_dict()
    assert all(torch.equal(tensor, shared[name]) for name, tensor in model.state_dict().items() if name in shared)


@pytest.mark.parametrize("attention_type", ["linear", "cosformer"])
@pytest.mark.parametrize("source", ["roberta", "bert"])
def test_checkpoint_converts_into_parameter_free_baselines_losslessly(tmp_path, caplog, attention_type, source):
    """Linear attention and cosFormer have no parameters beyond the projections: a RoBERTa or BERT checkpoint
    converts with nothing new and nothing dropped."""
    model_class = {"roberta": transformers.RobertaForMaskedLM, "bert": transformers.BertForMaskedLM}[source]
    reference = save_source(model_class, source, tmp_path)
    with caplog.at_level(logging.INFO, logger="hf_effattn"):
        model = hf_effattn.EffAttnRobertaForMaskedLM.from_pretrained(tmp_path, attention_type=attention_type)
    assert any("New parameters, initialised: none. Dropped from the checkpoint: none." in r.getMessage()
               for r in caplog.records)
    query = reference.base_model.encoder.layer[0].attention.self.query.weight
    assert torch.equal(model.roberta.encoder.layer[0].attention.self.query.weight, query)


BASELINE_PAPERS = {"linear": "arXiv:2006.16236", "performer": "arXiv:2009.14794", "cosformer": "arXiv:2202.08791"}


def cli(module, argv: list[str]) -> int:
    parser = argparse.ArgumentParser()
    module.add_arguments(parser)
    return module.run(parser.parse_args(argv))


def test_list_shows_the_baselines_with_their_papers(capsys):
    assert cli(listing, ["--attentions"]) == 0
    lines = {line.split()[0]: line for line in capsys.readouterr().out.splitlines()[1:]}
    for name, arxiv in BASELINE_PAPERS.items():
        assert arxiv in lines[name] and "O(N" in lines[name]


def test_bench_measures_the_baselines(tmp_path):
    argv = ["--attentions", *BASELINE_PAPERS, "--parts", "attention", "--lengths", "8", "16", "--hidden_size", "16",
            "--num_heads", "2", "--repeats", "1", "--warmup", "0", "--device", "cpu", "--dtype", "float32",
            "--threads", "1", "--output_dir", str(tmp_path)]
    assert cli(bench_command, argv) == 0
    with open(tmp_path / "results.csv") as handle:
        rows = [row for row in csv.DictReader(handle) if row["mechanism"] in BASELINE_PAPERS]
    expected = {(name, length) for name in BASELINE_PAPERS for length in (8, 16)}
    assert {(row["mechanism"], int(row["length"])) for row in rows} == expected
    assert all(not row["note"] and float(row["fwd_bwd_ms"]) > 0 for row in rows)


@pytest.mark.parametrize("attention", list(BASELINE_PAPERS))
def test_train_task_trains_each_baseline(attention):
    parser = argparse.ArgumentParser()
    train_task_command.add_arguments(parser)
    args = parser.parse_args(["adding", "--length", "16", "--attention", attention, "--steps", "3", "--batch_size", "4",
                              "--hidden_size", "16", "--num_heads", "2", "--layers", "1", "--eval_size", "8",
                              "--threads", "1"])
    result = training.train_task(args)
    assert len(result["train_losses"]) == 3 and all(math.isfinite(loss) for loss in result["train_losses"])
