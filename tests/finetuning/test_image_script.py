"""``finetune/run_image_classification.py`` end to end, in-process, on tiny CIFAR-10/100 copies and image folders."""

import json

import pytest
from helpers.finetuning import one_torch_thread  # noqa: F401 (autouse: one torch thread)
from helpers.finetuning import cifar_mirror, load_script, tiny_images, tiny_vit_checkpoint, training_options
from huggingface_hub import ModelCard


@pytest.mark.parametrize("num_classes, attention", [(10, "kerformer"), (100, "singularformer")])
def test_cifar_run_leaves_a_hub_ready_folder(num_classes, attention, tmp_path):
    outcome = load_script("run_image_classification").main([
        "--model_name_or_path", tiny_vit_checkpoint(), "--attention_type", attention,
        "--dataset_name", cifar_mirror(num_classes), *training_options(tmp_path, num_train_epochs=2),
    ])
    assert outcome.finished and outcome.state.completed_steps == 6
    assert set(outcome.final_metrics["test"]) == {"accuracy"}
    config = json.loads((tmp_path / "config.json").read_text())
    assert config["model_type"] == "effattn_vit" and config["attention_type"] == attention
    assert len(config["id2label"]) == num_classes
    assert config["auto_map"]["AutoModelForImageClassification"].endswith("EffAttnViTForImageClassification")
    for file in ("model.safetensors", "preprocessor_config.json", "modeling_effattn_vit.py", "README.md"):
        assert (tmp_path / file).is_file(), file
    card = ModelCard.load(tmp_path / "README.md")
    assert card.data.pipeline_tag == "image-classification" and attention in card.data.tags


def test_image_folder_with_a_checkpoint_that_has_no_image_processor(tmp_path):
    images, labels = tiny_images(16, 2, seed=3)
    for i, (image, label) in enumerate(zip(images, labels)):
        folder = tmp_path / "pictures" / ("train" if i < 12 else "validation") / ("cat", "dog")[label]
        folder.mkdir(parents=True, exist_ok=True)
        image.save(folder / f"{i}.png")
    output = tmp_path / "out"
    load_script("run_image_classification").main([
        "--model_name_or_path", tiny_vit_checkpoint(with_processor=False), "--attention_type", "dba",
        "--dataset_name", str(tmp_path / "pictures"), *training_options(output, max_train_steps=2),
    ])
    processor = json.loads((output / "preprocessor_config.json").read_text())
    assert processor["size"] == {"height": 16, "width": 16}  # built from the checkpoint's config
    assert json.loads((output / "config.json").read_text())["id2label"] == {"0": "cat", "1": "dog"}
