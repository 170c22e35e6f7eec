"""``from_pretrained``'s arguments as Transformers takes them (``pretrained.py``): those that locate a checkpoint's
files, those for its weights (``dtype``, ``torch_dtype``: ``"auto"`` is no dtype, so they never reach the config), the
``config.json`` of a path or of weights in memory (``from_pretrained(None, config=config, state_dict=state_dict)``),
and the error of weights of other shapes, a ``RuntimeError`` as Transformers raises it.
"""

from __future__ import annotations

from transformers import PreTrainedConfig

# Arguments of ``from_pretrained`` that locate the checkpoint's files.
HUB_KWARGS = ("cache_dir", "force_download", "local_files_only", "proxies", "revision", "subfolder", "token")
# Arguments of ``from_pretrained`` for the weights that are also config values: kept out of the config (``"auto"``
# is no dtype), passed to Transformers' loading, which sets the config's dtype from them.
WEIGHT_KWARGS = ("dtype", "torch_dtype")


class MismatchedSizesError(RuntimeError, ValueError):
    """Weights of a checkpoint whose shapes differ from the model's: a ``RuntimeError`` as Transformers raises it (code
    that catches it and retries with ``ignore_mismatched_sizes=True`` works unchanged), and a ``ValueError``, the
    user's to fix, so the command line answers it in one line."""


def checkpoint_config_dict(path, kwargs: dict) -> dict:
    """The ``config.json`` dict of checkpoint ``path`` (``kwargs``: those of ``from_pretrained``, which locate it);
    with no path (``from_pretrained(None, config=config, state_dict=state_dict)``, weights in memory), the dict of
    ``kwargs["config"]``, which must be given."""
    if path is not None:
        return PreTrainedConfig.get_config_dict(path, **{k: kwargs[k] for k in HUB_KWARGS if k in kwargs})[0]
    if not isinstance(kwargs.get("config"), PreTrainedConfig):
        raise ValueError("from_pretrained(None, ...) builds the model from weights in memory: pass the model's config "
                         "(config=...) and its weights (state_dict=...), or give a checkpoint's folder or Hub id.")
    return kwargs["config"].to_dict()
