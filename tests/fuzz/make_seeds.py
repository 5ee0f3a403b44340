#!/usr/bin/env python3
"""Writes the fuzzers' seed corpora: tests/fuzz/corpus/<fuzzer>/. A few KB per fuzzer, deterministic.

usage: make_seeds.py [CORPUS_DIR]   (default: corpus/ beside this script)
Needs numpy and the PyPI packages gguf and safetensors. The seeds are committed; rerun this only to
change them.
"""

import io
import json
import os
import struct
import sys
import tempfile

import numpy as np
import gguf
from gguf import quants
from safetensors.numpy import save as safetensors_bytes

HERE = os.path.dirname(os.path.abspath(__file__))
DIMS = dict(vocab=24, hidden=8, inter=16, layers=1, heads=2, kv_heads=1, head_dim=4)


def gguf_bytes(fill):
    with tempfile.TemporaryDirectory() as d:
        path = os.path.join(d, "seed.gguf")
        wr = gguf.GGUFWriter(path, "llama")
        fill(wr)
        wr.write_header_to_file()
        wr.write_kv_data_to_file()
        wr.write_tensors_to_file()
        wr.close()
        with open(path, "rb") as f:
            return f.read()


def vocabulary():
    tokens = ["<|im_start|>", "<|im_end|>"] + list("abcdehlorw\u0120\u010a!,.0123") + ["he", "ll", "\u0120w", "hell"]
    tokens = tokens[: DIMS["vocab"]]
    types = [3, 3] + [1] * (len(tokens) - 2)
    merges = ["h e", "l l", "\u0120 w", "he ll"]
    return tokens, types, merges


def tiny_model(wr, kind):
    rng = np.random.default_rng(7)
    v, h, f, hd = DIMS["vocab"], DIMS["hidden"], DIMS["inter"], DIMS["head_dim"]
    wr.add_context_length(64)
    wr.add_embedding_length(h)
    wr.add_block_count(DIMS["layers"])
    wr.add_feed_forward_length(f)
    wr.add_head_count(DIMS["heads"])
    wr.add_head_count_kv(DIMS["kv_heads"])
    wr.add_rope_freq_base(10000.0)
    wr.add_layer_norm_rms_eps(1e-5)
    wr.add_vocab_size(v)
    wr.add_rope_dimension_count(hd)
    tokens, types, merges = vocabulary()
    wr.add_tokenizer_model("gpt2")
    wr.add_tokenizer_pre("smollm")
    wr.add_token_list(tokens)
    wr.add_token_types(types)
    wr.add_token_merges(merges)
    wr.add_bos_token_id(0)
    wr.add_eos_token_id(1)
    wr.add_add_bos_token(False)

    def put(name, shape):
        a = rng.normal(0, 0.5, shape).astype(np.float32)
        if kind == "f16" and a.ndim == 2:
            wr.add_tensor(name, a.astype(np.float16))
        elif kind == "q8_0" and a.ndim == 2 and a.shape[-1] % 32 == 0:
            wr.add_tensor(name, quants.quantize(a, gguf.GGMLQuantizationType.Q8_0),
                          raw_dtype=gguf.GGMLQuantizationType.Q8_0)
        else:
            wr.add_tensor(name, a)

    q, kv = DIMS["heads"] * hd, DIMS["kv_heads"] * hd
    put("token_embd.weight", (v, h))
    for i in range(DIMS["layers"]):
        put(f"blk.{i}.attn_norm.weight", (h,))
        put(f"blk.{i}.attn_q.weight", (q, h))
        put(f"blk.{i}.attn_k.weight", (kv, h))
        put(f"blk.{i}.attn_v.weight", (kv, h))
        put(f"blk.{i}.attn_output.weight", (h, q))
        put(f"blk.{i}.ffn_norm.weight", (h,))
        put(f"blk.{i}.ffn_gate.weight", (f, h))
        put(f"blk.{i}.ffn_up.weight", (f, h))
        put(f"blk.{i}.ffn_down.weight", (h, f))
    put("output_norm.weight", (h,))


def every_type(wr):
    """Metadata of every value kind, and one small tensor of every storage type nucleus reads."""
    rng = np.random.default_rng(3)
    wr.add_uint8("t.u8", 200)
    wr.add_int8("t.i8", -3)
    wr.add_uint16("t.u16", 60000)
    wr.add_int16("t.i16", -30000)
    wr.add_uint32("t.u32", 4000000000)
    wr.add_int32("t.i32", -2000000000)
    wr.add_uint64("t.u64", 2**63 + 5)
    wr.add_int64("t.i64", -(2**62))
    wr.add_float32("t.f32", 1.5)
    wr.add_float64("t.f64", -2.25)
    wr.add_bool("t.bool", True)
    wr.add_string("t.str", "h\u00e9llo")
    wr.add_array("t.arr_i32", [1, -2, 3])
    wr.add_array("t.arr_str", ["a", "", "bc"])
    wr.add_array("t.arr_f32", [0.5, -1.0])
    wr.add_array("t.empty", [])
    wr.add_tensor("f32", rng.normal(size=(2, 4)).astype(np.float32))
    wr.add_tensor("f16", rng.normal(size=(3,)).astype(np.float16))
    for t in ("Q8_0", "Q4_0", "Q4_1", "Q5_0", "Q5_1"):
        qt = getattr(gguf.GGMLQuantizationType, t)
        wr.add_tensor(t.lower(), quants.quantize(rng.normal(size=(1, 32)).astype(np.float32), qt), raw_dtype=qt)
    for t in ("Q2_K", "Q3_K", "Q4_K", "Q5_K", "Q6_K"):
        qt = getattr(gguf.GGMLQuantizationType, t)
        size = gguf.GGML_QUANT_SIZES[qt][1]
        raw = rng.integers(0, 256, size=(1, size), dtype=np.uint8)
        raw[0, -2:] = (0x00, 0x3c)  # the super-block scale d: 1.0 as f16 (last field in most layouts)
        wr.add_tensor(t.lower(), raw, raw_dtype=qt)


def hf_config():
    return {
        "architectures": ["LlamaForCausalLM"], "model_type": "llama", "vocab_size": DIMS["vocab"],
        "hidden_size": DIMS["hidden"], "intermediate_size": DIMS["inter"],
        "num_hidden_layers": DIMS["layers"], "num_attention_heads": DIMS["heads"],
        "num_key_value_heads": DIMS["kv_heads"], "head_dim": DIMS["head_dim"], "rope_theta": 10000.0,
        "rms_norm_eps": 1e-5, "max_position_embeddings": 64, "tie_word_embeddings": True,
    }


def hf_tensors(dtype):
    rng = np.random.default_rng(11)
    v, h, f, hd = DIMS["vocab"], DIMS["hidden"], DIMS["inter"], DIMS["head_dim"]
    q, kv = DIMS["heads"] * hd, DIMS["kv_heads"] * hd
    shapes = {"model.embed_tokens.weight": (v, h), "model.norm.weight": (h,)}
    for i in range(DIMS["layers"]):
        p = f"model.layers.{i}."
        shapes.update({p + "input_layernorm.weight": (h,), p + "self_attn.q_proj.weight": (q, h),
                       p + "self_attn.k_proj.weight": (kv, h), p + "self_attn.v_proj.weight": (kv, h),
                       p + "self_attn.o_proj.weight": (h, q), p + "post_attention_layernorm.weight": (h,),
                       p + "mlp.gate_proj.weight": (f, h), p + "mlp.up_proj.weight": (f, h),
                       p + "mlp.down_proj.weight": (h, f)})
    return {k: rng.normal(0, 0.5, s).astype(dtype) for k, s in shapes.items()}


def with_config(config, file_bytes):
    """The safetensors harness's input: a 2-byte little-endian length, the JSON, the file."""
    text = json.dumps(config, separators=(",", ":")).encode() if config is not None else b""
    return struct.pack("<H", len(text)) + text + file_bytes


def sampler_seed(isa, dtype, mode, logits, params):
    """The sampler harness's input: isa, dtype, mode, V (2 bytes), one tag byte per logit, params."""
    return bytes([isa, dtype, mode]) + struct.pack("<H", len(logits)) + bytes(logits) + bytes(params)


def main():
    root = sys.argv[1] if len(sys.argv) > 1 else os.path.join(HERE, "corpus")
    seeds = {
        "gguf": {
            "tiny_f32.gguf": gguf_bytes(lambda w: tiny_model(w, "f32")),
            "tiny_f16.gguf": gguf_bytes(lambda w: tiny_model(w, "f16")),
            "every_type.gguf": gguf_bytes(every_type),
        },
        "safetensors": {
            "tiny_f32": with_config(hf_config(), safetensors_bytes(hf_tensors(np.float32), {"format": "pt"})),
            "tiny_f16": with_config(hf_config(), safetensors_bytes(hf_tensors(np.float16))),
            # A zero-size tensor beside others (issue 9): the PyPI writer puts it at the same offset.
            "zero_size": with_config(None, safetensors_bytes({"b": np.zeros((0, 3), np.float32),
                                                              "c": np.ones((2,), np.float32),
                                                              "a": np.zeros((3,), np.float16)})),
        },
        "tokenizer": {
            # mode byte (vocabulary << 1 | parse_special), 2-byte text length, text, then 2-byte ids.
            "plain": b"\x00" + struct.pack("<H", 24) + b"hello world 12345 the an" + struct.pack("<4H", 0, 256, 270, 65),
            "special": b"\x03" + struct.pack("<H", 30) + b"<|im_start|>user\n\xc3\xa9t<tool>" + b"\x00" * 3,
            "unicode": b"\x02" + struct.pack("<H", 25) + "caf\u00e9 \u65e5\u672c \U0001f600 \u0301x  \n\n".encode()[:25],
        },
        "sampler": {
            "argmax": sampler_seed(0, 0, 0, [128, 140, 200, 3, 1], [0]),
            "chain_f32": sampler_seed(3, 0, 0, list(range(32, 224, 6)), [6, 100, 120, 20, 10, 0, 1, 2, 3, 4, 5, 6, 7, 8]),
            "chain_bf16": sampler_seed(2, 1, 0, [1, 2, 3, 130, 130, 130, 7, 8, 9, 200], [7, 144, 100, 40, 3, 1, 9, 9, 9, 9]),
            "softmax_f16": sampler_seed(1, 2, 0, [0, 4, 5, 6, 7, 8, 12, 13, 150], [13, 0, 0, 0, 5]),
            "engine": sampler_seed(3, 0, 1, list(range(40, 200, 3)),
                                   [0, 100, 40, 120, 10, 150, 30, 30, 64, 2, 5, 60, 3, 2, 7, 9, 1, 9, 2, 1,
                                    6, 1, 2, 3, 4, 5, 0, 0, 1, 3, 5, 5, 6, 7, 8, 2, 9, 10, 3, 0xff, 0, 0xff, 0]),
        },
    }
    for fuzzer, files in seeds.items():
        d = os.path.join(root, fuzzer)
        os.makedirs(d, exist_ok=True)
        for name, data in files.items():
            with open(os.path.join(d, name), "wb") as f:
                f.write(data)
        print(f"{fuzzer}: {len(files)} seeds, {sum(len(x) for x in files.values())} bytes")


if __name__ == "__main__":
    main()
