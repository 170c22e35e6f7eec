#!/usr/bin/env python
"""Fine-tune an efficient-attention ViT-style encoder for image classification.

CIFAR-10 (``--dataset_name uoft-cs/cifar10``), CIFAR-100 (``--dataset_name uoft-cs/cifar100``), an image
folder (``--dataset_name path/to/folder``) or parquet files (``--train_file``). Runs on one device or many::

    accelerate launch finetune/run_image_classification.py --model_name_or_path google/vit-base-patch16-224-in21k \\
        --attention_type kerformer --dataset_name uoft-cs/cifar10 --output_dir outputs/vit-kerformer-cifar10

``--help`` lists every option; the logic lives in ``hf_effattn.finetuning``.
"""

from hf_effattn.finetuning.image_classification import main
from hf_effattn.options.user_errors import run_script

if __name__ == "__main__":
    run_script(main)  # a bad option or bad data: one line and exit status 2 (HF_EFFATTN_DEBUG=1: the traceback)
