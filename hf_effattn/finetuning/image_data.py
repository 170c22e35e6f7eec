"""Image classification data: CIFAR-10 (``uoft-cs/cifar10``: ``img``, ``label``), CIFAR-100
(``uoft-cs/cifar100``: ``img``, ``fine_label``), an image folder, or parquet files; and the usual
augmentation, written with torch and PIL only (no torchvision).

Training images are resized to the image processor's size, padded and randomly cropped back,
flipped at random, and normalised with the processor's mean and std; evaluation images are resized
and normalised. The random choices are a pure function of (seed, epoch, index): a run that is
resumed, or split over several processes, sees exactly the augmentation of a single uninterrupted run.
"""

from __future__ import annotations

import argparse
from dataclasses import dataclass

import numpy as np
import torch
import torch.nn.functional as F

from ..options.argument_types import non_negative_int
from .data import (
    LabelInfo,
    PreparedData,
    add_dataset_arguments,
    example_generator,
    limit_samples,
    load_raw_datasets,
    prepare_splits,
)
from .metrics import metric_spec


def add_image_data_arguments(parser: argparse.ArgumentParser) -> None:
    """The data options of the image script: the shared ones, the image column and the augmentation."""
    group = add_dataset_arguments(parser)
    group.add_argument("--image_column_name", default=None,
                       help="The image column (default: the first column of type Image, e.g. img or image).")
    group.add_argument("--crop_padding", type=non_negative_int, default=None,
                       help="Pixels of padding before the random crop (default: an eighth of the image size).")


@dataclass(frozen=True)
class ImageTransform:
    """Resize to ``size``, optionally pad-crop-flip at random, normalise: PIL image -> ``[3, H, W]`` float tensor."""

    size: tuple[int, int]
    mean: tuple[float, float, float]
    std: tuple[float, float, float]
    crop_padding: int = 0

    def __call__(self, image, generator: torch.Generator | None = None) -> torch.Tensor:
        pixels = resized_pixels(image, self.size)
        if generator is not None:
            pixels = random_crop_with_padding(pixels, self.crop_padding, generator)
            pixels = random_horizontal_flip(pixels, generator)
        mean = torch.tensor(self.mean).view(3, 1, 1)
        std = torch.tensor(self.std).view(3, 1, 1)
        return (pixels - mean) / std


def resized_pixels(image, size: tuple[int, int]) -> torch.Tensor:
    """A PIL image as RGB values in ``[0, 1]``, ``[3, height, width]``, resized bilinearly."""
    from PIL import Image

    height, width = size
    image = image.convert("RGB").resize((width, height), Image.Resampling.BILINEAR)
    return torch.from_numpy(np.asarray(image, dtype=np.float32) / 255.0).permute(2, 0, 1).contiguous()


def random_crop_with_padding(pixels: torch.Tensor, padding: int, generator: torch.Generator) -> torch.Tensor:
    """Zero-pad each side by ``padding`` and crop back to the original size at a random offset."""
    if padding <= 0:
        return pixels
    _, height, width = pixels.shape
    padded = F.pad(pixels, (padding, padding, padding, padding))
    top, left = torch.randint(0, 2 * padding + 1, (2,), generator=generator).tolist()
    return padded[:, top:top + height, left:left + width]


def random_horizontal_flip(pixels: torch.Tensor, generator: torch.Generator) -> torch.Tensor:
    """Mirror left-right with probability one half."""
    return pixels.flip(-1) if torch.rand((), generator=generator).item() < 0.5 else pixels


class ImageClassificationDataset(torch.utils.data.Dataset):
    """Rows of a ``datasets.Dataset`` as ``{"pixel_values", "labels"}``; augmented when ``seed`` is given."""

    def __init__(self, rows, image_column: str, labels: LabelInfo, transform: ImageTransform, seed: int | None):
        self.rows = rows
        self.image_column = image_column
        self.labels = labels
        self.transform = transform
        self.seed = seed
        self.epoch = 0

    def set_epoch(self, epoch: int) -> None:
        """Draw this epoch's augmentation (the training loop calls it at each epoch's start)."""
        self.epoch = epoch

    def __len__(self) -> int:
        return len(self.rows)

    def __getitem__(self, index: int) -> dict:
        row = self.rows[index]
        generator = None
        if self.seed is not None:
            generator = example_generator(self.seed, self.epoch, index)
        return {
            "pixel_values": self.transform(row[self.image_column], generator),
            "labels": self.labels.encode([row[self.labels.column]])[0],
        }


def image_column(train_split, override: str | None) -> str:
    """The image column: given, or the first column whose feature is ``datasets.Image``."""
    from datasets import Image

    if override:
        if override not in train_split.column_names:
            raise ValueError(f"--image_column_name {override!r} is not among {train_split.column_names}.")
        return override
    for name, feature in train_split.features.items():
        if isinstance(feature, Image):
            return name
    raise ValueError(f"No image column among {train_split.column_names}: name it with --image_column_name.")


def processor_geometry(processor) -> tuple[tuple[int, int], tuple[float, ...], tuple[float, ...]]:
    """``(height, width)``, mean and std of an image processor."""
    size = processor.size
    if "height" in size:
        shape = (size["height"], size["width"])
    else:
        shape = (size["shortest_edge"], size["shortest_edge"])
    return shape, tuple(processor.image_mean), tuple(processor.image_std)


def prepare_image_data(args: argparse.Namespace, processor, model_config=None) -> PreparedData:
    """Load, select splits, find the image and label columns and wrap the splits with their transforms."""
    raw = load_raw_datasets(args.dataset_name, args.dataset_config_name, args.train_file, args.validation_file)
    dataset_id = args.train_file or args.dataset_name
    column = image_column(raw["train"], args.image_column_name)
    raw, eval_splits, labels = prepare_splits(raw, args, [column], dataset_id)
    if labels.is_regression:
        raise ValueError(f"The label column {labels.column!r} holds floats: image classification needs classes.")
    size, mean, std = processor_geometry(processor)
    padding = max(size) // 8 if args.crop_padding is None else args.crop_padding
    train_transform = ImageTransform(size, mean, std, padding)
    eval_transform = ImageTransform(size, mean, std)
    return PreparedData(
        train=ImageClassificationDataset(limit_samples(raw["train"], args.max_train_samples), column, labels,
                                         train_transform, args.seed),
        evaluation={
            split: ImageClassificationDataset(limit_samples(raw[split], args.max_eval_samples), column, labels,
                                              eval_transform, None)
            for split in eval_splits
        },
        collate_fn=torch.utils.data.default_collate,
        metrics=metric_spec(None, is_regression=False),
        labels=labels,
        dataset_id=dataset_id,
        dataset_config=args.dataset_config_name,
    )
