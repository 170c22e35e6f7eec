"""``hf-effattn list``: the registered attention mechanisms and the model presets.

    hf-effattn list                     # both
    hf-effattn list "roberta-*/dba"     # presets matching a pattern
    hf-effattn list --attentions        # mechanisms only
"""

from __future__ import annotations

import argparse

from .modeling.attentions import describe_attention, list_attentions
from .presets import ARCHITECTURES, list_models

FLAGS = ("carries_state", "has_aux_loss", "needs_max_length", "uses_query_key")


def attention_lines() -> list[str]:
    """One line per mechanism: name, paper, complexity, capabilities, default settings."""
    lines = []
    for name in list_attentions():
        info = describe_attention(name)
        flags = ", ".join(flag for flag in FLAGS if info[flag]) or "-"
        lines.append(f"{name:15s} {info['paper']} | {info['complexity']} | {flags} | defaults {info['defaults']}")
    return lines


def model_lines(pattern: str) -> list[str]:
    """One line per preset matching ``pattern``: name and what the architecture is."""
    return [f"{name:40s} {ARCHITECTURES[name.split('/')[0]].description}" for name in list_models(pattern)]


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("pattern", nargs="?", default="*", help="fnmatch pattern of preset names (default: all)")
    what = parser.add_mutually_exclusive_group()
    what.add_argument("--attentions", action="store_true", help="list the attention mechanisms only")
    what.add_argument("--models", action="store_true", help="list the model presets only")


def run(args) -> int:
    sections = []
    if not args.models:
        sections.append(("Attention mechanisms (attention_type)", attention_lines()))
    if not args.attentions:
        title = f"Model presets matching {args.pattern!r} (hf_effattn.create_model)"
        sections.append((title, model_lines(args.pattern)))
    for title, lines in sections:
        print(f"{title}:\n" + "\n".join(f"  {line}" for line in lines or ["(none)"]))
    return 0
