"""A small model with the real model's tokenizer, for the server tests under the sanitizers.

write(src, dst) copies every key of the GGUF file src (the tokenizer, its merges, the chat template,
the special ids) into dst, but gives it 2 layers of width 64 with seeded random weights, stored in
src's own types (Q8_0 embeddings, Q4_1 matrices, F32 norms for SmolLM2). The server loads, tokenizes,
schedules, samples and streams exactly as with src; only the forward pass is some 40x cheaper, which
is what ASan and TSan make slow (nucleus_model_smollm2 runs the real forward pass under ASan).
The file's stem names the model in /v1/models, so dst should keep src's name ("SmolLM2-...").
"""
import numpy as np
import gguf
from gguf import quants

LAYERS, HIDDEN, FFN, HEADS, KV_HEADS = 2, 64, 128, 4, 2
# The layers' outputs are scaled up so that they outweigh a token's own embedding in the residual:
# with tied embeddings at the plain 1/sqrt(n) scale, greedy decoding repeats the last token forever.
MIX = 8.0


def write(src, dst, seed=7):
    reader = gguf.GGUFReader(src)
    arch = reader.fields["general.architecture"].contents()
    shape_keys = {
        f"{arch}.block_count": LAYERS,
        f"{arch}.embedding_length": HIDDEN,
        f"{arch}.feed_forward_length": FFN,
        f"{arch}.attention.head_count": HEADS,
        f"{arch}.attention.head_count_kv": KV_HEADS,
        f"{arch}.rope.dimension_count": HIDDEN // HEADS,
    }
    out = gguf.GGUFWriter(dst, arch)
    for name, field in reader.fields.items():
        if name.startswith("GGUF.") or name == "general.architecture":
            continue  # the writer writes these itself
        value = shape_keys.get(name, field.contents())
        array = field.types[0] == gguf.GGUFValueType.ARRAY
        out.add_key_value(name, value, field.types[0], sub_type=field.types[-1] if array else None)

    types = {t.name: t.tensor_type for t in reader.tensors}
    vocab = next(int(t.shape[1]) for t in reader.tensors if t.name == "token_embd.weight")
    rng = np.random.default_rng(seed)
    head_dim = HIDDEN // HEADS

    def put(name, rows, cols=None, scale=1.0):
        kind = types[name]
        if cols is None:  # a norm's gain: near 1
            out.add_tensor(name, (1.0 + 0.1 * rng.standard_normal(rows)).astype(np.float32))
            return
        a = (scale * rng.standard_normal((rows, cols))).astype(np.float32)
        if kind in (gguf.GGMLQuantizationType.F32, gguf.GGMLQuantizationType.F16):
            out.add_tensor(name, a.astype(np.float16 if kind == gguf.GGMLQuantizationType.F16 else np.float32))
        else:
            out.add_tensor(name, quants.quantize(a, kind), raw_dtype=kind)

    # Embeddings wide enough that the logits spread over a few nats: sampling at T = 0.8 then draws
    # from many tokens, as with the real model.
    put("token_embd.weight", vocab, HIDDEN, 0.4)
    s = 1.0 / np.sqrt(HIDDEN)
    for b in range(LAYERS):
        p = f"blk.{b}."
        put(p + "attn_norm.weight", HIDDEN)
        put(p + "attn_q.weight", HIDDEN, HIDDEN, s)
        put(p + "attn_k.weight", KV_HEADS * head_dim, HIDDEN, s)
        put(p + "attn_v.weight", KV_HEADS * head_dim, HIDDEN, s)
        put(p + "attn_output.weight", HIDDEN, HIDDEN, MIX * s)
        put(p + "ffn_norm.weight", HIDDEN)
        put(p + "ffn_gate.weight", FFN, HIDDEN, s)
        put(p + "ffn_up.weight", FFN, HIDDEN, s)
        put(p + "ffn_down.weight", HIDDEN, FFN, MIX / np.sqrt(FFN))
    put("output_norm.weight", HIDDEN)
    if "output.weight" in types:
        put("output.weight", vocab, HIDDEN, 0.4)
    out.write_header_to_file()
    out.write_kv_data_to_file()
    out.write_tensors_to_file()
    out.close()
