"""Run under ``accelerate launch`` (by ``tests/finetuning/test_multiprocess.py``): a masked-LM model, whose decoder is
tied to the word embeddings, trains three steps under the launch config's sharding, saves its state with
``accelerator.save_state``, takes one more step, loads the state back, and writes to ``argv[2]`` (JSON) whether
the decoder stayed tied and whether loading restored the saved weights exactly. ``argv[1]``: the state folder."""

import json
import sys
from pathlib import Path

import torch
from accelerate import Accelerator

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # tests/, for the helpers package
from helpers.models import text_config  # noqa: E402

import hf_effattn  # noqa: E402


def step(accelerator, model, optimizer, input_ids) -> None:
    """One masked-LM training step on ``input_ids [B, N]`` (labels: the inputs)."""
    accelerator.backward(model(input_ids=input_ids, labels=input_ids).loss)
    optimizer.step()
    optimizer.zero_grad()


def main(state_dir: str, result_file: str) -> None:
    accelerator = Accelerator()
    torch.manual_seed(0)
    model = hf_effattn.EffAttnRobertaForMaskedLM(text_config("kerformer"))
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-2)
    model, optimizer = accelerator.prepare(model, optimizer)
    input_ids = torch.randint(3, 40, (4, 9), generator=torch.Generator().manual_seed(accelerator.process_index))
    for _ in range(3):
        step(accelerator, model, optimizer, input_ids)
    accelerator.save_state(state_dir)
    accelerator.wait_for_everyone()
    saved = {name: tensor.clone() for name, tensor in accelerator.get_state_dict(model).items()}
    step(accelerator, model, optimizer, input_ids)
    accelerator.load_state(state_dir)
    loaded = accelerator.get_state_dict(model)
    if accelerator.is_main_process:
        decoder = saved.get("lm_head.decoder.weight")
        tied = decoder is None or torch.equal(decoder, saved["roberta.embeddings.word_embeddings.weight"])
        restored = saved.keys() == loaded.keys() and all(torch.equal(saved[k], loaded[k]) for k in saved)
        Path(result_file).write_text(json.dumps({"tied": tied, "restored": restored,
                                                 "processes": accelerator.num_processes}))


if __name__ == "__main__":
    main(*sys.argv[1:3])
