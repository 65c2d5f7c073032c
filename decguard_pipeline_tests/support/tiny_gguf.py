"""A tiny llama model with random weights and a real tokenizer, as a GGUF file, for running a
real llama.cpp server in tests: the tokenizer (SentencePiece, 32,000 pieces) is copied from a
vocabulary-only GGUF of llama.cpp's sources (``models/ggml-vocab-llama-spm.gguf``, shipped in
llama-cpp-python's sdist), the weights are drawn from ``seed``. Two seeds are two models: what
a swap under the same name needs. Needs the ``gguf`` package.

Random weights alone put an option letter among a 32,000-piece vocabulary's top 20 by chance
only; so every embedding leans the same way along one dimension and the letters' output rows
(``A``…``Z``, ``▁A``…``▁Z``, ``A``–``C`` most) point along it: letters come first, in a
random order of their own, as an instructed model's would."""

from __future__ import annotations

from pathlib import Path

import numpy as np

EMBED, HEADS, LAYERS, FF, CONTEXT = 64, 4, 2, 128, 2048


def write_tiny_llama(vocabulary: Path, out: Path, *, seed: int) -> Path:
    import gguf

    reader = gguf.GGUFReader(str(vocabulary))
    tokens = reader.fields["tokenizer.ggml.tokens"].contents()
    writer = gguf.GGUFWriter(str(out), "llama")
    writer.add_name(f"tiny-random-{seed}")
    writer.add_context_length(CONTEXT)
    writer.add_embedding_length(EMBED)
    writer.add_block_count(LAYERS)
    writer.add_feed_forward_length(FF)
    writer.add_head_count(HEADS)
    writer.add_head_count_kv(HEADS)
    writer.add_rope_dimension_count(EMBED // HEADS)
    writer.add_layer_norm_rms_eps(1e-5)
    writer.add_file_type(gguf.LlamaFileType.ALL_F32)
    for name, field in reader.fields.items():
        if not name.startswith("tokenizer."):
            continue
        value = field.contents()
        kind = field.types[0]
        if kind == gguf.GGUFValueType.ARRAY:
            writer.add_array(name, value)
        elif kind == gguf.GGUFValueType.STRING:
            writer.add_string(name, value)
        elif kind == gguf.GGUFValueType.BOOL:
            writer.add_bool(name, value)
        else:
            writer.add_uint32(name, int(value))
    rng = np.random.default_rng(seed)
    vocab = len(tokens)

    def weights(*shape: int, scale: float = 0.5) -> np.ndarray:
        return (rng.standard_normal(shape) * scale / np.sqrt(shape[-1])).astype(np.float32)

    embeddings = weights(vocab, EMBED, scale=8.0)
    embeddings[:, 0] = 4.0  # the shared lean
    output = weights(vocab, EMBED, scale=2.0)
    output[:, 0] = 0.0
    pieces = [str(t) for t in tokens]
    for letter in "ABCDEFGHIJKLMNOPQRSTUVWXYZ":
        for piece in (letter, "\u2581" + letter):
            if piece in pieces:  # the first three letters most: the usual options
                output[pieces.index(piece), 0] = 3.8 if letter in "ABC" else 3.0
    writer.add_tensor("token_embd.weight", embeddings)
    writer.add_tensor("output_norm.weight", np.ones(EMBED, dtype=np.float32))
    writer.add_tensor("output.weight", output)
    for layer in range(LAYERS):
        block = f"blk.{layer}"
        writer.add_tensor(f"{block}.attn_norm.weight", np.ones(EMBED, dtype=np.float32))
        for part in ("attn_q", "attn_k", "attn_v", "attn_output"):
            writer.add_tensor(f"{block}.{part}.weight", weights(EMBED, EMBED))
        writer.add_tensor(f"{block}.ffn_norm.weight", np.ones(EMBED, dtype=np.float32))
        writer.add_tensor(f"{block}.ffn_gate.weight", weights(FF, EMBED))
        writer.add_tensor(f"{block}.ffn_up.weight", weights(FF, EMBED))
        writer.add_tensor(f"{block}.ffn_down.weight", weights(EMBED, FF))
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    return out
