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
module folders (pooling; a module that saves no files, such as Normalize, has none), so
``SentenceTransformer(folder, trust_remote_code=True)`` loads it. Settings that change weight shapes need
``--ignore_mismatched_sizes``; a refused conversion is one line on stderr and exit status 2.

Nothing on disk is lost (:mod:`~hf_effattn.folders.output_folders`): the output folder is checked before anything
loads (never the checkpoint's own or the transfer data's, nor inside or around them; one that is not empty only with
``--overwrite_output_dir``, which replaces it whole) and written into a temporary folder moved into place once
complete. So is the request
(:func:`check_request`: settings the mechanism lacks, ``--num_labels`` for a head without labels, the transfer's
arguments), and the transfer data is read and checked before the model loads. The card's licence is the
checkpoint's own (its card's metadata), or ``--license``.

With ``--max_length N`` (text) or ``--image_size S`` (ViT) the model is extended past the checkpoint's input
size (``hf_effattn.modeling.position_extension``): its config, the extended weights (listed in the log and the
card) and the saved tokenizer's ``model_max_length`` or image processor's ``size`` follow.

With ``--transfer_data SOURCE --transfer_steps N`` the new attention is first trained to reproduce the
checkpoint's softmax attention (:mod:`hf_effattn.conversion.transfer`) on the texts or images of ``SOURCE``
(:mod:`hf_effattn.conversion.transfer.data`); the report is printed and saved beside the model as
``attention_transfer.json``.
"""

from __future__ import annotations

import inspect
from pathlib import Path

from transformers import AutoImageProcessor, AutoTokenizer, PreTrainedConfig
from transformers.utils import cached_file, logging

from ..block_tokens import framed_as_saved
from ..options.argument_types import MAX_LEARNING_RATE
from ..folders.hub_or_local import check_found, check_hub_id
from ..models.hybrid_parts import check_local_part, check_window_dropout_of, first_attention, mechanism_weights
from ..model_cards import (
    CardContent, card_base_model, card_license, converted_kind, local_part_of, source_architecture, write_model_card,
)
from ..models.model_classes import LABELLED_TASKS, TASKS, family_of, model_class, task_of
from ..modeling.configuration_effattn import pair, saved_attention
from ..modeling.local_settings import split_local_settings
from ..modeling.settings import Spec, checked
from ..folders.output_folders import Input, prepare_output_folder, written_into_place
from ..folders.sentence_transformers_folder import copy_sentence_transformers_modules, sentence_embedding
from .transfer import check_softmax, load_teacher, transfer_attention, transfer_length

logger = logging.get_logger(__name__)


def convert(checkpoint: str, attention_type: str | None, output_dir, task: str | None = None,
            attention_config: dict | None = None, convert_attention: bool = False,
            ignore_mismatched_sizes: bool = False, transfer: dict | None = None, max_length: int | None = None,
            image_size: int | None = None, overwrite_output_dir: bool = False, license: str | None = None,
            base_model: str | None = None, output_transfer_report: bool = False, **config_overrides):
    """Load ``checkpoint`` with ``attention_type``, save it Hub-ready into ``output_dir``; return the model, or with
    ``output_transfer_report=True`` the tuple ``(model, report)``: the :class:`~hf_effattn.TransferReport` of the
    attention transfer (``None`` without one), as ``from_pretrained(..., output_loading_info=True)`` returns its
    extra output. The report is also saved in the folder (``attention_transfer.json``).

    Everything that can be refused is refused before any weight loads, from the checkpoint's ``config.json``
    (read once) and the request: the output folder, the checkpoint's type, the head, the mechanism's settings, the
    input size (:meth:`~hf_effattn.modeling.pretrained.EffAttnPreTrainedModel.plan_load`, the check
    ``from_pretrained`` runs) and the transfer's arguments and data.

    ``attention_type`` ``None`` keeps the checkpoint's own mechanism and settings (``sdpa`` for a RoBERTa, BERT or
    ViT checkpoint): e.g. to extend one of ours with ``max_length``.

    ``output_dir`` is checked before anything loads (:mod:`~hf_effattn.folders.output_folders`): it may not be,
    contain or lie inside the checkpoint or the transfer data, nor be a folder that is not empty unless
    ``overwrite_output_dir``, which replaces it whole.
    It is written into a temporary folder beside it and moved into place once complete.

    ``max_length`` (text) / ``image_size`` (ViT): extend the model to this input size, at least the checkpoint's
    (see :meth:`~hf_effattn.modeling.pretrained.EffAttnPreTrainedModel.from_pretrained`).

    ``ignore_mismatched_sizes``: initialise anew (and log) the weights whose shapes the new settings change
    (Kerformer's SE-K layers from ``se_mode="token"`` to ``"channel"``); without it they raise.

    ``transfer``: run attention transfer first, with these arguments: those of :func:`transfer_batches` (``data``,
    ``column``, ``split``, ``batch_size``, ``max_length``, ``seed``), read and checked before the model loads,
    and those of :func:`~hf_effattn.conversion.transfer.transfer_attention` (``steps``, ``learning_rate``,
    ``train``, ...). Its ``max_length`` is at most the model's maximum length, ``"model"`` for it; by default 128
    or the model's if shorter (:func:`~hf_effattn.conversion.transfer.transfer_length`).

    ``license``: the model card's licence (default: the one the checkpoint's card states; ``other``, with a note,
    where it states none).

    ``base_model``: the Hub id of the checkpoint, for the model card's ``base_model`` and its link (default: the
    checkpoint's, when it is a Hub id, else the ``base_model`` that a local folder's card declares).
    """
    check_found(checkpoint)
    check_hub_id(base_model)
    inputs = [Input("checkpoint", None, checkpoint),
              Input("transfer data", "--transfer_data", (transfer or {}).get("data"))]
    prepare_output_folder(output_dir, inputs, overwrite_output_dir)
    source = PreTrainedConfig.get_config_dict(checkpoint)[0]
    family = family_of(source.get("model_type"), checkpoint)
    task = task or task_of(family, source.get("architectures"))
    loader = model_class(family, task)
    size = input_size_argument(loader.config_class.size_argument, family, max_length=max_length,
                               image_size=image_size)
    check_request(family, task, *requested_attention(source, attention_type, attention_config), transfer,
                  config_overrides)
    plan = loader.plan_load(checkpoint, attention_type, attention_config, convert_attention, config_dict=source,
                            ignore_mismatched_sizes=ignore_mismatched_sizes, output_loading_info=True, **size,
                            **config_overrides)
    if transfer:
        check_softmax(source.get("attention_type", "sdpa"), checkpoint)
        check_window_dropout_of(plan.target, transfer.get("window_dropout", 0.0))
        if "mechanism_weight_learning_rate" in transfer:
            check_local_part(first_attention(plan.target), "mechanism_weight_learning_rate",
                             transfer["mechanism_weight_learning_rate"])
        note_block_transfer(plan.target.local_block)
    base_model = linked_source(checkpoint, base_model)  # its note once every check has passed
    processor = load_preprocessor(checkpoint, family)
    batches, transfer_arguments = None, {}
    if transfer:
        loader_arguments, transfer_arguments = split_transfer(transfer)
        if family == "text":
            longest = plan.target.attention_max_length
            loader_arguments["max_length"] = transfer_length(loader_arguments.get("max_length"), longest)
        batches = transfer_batches(checkpoint, processor, family, **loader_arguments)
    model, info = loader.from_plan(plan)
    extension = info["position_extension"]
    report = None
    if transfer:
        report = transfer_attention(model, load_teacher(model, checkpoint, config_dict=source), batches,
                                    data_description=str(transfer["data"]), **transfer_arguments)
    with written_into_place(output_dir) as folder:
        model.save_pretrained(folder)
        save_preprocessor(processor, family, folder, model.config, extension, checkpoint)
        copy_sentence_transformers_modules(checkpoint, folder, model.config.attention_max_length if extension else None)
        if report is not None:
            report.save(folder)
        write_card(folder, Path(output_dir).resolve().name, checkpoint, converted_kind(family, task,
                   source_architecture(source)), model.config, report, license, extension,
                   mechanism_weights(model) or None, base_model)
    return (model, report) if output_transfer_report else model


def input_size_argument(argument: str, family: str, **sizes) -> dict:
    """``{argument: value}`` for the one of ``sizes`` given (``{}`` for none); raise for a size that is not the
    family's (``argument``: ``max_length`` for text, ``image_size`` for ViT)."""
    given = {name: value for name, value in sizes.items() if value is not None}
    wrong = sorted(given.keys() - {argument})
    if wrong:
        raise ValueError(f"--{wrong[0]} does not apply to a {family} checkpoint: its input size is set by "
                         f"--{argument}.")
    return given


def requested_attention(source: dict, attention_type: str | None, attention_config: dict | None) -> tuple[str, dict]:
    """The mechanism and settings the conversion asks for, as ``from_pretrained`` reads them: the checkpoint's own
    mechanism without ``attention_type``, and ``attention_config`` over its settings when the mechanism stays."""
    saved_type, saved, _ = saved_attention(source)
    chosen = attention_type or saved_type
    own = split_local_settings(attention_config)[0]
    return chosen, {**((saved if chosen == saved_type else None) or {}), **(own or {})}


def check_request(family: str, task: str, attention_type: str, attention_config: dict | None,
                  transfer: dict | None, config_overrides: dict) -> None:
    """Raise ``ValueError`` for a conversion that cannot run, or with a setting that would do nothing, before
    anything loads: settings ``attention_type`` does not have, ``num_labels`` for a head without labels, a transfer
    without data, with unknown arguments or with values out of range (:data:`TRANSFER_SPECS`)."""
    from ..modeling.attention_registry import build_settings

    build_settings(attention_type, attention_config)  # raises for a setting the mechanism does not have
    if "num_labels" in config_overrides and task not in LABELLED_TASKS:
        raise ValueError(f"--num_labels does nothing for the {task!r} head, which has no labels: drop it, or choose "
                         f"a head with labels (--task {' / '.join(t for t in LABELLED_TASKS if t in TASKS[family])}).")
    if transfer is None:
        return
    if not transfer.get("data"):
        raise ValueError("transfer needs its data: give transfer={'data': SOURCE, ...} (--transfer_data SOURCE).")
    unknown = sorted(set(transfer) - set(transfer_argument_names()))
    if unknown:
        raise ValueError(f"Unknown transfer argument(s) {', '.join(unknown)}: known are "
                         f"{', '.join(transfer_argument_names())}.")
    for name, spec in TRANSFER_SPECS.items():
        if name in transfer:
            checked(name, transfer[name], spec, where="transfer argument")


TRANSFER_SPECS = {  # the transfer's arguments that a value out of range would make fail after the model loads
    "steps": Spec(int, minimum=1), "batch_size": Spec(int, minimum=1),
    "learning_rate": Spec(float, above=0, maximum=MAX_LEARNING_RATE),
    "mechanism_weight_learning_rate": Spec(float, above=0, maximum=MAX_LEARNING_RATE),
}


def transfer_argument_names() -> list[str]:
    """The arguments ``convert(transfer=...)`` takes: those of :func:`transfer_batches`, then of
    :func:`~hf_effattn.conversion.transfer.transfer_attention` (less what ``convert`` gives itself)."""
    training = [name for name in inspect.signature(transfer_attention).parameters
                if name not in ("model", "teacher", "data", "data_description")]
    return loader_argument_names() + training


def loader_argument_names() -> list[str]:
    """The arguments of :func:`transfer_batches` that ``convert(transfer=...)`` passes on (``data``, ...)."""
    return list(inspect.signature(transfer_batches).parameters)[3:]  # after checkpoint, processor and family


def split_transfer(transfer: dict) -> tuple[dict, dict]:
    """``transfer`` split into the arguments of :func:`transfer_batches` and those of ``transfer_attention``."""
    loader = loader_argument_names()
    return ({k: v for k, v in transfer.items() if k in loader}, {k: v for k, v in transfer.items() if k not in loader})


def note_block_transfer(block: int | None) -> None:
    """The one-line note of an attention transfer on a block hybrid (``block``, its ``local_block``; none without):
    what it does to the model, and the documented way to train one."""
    if block is None:
        return
    logger.warning(f"Attention transfer on a block hybrid (local_block={block}) trains its memory and gates to "
                   "reproduce the checkpoint's full softmax attention, which moves the model away from the chunked "
                   "reader it starts as; the documented way to train a block hybrid is masked-LM continued pretraining "
                   "(finetune/run_mlm.py) after a conversion without --transfer_data (Python: transfer=None).")


def linked_source(checkpoint: str, base_model: str | None) -> str | None:
    """The Hub id the card links as the source (:func:`~hf_effattn.model_cards.card_base_model`); where none is
    known (a local folder whose card declares none, and no ``base_model``), a one-line note says how to give it."""
    linked = card_base_model(checkpoint, base_model)
    if linked is None:
        logger.warning(f"{checkpoint} is a local folder whose Hub id is unknown (its card declares no base_model): the "
                       "model card names it by its folder and links no source; give the Hub id with --base_model ID "
                       "(Python: base_model=) to link it.")
    return linked


def write_card(folder, repo_id: str, checkpoint: str, kind, config, report, license: str | None = None,
               extension: dict | None = None, window_weights: list[list[float]] | None = None,
               base_model: str | None = None) -> None:
    """The folder's model card (of ``kind``, :func:`~hf_effattn.model_cards.converted_kind`): the mechanism, the
    source checkpoint (its Hub id ``base_model``, if known), its licence, an extension of its input size, the
    learned weights beside a local window, after a transfer its report, and the folder's sentence-transformers
    pipeline."""
    settings = {} if report is None else {
        "transfer_steps": report.steps, "transfer_examples": report.examples_seen,
        "transfer_learning_rate": report.learning_rate, "transfer_train": report.train,
    }
    write_model_card(folder, CardContent(
        kind=kind, repo_id=repo_id,
        attention_type=config.attention_type, attention_config=config.attention_config, base_model=checkpoint,
        dataset_id=report.data if report else None, dataset_config=None, results={}, hyperparameters=settings,
        transfer=report.to_dict() if report else None, license=card_license(checkpoint, license),
        extension=extension, window_weights=window_weights, base_model_id=base_model,
        sentence_embedding=sentence_embedding(folder), local_part=local_part_of(config),
    ))


def transfer_batches(checkpoint: str, processor, family: str, data: str, column: str | None = None,
                     split: str = "train", batch_size: int = 16, max_length: int = 128, seed: int = 0):
    """The attention-transfer batches of ``data``, made by ``checkpoint``'s tokenizer or image ``processor`` (texts
    truncated to ``max_length`` tokens)."""
    from .transfer.data import transfer_loader

    if processor is None:
        called = PREPROCESSORS[family][2]
        raise ValueError(f"{checkpoint} has no {called}, so the transfer data cannot be read for its model: add one "
                         "to the checkpoint, or convert without --transfer_data.")
    return transfer_loader(data, processor, family, column=column, split=split, batch_size=batch_size,
                           max_length=max_length, seed=seed)


PREPROCESSORS = {  # family -> (loader, file that marks its presence, what it is called)
    "text": (AutoTokenizer, "tokenizer_config.json", "tokenizer"),
    "vision": (AutoImageProcessor, "preprocessor_config.json", "image processor"),
}


def load_preprocessor(checkpoint: str, family: str):
    """The checkpoint's tokenizer (text) or image processor (vision), loaded once for the transfer's batches and the
    saved folder; ``None``, with a warning, when it has none."""
    loader, config_file, called = PREPROCESSORS[family]
    if cached_file(checkpoint, config_file, _raise_exceptions_for_missing_entries=False) is None:
        logger.warning(f"{checkpoint} has no {called} ({config_file}): add one to the converted folder before "
                       "publishing it.")
        return None
    return loader.from_pretrained(checkpoint)


def save_preprocessor(processor, family: str, output_dir, config, extended: bool, checkpoint: str) -> None:
    """Save the checkpoint's tokenizer (text) or image ``processor`` (vision) into ``output_dir``, if it has one: for
    a model extended to a larger input size (``extended``), sized to its ``config`` (:data:`PREPROCESSOR_SIZES`); a
    tokenizer that ``checkpoint`` saved framing its blocks, framing them still
    (:func:`~hf_effattn.block_tokens.framed_as_saved`)."""
    if processor is None:
        return
    if extended:
        PREPROCESSOR_SIZES[family](processor, config)
    if family == "text":
        processor = framed_as_saved(checkpoint, processor, config.local_block)
    processor.save_pretrained(output_dir)


def size_tokenizer(tokenizer, config) -> None:
    """The tokenizer truncates to the model's maximum length."""
    tokenizer.model_max_length = config.attention_max_length


def size_image_processor(processor, config) -> None:
    """The image processor resizes images to the model's image size."""
    height, width = pair(config.image_size)
    processor.size = {"height": height, "width": width}


PREPROCESSOR_SIZES = {"text": size_tokenizer, "vision": size_image_processor}  # family -> sizes a preprocessor
