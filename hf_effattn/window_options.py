"""The local-window options that ``hf-effattn convert`` and the fine-tuning scripts share: ``--local_window``,
``--global_tokens`` and ``--local_window_every`` (:func:`add_window_arguments`), merged into the attention settings
(:func:`with_window_settings`)."""

from __future__ import annotations

from .argument_types import non_negative_int, positive_int
from .modeling.configuration_effattn import WINDOW_SETTINGS, merge_window_settings


def with_window_settings(attention_config: dict | None, options) -> dict | None:
    """``--attention_config`` with the window options of the parsed ``options`` (``--local_window``,
    ``--global_tokens``, ``--local_window_every``) merged in (None when none is given); a window setting given in
    both places with two values raises (:func:`~hf_effattn.modeling.configuration_effattn.merge_window_settings`)."""
    window = {name: getattr(options, name) for name in WINDOW_SETTINGS}
    return merge_window_settings(attention_config, window, given_as="--{name} {value}", where="--attention_config")


def add_window_arguments(group) -> None:
    """``--local_window``, ``--global_tokens`` and ``--local_window_every``, merged into the attention settings by
    :func:`with_window_settings`."""
    group.add_argument("--local_window", type=positive_int, default=None, metavar="W",
                       help="Exact softmax over the tokens at most W // 2 positions away, beside the mechanism (a "
                            "setting of every mechanism but softmax's; default: none, the mechanism as published).")
    group.add_argument("--global_tokens", type=non_negative_int, default=None, metavar="G",
                       help="With --local_window: the first G tokens ([CLS]) attend to, and are attended by, every "
                            "token exactly (default 0: none).")
    group.add_argument("--local_window_every", type=positive_int, default=None, metavar="K",
                       help="With --local_window: the window in layers 0, K, 2K, ... only, the others running the "
                            "mechanism alone (default: 1, every layer).")
