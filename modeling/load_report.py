"""The report of a load: which parameters are new (initialised), which of the checkpoint's were dropped, and which
were extended, with layer numbers folded into ``*``, logged once, in place of Transformers' own load-report table
(which is shown only when loading fails, since its error message points to it)."""

from __future__ import annotations

import contextlib
import logging as std_logging
import re

from transformers.utils import logging

logger = logging.get_logger(__name__)


def fold_layers(keys) -> str:
    """Parameter names with layer numbers folded into ``*``, sorted and deduplicated."""
    return ", ".join(sorted({re.sub(r"\.\d+\.", ".*.", key) for key in keys})) or "none"


@contextlib.contextmanager
def transformers_load_report_held_back():
    """Hold back what Transformers' ``from_pretrained`` logs (logger ``transformers.modeling_utils``) of the
    parameters it did not find, since :func:`log_loading_report` reports the same once: its ``LOAD REPORT`` table,
    and its "checkpoint seem corrupted" for a tied pair both absent (an encoder's checkpoint loaded with a new
    masked-LM head: ``lm_head.bias`` and ``lm_head.decoder.bias``, both listed as new). If loading fails, they are
    logged after all (Transformers' error then refers to them)."""
    target = std_logging.getLogger("transformers.modeling_utils")
    held: list[std_logging.LogRecord] = []

    def hold(record: std_logging.LogRecord) -> bool:
        message = record.getMessage()
        if "LOAD REPORT" in message or "but both are absent from the checkpoint" in message:
            held.append(record)
            return False
        return True

    target.addFilter(hold)
    try:
        yield
    except Exception:
        target.removeFilter(hold)
        for record in held:
            target.handle(record)
        raise
    finally:
        target.removeFilter(hold)


def log_loading_report(model, info: dict, path, source_type: str) -> None:
    """Log which parameters are new (initialised), which of the checkpoint's were dropped, and which were
    extended to a larger input size."""
    new = info["missing_keys"]
    reshaped = [key for key, *_ in info["mismatched_keys"]]
    dropped = info["unexpected_keys"]
    extension = info.get("position_extension")
    message = (
        f"{type(model).__name__} (attention_type={model.config.attention_type!r}) from {path} "
        f"(model_type {source_type!r}). New parameters, initialised: {fold_layers(new)}. "
        f"Dropped from the checkpoint: {fold_layers(dropped)}."
    )
    if reshaped:
        message += f" Initialised anew because their shapes changed (ignore_mismatched_sizes): {fold_layers(reshaped)}."
    if extension:
        message += (
            f" Extended from {extension['argument']} {extension['from']} to {extension['to']} (positions copied or "
            f"interpolated, length-sized weights by their mechanism's rule): {fold_layers(extension['parameters'])}."
        )
    if new or dropped or reshaped or extension:
        logger.warning(message)
    else:
        logger.info(message)
