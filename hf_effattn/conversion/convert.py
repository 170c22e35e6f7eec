"""``hf-effattn convert``: a RoBERTa, BERT or ViT checkpoint (or one of ours) -> a Hub-ready folder with
another attention mechanism.

    hf-effattn convert FacebookAI/roberta-base --attention_type kerformer --output_dir roberta-base-kerformer

The folder holds ``model.safetensors``, ``config.json`` (with ``attention_type``, ``attention_config`` and an
``auto_map`` naming every head), the flat remote-code files, a model card (``README.md``), and the
checkpoint's tokenizer or image processor when it has one: ``AutoModel*.from_pretrained(folder,
trust_remote_code=True)`` loads it without this package. Weights the checkpoint shares are reused; the new
and the dropped ones are logged.

The head is ``--task``, or else the one the checkpoint was saved with (its ``architectures``), or else the bare
encoder. From Python: :func:`convert`. A sentence-transformers checkpoint keeps its ``modules.json``, settings and
module folders (pooling, normalisation), so ``SentenceTransformer(folder, trust_remote_code=True)`` loads it.
Settings that change weight shapes need ``--ignore_mismatched_sizes``; a refused conversion is one line on stderr
and exit status 2.

With ``--max_length N`` (text) or ``--image_size S`` (ViT) the model is extended past the checkpoint's input
size (``hf_effattn.modeling.position_extension``): its config, the extended weights (listed in the log and the
card) and the saved tokenizer's ``model_max_length`` or image processor's ``size`` follow.

With ``--transfer_data SOURCE --transfer_steps N`` the new attention is first trained to reproduce the
checkpoint's softmax attention (:mod:`hf_effattn.conversion.transfer`) on the texts or images of ``SOURCE``
(:mod:`hf_effattn.conversion.transfer_data`); the report is printed and saved beside the model as
``attention_transfer.json``.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

from huggingface_hub.utils import HFValidationError, validate_repo_id
from transformers import AutoImageProcessor, AutoTokenizer, PreTrainedConfig
from transformers.utils import cached_file, logging

from ..modeling.configuration_effattn import pair
from ..presets import FAMILIES, TASKS, model_class

logger = logging.get_logger(__name__)


def loadable_model_types() -> dict[str, str]:
    """``model_type -> family`` (``"text"`` or ``"vision"``) for every checkpoint our models load."""
    families = {}
    for family, (_, auto_classes, _) in FAMILIES.items():
        base = auto_classes["AutoModel"]
        for model_type in (base.config_class.model_type, *base.checkpoint_key_mappings):
            families[model_type] = family
    return families


def family_of(model_type: str) -> str:
    """The family whose models load checkpoints of ``model_type``."""
    families = loadable_model_types()
    if model_type not in families:
        raise ValueError(
            f"Cannot convert a checkpoint of model_type {model_type!r}: one of {', '.join(families)} is needed."
        )
    return families[model_type]


def task_of(family: str, architectures: list[str] | None) -> str:
    """The task whose head the checkpoint was saved with (``"base"`` when it has none of ours)."""
    for task, auto_class in TASKS[family].items():
        suffix = auto_class.removeprefix("AutoModel")
        if suffix and any(name.endswith(suffix) for name in architectures or ()):
            return task
    return "base"


def check_found(checkpoint) -> None:
    """Raise ``FileNotFoundError`` for a local folder that does not exist (a name that cannot be a Hub id, such
    as ``./model`` or ``/data/model``), rather than Hugging Face Hub's complaint about the id's form."""
    if Path(checkpoint).exists():
        return
    try:
        validate_repo_id(str(checkpoint))
    except HFValidationError:
        raise FileNotFoundError(f"Checkpoint folder {checkpoint} not found: give an existing folder, or a Hub id "
                                "such as FacebookAI/roberta-base.") from None


def convert(checkpoint: str, attention_type: str, output_dir, task: str | None = None,
            attention_config: dict | None = None, convert_attention: bool = False,
            ignore_mismatched_sizes: bool = False, transfer: dict | None = None, max_length: int | None = None,
            image_size: int | None = None, **config_overrides):
    """Load ``checkpoint`` with ``attention_type``, save it Hub-ready into ``output_dir``; return the model.

    ``max_length`` (text) / ``image_size`` (ViT): extend the model to this input size, at least the checkpoint's
    (see :meth:`~hf_effattn.modeling.pretrained.EffAttnPreTrainedModel.from_pretrained`).

    ``ignore_mismatched_sizes``: initialise anew (and log) the weights whose shapes the new settings change
    (Kerformer's SE-K layers from ``se_mode="token"`` to ``"channel"``); without it they raise.

    ``transfer``: run attention transfer first, with these arguments: ``data`` (a source for
    :func:`~hf_effattn.conversion.transfer_data.transfer_loader`), ``column``, ``batch_size``, ``max_length`` (up to the
    model's maximum length, ``"model"`` for it; by default 128 or the model's if shorter), ``seed``, and
    those of :func:`~hf_effattn.conversion.transfer.transfer_attention` (``steps``, ``learning_rate``, ``train``).
    """
    check_found(checkpoint)
    source = PreTrainedConfig.get_config_dict(checkpoint)[0]
    family = family_of(source.get("model_type"))
    task = task or task_of(family, source.get("architectures"))
    loader = model_class(family, task)
    size = input_size_argument(loader.config_class.size_argument, family, max_length=max_length,
                               image_size=image_size)
    model, info = loader.from_pretrained(
        checkpoint, attention_type=attention_type, attention_config=attention_config,
        convert_attention=convert_attention, ignore_mismatched_sizes=ignore_mismatched_sizes,
        output_loading_info=True, **size, **config_overrides,
    )
    extension = info["position_extension"]
    report = transfer_from(checkpoint, family, model, **transfer) if transfer else None
    model.save_pretrained(output_dir)
    save_preprocessor(checkpoint, family, output_dir, model.config if extension else None)
    save_sentence_transformers_modules(checkpoint, output_dir)
    if report is not None:
        report.save(output_dir)
    write_card(output_dir, checkpoint, family, task, model.config, report, extension)
    return model


def input_size_argument(argument: str, family: str, **sizes) -> dict:
    """``{argument: value}`` for the one of ``sizes`` given (``{}`` for none); raise for a size that is not the
    family's (``argument``: ``max_length`` for text, ``image_size`` for ViT)."""
    given = {name: value for name, value in sizes.items() if value is not None}
    wrong = sorted(given.keys() - {argument})
    if wrong:
        raise ValueError(f"--{wrong[0]} does not apply to a {family} checkpoint: its input size is set by "
                         f"--{argument}.")
    return given


def write_card(output_dir, checkpoint: str, family: str, task: str, config, report, extension=None) -> None:
    """The folder's model card: the mechanism, the source checkpoint, an extension of its input size, and after a
    transfer, its report."""
    from ..finetuning.model_card import CardContent, converted_kind, write_model_card

    settings = {} if report is None else {
        "transfer_steps": report.steps, "transfer_examples": report.examples_seen,
        "transfer_learning_rate": report.learning_rate, "transfer_train": report.train,
    }
    write_model_card(output_dir, CardContent(
        kind=converted_kind(family, task), repo_id=Path(output_dir).resolve().name,
        attention_type=config.attention_type, attention_config=config.attention_config, base_model=checkpoint,
        dataset_id=report.data if report else None, dataset_config=None, results={}, hyperparameters=settings,
        transfer=report.to_dict() if report else None, extension=extension,
    ))


def transfer_from(checkpoint: str, family: str, model, data: str, column: str | None = None, split: str = "train",
                  batch_size: int = 16, max_length: int | str | None = None, seed: int = 0, **transfer_arguments):
    """Attention transfer from ``checkpoint``'s softmax attention into ``model`` on the inputs of ``data`` (texts
    truncated to ``max_length`` tokens: see :func:`~hf_effattn.conversion.transfer.transfer_length`)."""
    from .transfer import load_teacher, transfer_attention, transfer_length
    from .transfer_data import transfer_loader

    if family == "text":
        max_length = transfer_length(max_length, model)
    teacher = load_teacher(model, checkpoint)
    loader, _, _ = PREPROCESSORS[family]
    batches = transfer_loader(data, loader.from_pretrained(checkpoint), family, column=column, split=split,
                              batch_size=batch_size, max_length=max_length, seed=seed)
    return transfer_attention(model, teacher, batches, data_description=str(data), **transfer_arguments)


PREPROCESSORS = {  # family -> (loader, file that marks its presence, what it is called)
    "text": (AutoTokenizer, "tokenizer_config.json", "tokenizer"),
    "vision": (AutoImageProcessor, "preprocessor_config.json", "image processor"),
}


def save_preprocessor(checkpoint: str, family: str, output_dir, extended_config=None) -> None:
    """Copy the checkpoint's tokenizer (text) or image processor (vision) into ``output_dir``, if it has one; for a
    model extended to a larger input size (``extended_config``), sized to it (:data:`PREPROCESSOR_SIZES`)."""
    loader, config_file, called = PREPROCESSORS[family]
    if cached_file(checkpoint, config_file, _raise_exceptions_for_missing_entries=False) is None:
        logger.warning(f"{checkpoint} has no {called} ({config_file}): add one to {output_dir} before publishing it.")
        return
    processor = loader.from_pretrained(checkpoint)
    if extended_config is not None:
        PREPROCESSOR_SIZES[family](processor, extended_config)
    processor.save_pretrained(output_dir)


def size_tokenizer(tokenizer, config) -> None:
    """The tokenizer truncates to the model's maximum length."""
    tokenizer.model_max_length = config.attention_max_length


def size_image_processor(processor, config) -> None:
    """The image processor resizes images to the model's image size."""
    height, width = pair(config.image_size)
    processor.size = {"height": height, "width": width}


PREPROCESSOR_SIZES = {"text": size_tokenizer, "vision": size_image_processor}  # family -> sizes a preprocessor


SENTENCE_TRANSFORMERS_FILES = ("modules.json", "sentence_bert_config.json", "config_sentence_transformers.json")


def save_sentence_transformers_modules(checkpoint: str, output_dir) -> None:
    """Copy a sentence-transformers checkpoint's module list and settings, and the folders of the modules after
    the transformer (pooling, normalisation, dense layers), so that ``SentenceTransformer(output_dir,
    trust_remote_code=True)`` loads the converted model. The transformer module itself is the converted model, in
    the folder's root."""
    modules_file = cached_file(checkpoint, "modules.json", _raise_exceptions_for_missing_entries=False)
    if modules_file is None:
        return
    folders = [module["path"] for module in json.loads(Path(modules_file).read_text()) if module["path"]]
    if Path(checkpoint).is_dir():
        root = Path(checkpoint)
    else:
        from huggingface_hub import snapshot_download

        patterns = [*SENTENCE_TRANSFORMERS_FILES, *(f"{folder}/*" for folder in folders)]
        root = Path(snapshot_download(checkpoint, allow_patterns=patterns))
    for name in SENTENCE_TRANSFORMERS_FILES:
        if (root / name).is_file():
            shutil.copyfile(root / name, Path(output_dir) / name)
    for folder in folders:
        shutil.copytree(root / folder, Path(output_dir) / folder, dirs_exist_ok=True)
    logger.info(f"Copied the sentence-transformers modules of {checkpoint} ({', '.join(folders) or 'none'}).")
