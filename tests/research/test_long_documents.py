"""The long-document benchmark's own logic (research/long_documents): cleaning, masking, windows, its rows
and stages, the readers of documents, the retrieval passages, the far masked words and the paired differences
(its costs: test_long_document_costs.py; its pretraining's budget: test_long_document_pretraining.py)."""

from types import SimpleNamespace

import pytest
import torch

import build_corpus
import cost_tables
import heldout
import long_range
import pretrain
import represent
import tables
from rows import ROWS


class Tokenizer:
    """What the masking reads of a tokenizer: its size and special ids."""

    mask_token_id, cls_token_id, sep_token_id = 3, 1, 2

    def __len__(self):
        return 100


def test_clean_drops_punctuation_lines_and_repeated_blank_lines():
    text = "Title\n=====\n\n\n\nSome text.   \n+----+----+\n| a  | b  |\n"
    assert build_corpus.clean(text) == "Title\n\nSome text.\n| a  | b  |"


def test_masking_is_bert_s_and_reproducible():
    ids = torch.arange(10, 4010)
    inputs, labels = heldout.mask_tokens(ids, Tokenizer(), torch.Generator().manual_seed(0))
    again = heldout.mask_tokens(ids, Tokenizer(), torch.Generator().manual_seed(0))
    assert torch.equal(inputs, again[0]) and torch.equal(labels, again[1])
    chosen = labels != -100
    assert torch.equal(labels[chosen], ids[chosen]) and torch.equal(inputs[~chosen], ids[~chosen])
    assert 0.12 < chosen.float().mean() < 0.18
    assert 0.75 < (inputs[chosen] == Tokenizer.mask_token_id).float().mean() < 0.85


@pytest.mark.parametrize("content", [510, 2040])
def test_windows_hold_the_same_masked_tokens_at_every_length(content):
    ids = torch.arange(10, 2050)
    inputs, labels = heldout.mask_tokens(ids, Tokenizer(), torch.Generator().manual_seed(1))
    windows = heldout.windows(inputs, labels, Tokenizer(), content)
    assert len(windows) == 2040 // content
    for window_ids, window_labels in windows:
        assert window_ids.shape == window_labels.shape == (1, content + 2)
        assert window_ids[0, 0] == Tokenizer.cls_token_id and window_ids[0, -1] == Tokenizer.sep_token_id
        assert window_labels[0, 0] == window_labels[0, -1] == -100
    assert torch.equal(torch.cat([w[0][0, 1:-1] for w in windows]), inputs)
    assert torch.equal(torch.cat([w[1][0, 1:-1] for w in windows]), labels)


def test_each_row_runs_the_stages_that_apply_to_it_in_order():
    jobs = pretrain.jobs(["sdpa", "kerformer-w128"], ["head", "mlm_512", "extend", "transfer", "mlm"])
    assert jobs == [("sdpa-512", "head"), ("sdpa-512", "mlm_512"), ("sdpa", "extend"), ("sdpa", "mlm"),
                    ("kerformer-w128", "extend"), ("kerformer-w128", "transfer"), ("kerformer-w128", "mlm")]
    assert pretrain.jobs(["dba"], ["transfer"]) == [("dba", "transfer")]  # softmax alone has no transfer


def test_the_rows_compare_every_mechanism_alone_and_beside_the_same_window_or_blocks():
    hybrids = [row for row in ROWS.values() if row.hybrid]
    assert {row.attention for row in hybrids} == {"singularformer", "kerformer", "dba", "psf"}
    assert {row.settings.get("local_window") for row in hybrids} == {64, 128, 256, None}
    assert {row.block for row in hybrids} == {None, 512}
    assert not ROWS["local-w128"].hybrid and ROWS["local-w128-g1"].settings["global_tokens"] == 1
    assert not ROWS["local-b512"].hybrid and ROWS["local-b512"].direct and ROWS["local-b512"].framed
    command = pretrain.stage_command(ROWS["kerformer-w128"], "transfer", SimpleNamespace(
        batch_size=1, transfer_steps=3, transfer_learning_rate=1e-3))
    assert command[command.index("--attention_config") + 1] == '{"local_window": 128}'
    assert command[command.index("--transfer_window_dropout") + 1] == "0.25"
    budget = SimpleNamespace(batch_size=1, mlm_accumulation=4, mlm_learning_rate=1e-4, mlm_steps=3, mlm_warmup_steps=1,
                             again=False)
    direct = pretrain.stage_command(ROWS["kerformer-b512-direct"], "mlm", budget)
    assert direct[direct.index("--model_name_or_path") + 1].endswith("kerformer-b512-direct-2048-extend")
    assert "--block_special_tokens" in direct and not pretrain.applies(ROWS["kerformer-b512-direct"], "transfer")
    lever = pretrain.stage_command(ROWS["singularformer-b512-direct-gate-lr0.1"], "mlm", budget)
    assert lever[lever.index("--mechanism_weight_learning_rate") + 1] == "0.1"


def test_passages_come_from_deep_inside_each_document_and_are_the_same_every_time():
    documents = [list(range(3000)), list(range(10_000, 12_500))]
    passages = represent.passages(documents, 2048)
    assert passages == represent.passages(documents, 2048)
    for document, passage in zip(documents, passages):
        start = document.index(passage[0])
        assert document[start:start + represent.PASSAGE] == passage and 1100 <= start < 1900


@pytest.mark.parametrize("name, chunk, limit, part", [
    ("sdpa-512", None, 512, None), ("sdpa-512-chunks", 512, None, None),
    ("kerformer-w128@mlm-window-alone", None, None, "window"), ("dba@transfer", None, None, None),
])
def test_readers_say_how_they_read(name, chunk, limit, part):
    reader = represent.reader(name)
    assert (reader.chunk, reader.limit, reader.part) == (chunk, limit, part)
    with pytest.raises(SystemExit, match="unknown reader"):
        represent.reader("kerformer@pretrained")


class Echo:
    """A stand-in encoder whose last hidden state is each input id, as a float ``[1, N, 1]``."""

    device = "cpu"

    def __call__(self, input_ids):
        return SimpleNamespace(last_hidden_state=input_ids.float()[..., None])


@pytest.mark.parametrize("chunk, pieces", [(None, [list(range(100, 110))]),
                                           (6, [list(range(100, 104)), list(range(104, 108))])])
def test_a_document_is_read_whole_or_in_chunks_each_with_its_special_tokens(chunk, pieces):
    tokenizer = SimpleNamespace(cls_token_id=1, sep_token_id=2)
    vector = represent.embed(Echo(), tokenizer, list(range(100, 120)), 12, chunk)
    means = [sum([1, *piece, 2]) / (len(piece) + 2) for piece in pieces]  # [CLS] ... [SEP], averaged
    assert vector.item() == pytest.approx(sum(means) / len(means))


def test_a_masked_word_is_far_when_last_seen_unmasked_before_its_own_chunk(monkeypatch):
    monkeypatch.setattr(long_range, "CHUNK", 4)
    #          chunk 0       | chunk 1         | chunk 2
    inputs = torch.tensor([7, 8, 9, 5, 3, 6, 3, 6, 3, 3, 3, 3])  # 3 is [MASK]
    labels = torch.full_like(inputs, -100)
    labels[[4, 6, 8, 9, 10, 11]] = torch.tensor([7, 8, 6, 4, 9, 6])
    # 7, 8 and 9 last seen unmasked in chunk 0, far from chunks 1 and 2; both 6s of chunk 2 last seen at 7, in
    # chunk 1: far; 4 never seen unmasked: not far.
    assert long_range.far_tokens(inputs, labels) == [True, True, True, False, True, True]
    inputs[9] = 6  # an unmasked 6 inside chunk 2 makes the masked 6 at 11 near
    assert long_range.far_tokens(inputs, labels)[-1] is False


def test_long_range_differences_are_paired_on_the_same_tokens():
    mine = {"losses": [1.0, 2.0, 3.0, 5.0], "far": [True, False, True, False]}
    theirs = {"losses": [2.0, 2.0, 2.0, 4.0], "far": [True, False, True, False]}
    assert tables.paired_loss(mine, theirs, True) == pytest.approx((0.0, 1.0))  # differences -1, +1
    assert tables.paired_loss(mine, theirs, False) == pytest.approx((0.5, 0.5))  # differences 0, +1
    difference, error = tables.paired_loss(mine, theirs)
    assert difference == pytest.approx(-0.5) and error == pytest.approx((1.0 + 0.25) ** 0.5)


def test_the_gpu_costs_are_tabled_relative_to_softmax_on_the_same_gpu(tmp_path, monkeypatch):
    import json

    import runs

    monkeypatch.setattr(runs, "RESULTS", tmp_path)
    (tmp_path / "cost").mkdir()
    steps = {"sdpa": {"step_seconds": 0.02, "peak_mib": 1000.0}, "kerformer-w128": {"step_seconds": 0.05,
                                                                                     "peak_mib": 3500.0}}
    result = {"device": "NVIDIA H200 (torch 2.11.0)", "repeats": 10, "batch_size": 8, "length": 2048, "steps": steps}
    (tmp_path / "cost" / "2048_cuda_bfloat16_batch8.json").write_text(json.dumps(result))
    table = cost_tables.gpu_cost_table()
    assert "| `kerformer-w128` | 2.50x | 3.50x | not run | not run |" in table
    assert "NVIDIA H200" in table and "a batch of 16,384 tokens" in table
    assert "20 ms and 1.0 GiB at 2,048, batch 8" in table
    assert cost_tables.cost_ratio("kerformer-w128", "2048_cuda_bfloat16_batch8") == pytest.approx(2.5)
    (tmp_path / "cost" / "2048_cuda_bfloat16_batch8.json").rename(tmp_path / "cost" / "2048.json")
    assert cost_tables.gpu_cost_table() == ""  # the CPU's costs measured, not the GPU's


class WordTokenizer:
    """A tokenizer of whitespace-separated words, called as Transformers' tokenizers are on a batch."""

    def __call__(self, texts, **kwargs):
        return {"input_ids": [[len(word) for word in text.split()] for text in texts]}


def test_the_probe_s_extra_documents_are_added_without_changing_the_listed_ones(tmp_path, monkeypatch):
    source, data = tmp_path / "_sources", tmp_path / "data"
    for path, words in {"net/long.rst.txt": 30, "net/mid.rst.txt": 15, "net/short.rst.txt": 5,
                        "fs/mid.rst.txt": 12, "fs/sub/long.rst.txt": 25}.items():
        (source / path).parent.mkdir(parents=True, exist_ok=True)
        (source / path).write_text(" ".join(["word"] * words))
    monkeypatch.setattr(build_corpus, "OUT", data)
    monkeypatch.setattr(build_corpus, "LIST", data / "documents.csv")
    monkeypatch.setattr(build_corpus, "MIN_TOKENS", 20)
    monkeypatch.setattr(build_corpus, "PROBE_MIN_TOKENS", 10)
    monkeypatch.setattr(build_corpus, "minilm_tokenizer", WordTokenizer)
    listed = [dict(row, split=split) for row, split in zip(build_corpus.candidates(source, WordTokenizer(), 20),
                                                           ("mlm_train", "train"))]
    build_corpus.write_list(listed)
    before = build_corpus.read_list()
    for _ in range(2):  # the second time replaces the first's rows
        build_corpus.add_probe_documents(source)
        rows = build_corpus.read_list()
        assert [row for row in rows if row["split"] != "probe_extra"] == before
        assert [(row["path"], row["label"], row["tokens"]) for row in rows if row["split"] == "probe_extra"] == \
            [("fs/mid.rst.txt", "fs", "12"), ("net/mid.rst.txt", "net", "15")]


def test_the_probe_reads_the_extra_documents_only_when_asked(tmp_path, monkeypatch):
    import json

    import runs

    rows = {"train": [("net", 3000), ("net", 2500), ("fs", 4000)],  # documents.csv's word-pieces; 1 word a 100
            "probe_extra": [("fs", 1500), ("net", 1200), ("mm", 1100)]}
    with open(tmp_path / "documents.csv", "w", encoding="utf-8") as file:
        file.write("split,label,path,sha256,chars,tokens\n")
        for split, documents in rows.items():
            file.writelines(f"{split},{label},{split}{i},0,0,{tokens}\n" for i, (label, tokens) in enumerate(documents))
            (tmp_path / f"{split}.jsonl").write_text("".join(json.dumps({"text": " ".join(["ab"] * (tokens // 100)),
                                                                         "label": label}) + "\n"
                                                             for label, tokens in documents))
    for split in ("validation", "test", "mlm_train", "mlm_heldout"):
        (tmp_path / f"{split}.jsonl").write_text("")
    monkeypatch.setattr(runs, "DATA", tmp_path)
    monkeypatch.setattr(represent, "DATA", tmp_path)
    monkeypatch.setattr(represent, "MIN_PER_LABEL", 2)
    ids, labels = represent.documents(WordTokenizer(), 2048)
    assert labels == ["net", "net"] and [len(document) for document in ids] == [30, 25]  # fs has one long document
    ids, labels = represent.documents(WordTokenizer(), 2048, min_tokens=1024)
    assert labels == ["net", "net", "fs", "fs", "net"] and [len(document) for document in ids] == [30, 25, 40, 15, 12]
    assert represent.result_name("sdpa@mlm", 2048, 1024) == "sdpa@mlm_2048_probe1024"
    assert represent.result_name("sdpa@mlm", 2048, 2048) == "sdpa@mlm_2048"


def test_the_summary_judges_the_probe_over_the_shorter_documents_too_where_measured(tmp_path, monkeypatch):
    import json

    import runs

    monkeypatch.setattr(runs, "RESULTS", tmp_path)
    (tmp_path / "representations").mkdir()
    assert "1,024 word-pieces or more" not in tables.summary_table()
    accuracies = {"sdpa@mlm": 0.70, "sdpa-512-chunks@mlm": 0.69, "local-w128@mlm": 0.675, "dba-w128@mlm": 0.68}
    for reader, accuracy in accuracies.items():
        (tmp_path / "representations" / f"{reader}_2048_probe1024.json").write_text(
            json.dumps({"reader": reader, "probe": {"accuracy": accuracy, "standard_error": 0.014}}))
    summary = tables.summary_table()
    assert "| `dba-w128` | met (68 vs 68) | **missed** (68 vs 69) | met (68 vs 67.5) |" in summary
    assert "`kerformer-w128` | met" not in summary.split("1,024 word-pieces or more")[-1]  # not measured: no row
