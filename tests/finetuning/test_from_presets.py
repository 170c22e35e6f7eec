"""Training from scratch from a preset: ``--model_name_or_path`` takes ``hf_effattn.list_models()`` names, with the
tokenizer (``--tokenizer_name``) or the image processor explicit, on tiny local copies of the Hub datasets."""

import json

import pytest
from helpers.finetuning import one_torch_thread  # noqa: F401 (autouse: one torch thread)
from helpers.finetuning import MAX_LENGTH, cifar_mirror, glue_mirror, load_script, tiny_text_checkpoint, training_options

from hf_effattn import create_config

TEXT_PRESET = "lra-pathfinder/kerformer"  # the smallest text preset: 1 layer, hidden 128


def text_run(output_dir, *extra: str):
    return load_script("run_text_classification").main([
        "--model_name_or_path", TEXT_PRESET, "--task_name", "sst2", "--dataset_name", glue_mirror(),
        "--max_length", str(MAX_LENGTH), *extra, *training_options(output_dir, max_train_steps=2),
    ])


def saved_config(folder) -> dict:
    return json.loads((folder / "config.json").read_text())


def assert_preset_shape(config: dict, preset: str):
    """The saved config has the preset's attention and every shape value of the preset."""
    expected = create_config(preset).to_dict()
    assert config["attention_type"] == expected["attention_type"]
    for name in ("hidden_size", "num_hidden_layers", "num_attention_heads", "intermediate_size", "attention_config"):
        assert config[name] == expected[name], name


def test_text_preset_trains_from_scratch_with_an_explicit_tokenizer(tmp_path):
    outcome = text_run(tmp_path, "--tokenizer_name", tiny_text_checkpoint())
    assert outcome.finished and outcome.state.completed_steps == 2
    config = saved_config(tmp_path)
    assert_preset_shape(config, TEXT_PRESET)
    assert config["id2label"] == {"0": "negative", "1": "positive"}
    assert (tmp_path / "tokenizer.json").exists()


def test_text_preset_without_tokenizer_or_with_another_attention_is_refused(tmp_path):
    with pytest.raises(ValueError, match="is a preset .* pass --tokenizer_name"):
        text_run(tmp_path)
    with pytest.raises(ValueError, match="--attention_type 'dba' contradicts the preset"):
        text_run(tmp_path, "--tokenizer_name", tiny_text_checkpoint(), "--attention_type", "dba")


def test_vision_preset_trains_from_scratch_on_cifar10_with_an_image_processor_of_its_size(tmp_path):
    preset = "vit-tiny-patch4-32/kerformer"
    outcome = load_script("run_image_classification").main([
        "--model_name_or_path", preset, "--dataset_name", cifar_mirror(10),
        *training_options(tmp_path, max_train_steps=1, per_device_train_batch_size=4),
    ])
    assert outcome.finished
    config = saved_config(tmp_path)
    assert_preset_shape(config, preset)
    assert config["image_size"] == 32 and len(config["id2label"]) == 10
    processor = json.loads((tmp_path / "preprocessor_config.json").read_text())
    assert processor["image_processor_type"] == "ViTImageProcessor"
    assert processor["size"] == {"height": 32, "width": 32}
