"""Image classification fine-tuning (CIFAR-10, CIFAR-100, image folders, parquet): what
``finetune/run_image_classification.py`` runs, and the same without a clone of the repository:
``python -m hf_effattn.finetuning.image_classification`` (or ``accelerate launch -m
hf_effattn.finetuning.image_classification``) with the script's options; from Python, :func:`main` (a command line)
or :func:`train` (the options as keyword arguments)."""

from ..model_cards import IMAGE_CLASSIFICATION
from ..options.user_errors import run_script
from .image_data import add_image_data_arguments, prepare_image_data
from .models import check_classifier_options, load_image_classifier, load_image_processor
from .run import Recipe

RECIPE = Recipe(
    description="Fine-tune an efficient-attention ViT-style encoder for image classification.",
    add_data_arguments=add_image_data_arguments,
    load_processor=load_image_processor,
    prepare_data=prepare_image_data,
    load_model=load_image_classifier,
    processor_option="image_processor_name",
    card_kind=IMAGE_CLASSIFICATION,
    check_options=check_classifier_options("vision"),
)
build_parser = RECIPE.build_parser
parse_args = RECIPE.parse_args
main = RECIPE.main
train = RECIPE.train

if __name__ == "__main__":  # python -m / accelerate launch -m hf_effattn.finetuning.image_classification
    run_script(main)
