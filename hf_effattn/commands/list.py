"""``hf-effattn list``: the registered attention mechanisms and the model presets.

    hf-effattn list                     # both
    hf-effattn list psf                 # the mechanisms and presets whose names contain "psf"
    hf-effattn list "roberta-*/dba"     # a pattern (fnmatch wildcards) matches anywhere in a name too
    hf-effattn list --attentions        # mechanisms only

A pattern that matches no name is refused (exit status 2) with the closest names, as a misspelt name would be.
"""

from __future__ import annotations

import argparse
import difflib
import fnmatch

FLAGS = ("carries_state", "has_aux_loss", "needs_max_length", "uses_query_key")


def matches(name: str, pattern: str) -> bool:
    """Whether ``pattern`` (fnmatch wildcards allowed) matches a part of ``name``, ignoring case."""
    return fnmatch.fnmatchcase(name.lower(), f"*{pattern.lower()}*")


def attention_lines(pattern: str = "*") -> list[str]:
    """One line per mechanism matching ``pattern``: name, paper, complexity, capabilities, default settings."""
    from ..modeling.attentions import describe_attention, list_attentions

    lines = []
    for name in (name for name in list_attentions() if matches(name, pattern)):
        info = describe_attention(name)
        flags = ", ".join(flag for flag in FLAGS if info[flag]) or "-"
        lines.append(f"{name:15s} {info['paper']} | {info['complexity']} | {flags} | defaults {info['defaults']}")
    return lines


def model_lines(pattern: str) -> list[str]:
    """One line per preset matching ``pattern``: name and what the architecture is."""
    from ..models.presets import ARCHITECTURES, list_models

    return [f"{name:40s} {ARCHITECTURES[name.split('/')[0]].description}" for name in list_models()
            if matches(name, pattern)]


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("pattern", nargs="?", default="*",
                        help="a part of the names to show, fnmatch wildcards allowed, e.g. psf or 'lra*/psf' "
                             "(default: all)")
    what = parser.add_mutually_exclusive_group()
    what.add_argument("--attentions", action="store_true", help="list the attention mechanisms only")
    what.add_argument("--models", action="store_true", help="list the model presets only")


def check_something_matches(args, sections: list[tuple[str, list[str]]]) -> None:
    """Raise ``ValueError`` when no name that ``args`` lists matches its pattern (a typo, as a rule), naming the
    closest names: the mechanisms', the architectures' and the presets'."""
    from ..modeling.attentions import list_attentions
    from ..models.presets import ARCHITECTURES, list_models

    if any(lines for _, lines in sections):
        return
    names = ([] if args.models else list_attentions()) + ([] if args.attentions else [*ARCHITECTURES, *list_models()])
    close = difflib.get_close_matches(args.pattern.lower(), names, n=3, cutoff=0.5)
    hint = f"did you mean {', '.join(close)}?" if close else "hf-effattn list without a pattern shows every name."
    listed = "mechanism" if args.attentions else "preset" if args.models else "mechanism or preset"
    raise ValueError(f"No {listed} name matches {args.pattern!r}: {hint}")


def run(args) -> int:
    sections = []
    matching = "" if args.pattern == "*" else f" matching {args.pattern!r}"
    if not args.models:
        sections.append((f"Attention mechanisms{matching} (attention_type)", attention_lines(args.pattern)))
    if not args.attentions:
        sections.append((f"Model presets{matching} (hf_effattn.create_model)", model_lines(args.pattern)))
    check_something_matches(args, sections)
    for title, lines in sections:
        print(f"{title}:\n" + "\n".join(f"  {line}" for line in lines or ["(none)"]))
    return 0
