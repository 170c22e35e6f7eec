"""LoRA fine-tuning (``--lora_r``) of converted models: the adapter folder, with its base, reloads in a fresh
process, with the package and through PEFT's Auto classes (also as remote code), with the same logits."""

import argparse
import json
import os
import subprocess
import sys
import textwrap
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
from helpers.models import BLOCK_PACKAGE, save_source, text_inputs
from safetensors.torch import load_file, save_file
from transformers import RobertaForSequenceClassification

from hf_effattn import EffAttnRobertaForSequenceClassification, EffAttnViTForImageClassification
from hf_effattn.finetuning.lora import (
    BASE_DIR,
    add_lora,
    default_target_modules,
    lora_config,
    mechanism_parameters,
    save_adapter_folder,
)

# Run in a fresh process, after BLOCK_PACKAGE: load each adapter folder every documented way and print each one's
# largest logit difference to the logits saved beside it. First as remote code, while hf_effattn cannot be imported;
# then, the block lifted, with the package. argv: the folders.
LOADER = textwrap.dedent(
    """
    import json

    import torch
    from peft import AutoPeftModelForSequenceClassification, PeftModel
    from safetensors.torch import load_file
    from transformers import AutoModelForSequenceClassification


    def remote_code(folder):
        base = AutoModelForSequenceClassification.from_pretrained(f"{folder}/base_model", trust_remote_code=True)
        return {"PeftModel, remote code": PeftModel.from_pretrained(base, folder),
                "AutoPeftModel, remote code": AutoPeftModelForSequenceClassification.from_pretrained(
                    folder, trust_remote_code=True)}


    def package(folder):
        import hf_effattn

        base = hf_effattn.EffAttnRobertaForSequenceClassification.from_pretrained(f"{folder}/base_model")
        return {"PeftModel": PeftModel.from_pretrained(base, folder),
                "AutoPeftModel": AutoPeftModelForSequenceClassification.from_pretrained(folder)}


    for load in (remote_code, package):
        if load is package:
            sys.meta_path[:] = [finder for finder in sys.meta_path if type(finder).__name__ != "BlockPackage"]
        for folder in sys.argv[1:]:
            case = load_file(f"{folder}/case.safetensors")
            inputs = {"input_ids": case["input_ids"], "attention_mask": case["attention_mask"]}
            for path, model in load(folder).items():
                with torch.no_grad():
                    logits = model.eval()(**inputs).logits
                base = type(model.get_base_model())
                print(json.dumps({"folder": folder, "path": path, "class": base.__name__, "module": base.__module__,
                                  "difference": (logits - case["logits"]).abs().max().item()}))
    """
)


def save_case(folder: Path, inputs: dict, logits: torch.Tensor) -> None:
    """The inputs and the expected logits, beside the adapter, for the fresh process."""
    save_file({**inputs, "logits": logits.contiguous()}, str(folder / "case.safetensors"))


def reload_in_fresh_process(folders: list[Path]) -> list[dict]:
    """Each way of loading each folder, in a fresh offline process (as remote code while hf_effattn cannot be
    imported, then with it): one dict per (folder, way) with the loaded class and the largest logit difference."""
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    env |= {"HF_HUB_OFFLINE": "1", "OMP_NUM_THREADS": "1", "HF_HOME": str(folders[0].parent / "hf_home")}
    result = subprocess.run([sys.executable, "-c", BLOCK_PACKAGE + LOADER, *map(str, folders)], env=env,
                            cwd=folders[0].parent, capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr[-3000:]
    return [json.loads(line) for line in result.stdout.splitlines() if line.startswith("{")]


def assert_reproduced(rows: list[dict], folders: list[Path]) -> None:
    """Every folder loaded four ways, each time as our class (remote code where the package was blocked), with the
    logits it was saved with."""
    assert len(rows) == 4 * len(folders)
    for row in rows:
        assert row["class"] == "EffAttnRobertaForSequenceClassification", row
        assert row["module"].startswith("transformers_modules." if "remote" in row["path"] else "hf_effattn."), row
        assert row["difference"] <= 1e-6, row


def lora_options(**overrides) -> argparse.Namespace:
    return argparse.Namespace(**{"lora_r": 4, "lora_alpha": 16, "lora_dropout": 0.0, "lora_target_modules": None,
                                 **overrides})


def trained_lora_model(source: Path, attention_type: str):
    """A converted classifier wrapped for LoRA, after three AdamW steps; its mechanism parameters at conversion."""
    torch.manual_seed(0)
    model = EffAttnRobertaForSequenceClassification.from_pretrained(source, attention_type=attention_type)
    initial = {name: parameter.detach().clone() for name, parameter in mechanism_parameters(model)}
    model = add_lora(lora_options(), model)
    optimizer = torch.optim.AdamW([p for p in model.parameters() if p.requires_grad], lr=1e-2)
    batch = {**text_inputs(4, 8, seed=1), "labels": torch.tensor([0, 1, 1, 0])}
    for _ in range(3):
        model(**batch).loss.backward()
        optimizer.step()
        optimizer.zero_grad()
    return model.eval(), initial


@pytest.fixture(scope="module")
def script_output(tmp_path_factory) -> Path:
    """The folder a LoRA run of ``run_text_classification.py`` (PSF, converted from RoBERTa) leaves."""
    output = tmp_path_factory.mktemp("lora") / "run"
    load_script("run_text_classification").main([
        "--model_name_or_path", tiny_text_checkpoint(), "--attention_type", "psf", "--task_name", "sst2",
        "--dataset_name", glue_mirror(), "--max_length", str(MAX_LENGTH), "--lora_r", "4", "--lora_dropout", "0",
        *training_options(output, num_train_epochs=1),
    ])
    return output


def test_a_finished_lora_run_is_not_continued_or_replaced_without_overwrite_output_dir(script_output):
    """The adapter is the final model of a LoRA run: resuming into its folder is refused like any finished run."""
    with pytest.raises(ValueError, match="holds a finished run"):
        load_script("run_text_classification").main([
            "--model_name_or_path", tiny_text_checkpoint(), "--attention_type", "psf", "--task_name", "sst2",
            "--dataset_name", glue_mirror(), "--max_length", str(MAX_LENGTH), "--lora_r", "4", "--lora_dropout", "0",
            *training_options(script_output, num_train_epochs=1), "--resume_from_checkpoint", "latest",
        ])


def test_adapters_reproduce_the_trained_models_in_a_fresh_process(tmp_path, script_output):
    """Each mechanism after a few LoRA steps, and the script's result: the same logits in fresh processes."""
    source = tmp_path / "roberta"
    save_source(RobertaForSequenceClassification, "roberta", source)
    inputs, folders = text_inputs(), []
    for attention_type in ("singularformer", "kerformer", "dba", "psf"):
        model, initial = trained_lora_model(source, attention_type)
        folder = tmp_path / attention_type
        save_adapter_folder(model, folder)
        with torch.no_grad():
            save_case(folder, inputs, model(**inputs).logits)
        base = load_file(str(folder / BASE_DIR / "model.safetensors"))
        assert not any("lora_" in key or "modules_to_save" in key for key in base)
        for name, value in initial.items():  # trained, and saved with the base
            assert not torch.equal(base[name], value), name
        config = json.loads((folder / "adapter_config.json").read_text())
        assert config["base_model_name_or_path"] == str((folder / BASE_DIR).resolve())
        folders.append(folder)

    from peft import AutoPeftModelForSequenceClassification

    with torch.no_grad():  # the script's result, loaded here as the documentation says
        save_case(script_output, inputs,
                  AutoPeftModelForSequenceClassification.from_pretrained(script_output).eval()(**inputs).logits)
    folders.append(script_output)
    assert_reproduced(reload_in_fresh_process(folders), folders)


def test_default_targets_are_the_mechanisms_projections(tmp_path):
    source = tmp_path / "roberta"
    save_source(RobertaForSequenceClassification, "roberta", source)
    for attention_type, window, expected in (("kerformer", None, ["query", "value"]), ("psf", None, ["value"]),
                                             ("psf", 6, ["query", "value"])):  # the window brings PSF a query
        model = EffAttnRobertaForSequenceClassification.from_pretrained(source, attention_type=attention_type,
                                                                        local_window=window)
        assert default_target_modules(model) == expected
        assert lora_config(lora_options(), model).target_modules == set(expected)


def test_bad_lora_options_are_refused_with_a_message(tmp_path):
    source = tmp_path / "roberta"
    save_source(RobertaForSequenceClassification, "roberta", source)
    model = EffAttnRobertaForSequenceClassification.from_pretrained(source, attention_type="psf")
    with pytest.raises(ValueError, match=r"--lora_target_modules query: no such linear layer in the 'psf' model"):
        add_lora(lora_options(lora_target_modules=["query"]), model)
    with pytest.raises(ValueError, match=r"--lora_target_modules applies to LoRA: pass --lora_r too"):
        add_lora(lora_options(lora_r=None, lora_target_modules=["value"]), model)
    with pytest.raises(ValueError, match=r"--lora_r must be a positive integer, got 0"):
        add_lora(lora_options(lora_r=0), model)


def test_the_script_leaves_an_adapter_and_its_base(script_output):
    output = script_output
    for file in ("adapter_config.json", "adapter_model.safetensors", "tokenizer.json", "all_results.json",
                 f"{BASE_DIR}/config.json", f"{BASE_DIR}/model.safetensors", f"{BASE_DIR}/modeling_effattn_roberta.py",
                 "checkpoints/best/adapter_model.safetensors", f"checkpoints/best/{BASE_DIR}/model.safetensors"):
        assert (output / file).is_file(), file
    for folder in (output, output / "checkpoints" / "best"):  # best/ was written elsewhere, then renamed
        config = json.loads((folder / "adapter_config.json").read_text())
        assert config["base_model_name_or_path"] == str((folder / BASE_DIR).resolve())
    assert not (output / "model.safetensors").exists()
    adapter = load_file(str(output / "adapter_model.safetensors"))
    assert any("lora_A" in key for key in adapter) and any("classifier" in key for key in adapter)
    source = RobertaForSequenceClassification.from_pretrained(tiny_text_checkpoint()).state_dict()
    base = load_file(str(output / BASE_DIR / "model.safetensors"))
    for name in ("roberta.encoder.layer.0.attention.self.value.weight", "roberta.embeddings.word_embeddings.weight"):
        torch.testing.assert_close(base[name], source[name], rtol=0, atol=0)  # frozen: LoRA is not merged in
    card = ModelCard.load(output / "README.md")
    assert card.data.library_name == "peft" and "| `lora_r` | 4 |" in card.text
    assert "PeftModel.from_pretrained(base, folder)" in card.text


def test_the_trainer_script_names_the_saved_base(tmp_path):
    load_script("run_trainer").main([
        "--model_name_or_path", tiny_text_checkpoint(), "--attention_type", "kerformer", "--task_name", "sst2",
        "--dataset_name", glue_mirror(), "--max_length", str(MAX_LENGTH), "--lora_r", "4",
        "--lora_target_modules", "query", "value", "dense", "--output_dir", str(tmp_path), "--max_steps", "2",
        "--per_device_train_batch_size", "8", "--report_to", "none", "--use_cpu", "--save_strategy", "no",
    ])
    config = json.loads((tmp_path / "adapter_config.json").read_text())
    assert config["base_model_name_or_path"] == str((tmp_path / BASE_DIR).resolve())
    assert set(config["target_modules"]) == {"query", "value", "dense"}
    base = json.loads((tmp_path / BASE_DIR / "config.json").read_text())
    assert base["attention_type"] == "kerformer" and "auto_map" in base
    assert "| `lora_target_modules` | dense, query, value |" in ModelCard.load(tmp_path / "README.md").text


def test_the_image_script_saves_the_head_with_the_adapter(tmp_path):
    load_script("run_image_classification").main([
        "--model_name_or_path", tiny_vit_checkpoint(), "--attention_type", "kerformer", "--dataset_name",
        cifar_mirror(10), "--lora_r", "4", "--lora_dropout", "0", *training_options(tmp_path, max_train_steps=1),
    ])
    config = json.loads((tmp_path / "adapter_config.json").read_text())
    assert config["modules_to_save"] == ["classifier"] and config["task_type"] is None
    assert (tmp_path / "preprocessor_config.json").is_file()

    from peft import AutoPeftModel, PeftModel

    base = EffAttnViTForImageClassification.from_pretrained(tmp_path / BASE_DIR)
    pixels = torch.randn(2, 3, 16, 16, generator=torch.Generator().manual_seed(0))
    with torch.no_grad():
        expected = PeftModel.from_pretrained(base, tmp_path).eval()(pixel_values=pixels).logits
        auto = AutoPeftModel.from_pretrained(tmp_path, import_allowlist=["hf_effattn"]).eval()
        torch.testing.assert_close(auto(pixel_values=pixels).logits, expected, rtol=0, atol=1e-6)
    assert expected.shape == (2, 10)
