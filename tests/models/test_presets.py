"""The model presets: names, the papers' settings, head selection, overrides and close-name suggestions."""

from __future__ import annotations

import pytest

import hf_effattn
from hf_effattn.models.presets import ARCHITECTURES, create_config

TINY = dict(num_hidden_layers=1, hidden_size=24, num_attention_heads=2, intermediate_size=32)


def test_every_preset_is_a_valid_config():
    names = hf_effattn.list_models()
    assert len(names) == len(ARCHITECTURES) * len(hf_effattn.list_attentions())
    for name in names:
        config = create_config(name)
        assert config.attention_type == name.split("/")[1]


def test_list_models_pattern():
    assert hf_effattn.list_models("roberta-base/k*") == ["roberta-base/kerformer"]
    assert set(hf_effattn.list_models("lra-*/dba")) == {
        f"lra-{task}/dba" for task in ("listops", "text", "retrieval", "image", "pathfinder")
    }
    assert "vit-base-patch16-224/kerformer" in hf_effattn.list_models("vit-*")


def test_papers_settings():
    singular = create_config("singularformer-text/singularformer")
    assert (singular.num_hidden_layers, singular.hidden_size, singular.num_attention_heads) == (6, 384, 6)
    assert singular.attention_config["gamma_orthogonal"] == singular.attention_config["gamma_diagonal"] == 0.01
    listops = create_config("lra-listops/dba")
    assert (listops.num_hidden_layers, listops.num_attention_heads, listops.hidden_size, listops.intermediate_size) \
        == (6, 8, 512, 2048)
    assert listops.attention_config == {"compressed_length": 16, "compressed_dim": 24} and listops.local_part is None
    assert listops.attention_max_length == 2001  # 2000 symbols and [CLS]
    vit = create_config("vit-base-patch16-224/kerformer")
    assert vit.attention_max_length == 197 and vit.attention_config["se_mode"] == "token"
    assert create_config("roberta-large/dba").attention_config["compressed_dim"] == 32  # 24 does not split in 16 heads
    assert create_config("roberta-base/sdpa").attention_max_length == 512
    assert create_config("roberta-base/linformer").attention_config["projected_length"] == 256  # Linformer's n = 512
    assert create_config("vit-base-patch16-224/linformer").attention_config["projected_length"] == 64  # < 197 tokens
    assert create_config("vit-tiny-patch4-32/linformer").attention_config["projected_length"] == 16  # < 65 tokens
    assert create_config("vit-tiny-patch4-32/local").local_window == 16  # 128 > 65 tokens
    assert create_config("roberta-base/local").local_window == 128  # ModernBERT's


@pytest.mark.parametrize("name, kwargs, expected", [
    ("roberta-base/kerformer", {"num_labels": 2}, "EffAttnRobertaForSequenceClassification"),
    ("roberta-base/kerformer", {}, "EffAttnRobertaModel"),
    ("roberta-base", {"task": "masked-lm"}, "EffAttnRobertaForMaskedLM"),
    ("bert-base/psf", {"task": "question-answering"}, "EffAttnRobertaForQuestionAnswering"),
    ("vit-tiny-patch4-32/dba", {"num_labels": 10}, "EffAttnViTForImageClassification"),
    ("vit-tiny-patch4-32/singularformer", {"task": "masked-image-modeling"}, "EffAttnViTForMaskedImageModeling"),
])
def test_create_model_picks_the_head(name, kwargs, expected):
    model = hf_effattn.create_model(name, **kwargs, **TINY)
    assert type(model).__name__ == expected
    assert model.config.attention_type == (name.split("/")[1] if "/" in name else "sdpa")


def test_overrides_merge_attention_settings():
    sizes = {**TINY, "num_attention_heads": 4}
    model = hf_effattn.create_model("roberta-large/dba", num_labels=3, attention_config={"compressed_length": 8},
                                    **sizes)
    assert model.config.attention_config == {"compressed_length": 8, "compressed_dim": 32}
    assert model.config.num_labels == 3 and model.config.hidden_size == 24


def test_unknown_names_and_tasks():
    with pytest.raises(ValueError, match=r"Unknown model preset 'roberta-bse/kerformr'.*'roberta-base/kerformer'"):
        hf_effattn.create_model("roberta-bse/kerformr")
    with pytest.raises(ValueError, match="Unknown task 'masked-lm' for a vision model: one of base, image-class"):
        hf_effattn.create_model("vit-tiny-patch4-32/dba", task="masked-lm", **TINY)


def test_timm_habits_are_refused_with_the_way_forward():
    with pytest.raises(ValueError, match=r"no pretrained weights.*EffAttnRobertaForSequenceClassification"
                                         r"\.from_pretrained\('FacebookAI/roberta-base', attention_type='kerformer'\)"):
        hf_effattn.create_model("roberta-base/kerformer", pretrained=True, num_labels=2)
    model = hf_effattn.create_model("roberta-base/kerformer", pretrained=False, **TINY)  # timm's default: accepted
    assert model.config.attention_type == "kerformer"
    with pytest.raises(ValueError, match=r"RobertaConfig has no setting 'hidden_sise'\. Did you mean 'hidden_size'"):
        hf_effattn.create_model("roberta-base/kerformer", hidden_sise=24)
    with pytest.raises(ValueError, match=r"EffAttnViTConfig has no setting 'img_size'\. Did you mean 'image_size'"):
        hf_effattn.create_config("vit-tiny-patch4-32/dba", img_size=64)


def test_attn_implementation_maps_to_the_softmax_mechanisms_or_is_refused():
    model = hf_effattn.create_model("roberta-base", attn_implementation="eager", **TINY)
    assert model.config.attention_type == "eager"
    assert type(model.encoder.layer[0].attention.self).__name__ == "EagerAttention"
    assert hf_effattn.create_config("vit-tiny-patch4-32/sdpa", attn_implementation="sdpa").attention_type == "sdpa"
    with pytest.raises(ValueError, match=r"attn_implementation='eager' conflicts with preset 'roberta-base/kerformer'"):
        hf_effattn.create_model("roberta-base/kerformer", attn_implementation="eager")
    with pytest.raises(ValueError, match=r"attn_implementation='flash_attention_2' is not supported.*'roberta-base/"):
        hf_effattn.create_model("roberta-base", attn_implementation="flash_attention_2")


def test_attention_type_override_agrees_with_the_preset_or_is_refused():
    assert hf_effattn.create_config("roberta-base", attention_type="dba").attention_type == "dba"
    assert hf_effattn.create_config("roberta-base/dba", attention_type="dba").attention_type == "dba"
    with pytest.raises(ValueError, match=r"attention_type='psf' conflicts with preset 'roberta-base/dba'.*"
                                         r"create_model\('roberta-base/psf'\)"):
        hf_effattn.create_config("roberta-base/dba", attention_type="psf")
    with pytest.raises(ValueError, match="Unknown attention_type 'kerformr'"):
        hf_effattn.create_config("roberta-base", attention_type="kerformr")
