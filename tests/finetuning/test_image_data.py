"""Image data in CIFAR-10's, CIFAR-100's and image folders' schemas, and the torch-only augmentation."""

import numpy as np
import pytest
import torch
from helpers.finetuning import cifar_mirror, tiny_images
from PIL import Image

from hf_effattn.finetuning.image_classification import parse_args
from hf_effattn.finetuning.image_data import (
    ImageTransform,
    prepare_image_data,
    random_crop_with_padding,
    random_horizontal_flip,
    resized_pixels,
)


def processor():
    from transformers import ViTImageProcessor

    return ViTImageProcessor(size={"height": 16, "width": 16}, image_mean=[0.4, 0.5, 0.6], image_std=[0.2, 0.25, 0.3])


def prepare(*options):
    args = parse_args(["--model_name_or_path", "unused", "--output_dir", "unused", *options])
    return prepare_image_data(args, processor())


def test_cifar10_reads_img_and_label():
    data = prepare("--dataset_name", cifar_mirror(10))
    assert data.labels.column == "label" and len(data.labels.names) == 10 and data.labels.names[0] == "airplane"
    assert list(data.evaluation) == ["test"] and data.train.image_column == "img"
    example = data.train[0]
    assert example["pixel_values"].shape == (3, 16, 16) and isinstance(example["labels"], int)


def test_cifar100_reads_fine_label():
    data = prepare("--dataset_name", cifar_mirror(100))
    assert data.labels.column == "fine_label" and data.labels.num_labels == 100


def test_image_folder_and_parquet_files(tmp_path):
    images, labels = tiny_images(12, 3, seed=0)
    for i, (image, label) in enumerate(zip(images, labels)):
        folder = tmp_path / "pictures" / ("train" if i < 8 else "test") / f"class{label}"
        folder.mkdir(parents=True, exist_ok=True)
        image.save(folder / f"{i}.png")
    data = prepare("--dataset_name", str(tmp_path / "pictures"))
    assert data.train.image_column == "image" and list(data.evaluation) == ["test"] and len(data.train) == 8

    from datasets import ClassLabel, Dataset, Features
    from datasets import Image as ImageFeature

    rows = Dataset.from_dict({"picture": images, "kind": labels},
                             features=Features({"picture": ImageFeature(), "kind": ClassLabel(num_classes=3)}))
    rows.to_parquet(tmp_path / "train.parquet")
    data = prepare("--train_file", str(tmp_path / "train.parquet"), "--label_column_name", "kind")
    assert data.train.image_column == "picture" and len(data.evaluation["validation"]) == 2


def test_evaluation_images_are_resized_and_normalised_with_the_processor_statistics():
    data = prepare("--dataset_name", cifar_mirror(10))
    row = data.evaluation["test"].rows[0]
    resized = np.asarray(row["img"].convert("RGB").resize((16, 16), Image.Resampling.BILINEAR), dtype=np.float32)
    expected = (torch.from_numpy(resized / 255).permute(2, 0, 1) - torch.tensor([0.4, 0.5, 0.6]).view(3, 1, 1)) \
        / torch.tensor([0.2, 0.25, 0.3]).view(3, 1, 1)
    torch.testing.assert_close(data.evaluation["test"][0]["pixel_values"], expected)


def test_augmentation_is_a_function_of_seed_epoch_and_index():
    data = prepare("--dataset_name", cifar_mirror(10))
    first = [data.train[i]["pixel_values"] for i in range(8)]
    assert all(torch.equal(a, data.train[i]["pixel_values"]) for i, a in enumerate(first))
    data.train.set_epoch(1)
    assert any(not torch.equal(a, data.train[i]["pixel_values"]) for i, a in enumerate(first))
    data.train.set_epoch(0)
    assert all(torch.equal(a, data.train[i]["pixel_values"]) for i, a in enumerate(first))


def test_random_crop_with_padding_is_a_window_of_the_zero_padded_image():
    pixels = torch.arange(1, 1 + 3 * 8 * 8, dtype=torch.float32).view(3, 8, 8)
    padded = torch.nn.functional.pad(pixels, (2, 2, 2, 2))
    offsets = set()
    for seed in range(20):
        cropped = random_crop_with_padding(pixels, 2, torch.Generator().manual_seed(seed))
        windows = [(top, left) for top in range(5) for left in range(5)
                   if torch.equal(cropped, padded[:, top:top + 8, left:left + 8])]
        assert len(windows) == 1
        offsets.update(windows)
    assert len(offsets) > 3
    assert torch.equal(random_crop_with_padding(pixels, 0, torch.Generator()), pixels)


def test_horizontal_flip_mirrors_half_the_time():
    pixels = torch.rand(3, 4, 5)
    flips = [random_horizontal_flip(pixels, torch.Generator().manual_seed(seed)) for seed in range(40)]
    assert all(torch.equal(f, pixels) or torch.equal(f, pixels.flip(-1)) for f in flips)
    assert 5 < sum(torch.equal(f, pixels.flip(-1)) for f in flips) < 35


def test_transform_converts_grey_images_to_rgb():
    grey = Image.fromarray(np.full((10, 12), 128, dtype=np.uint8), mode="L")
    assert resized_pixels(grey, (6, 6)).shape == (3, 6, 6)
    transform = ImageTransform((6, 6), (0.5, 0.5, 0.5), (0.5, 0.5, 0.5), crop_padding=1)
    assert transform(grey, torch.Generator().manual_seed(0)).shape == (3, 6, 6)


def test_float_labels_are_refused_for_images(tmp_path):
    from datasets import Dataset, Features, Value
    from datasets import Image as ImageFeature

    images, _ = tiny_images(4, 2, seed=0)
    Dataset.from_dict({"image": images, "label": [0.5] * 4},
                      features=Features({"image": ImageFeature(), "label": Value("float32")})
                      ).to_parquet(tmp_path / "train.parquet")
    with pytest.raises(ValueError, match="needs classes"):
        prepare("--train_file", str(tmp_path / "train.parquet"))


def write_parquet(path, images: list, labels: list) -> str:
    from datasets import Dataset, Features, Value
    from datasets import Image as ImageFeature

    Dataset.from_dict({"image": images, "label": labels},
                      features=Features({"image": ImageFeature(), "label": Value("int64")})).to_parquet(path)
    return str(path)


def test_an_evaluation_label_missing_from_training_names_file_and_row(tmp_path):
    images, _ = tiny_images(4, 2, seed=0)
    train = write_parquet(tmp_path / "train.parquet", images, [0, 1, 0, 1])
    dev = write_parquet(tmp_path / "dev.parquet", images, [1, 0, 2, 1])
    with pytest.raises(ValueError, match=r"dev.parquet, row 3: label 2 is not among the training labels \(0, 1\)"):
        prepare("--train_file", train, "--validation_file", dev)


def test_a_row_without_an_image_names_file_and_row(tmp_path):
    images, _ = tiny_images(3, 2, seed=0)
    train = write_parquet(tmp_path / "train.parquet", [images[0], None, images[2]], [0, 1, 0])
    with pytest.raises(ValueError, match=r"train.parquet, row 2: no image in column 'image' \(an empty cell\)"):
        prepare("--train_file", train)


def test_unlabelled_rows_of_a_hub_split_are_refused(tmp_path):
    """Hub test splits mark missing labels with -1 (a ``ClassLabel``); training on them would fail in the loss."""
    from datasets import ClassLabel, Dataset, Features
    from datasets import Image as ImageFeature

    images, _ = tiny_images(3, 2, seed=0)
    Dataset.from_dict({"img": images, "label": [0, -1, 1]},
                      features=Features({"img": ImageFeature(), "label": ClassLabel(names=["a", "b"])})
                      ).to_parquet(tmp_path / "train.parquet")
    with pytest.raises(ValueError, match=r"train.parquet, row 2: label -1 \(unlabelled"):
        prepare("--train_file", str(tmp_path / "train.parquet"))
