"""Build a tiny random-weight Llama and a word-level tokenizer that vLLM can serve on CPU.

Run with the python of the vLLM venv (it needs torch, transformers and tokenizers):

    $SPECTUNE_VLLM_PYTHON tests/vllm/build_tiny_model.py OUT_DIR [--seed 0]

Shape (shared/reference/real-vllm.md): hidden 256, 4 heads (head dim 64; the CPU attention
kernel refuses head dim 16), 2 KV heads, 2 layers, bf16, max 1024 positions. The tokenizer is
a `tokenizers` WordLevel model over a few hundred made-up words, wrapped in
PreTrainedTokenizerFast with a trivial chat template. Random weights under greedy decoding
fall into repetitive loops, which is what n-gram drafting feeds on.

``--size medium`` builds a larger random Llama (hidden 1024, 8 layers, intermediate 2816,
16 heads, 8 KV heads; about 90M parameters, 181 MB in bf16) whose step times on a CPU are
long enough to calibrate against (scripts/closed_loop.py).
"""

from __future__ import annotations

import argparse
import itertools
from pathlib import Path

SYLLABLES = ["ba", "ko", "mi", "ru", "te", "sa", "no", "li", "pe", "da",
             "fu", "gi", "ha", "jo", "ke", "lu", "ma", "ni", "po", "ra"]


def words() -> list[str]:
    """400 two-syllable words, deterministic."""
    return ["".join(p) for p in itertools.product(SYLLABLES, repeat=2)]


SIZES = {
    "tiny": {"hidden_size": 256, "intermediate_size": 512, "num_hidden_layers": 2,
             "num_attention_heads": 4, "num_key_value_heads": 2},
    "medium": {"hidden_size": 1024, "intermediate_size": 2816, "num_hidden_layers": 8,
               "num_attention_heads": 16, "num_key_value_heads": 8},
}


def build(out: Path, seed: int, size: str = "tiny") -> None:
    import torch
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers
    from transformers import LlamaConfig, LlamaForCausalLM, PreTrainedTokenizerFast

    out.mkdir(parents=True, exist_ok=True)
    specials = ["<unk>", "<s>", "</s>", "<pad>"]
    vocab = {tok: i for i, tok in enumerate(specials + words())}
    tok = Tokenizer(models.WordLevel(vocab=vocab, unk_token="<unk>"))
    tok.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    tok.decoder = decoders.WordPiece(prefix="##")  # joins word tokens with spaces
    fast = PreTrainedTokenizerFast(tokenizer_object=tok, unk_token="<unk>", bos_token="<s>",
                                   eos_token="</s>", pad_token="<pad>")
    fast.chat_template = "{% for m in messages %}{{ m['content'] }} {% endfor %}"
    fast.model_max_length = 1024
    fast.save_pretrained(out)

    config = LlamaConfig(vocab_size=len(vocab), **SIZES[size],
                         max_position_embeddings=1024, bos_token_id=1, eos_token_id=2, pad_token_id=3,
                         tie_word_embeddings=False, torch_dtype="bfloat16")
    torch.manual_seed(seed)
    model = LlamaForCausalLM(config).to(torch.bfloat16)
    model.save_pretrained(out)
    print(f"tiny llama: {sum(p.numel() for p in model.parameters()):,} parameters, "
          f"vocab {len(vocab)}, saved to {out}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("out", type=Path)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--size", choices=sorted(SIZES), default="tiny")
    args = ap.parse_args()
    build(args.out, args.seed, args.size)


if __name__ == "__main__":
    main()
