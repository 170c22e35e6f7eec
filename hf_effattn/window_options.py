"""The local-window options that ``hf-effattn convert`` and the fine-tuning scripts share: ``--local_window`` and
``--global_tokens`` (:func:`add_window_arguments`), merged into the attention settings
(:func:`with_window_settings`)."""

from __future__ import annotations

from .argument_types import positive_int


def with_window_settings(attention_config: dict | None, local_window: int | None,
                         global_tokens: int | None) -> dict | None:
    """``--attention_config`` with ``--local_window`` and ``--global_tokens`` merged in (None when none is given);
    a window setting given in both places with two values raises."""
    settings = dict(attention_config or {})
    for name, value in {"local_window": local_window, "global_tokens": global_tokens}.items():
        if value is None:
            continue
        if settings.get(name, value) != value:
            raise ValueError(f"--{name} {value} contradicts {name}={settings[name]!r} in --attention_config: give it "
                             "once.")
        settings[name] = value
    return settings or None


def add_window_arguments(group) -> None:
    """``--local_window`` and ``--global_tokens``, merged into the attention settings by
    :func:`with_window_settings`."""
    group.add_argument("--local_window", type=positive_int, default=None, metavar="W",
                       help="Exact softmax over the tokens at most W // 2 positions away, beside the mechanism (a "
                            "setting of every mechanism but softmax's; default: none, the mechanism as published).")
    group.add_argument("--global_tokens", type=positive_int, default=None, metavar="G",
                       help="With --local_window: the first G tokens ([CLS]) attend to, and are attended by, every "
                            "token exactly.")
