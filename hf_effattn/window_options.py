"""The local-window options that ``hf-effattn convert`` and the fine-tuning scripts share: ``--local_window``,
``--global_tokens`` and ``--local_window_every`` (:func:`add_window_arguments`), merged into the attention settings
(:func:`with_window_settings`)."""

from __future__ import annotations

from .argument_types import positive_int
from .modeling.configuration_effattn import WINDOW_SETTINGS


def with_window_settings(attention_config: dict | None, options) -> dict | None:
    """``--attention_config`` with the window options of the parsed ``options`` (``--local_window``,
    ``--global_tokens``, ``--local_window_every``) merged in (None when none is given); a window setting given in
    both places with two values raises."""
    settings = dict(attention_config or {})
    for name in WINDOW_SETTINGS:
        value = getattr(options, name)
        if value is None:
            continue
        if settings.get(name, value) != value:
            raise ValueError(f"--{name} {value} contradicts {name}={settings[name]!r} in --attention_config: give it "
                             "once.")
        settings[name] = value
    return settings or None


def add_window_arguments(group) -> None:
    """``--local_window``, ``--global_tokens`` and ``--local_window_every``, merged into the attention settings by
    :func:`with_window_settings`."""
    group.add_argument("--local_window", type=positive_int, default=None, metavar="W",
                       help="Exact softmax over the tokens at most W // 2 positions away, beside the mechanism (a "
                            "setting of every mechanism but softmax's; default: none, the mechanism as published).")
    group.add_argument("--global_tokens", type=positive_int, default=None, metavar="G",
                       help="With --local_window: the first G tokens ([CLS]) attend to, and are attended by, every "
                            "token exactly.")
    group.add_argument("--local_window_every", type=positive_int, default=None, metavar="K",
                       help="With --local_window: the window in layers 0, K, 2K, ... only, the others running the "
                            "mechanism alone (default: 1, every layer).")
