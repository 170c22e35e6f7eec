"""The models in the Hugging Face ecosystem: PEFT LoRA adapters, ``transformers.Trainer`` on every head,
gradient accumulation and gradient checkpointing."""

from __future__ import annotations

import pytest
import torch
from peft import LoraConfig, PeftModel, get_peft_model
from transformers import Trainer, TrainingArguments

import hf_effattn
from helpers.models import MECHANISMS, enable_checkpointing, pixel_values, text_config, text_inputs, vision_config


class Examples(torch.utils.data.Dataset):
    """A list of feature dicts as a dataset."""

    def __init__(self, examples: list[dict]):
        self.examples = examples

    def __len__(self):
        return len(self.examples)

    def __getitem__(self, index):
        return self.examples[index]


def split(batch: dict) -> Examples:
    """One example per row of a batch of tensors."""
    size = len(next(iter(batch.values())))
    return Examples([{name: value[i] for name, value in batch.items()} for i in range(size)])


def text_batch(size: int = 8) -> dict:
    return text_inputs(size, 8, seed=3)


def head_cases():
    """(head, config, batch): every head, with a mechanism each so that all of them train."""
    text, generator = text_batch(), torch.Generator().manual_seed(4)
    labels = torch.randint(0, 2, (8,), generator=generator)
    images = pixel_values(8, seed=5)
    return [
        ("EffAttnRobertaForMaskedLM", text_config("kerformer"), {**text, "labels": text["input_ids"].clone()}),
        ("EffAttnRobertaForSequenceClassification", text_config("singularformer"), {**text, "labels": labels}),
        ("EffAttnRobertaForTokenClassification", text_config("dba"),
         {**text, "labels": text["input_ids"] % 2}),
        ("EffAttnRobertaForQuestionAnswering", text_config("psf"),
         {**text, "start_positions": labels + 1, "end_positions": labels + 3}),
        ("EffAttnRobertaForMultipleChoice", text_config("sdpa"),
         {**{k: v.view(4, 2, -1) for k, v in text.items()}, "labels": labels[:4]}),
        ("EffAttnViTForImageClassification", vision_config("kerformer"),
         {"pixel_values": images, "labels": labels}),
        ("EffAttnViTForMaskedImageModeling", vision_config("singularformer"),
         {"pixel_values": images, "bool_masked_pos": torch.rand(8, 4, generator=generator) > 0.5}),
    ]


def training_arguments(folder, **overrides) -> TrainingArguments:
    values = dict(
        output_dir=str(folder), per_device_train_batch_size=4, learning_rate=5e-3, max_steps=10, logging_steps=1,
        save_strategy="no", report_to="none", use_cpu=True, disable_tqdm=True, seed=0, dataloader_num_workers=0,
    )
    return TrainingArguments(**{**values, **overrides})


@pytest.mark.parametrize("head, config, batch", head_cases(), ids=[case[0] for case in head_cases()])
def test_trainer_lowers_the_loss_of_every_head(tmp_path, head, config, batch):
    torch.manual_seed(0)
    model = getattr(hf_effattn, head)(config)
    trainer = Trainer(model=model, args=training_arguments(tmp_path), train_dataset=split(batch))
    trainer.train()
    losses = [entry["loss"] for entry in trainer.state.log_history if "loss" in entry]
    assert len(losses) == 10
    assert sum(losses[-3:]) < sum(losses[:3])


def test_gradient_accumulation_equals_one_large_batch(tmp_path):
    """Trainer steps with 2 x 2 accumulated examples and with 4 at once move the weights alike (plain SGD)."""
    batch = {**text_inputs(4, 8, seed=3), "labels": torch.tensor([0, 1, 1, 0])}
    weights = []
    for size, accumulation in ((4, 1), (2, 2)):
        torch.manual_seed(0)
        model = hf_effattn.EffAttnRobertaForSequenceClassification(text_config("singularformer"))
        arguments = training_arguments(
            tmp_path, per_device_train_batch_size=size, gradient_accumulation_steps=accumulation, max_steps=1,
            optim="sgd", learning_rate=1.0, max_grad_norm=0.0, weight_decay=0.0,
        )
        Trainer(model=model, args=arguments, train_dataset=split(batch)).train()
        weights.append(model.state_dict())
    for name, tensor in weights[0].items():
        torch.testing.assert_close(weights[1][name], tensor, atol=1e-6, rtol=1e-5, msg=name)


@pytest.mark.parametrize("attention_type", MECHANISMS)
def test_gradient_checkpointing_gives_the_same_gradients(attention_type):
    batch = {**text_inputs(3, 8), "labels": torch.tensor([0, 1, 1])}
    gradients, calls = [], []
    for checkpointing in (False, True):
        torch.manual_seed(0)
        model = hf_effattn.EffAttnRobertaForSequenceClassification(text_config(attention_type)).train()
        if checkpointing:
            enable_checkpointing(model)
        model.roberta.encoder.layer[1].attention.self.register_forward_hook(lambda *_: calls.append(checkpointing))
        model(**batch).loss.backward()
        gradients.append({name: p.grad for name, p in model.named_parameters()})
    assert calls.count(True) == 2 * calls.count(False)  # the checkpointed layer ran again in the backward pass
    for name, gradient in gradients[0].items():
        torch.testing.assert_close(gradients[1][name], gradient, msg=name)


@pytest.mark.parametrize("attention_type, target_modules", [("kerformer", ["query", "value"]), ("psf", ["value"])])
def test_lora_adapter_saves_reloads_and_merges(tmp_path, attention_type, target_modules):
    torch.manual_seed(0)
    hf_effattn.EffAttnRobertaForSequenceClassification(text_config(attention_type)).save_pretrained(tmp_path / "base")

    def base():
        return hf_effattn.EffAttnRobertaForSequenceClassification.from_pretrained(tmp_path / "base")

    lora = LoraConfig(task_type="SEQ_CLS", target_modules=target_modules, r=4, init_lora_weights=False)
    model = get_peft_model(base(), lora).eval()
    trainable = {name for name, p in model.named_parameters() if p.requires_grad}
    assert any("lora_A" in name for name in trainable) and any("classifier" in name for name in trainable)
    inputs = text_inputs()
    with torch.no_grad():
        expected = model(**inputs).logits
        assert not torch.allclose(expected, base()(**inputs).logits)
        model.save_pretrained(tmp_path / "adapter")
        reloaded = PeftModel.from_pretrained(base(), tmp_path / "adapter").eval()
        torch.testing.assert_close(reloaded(**inputs).logits, expected)
        merged = reloaded.merge_and_unload()
        assert isinstance(merged, hf_effattn.EffAttnRobertaForSequenceClassification)
        torch.testing.assert_close(merged(**inputs).logits, expected, atol=1e-5, rtol=1e-5)
