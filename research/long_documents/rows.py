"""The long-document study's rows: each model it measures (:class:`Row`), the builders of its levers, and
``ROWS``, every row by name. A row says what is converted from MiniLM (or from another row's model), how it is
pretrained and on what; ``pretrain.py`` runs its stages, the readers measure it, ``block_tables.py`` and ``tables.py``
hold it against its control."""

from __future__ import annotations

from dataclasses import dataclass, field, replace

MECHANISMS = ("singularformer", "kerformer", "dba", "psf")
LONG, SHORT = 2048, 512
LONGEST = 8192  # the longest reading: retrieval over the documents that long, and the length a lever pretrains at
WINDOW = 128  # the local window of the hybrids and of `local` (ModernBERT's)
BLOCK = SHORT  # the aligned blocks of the block rows: the checkpoint's own length
MIDDLE = 4096  # the length lever between LONG and LONGEST
LONGER_MLM_STEPS = 160  # the "more pretraining" lever: twice the benchmark's 80 masked-LM steps
SEEDS = [("", "", None), ("-seed2", ", another pretraining seed", 2)]  # a row's name suffix, words and mlm_seed


@dataclass(frozen=True)
class Row:
    """One model of the benchmark: an attention (with its local part's settings) converted from MiniLM at 512 and put
    through the same stages, extension to 2,048, long attention transfer and masked-LM pretraining, with the same
    budget. ``transfer_window_dropout`` / ``mlm_window_dropout``: the share of steps with the local part switched off
    (hybrids only); ``transfer_steps`` / ``mlm_steps``: a lever's own transfer / masked-LM budget (None: the run's,
    ``--transfer_steps`` / ``--mlm_steps``; the warm-up scales with the masked-LM steps);
    ``framed``: [CLS]/[SEP] at every block's edges in pretraining and evaluation (rows with aligned blocks); ``direct``:
    no transfer, masked-LM pretraining straight from the extended model; ``mlm_options``: a lever's own options of
    ``run_mlm.py``; ``mlm_seed``: another seed of the pretraining (None: the benchmark's), its run-to-run noise;
    ``length``: the length it is pretrained at, and extended to (at least ``LONG``, where every row is read: a row
    pretrained at 512 reads its 512-token blocks of 2,048 as it trained on them); ``pieces``: pretrained on its
    documents cut into shuffled pieces of this many word-pieces (``pieces.py``; None: the documents whole);
    ``start``: the row whose pretrained model this row starts from (None: the MLM head's folder); ``head``: the MLM
    head this row is measured on where it is not the one the results record (its ``head_sha256``; ``pretrain.py``),
    a rerun on a head trained again, compared only with rows on it."""

    name: str
    attention: str
    settings: dict = field(default_factory=dict)
    transfer_window_dropout: float = 0.0
    mlm_window_dropout: float = 0.0
    transfer_steps: int | None = None
    mlm_steps: int | None = None
    what: str = ""
    framed: bool = False
    direct: bool = False
    mlm_options: tuple[str, ...] = ()
    mlm_seed: int | None = None
    length: int = LONG
    pieces: int | None = None
    start: str | None = None
    head: str | None = None

    @property
    def hybrid(self) -> bool:
        return self.attention != "local" and ("local_window" in self.settings or "local_block" in self.settings)

    @property
    def block(self) -> int | None:
        """The aligned blocks' size, or None."""
        return self.settings.get("local_block")


def mlm_steps(row: Row | None, run_steps: int) -> int:
    """A row's masked-LM steps: its lever's own, else the run's ``run_steps`` (``row`` None: the chunked control)."""
    return (row and row.mlm_steps) or run_steps


def hybrid(mechanism: str, window: int = WINDOW, lever: tuple[str, str] = ("", ""), settings: dict | None = None,
           **budget) -> Row:
    """A mechanism beside a window, with the default window dropout (a share of 0.25 of the transfer steps and 0.1 of
    the masked-LM steps) unless ``budget`` says otherwise; ``lever``: the name's suffix and the words of a lever
    tried on it, ``settings``: window settings beside ``local_window``."""
    budget = {"transfer_window_dropout": 0.25, "mlm_window_dropout": 0.1, **budget}
    suffix, note = lever
    return Row(f"{mechanism}-w{window}{suffix}", mechanism, {"local_window": window, **(settings or {})}, **budget,
               what=f"{mechanism} beside a {window}-token window" + (f", {note}" if note else ""))


def blocks(mechanism: str, lever: tuple[str, str] = ("", ""), settings: dict | None = None, framed: bool = True,
           **budget) -> Row:
    """A mechanism beside aligned blocks of the checkpoint's own 512 tokens (the chunked reader, the mechanism a
    gated memory across the blocks), framed by default, no window dropout; ``lever`` as for :func:`hybrid`.
    Kerformer's memory is under the blocks' own normaliser (``shared_normaliser``: not its default beside blocks,
    which :func:`gated` gives)."""
    suffix, note = lever
    alone = mechanism == "local"  # the chunked reader: nothing to transfer, pretrained straight away
    what = "blocks of 512 alone: the chunked reader as one model" if alone else \
        f"{mechanism} as a memory across blocks of 512"
    shared = {"shared_normaliser": True} if mechanism == "kerformer" else {}
    return Row(f"{mechanism}-b{BLOCK}{suffix}", mechanism, {"local_block": BLOCK, **shared, **(settings or {})},
               framed=framed, what=what + (f", {note}" if note else ""), **{"direct": alone, **budget})


def pretrained_at(length: int) -> tuple[str, str]:
    """The name's suffix and the words of a row pretrained at ``length`` (none at ``LONG``)."""
    return (f"-at{length}", f", pretrained at {length:,} tokens") if length != LONG else ("", "")


def longer_blocks(mechanism: str, suffix: str, note: str, seed: int | None, length: int = LONG) -> Row:
    """The steps lever of a block row (the chunks alone: ``mechanism`` ``local``): ``LONGER_MLM_STEPS`` masked-LM
    steps with pretraining seed ``seed`` (``suffix`` and ``note`` its name and words), at ``length``; a mechanism's
    with no transfer and the gates at a learning rate of 0.1."""
    at, at_words = pretrained_at(length)
    steps, steps_words = f"-mlm{LONGER_MLM_STEPS}", f"{LONGER_MLM_STEPS} masked-LM steps"
    if mechanism == "local":
        return blocks("local", lever=(steps + suffix + at, steps_words + note + at_words), mlm_steps=LONGER_MLM_STEPS,
                      mlm_seed=seed, length=length)
    return blocks(mechanism, lever=(f"-direct-gate-lr0.1{steps}{suffix}{at}",
                                    f"no attention transfer, the gates at 0.1, {steps_words}{note}{at_words}"),
                  direct=True, mlm_options=("--mechanism_weight_learning_rate", "0.1"), mlm_steps=LONGER_MLM_STEPS,
                  mlm_seed=seed, length=length)


def in_pieces(row: Row, size: int = LONG) -> Row:
    """``row`` pretrained on its documents cut into shuffled pieces of ``size`` word-pieces: at ``LONGEST``, each
    block reads pieces of several documents drawn apart, as the four blocks of a step at ``LONG`` are (at ``LONG``,
    the chunks' row: whether the pieces or the length made the difference)."""
    return replace(row, name=f"{row.name}-pieces{size}", pieces=size,
                   what=f"{row.what}, on its documents in shuffled pieces of {size:,} tokens")


def gated(row: Row) -> Row:
    """``row``, a kernelized mechanism's block row, with its memory normalised on its own and mixed per head by its
    gate (``shared_normaliser`` False, the default beside blocks), as Singularformer's, DBA's and PSF's are."""
    return replace(row, name=f"{row.name}-gated", settings={**row.settings, "shared_normaliser": False},
                   what=f"{row.what}, the memory normalised on its own and gated")


def then(start: Row, row: Row, seed: int, steps: int | None = None, seed_in_name: bool = False) -> Row:
    """``row``'s attention, settings, data and length for ``steps`` masked-LM steps more (None: the benchmark's 80),
    started from ``start``'s pretrained model with pretraining seed ``seed`` (not ``start``'s: the same batches again
    in the same order); a length beyond ``LONG`` is in the name (``-at8192``), and so is the seed where asked
    (``-seed4``: another continuation of the same start) and a gate's start other than the default (``-gate0.01``)."""
    gate = row.settings.get("initial_mechanism_weight")
    gate_name, gate_words = (f"-gate{gate:g}", f", the gates starting at {gate:g}") if gate is not None else ("", "")
    label = f"{row.attention}-gated{gate_name}" if row.attention != "local" else \
        f"local-pieces{row.pieces}" if row.pieces else "local"
    pieces = f", on shuffled pieces of {row.pieces:,}" if row.pieces else ""
    more = f"{steps} masked-LM steps" if steps else "the benchmark's 80 masked-LM steps"
    at = f"-at{row.length}" if row.length > LONG else ""
    named = f"-seed{seed}" if seed_in_name else ""
    return replace(row, name=f"{start.name}-then-{label}" + (f"-mlm{steps}" if steps else "") + named + at,
                   start=start.name, mlm_steps=steps, mlm_seed=seed, head=start.head,
                   what=f"{more} more from `{start.name}`: {row.what.split(', ')[0]}, at {row.length:,} "
                        f"tokens{pieces}, seed {seed}{gate_words}")


def gate_start(row: Row, gate: float) -> Row:
    """``row``, a block row with a memory, its gates starting at ``gate`` (``initial_mechanism_weight``) instead of
    its mechanism's default."""
    return replace(row, settings={**row.settings, "initial_mechanism_weight": gate},
                   what=f"{row.what}, the gates starting at {gate:g}")


def rerun(row: Row, date: str, head: str | None = None) -> Row:
    """``row`` pretrained again on the MLM head trained again on ``date``; ``head``: that head's identity, where the
    results record another for the rows it is not compared with."""
    return replace(row, name=f"{row.name}-rerun", head=head, what=f"{row.what}, again on the MLM head retrained {date}")


# the start of every row that continues the chunks pretrained 160 steps at 512, on the head retrained 2026-11-29
AT_512_AGAIN = rerun(longer_blocks("local", *SEEDS[0], length=SHORT), "2026-11-29", "a4ffe15692f9bb4d")

ROWS = {row.name: row for row in [
    Row("sdpa", "sdpa", what="softmax at 2,048 (copied positions)"),
    *(Row(f"local-w{window}", "local", {"local_window": window}, what=f"a {window}-token window alone")
      for window in (WINDOW, 64, 256)),
    Row(f"local-w{WINDOW}-g1", "local", {"local_window": WINDOW, "global_tokens": 1},
        what=f"a {WINDOW}-token window and a global [CLS]"),
    *(Row(mechanism, mechanism, what=f"{mechanism} alone") for mechanism in MECHANISMS),
    *(hybrid(mechanism) for mechanism in MECHANISMS),
    hybrid("kerformer", 64), hybrid("kerformer", 256),
    hybrid("kerformer", lever=("-no-dropout", "no window dropout"), transfer_window_dropout=0.0,
           mlm_window_dropout=0.0),
    hybrid("kerformer", lever=("-transfer600", "600 transfer steps"), transfer_steps=600),
    *(hybrid(mechanism, lever=("-every2", "in every other layer"), settings={"local_window_every": 2})
      for mechanism in ("kerformer", "singularformer")),
    blocks("local"), blocks("local", lever=("-plain", "[CLS]/[SEP] at the document's ends only"), framed=False),
    blocks("local", lever=("-seed2", "another pretraining seed: the run-to-run noise"), mlm_seed=2),
    *(blocks(mechanism) for mechanism in MECHANISMS), gated(blocks("kerformer")),
    *(blocks(mechanism, lever=("-direct", "no attention transfer"), direct=True) for mechanism in MECHANISMS),
    blocks("kerformer", lever=("-plain", "[CLS]/[SEP] at the document's ends only"), framed=False),
    *(blocks(mechanism, lever=("-direct-gate-lr0.1", "no attention transfer, the gates at a learning rate of 0.1"),
             direct=True, mlm_options=("--mechanism_weight_learning_rate", "0.1"))
      for mechanism in ("kerformer", "singularformer")),
    *(longer_blocks("local", *seed) for seed in SEEDS),
    blocks("local", lever=(f"-mlm{LONGER_MLM_STEPS}-plain", f"{LONGER_MLM_STEPS} masked-LM steps, [CLS]/[SEP] at the "
                           "document's ends only"), framed=False, mlm_steps=LONGER_MLM_STEPS),
    *(longer_blocks(mechanism, *seed) for mechanism, seed in [
        ("singularformer", SEEDS[0]), ("singularformer", SEEDS[1]), ("kerformer", SEEDS[0]), ("kerformer", SEEDS[1]),
        ("dba", SEEDS[0]), ("psf", SEEDS[0]), ("psf", SEEDS[1]), ("dba", SEEDS[1])]),
    *(longer_blocks(mechanism, *SEEDS[0], length=LONGEST)
      for mechanism in ("local", "kerformer", "psf", "singularformer", "dba")),
    *(longer_blocks(mechanism, *SEEDS[1], length=LONGEST) for mechanism in ("local", "kerformer")),
    *(in_pieces(longer_blocks(mechanism, *seed, length=LONGEST))
      for mechanisms in (("local", "kerformer"), ("singularformer", "dba")) for seed in SEEDS
      for mechanism in mechanisms),
    *(in_pieces(longer_blocks("psf", *seed, length=LONGEST)) for seed in SEEDS),
    *(gated(in_pieces(longer_blocks("kerformer", *seed, length=LONGEST))) for seed in SEEDS),
    *(gated(longer_blocks("kerformer", *seed)) for seed in SEEDS),
    *(in_pieces(longer_blocks("local", *seed)) for seed in SEEDS),
    *(gated(in_pieces(longer_blocks("kerformer", *seed))) for seed in SEEDS),
    *(in_pieces(longer_blocks("singularformer", *seed)) for seed in SEEDS),
    in_pieces(longer_blocks("local", *SEEDS[0]), 512),
    *(longer_blocks("local", *seed, length=SHORT) for seed in SEEDS),
    *(rerun(longer_blocks("local", *seed), "2026-11-28") for seed in SEEDS),
    *(then(longer_blocks("local", *seed, length=SHORT), after, continuation)
      for seed, continuation in zip(SEEDS, (3, 4))
      for after in (longer_blocks("local", *seed, length=SHORT), gated(in_pieces(longer_blocks("kerformer", *seed))),
                    in_pieces(longer_blocks("singularformer", *seed)), in_pieces(longer_blocks("local", *seed)))),
    AT_512_AGAIN,
    *(then(AT_512_AGAIN, after, 3, LONGER_MLM_STEPS)
      for after in (longer_blocks("local", *SEEDS[0], length=SHORT),
                    *(in_pieces(longer_blocks(mechanism, *SEEDS[0]))
                      for mechanism in ("singularformer", "dba", "psf")))),
    *(then(AT_512_AGAIN, in_pieces(after), 3, LONGER_MLM_STEPS)
      for after in (gated(longer_blocks("kerformer", *SEEDS[0], length=LONGEST)),
                    longer_blocks("singularformer", *SEEDS[0], length=LONGEST))),
    *(then(AT_512_AGAIN, after, 4, LONGER_MLM_STEPS, seed_in_name=True)
      for after in (longer_blocks("local", *SEEDS[0], length=SHORT),
                    in_pieces(gated(longer_blocks("kerformer", *SEEDS[0], length=LONGEST))))),
    then(AT_512_AGAIN, in_pieces(longer_blocks("singularformer", *SEEDS[0], length=MIDDLE)), 3, LONGER_MLM_STEPS),
    *(then(AT_512_AGAIN, in_pieces(longer_blocks(mechanism, *SEEDS[0])), 4, LONGER_MLM_STEPS, seed_in_name=True)
      for mechanism in ("singularformer", "dba", "psf")),
    *(then(AT_512_AGAIN, gate_start(in_pieces(longer_blocks("singularformer", *SEEDS[0])), 0.01), seed,
           LONGER_MLM_STEPS, seed_in_name=seed == 4) for seed in (3, 4)),
    *(then(AT_512_AGAIN, in_pieces(longer_blocks("local", *SEEDS[0])), seed, LONGER_MLM_STEPS, seed_in_name=seed == 4)
      for seed in (3, 4)),
]}
