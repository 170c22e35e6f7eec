"""The code a sentence-transformers folder's card shows to compute its sentence embeddings: with
sentence-transformers, and the same with Transformers alone (the folder's pooling and normalisation written out)."""

from __future__ import annotations

from ..folders.sentence_transformers_folder import SentenceEmbedding

SENTENCES = '["A first sentence.", "A second one."]'  # what the card's sentence-embedding snippets encode
POOLING_CODE = {  # a pooling mode -> the code that computes it from `tokens` [B, N, C] and `mask` [B, N, 1]
    "mean": "embeddings = (tokens * mask).sum(1) / mask.sum(1).clamp(min=1e-9)  # the mean over the real tokens",
    "cls": "embeddings = tokens[:, 0]  # the first token's",
    "max": "embeddings = tokens.masked_fill(mask == 0, -1e9).max(1).values  # the maximum over the real tokens",
}


def sentence_transformers_code(repo_id: str) -> str:
    """How a sentence-transformers folder computes sentence embeddings with sentence-transformers."""
    return ("from sentence_transformers import SentenceTransformer\n\n"
            f'encoder = SentenceTransformer("{repo_id}", trust_remote_code=True)\n'
            f"embeddings = encoder.encode({SENTENCES})\n")


def transformers_embedding_code(repo_id: str, embedding: SentenceEmbedding) -> str | None:
    """The same embeddings as the folder's sentence-transformers modules, with Transformers alone: the tokenizer
    truncating at ``max_seq_length``, the pooling, the normalisation. ``None`` where the modules do more than
    Transformers alone reproduces here (another pooling, a dense layer, lower-casing)."""
    if embedding.pooling is None:
        return None
    length = f", max_length={embedding.max_seq_length}" if embedding.max_seq_length else ""
    lines = [
        "import torch", "from transformers import AutoModel, AutoTokenizer", "",
        f'tokenizer = AutoTokenizer.from_pretrained("{repo_id}", trust_remote_code=True)',
        f'model = AutoModel.from_pretrained("{repo_id}", trust_remote_code=True).eval()',
        f'inputs = tokenizer({SENTENCES}, padding=True, truncation=True{length}, return_tensors="pt")',
        "with torch.no_grad():",
        "    tokens = model(**inputs).last_hidden_state  # [sentences, tokens, width]",
        'mask = inputs["attention_mask"].unsqueeze(-1).to(tokens.dtype)  # [sentences, tokens, 1]: 1 at real tokens',
        POOLING_CODE[embedding.pooling],
    ]
    if embedding.normalize:
        lines.append("embeddings = torch.nn.functional.normalize(embeddings, dim=-1)  # unit length")
    return "\n".join(lines) + "\n"
