#!/usr/bin/env python3
"""Writes tiny random Llama-family models as GGUF and as safetensors (+ config.json), and the logits an
independent numpy forward pass gives for a fixed token sequence at every position.

usage: make_tiny.py OUTDIR
Exit code 77 (ctest SKIP_RETURN_CODE) when numpy, gguf or safetensors is missing.

The numpy reference follows Hugging Face semantics (rotate-half RoPE on unpermuted Q/K). The GGUF llama
files store Q/K permuted the way llama.cpp's convert_hf_to_gguf.py does (adjacent-pair RoPE); the script
checks that the adjacent-pair forward on the permuted weights gives the same logits, so the convention
under test is pinned here rather than assumed.
"""

import json
import os
import shutil
import sys

try:
    import numpy as np
    import gguf
    from gguf import quants
    from safetensors.numpy import save_file
except ImportError as e:  # pragma: no cover - exercised only where the packages are absent
    if len(sys.argv) == 2:
        shutil.rmtree(sys.argv[1], ignore_errors=True)  # no stale fixture for the C++ test to find
    print(f"make_tiny.py: skipping, {e}")
    sys.exit(77)

TOKENS = [1, 17, 299, 42, 42, 7, 150, 3, 255, 88, 0, 123, 64, 200]

VARIANTS = [
    # SmolLM2-shaped: llama arch, tied embeddings, adjacent-pair RoPE in GGUF.
    dict(name="llama", arch="llama", vocab=300, hidden=64, inter=160, layers=2, heads=4, kv_heads=2,
         head_dim=16, theta=10000.0, eps=1e-5, tied=True, qkv_bias=False, qk_norm=False, gguf_type="f32"),
    # Qwen2-shaped: q/k/v biases, separate output head, f16 storage.
    dict(name="qwen2", arch="qwen2", vocab=300, hidden=64, inter=128, layers=2, heads=4, kv_heads=2,
         head_dim=16, theta=1000000.0, eps=1e-6, tied=False, qkv_bias=True, qk_norm=False, gguf_type="f16"),
    # Qwen3-shaped: per-head q/k RMSNorm, head_dim != hidden / heads.
    dict(name="qwen3", arch="qwen3", vocab=300, hidden=64, inter=96, layers=3, heads=4, kv_heads=1,
         head_dim=32, theta=1000000.0, eps=1e-6, tied=True, qkv_bias=False, qk_norm=True, gguf_type="f32"),
    # The real model's storage types: Q8_0 embeddings, Q4_1 matrices (safetensors holds their dequantized values).
    dict(name="llama_q", arch="llama", vocab=300, hidden=64, inter=128, layers=2, heads=4, kv_heads=4,
         head_dim=16, theta=100000.0, eps=1e-5, tied=True, qkv_bias=False, qk_norm=False, gguf_type="q4_1"),
]


def random_weights(v, rng):
    h, hd, nh, nkv, f = v["hidden"], v["head_dim"], v["heads"], v["kv_heads"], v["inter"]
    w = {"embed": rng.normal(0, 1.0, (v["vocab"], h)), "norm": 1 + 0.1 * rng.normal(size=h), "layers": []}
    for _ in range(v["layers"]):
        L = {
            "attn_norm": 1 + 0.1 * rng.normal(size=h),
            "q": rng.normal(0, h ** -0.5, (nh * hd, h)),
            "k": rng.normal(0, h ** -0.5, (nkv * hd, h)),
            "v": rng.normal(0, h ** -0.5, (nkv * hd, h)),
            "o": rng.normal(0, (nh * hd) ** -0.5, (h, nh * hd)),
            "ffn_norm": 1 + 0.1 * rng.normal(size=h),
            "gate": rng.normal(0, h ** -0.5, (f, h)),
            "up": rng.normal(0, h ** -0.5, (f, h)),
            "down": rng.normal(0, f ** -0.5, (h, f)),
        }
        if v["qkv_bias"]:
            L["bq"], L["bk"], L["bv"] = (rng.normal(0, 0.5, n * hd) for n in (nh, nkv, nkv))
        if v["qk_norm"]:
            L["q_norm"], L["k_norm"] = (1 + 0.1 * rng.normal(size=hd) for _ in range(2))
        w["layers"].append(L)
    if not v["tied"]:
        w["output"] = rng.normal(0, h ** -0.5, (v["vocab"], h))
    return w


# Storage rounding: what a loader reads back is what the reference must use.
def stored(a, kind):
    a = np.asarray(a, dtype=np.float32)
    if kind == "f16":
        return a.astype(np.float16).astype(np.float32)
    if kind in ("q8_0", "q4_1") and a.ndim == 2:
        qt = getattr(gguf.GGMLQuantizationType, kind.upper())
        return quants.dequantize(quants.quantize(a, qt), qt).astype(np.float32)
    return a


def matrix_kind(v, what):
    if v["gguf_type"] == "q4_1":
        return "q8_0" if what == "embed" else "q4_1"
    return v["gguf_type"]


def round_all(v, w):
    r = {"embed": stored(w["embed"], matrix_kind(v, "embed")), "norm": stored(w["norm"], "f32"), "layers": []}
    for L in w["layers"]:
        r["layers"].append({k: stored(a, matrix_kind(v, k) if a.ndim == 2 else "f32") for k, a in L.items()})
    if "output" in w:
        r["output"] = stored(w["output"], matrix_kind(v, "output"))
    return r


def rms_norm(x, g, eps):
    return x / np.sqrt(np.mean(x * x, axis=-1, keepdims=True) + eps) * g


def rope_rotate_half(x, pos, theta):  # x: (T, heads, hd)
    hd = x.shape[-1]
    inv = theta ** (-np.arange(0, hd, 2, dtype=np.float64) / hd)
    ang = pos[:, None] * inv[None, :]
    cos = np.concatenate([np.cos(ang)] * 2, axis=-1)[:, None, :]
    sin = np.concatenate([np.sin(ang)] * 2, axis=-1)[:, None, :]
    rot = np.concatenate([-x[..., hd // 2:], x[..., : hd // 2]], axis=-1)
    return x * cos + rot * sin


def rope_adjacent(x, pos, theta):
    hd = x.shape[-1]
    inv = theta ** (-np.arange(0, hd, 2, dtype=np.float64) / hd)
    ang = (pos[:, None] * inv[None, :])[:, None, :]
    a, b = x[..., 0::2], x[..., 1::2]
    out = np.empty_like(x)
    out[..., 0::2] = a * np.cos(ang) - b * np.sin(ang)
    out[..., 1::2] = a * np.sin(ang) + b * np.cos(ang)
    return out


def forward(v, w, tokens, rope=rope_rotate_half):
    """Float64 decoder, all positions: returns logits (T, vocab)."""
    nh, nkv, hd, eps = v["heads"], v["kv_heads"], v["head_dim"], v["eps"]
    T = len(tokens)
    pos = np.arange(T, dtype=np.float64)
    x = w["embed"].astype(np.float64)[tokens]
    mask = np.triu(np.full((T, T), -np.inf), 1)
    for L in w["layers"]:
        h = rms_norm(x, L["attn_norm"], eps)
        q, k, val = h @ L["q"].T, h @ L["k"].T, h @ L["v"].T
        if v["qkv_bias"]:
            q, k, val = q + L["bq"], k + L["bk"], val + L["bv"]
        q, k, val = q.reshape(T, nh, hd), k.reshape(T, nkv, hd), val.reshape(T, nkv, hd)
        if v["qk_norm"]:
            q, k = rms_norm(q, L["q_norm"], eps), rms_norm(k, L["k_norm"], eps)
        q, k = rope(q, pos, v["theta"]), rope(k, pos, v["theta"])
        heads = []
        for i in range(nh):
            g = i // (nh // nkv)
            s = q[:, i, :] @ k[:, g, :].T / np.sqrt(hd) + mask
            p = np.exp(s - s.max(axis=-1, keepdims=True))
            p /= p.sum(axis=-1, keepdims=True)
            heads.append(p @ val[:, g, :])
        x = x + np.concatenate(heads, axis=-1) @ L["o"].T
        h = rms_norm(x, L["ffn_norm"], eps)
        gate, up = h @ L["gate"].T, h @ L["up"].T
        x = x + (gate / (1 + np.exp(-gate)) * up) @ L["down"].T
    x = rms_norm(x, w["norm"], eps)
    return x @ (w["output"] if "output" in w else w["embed"]).T


def permute_for_gguf(a, n_head):
    """llama.cpp convert_hf_to_gguf.py LlamaModel.permute: rotate-half row order -> adjacent pairs."""
    return a.reshape(n_head, 2, a.shape[0] // n_head // 2, *a.shape[1:]).swapaxes(1, 2).reshape(a.shape)


def permuted(v, w):
    p = {k: val for k, val in w.items() if k != "layers"}
    p["layers"] = []
    for L in w["layers"]:
        L = dict(L)
        L["q"], L["k"] = permute_for_gguf(L["q"], v["heads"]), permute_for_gguf(L["k"], v["kv_heads"])
        if "bq" in L:
            L["bq"], L["bk"] = permute_for_gguf(L["bq"], v["heads"]), permute_for_gguf(L["bk"], v["kv_heads"])
        p["layers"].append(L)
    return p


def write_gguf(path, v, w):
    arch = v["arch"]
    wr = gguf.GGUFWriter(path, arch)
    wr.add_name(f"nucleus tiny {v['name']}")
    wr.add_context_length(256)
    wr.add_embedding_length(v["hidden"])
    wr.add_block_count(v["layers"])
    wr.add_feed_forward_length(v["inter"])
    wr.add_head_count(v["heads"])
    wr.add_head_count_kv(v["kv_heads"])
    wr.add_rope_freq_base(v["theta"])
    wr.add_layer_norm_rms_eps(v["eps"])
    wr.add_vocab_size(v["vocab"])
    if v["head_dim"] != v["hidden"] // v["heads"]:
        wr.add_key_length(v["head_dim"])
        wr.add_value_length(v["head_dim"])
    wr.add_rope_dimension_count(v["head_dim"])
    if arch == "llama":
        w = permuted(v, w)

    def put(name, a, what):
        kind = matrix_kind(v, what) if a.ndim == 2 else "f32"
        a = np.ascontiguousarray(a, dtype=np.float32)
        if kind == "f16":
            wr.add_tensor(name, a.astype(np.float16))
        elif kind in ("q8_0", "q4_1"):
            qt = getattr(gguf.GGMLQuantizationType, kind.upper())
            wr.add_tensor(name, quants.quantize(a, qt), raw_dtype=qt)
        else:
            wr.add_tensor(name, a)

    put("token_embd.weight", w["embed"], "embed")
    names = {"attn_norm": "attn_norm", "q": "attn_q", "k": "attn_k", "v": "attn_v", "o": "attn_output",
             "ffn_norm": "ffn_norm", "gate": "ffn_gate", "up": "ffn_up", "down": "ffn_down",
             "bq": "attn_q.bias", "bk": "attn_k.bias", "bv": "attn_v.bias", "q_norm": "attn_q_norm",
             "k_norm": "attn_k_norm"}
    for i, L in enumerate(w["layers"]):
        for k, a in L.items():
            n = names[k]
            put(f"blk.{i}.{n}" + ("" if n.endswith(".bias") else ".weight"), a, k)
    put("output_norm.weight", w["norm"], "norm")
    if "output" in w:
        put("output.weight", w["output"], "output")
    wr.write_header_to_file()
    wr.write_kv_data_to_file()
    wr.write_tensors_to_file()
    wr.close()


def write_safetensors(folder, v, w):
    os.makedirs(folder, exist_ok=True)
    dt = np.float16 if v["gguf_type"] == "f16" else np.float32

    def c(a):
        return np.ascontiguousarray(a, dtype=dt if a.ndim == 2 else np.float32)

    t = {"model.embed_tokens.weight": c(w["embed"]), "model.norm.weight": c(w["norm"])}
    names = {"attn_norm": "input_layernorm.weight", "q": "self_attn.q_proj.weight",
             "k": "self_attn.k_proj.weight", "v": "self_attn.v_proj.weight", "o": "self_attn.o_proj.weight",
             "ffn_norm": "post_attention_layernorm.weight", "gate": "mlp.gate_proj.weight",
             "up": "mlp.up_proj.weight", "down": "mlp.down_proj.weight", "bq": "self_attn.q_proj.bias",
             "bk": "self_attn.k_proj.bias", "bv": "self_attn.v_proj.bias", "q_norm": "self_attn.q_norm.weight",
             "k_norm": "self_attn.k_norm.weight"}
    for i, L in enumerate(w["layers"]):
        for k, a in L.items():
            t[f"model.layers.{i}.{names[k]}"] = c(a)
    if "output" in w:
        t["lm_head.weight"] = c(w["output"])
    save_file(t, os.path.join(folder, "model.safetensors"), metadata={"format": "pt"})
    model_type = v["arch"]
    cfg = {
        "architectures": [{"llama": "LlamaForCausalLM", "qwen2": "Qwen2ForCausalLM",
                           "qwen3": "Qwen3ForCausalLM"}[model_type]],
        "model_type": model_type,
        "vocab_size": v["vocab"],
        "hidden_size": v["hidden"],
        "intermediate_size": v["inter"],
        "num_hidden_layers": v["layers"],
        "num_attention_heads": v["heads"],
        "num_key_value_heads": v["kv_heads"],
        "head_dim": v["head_dim"],
        "rope_theta": v["theta"],
        "rms_norm_eps": v["eps"],
        "max_position_embeddings": 256,
        "tie_word_embeddings": v["tied"],
        "torch_dtype": "float16" if dt == np.float16 else "float32",
    }
    if model_type == "llama":
        cfg["attention_bias"] = False
    with open(os.path.join(folder, "config.json"), "w") as f:
        json.dump(cfg, f, indent=2)


def main():
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    out = sys.argv[1]
    shutil.rmtree(out, ignore_errors=True)  # never leave a stale fixture behind a failed run
    os.makedirs(out)
    manifest = {"tokens": TOKENS, "variants": []}
    for i, v in enumerate(VARIANTS):
        rng = np.random.default_rng(1234 + i)
        raw = random_weights(v, rng)
        w = round_all(v, raw)
        logits = forward(v, w, TOKENS)
        if v["arch"] == "llama":
            alt = forward(v, permuted(v, w), TOKENS, rope=rope_adjacent)
            assert np.allclose(alt, logits, rtol=0, atol=1e-9), "GGUF Q/K permutation convention broken"
        gguf_path = os.path.join(out, f"{v['name']}.gguf")
        st_dir = os.path.join(out, f"{v['name']}_hf")
        write_gguf(gguf_path, v, raw)  # quantized from the same values round_all saw
        write_safetensors(st_dir, v, w)
        manifest["variants"].append({
            "name": v["name"], "arch": v["arch"], "gguf": gguf_path, "safetensors": st_dir,
            "vocab": v["vocab"], "hidden": v["hidden"], "intermediate": v["inter"], "n_layers": v["layers"],
            "n_heads": v["heads"], "n_kv_heads": v["kv_heads"], "head_dim": v["head_dim"],
            "tied": v["tied"], "qkv_bias": v["qkv_bias"], "qk_norm": v["qk_norm"],
            "logits": [[float(f"{x:.9g}") for x in row] for row in logits],
        })
    with open(os.path.join(out, "manifest.json"), "w") as f:
        json.dump(manifest, f)
    print(f"make_tiny.py: wrote {len(VARIANTS)} variants to {out}")


if __name__ == "__main__":
    main()
