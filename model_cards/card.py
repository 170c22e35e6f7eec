"""The model card (``README.md``) of a Hub-ready folder, rendered from ``template.md`` beside this file: the one card
that conversion (:mod:`hf_effattn.conversion.convert`) and fine-tuning (:mod:`hf_effattn.finetuning.run`) both write.

The YAML header is built by ``huggingface_hub.ModelCardData`` (the licence: the source checkpoint's, from its
card's metadata, or ``--license``, else ``other`` with a note in the body; tags with the mechanism,
datasets, metrics, ``library_name: transformers``, ``pipeline_tag``, base model, and the results as a
``model-index``); the body describes the mechanism (its paper, linked where the paper prints a DOI, and its
BibTeX citation, both from the mechanism class), the results, the hyper-parameters, how to load the model with
``trust_remote_code=True``, and its limitations (where its attention's training comes from, the supported
versions).
"""

from __future__ import annotations

import dataclasses
import json
import logging
from dataclasses import dataclass, field
from pathlib import Path

from ..models.model_classes import TASKS
from ..modeling.attentions import describe_attention, get_settings_class
from ..modeling.local_settings import local_part_settings
from ..modeling.load_report import fold_layers
from ..modeling.supported_versions import SUPPORTED_TORCH, SUPPORTED_TRANSFORMERS
from ..models.presets import SOFTMAX_IMPLEMENTATIONS, list_models
from ..folders.sentence_transformers_folder import SentenceEmbedding
from ..version import __version__
from .converted_attention import converted_purpose, untrained_note
from .embedding_snippets import sentence_transformers_code, transformers_embedding_code
from .source_card import License, is_hub_id

logger = logging.getLogger(__name__)
TEMPLATE_PATH = Path(__file__).resolve().parent / "template.md"


@dataclass(frozen=True)
class CardKind:
    """What differs between text and image models in a card."""

    pipeline_tag: str | None
    architecture_tag: str
    processor_class: str
    model_class: str
    usage_example: str
    training_phrase: str | None = None  # how the card says the model was trained; default: "fine-tuned for <tag>"


TEXT_CLASSIFICATION = CardKind(
    pipeline_tag="text-classification",
    architecture_tag="roberta",
    processor_class="AutoTokenizer",
    model_class="AutoModelForSequenceClassification",
    usage_example=(
        '```python\ninputs = processor("A sentence to classify.", return_tensors="pt")\n'
        "label = model.config.id2label[model(**inputs).logits.argmax(-1).item()]\n```"
    ),
)
IMAGE_CLASSIFICATION = CardKind(
    pipeline_tag="image-classification",
    architecture_tag="vit",
    processor_class="AutoImageProcessor",
    model_class="AutoModelForImageClassification",
    usage_example=(
        '```python\nfrom PIL import Image\n\ninputs = processor(Image.open("image.png"), return_tensors="pt")\n'
        "label = model.config.id2label[model(**inputs).logits.argmax(-1).item()]\n```"
    ),
)


PIPELINE_TAGS = {  # (family, task) of a converted model -> the Hub's pipeline tag (none for the others)
    ("text", "base"): "feature-extraction",
    ("text", "masked-lm"): "fill-mask",
    ("text", "sequence-classification"): "text-classification",
    ("text", "token-classification"): "token-classification",
    ("text", "question-answering"): "question-answering",
    ("vision", "base"): "image-feature-extraction",
    ("vision", "image-classification"): "image-classification",
}


def converted_kind(family: str, task: str, architecture: str | None = None) -> CardKind:
    """The card kind of a model converted (not fine-tuned) by ``hf-effattn convert``, with head ``task``, tagged with
    the source's ``architecture`` (:func:`~.converted_attention.source_architecture`; default: the family's)."""
    processor = "AutoTokenizer" if family == "text" else "AutoImageProcessor"
    example = ('inputs = processor("A sentence.", return_tensors="pt")' if family == "text" else
               'from PIL import Image\n\ninputs = processor(Image.open("image.png"), return_tensors="pt")')
    return CardKind(
        pipeline_tag=PIPELINE_TAGS.get((family, task)),
        architecture_tag=architecture or ("roberta" if family == "text" else "vit"),
        processor_class=processor,
        model_class=TASKS[family][task],
        usage_example=f"```python\n{example}\noutputs = model(**inputs)\n```",
    )


@dataclass
class CardContent:
    """Everything a card states about one fine-tuned model."""

    kind: CardKind
    repo_id: str
    attention_type: str
    attention_config: dict
    base_model: str
    dataset_id: str
    dataset_config: str | None
    results: dict[str, dict[str, float]]
    hyperparameters: dict
    best: dict | None = None
    extra_tags: list[str] = field(default_factory=list)
    transfer: dict | None = None  # a TransferReport as a dict, when attention transfer ran before fine-tuning
    lora: bool = False  # the folder holds a LoRA adapter and its base (``base_model/``), not the whole model
    # The input size extended at conversion or as a training run loaded the model: from_pretrained's
    # "position_extension", with "trained_length", the longest input the run trained on, for the latter.
    extension: dict | None = None
    license: License = License(None)
    # With a local window or blocks beside the mechanism: each layer's learned weight of its part (gate), per head.
    window_weights: list[list[float]] | None = None
    # The Hub id of what the model derives from (card_base_model): by default base_model's, when that is a Hub id.
    base_model_id: str | None = None
    # The folder's sentence-transformers pipeline (pooling, normalisation), when it is a sentence-transformers model.
    sentence_embedding: SentenceEmbedding | None = None
    # The blocks the folder's tokenizer frames in its own call (EffAttnBlockTokenizer), read by write_model_card.
    framing_block: int | None = None
    # The model's exact local part (its config's local_window, local_block, global_tokens, ...), empty without one.
    local_part: dict = field(default_factory=dict)

    def __post_init__(self):
        if self.base_model_id is None and is_hub_id(self.base_model):
            self.base_model_id = self.base_model


def card_data(content: CardContent):
    """The YAML metadata of the card (results as a ``model-index`` when the dataset is on the Hub)."""
    from huggingface_hub import EvalResult, ModelCardData

    dataset = content.dataset_id if is_hub_id(content.dataset_id) else None
    eval_results = [
        EvalResult(task_type=content.kind.pipeline_tag, dataset_type=dataset, dataset_name=dataset,
                   dataset_config=content.dataset_config, dataset_split=split, metric_type=metric, metric_value=value)
        for split, metrics in content.results.items() for metric, value in metrics.items()
    ] if dataset else []
    sentence_transformers = content.sentence_embedding is not None
    return ModelCardData(
        license=content.license.name or "other",
        library_name="peft" if content.lora else "sentence-transformers" if sentence_transformers else "transformers",
        pipeline_tag=pipeline_tag(content),
        tags=["hf_effattn", "efficient-attention", content.attention_type, content.kind.architecture_tag,
              "custom_code", *(["sentence-transformers"] if sentence_transformers else []), *content.extra_tags],
        datasets=[dataset] if dataset else None,
        metrics=sorted({metric for metrics in content.results.values() for metric in metrics} - {"combined_score"})
        or None,
        base_model=content.base_model_id,
        model_name=content.repo_id,
        eval_results=eval_results or None,
    )


def pipeline_tag(content: CardContent) -> str | None:
    """The Hub's pipeline tag: the head's, but ``sentence-similarity`` for the encoder of a sentence-transformers
    folder, as sentence-transformers tags its models."""
    if content.sentence_embedding is not None and content.kind.pipeline_tag == "feature-extraction":
        return "sentence-similarity"
    return content.kind.pipeline_tag


def purpose_sentence(content: CardContent) -> str:
    """What was done to the checkpoint after the swap: fine-tuned on a dataset, or only converted."""
    if content.results:
        trained = content.kind.training_phrase or f"fine-tuned for {content.kind.pipeline_tag}"
        return f"{trained} on {dataset_sentence(content)}"
    if content.transfer:
        return ("converted and not fine-tuned: the new attention was trained only by attention transfer (below), "
                "to reproduce the original softmax attention")
    return converted_purpose(content)


def dataset_sentence(content: CardContent) -> str:
    """How the card names the dataset: a Hub link, or the local source's name."""
    name = content.dataset_id if not content.dataset_config else f"{content.dataset_id} ({content.dataset_config})"
    if is_hub_id(content.dataset_id):
        return f"[{name}](https://huggingface.co/datasets/{content.dataset_id})"
    return f"a local dataset, `{Path(content.dataset_id).name}`" + (
        f" ({content.dataset_config})" if content.dataset_config else "")


def paper_reference(description: dict) -> str:
    """The mechanism's paper, linked when the paper prints an identifier (a DOI) to link to."""
    url = description["paper_url"]
    return f"[{description['paper']}]({url})" if url else description["paper"]


def license_sentence(content: CardContent) -> str:
    """Where the card's licence comes from, or, where it is unknown, what to do."""
    name, base = content.license.name, base_name(content)
    if name and content.license.given:
        return f"`{name}`, as given when the model was written."
    if name:
        return f"`{name}`, the licence that the card of {base} states: this model's weights derive from it."
    unknown = ("the model was trained from scratch and no licence was given" if content.base_model in list_models()
               else f"the card of {base} states none")
    return (f"Unknown: {unknown}, so the metadata says `other`. Check the terms of what the model was made from "
            "before using or sharing it, and set the licence with `--license` (Python: `license=`).")


def base_name(content: CardContent) -> str:
    """The source checkpoint as a card names it: a Hub link to its id, or the local folder's name."""
    if content.base_model_id:
        return f"[{content.base_model_id}](https://huggingface.co/{content.base_model_id})"
    return f"`{Path(content.base_model).name}`"


def opening_sentence(content: CardContent) -> str:
    """``This model is SOURCE``: the source's Hub link; from a local folder whose Hub id is unknown, the model
    named by its own folder, then the source's (often a name such as ``model`` that says nothing)."""
    if content.base_model_id or content.base_model in list_models():
        return f"This model is {base_name(content)}"
    return f"This model, `{content.repo_id.split('/')[-1]}`, is the local checkpoint {base_name(content)}"


def limitations(content: CardContent) -> list[str]:
    """What a user of the model must know: where its attention's training comes from, and the versions it runs on."""
    notes, base = [], content.base_model_id or f"`{Path(content.base_model).name}`"
    if content.base_model in list_models():
        notes.append(f"The model was trained from scratch (preset `{content.base_model}`, random weights) on the "
                     f"fine-tuning data only ({dataset_sentence(content)}), with no pretraining.")
    elif content.attention_type == "local":  # the checkpoint's softmax, restricted: nothing new to train
        notes.append(f"The `local` attention adds no parameters to {base}'s: each token reads only the tokens of its "
                     "block or window (and any global tokens, above); nothing carries what lies beyond them.")
    elif content.attention_type not in SOFTMAX_IMPLEMENTATIONS:  # the checkpoint's own attention: nothing new
        origin = f"The `{content.attention_type}` attention was not part of {base}'s pretraining: its new parameters"
        if content.results:
            trained = ("were first trained by attention transfer to imitate the original softmax attention (above), "
                       "then" if content.transfer else "started from random values and were trained only")
            notes.append(f"{origin} {trained} on the fine-tuning data ({dataset_sentence(content)}).")
        elif content.transfer:
            notes.append(f"{origin} were trained only by attention transfer (above), with no labels: fine-tune the "
                         "model before relying on its outputs.")
        else:
            notes.append(untrained_note(content, origin))
    if content.base_model_id is None and content.base_model not in list_models():
        notes.append(f"The card does not link the source on the Hub: `{Path(content.base_model).name}` is a local "
                     "folder whose card declares no `base_model`. Name its Hub id with `--base_model` (Python: "
                     "`base_model=`) when you write the folder.")
    notes.append(
        f"The remote code needs Transformers {SUPPORTED_TRANSFORMERS} and PyTorch {SUPPORTED_TORCH}. On an older "
        "Transformers it refuses with a message naming the version (loading a local copy of the folder, Transformers "
        "4 fails earlier, with a `FileNotFoundError` in `transformers_modules`).")
    return notes


def local_part_of(config) -> dict:
    """A model config's exact local part as :attr:`CardContent.local_part` holds it (empty without one)."""
    local = config.local_part
    return {} if local is None else local.to_dict()


def shares_normaliser(attention_type: str, local_part: dict) -> bool:
    """Whether the mechanism's terms sit under its local part's normaliser: a kernelized mechanism's
    ``shared_normaliser`` in force (the others are mixed per head)."""
    role = get_settings_class(attention_type).local_part_role
    local = local_part_settings(local_part, role)
    return local is not None and local.shares_normaliser(role)


def render_model_card(content: CardContent, template_path: str | Path = TEMPLATE_PATH):
    """The ``huggingface_hub.ModelCard`` of a fine-tuned model."""
    import torch
    import transformers
    from huggingface_hub import ModelCard

    if not Path(template_path).is_file():
        raise FileNotFoundError(f"No model card template at {template_path}: pass the path of a Jinja template.")
    description = describe_attention(content.attention_type)
    best_sentence = ""
    if content.best:
        best_sentence = (f"The best evaluation during training ({content.best['metric']} = "
                         f"{content.best['value']:.4f}) came at step {content.best['step']}.")
    return ModelCard.from_template(
        card_data(content),
        template_path=str(template_path),
        model_name=content.repo_id.split("/")[-1],
        repo_id=content.repo_id,
        base_model_sentence=opening_sentence(content),
        purpose_sentence=purpose_sentence(content),
        attention_type=content.attention_type,
        attention_config=json.dumps(content.attention_config),
        paper=paper_reference(description),
        citation=description["citation"],
        equations=description["equations"],
        complexity=description["complexity"],
        results=[{"split": split, "metric": metric, "value": value}
                 for split, metrics in content.results.items() for metric, value in metrics.items()],
        best_sentence=best_sentence,
        hyperparameters=content.hyperparameters,
        transfer=content.transfer,
        window_weights=content.window_weights,
        local_window=content.local_part.get("local_window"),
        local_block=content.local_part.get("local_block"),
        global_tokens=content.local_part.get("global_tokens"),
        local_window_every=content.local_part.get("local_window_every", 1),
        shared_normaliser=shares_normaliser(content.attention_type, content.local_part),
        lora=content.lora,
        extension=content.extension and {**content.extension, "parameters": ", ".join(
            f"`{name}`" for name in fold_layers(content.extension["parameters"]).split(", "))},
        processor_class=content.kind.processor_class,
        model_class=content.kind.model_class,
        usage_example=content.kind.usage_example,
        framing_block=content.framing_block,
        sentence_embedding=content.sentence_embedding,
        sentence_transformers_code=sentence_transformers_code(content.repo_id),
        transformers_embedding_code=content.sentence_embedding and transformers_embedding_code(
            content.repo_id, content.sentence_embedding),
        limitations=limitations(content),
        license_sentence=license_sentence(content),
        versions={"hf_effattn": __version__, "Transformers": transformers.__version__,
                  "PyTorch": torch.__version__},
    )


def write_model_card(folder: str | Path, content: CardContent) -> Path:
    """Render the card into ``folder/README.md`` (with the blocks its tokenizer frames, where it does) and return its
    path."""
    from ..block_tokens import saved_framing_block  # the tokenizer's modules, only where a card is written

    path = Path(folder) / "README.md"
    framing = {"framing_block": saved_framing_block(str(folder))} if content.framing_block is None else {}
    render_model_card(dataclasses.replace(content, **framing)).save(path)
    return path


def card_writer(folder: str | Path, content: CardContent):
    """``write_card(repo_id)`` for :func:`~hf_effattn.finetuning.publishing.publish_folder`: ``content``'s card, naming
    the repository ``repo_id``, into ``folder``."""
    return lambda repo_id: write_model_card(folder, dataclasses.replace(content, repo_id=repo_id))
