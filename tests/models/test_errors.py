"""Bad inputs raise errors that name the problem and the fix."""

from __future__ import annotations

import pytest
import torch

import hf_effattn
from helpers.finetuning import tiny_text_checkpoint, tiny_vit_checkpoint
from helpers.models import pixel_values, text_config, vision_config


@pytest.mark.parametrize("attention_type", ["sdpa", "kerformer", "psf"])
def test_text_longer_than_the_maximum(attention_type):
    config = text_config(attention_type)
    model = hf_effattn.EffAttnRobertaModel(config)
    assert config.attention_max_length == config.max_position_embeddings - config.pad_token_id - 1
    model(torch.full((1, config.attention_max_length), 5))
    with pytest.raises(ValueError, match=r"Input length 19 exceeds .* maximum of 18 tokens.*truncat.*"
                       r"convert CHECKPOINT --max_length 19 .*from_pretrained\(CHECKPOINT, max_length=19\)"):
        model(torch.full((1, 19), 5))


def test_bert_positions_allow_max_position_embeddings_tokens():
    config = text_config("psf", roberta_positions=False, pad_token_id=0)
    assert config.attention_max_length == config.max_position_embeddings
    hf_effattn.EffAttnRobertaModel(config)(torch.full((1, config.max_position_embeddings), 5))


def test_image_with_more_patches_than_the_mechanism_was_built_for():
    """The fix named is ViT's (the image size), not max_position_embeddings, which ViT does not have; Kerformer's
    token mode adds its length-free se_mode."""
    model = hf_effattn.EffAttnViTModel(vision_config("psf"))
    larger = torch.randn(1, 3, 12, 12)  # 9 patches + [CLS] > 5 tokens
    expected = (r"An image of 12x12 pixels gives 9 patches \+ \[CLS\] = 10 tokens, more than the 5 that this model's "
                r"'psf' attention was built for \(image_size=8, patch_size=4\): resize the images to image_size, or "
                r"extend the model to a larger image_size \(hf-effattn convert CHECKPOINT --image_size 12, or "
                r"from_pretrained\(CHECKPOINT, image_size=12\)\)\.$")
    with pytest.raises(ValueError, match=expected) as error:
        model(larger, interpolate_pos_encoding=True)
    assert "max_position_embeddings" not in str(error.value)
    with pytest.raises(ValueError, match=r"image_size=12\)\), or use se_mode=\"channel\", which has no length limit"):
        hf_effattn.EffAttnViTModel(vision_config("kerformer"))(larger, interpolate_pos_encoding=True)
    channel = vision_config("kerformer", attention_config={"se_mode": "channel"})
    assert hf_effattn.EffAttnViTModel(channel)(larger, interpolate_pos_encoding=True)[0].shape[1] == 10
    assert hf_effattn.EffAttnViTModel(vision_config("dba"))(larger, interpolate_pos_encoding=True)[0].shape[1] == 10
    with pytest.raises(ValueError, match="doesn't match model"):
        model(pixel_values()[:, :, :4, :4])


@pytest.mark.parametrize("make", [text_config, vision_config])
def test_width_not_divisible_by_heads(make):
    with pytest.raises(ValueError, match=r"hidden_size=18 is not divisible by num_attention_heads=4.*one of"):
        make(hidden_size=18, num_attention_heads=4)


def test_unknown_mechanism_and_settings():
    with pytest.raises(ValueError, match=r"Unknown attention_type 'kerformr'.*Known: .*kerformer.*Did you mean"):
        text_config("kerformr")
    with pytest.raises(ValueError, match=r"Unknown setting\(s\) rank for attention 'dba'. Valid settings"):
        text_config("dba", attention_config={"rank": 4})
    with pytest.raises(ValueError, match="compressed_dim=3: it must be a positive multiple of num_attention_heads=2"):
        text_config("dba", attention_config={"compressed_dim": 3})
    with pytest.raises(ValueError, match="num_links"):
        text_config("psf", attention_config={"num_links": 12})  # links of 2^10 tokens past the 18 a sequence can have


def test_a_size_argument_of_the_other_family_is_one_value_error():
    with pytest.raises(ValueError, match=r"^image_size=64 does not apply to EffAttnRobertaModel, whose input size is "
                                         r"set by max_length: pass max_length=\.\.\. to extend it"):
        hf_effattn.EffAttnRobertaModel.from_pretrained(tiny_text_checkpoint(), image_size=64)
    with pytest.raises(ValueError, match=r"^max_length=64 does not apply to EffAttnViTModel, whose input size is set "
                                         "by image_size"):
        hf_effattn.EffAttnViTModel.from_pretrained(tiny_vit_checkpoint(), max_length=64)
