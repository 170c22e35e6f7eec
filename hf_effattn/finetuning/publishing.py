"""Hub-ready folders and their upload.

A Hub-ready folder holds the weights (safetensors), ``config.json`` with ``auto_map``, the flat
remote-code files (both written by the model's ``save_pretrained``), the tokenizer or image processor,
and the model card; after LoRA training, the adapter and its base in ``base_model/`` instead of the model
(:mod:`~hf_effattn.finetuning.lora`). :func:`publish_folder` writes the card and uploads the folder with
``huggingface_hub`` (never the training checkpoints or pickles); when it cannot (offline, no token, the Hub
refuses), it logs why and leaves the folder in place.
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Callable

from ..folders.hub_or_local import hub_offline
from .checkpoints import CHECKPOINTS_DIR
from .lora import is_peft_model, save_adapter_folder

logger = logging.getLogger(__name__)

def save_model_folder(accelerator, model, processor, folder: str | Path, final_folder: str | Path | None = None
                      ) -> None:
    """Save the (unwrapped) model and its tokenizer or image processor into ``folder`` (main process writes); a
    LoRA model as its adapter plus its base (:func:`~hf_effattn.finetuning.lora.save_adapter_folder`), named at
    ``final_folder`` when ``folder`` is a temporary one renamed there once complete."""
    accelerator.wait_for_everyone()
    unwrapped, state_dict = accelerator.unwrap_model(model), accelerator.get_state_dict(model)
    if is_peft_model(unwrapped):
        save_adapter_folder(unwrapped, folder, state_dict, is_main_process=accelerator.is_main_process,
                            save_function=accelerator.save, final_folder=final_folder)
    else:
        unwrapped.save_pretrained(folder, is_main_process=accelerator.is_main_process,
                                  save_function=accelerator.save, state_dict=state_dict)
    if accelerator.is_main_process and processor is not None:
        processor.save_pretrained(folder)
    accelerator.wait_for_everyone()


def upload_blocker(token: str | None) -> str | None:
    """Why an upload cannot even be tried (offline mode, no token), or ``None``."""
    from huggingface_hub import get_token

    if hub_offline():
        return "HF_HUB_OFFLINE is set"
    if not (token or get_token()):
        return "no Hugging Face token was found (pass --hub_token, set HF_TOKEN, or run `hf auth login`)"
    return None


# What stays out of an upload, beside the Hub-ready files: our checkpoints, Trainer's (``checkpoint-<step>``, with
# their optimizer, scheduler and RNG pickles) and its private files (``_*``, as Trainer's own push leaves them out),
# and pickles (Trainer's ``training_args.bin``): the model itself is in safetensors.
HUB_IGNORE_PATTERNS = (f"{CHECKPOINTS_DIR}/*", "checkpoint-*/*", "_*", "*.bin", "*.pt", "*.pth", "*.pkl")


def repository_name(hub_model_id: str | None, output_dir: str | Path) -> str:
    """``--hub_model_id``, or else the output folder's name (the Hub puts it under the token's user), as Trainer
    does."""
    return hub_model_id or Path(output_dir).resolve().name


def publish_folder(folder: str | Path, name: str, write_card: Callable[[str], object], push: bool = False,
                   token: str | None = None, private: bool = False) -> str | None:
    """Write the model card of ``folder`` with ``write_card(repo_id)`` and, with ``push``, upload the folder (without
    :data:`HUB_IGNORE_PATTERNS`) to the model repository ``name`` (``user/name``, or ``name`` under the token's user).

    The repository is created first, so that the card's loading snippet names it as the Hub does (``user/name``).
    Returns the repository's URL, or ``None``: not asked to push, or the upload did not happen (offline, no token,
    the Hub refuses), which is logged with the command that uploads the folder later; the folder is kept either way.
    """
    if not push:
        write_card(name)
        return None
    from huggingface_hub import HfApi

    url, reason = None, upload_blocker(token)
    if reason is None:
        try:
            api = HfApi(token=token)
            url = api.create_repo(name, private=private, exist_ok=True)
            write_card(url.repo_id)
            api.upload_folder(repo_id=url.repo_id, folder_path=str(folder), ignore_patterns=list(HUB_IGNORE_PATTERNS),
                              commit_message="Upload fine-tuned hf_effattn model")
            logger.info(f"Pushed {folder} to {url}")
            return str(url)
        except Exception as error:  # noqa: BLE001 - any failure leaves the local folder as the result
            reason = f"the upload failed ({type(error).__name__}: {error})"
    if url is None:
        write_card(name)
    excludes = " ".join(f"--exclude '{pattern}'" for pattern in HUB_IGNORE_PATTERNS)
    namespace = "" if "/" in name else (f" The model card names the repository {name!r}: pass a full id "
                                        f"(--hub_model_id user/{name}) for a card that names it in full.")
    logger.warning(f"Not pushing to the Hub: {reason}. The Hub-ready folder stays at {Path(folder).resolve()}; "
                   f"upload it later with `hf upload {url.repo_id if url else name} {folder} . {excludes}`.{namespace}")
    return None
