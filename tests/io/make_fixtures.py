#!/usr/bin/env python3
"""Writes the reference data the nucleus::io tests compare against, using the PyPI `gguf` package.

usage: make_fixtures.py OUTDIR

OUTDIR/quant/<type>.bin, .f32   blocks of each type and gguf.quants.dequantize's float32 output
OUTDIR/tiny*.gguf, tiny*.json   small GGUF files (GGUFWriter) and what they must read back as
OUTDIR/tiny/<tensor>.bin, .f32  raw bytes and dequantized values of each tensor in them
OUTDIR/safetensors/*.safetensors, OUTDIR/safetensors.json
                                files the `safetensors` package writes, with zero-size tensors in
                                every position, and what they hold (only if safetensors is installed)
OUTDIR/smollm2.json             the real model's path and per-tensor checksums (only if installed;
                                the path is $NUCLEUS_SMOLLM2_GGUF, else scripts/find-model's answer)

Exits 77 (ctest's skip code) when numpy or gguf cannot be imported.
"""
import json
import os
import shutil
import struct
import sys

if __name__ == "__main__" and len(sys.argv) == 2:
    shutil.rmtree(sys.argv[1], ignore_errors=True)  # a skip must not leave stale fixtures behind

try:
    import numpy as np
    import gguf
    from gguf import GGMLQuantizationType as Q, GGUFValueType as V
except ImportError as e:  # no reference, no comparison: skip rather than fail
    print(f"skipping: {e}")
    sys.exit(77)

QUANTIZABLE = [Q.Q8_0, Q.Q4_0, Q.Q4_1, Q.Q5_0, Q.Q5_1]
K_QUANTS = [Q.Q2_K, Q.Q3_K, Q.Q4_K, Q.Q5_K, Q.Q6_K]

# Byte offsets of the f16 scales in each block: random bytes elsewhere, sane finite scales here.
SCALE_OFFSETS = {
    Q.Q8_0: [0], Q.Q4_0: [0], Q.Q4_1: [0, 2], Q.Q5_0: [0], Q.Q5_1: [0, 2],
    Q.Q2_K: [80, 82], Q.Q3_K: [108], Q.Q4_K: [0, 2], Q.Q5_K: [0, 2], Q.Q6_K: [208],
}


def cname(q):
    return q.name.lower()


def random_blocks(rng, q, n_blocks):
    _, type_size = gguf.GGML_QUANT_SIZES[q]
    raw = rng.integers(0, 256, size=(n_blocks, type_size), dtype=np.uint8)
    for off in SCALE_OFFSETS[q]:
        mag = np.exp2(rng.uniform(-14, 4, size=n_blocks)) * rng.choice([-1.0, 1.0], size=n_blocks)
        mag[0] = 0.0
        mag[1] = 6.0e-8  # an f16 subnormal
        raw[:, off:off + 2] = mag.astype(np.float16).view(np.uint8).reshape(n_blocks, 2)
    return raw


def write(path, array):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    np.ascontiguousarray(array).tofile(path)


def quant_fixtures(out, rng):
    # f16 and bf16: every one of the 65536 bit patterns, NaNs included.
    every = np.arange(65536, dtype=np.uint16).view(np.uint8)
    for q in (Q.F16, Q.BF16):
        write(f"{out}/quant/{cname(q)}.bin", every)
        write(f"{out}/quant/{cname(q)}.f32", gguf.quants.dequantize(every, q).astype(np.float32))
    for q in QUANTIZABLE + K_QUANTS:
        block_size, _ = gguf.GGML_QUANT_SIZES[q]
        parts = [random_blocks(rng, q, 400)]
        if q in QUANTIZABLE:
            values = rng.standard_normal((64, block_size)).astype(np.float32)
            values[0] = 0
            values[1] *= 1e-6
            values[2] *= 1e4
            parts.append(gguf.quants.quantize(values, q).reshape(64, -1))
        raw = np.concatenate(parts)
        write(f"{out}/quant/{cname(q)}.bin", raw)
        write(f"{out}/quant/{cname(q)}.f32", gguf.quants.dequantize(raw, q).astype(np.float32))


def typed(v, t, sub=None):
    """What the C++ reader must produce for a value, with its exact kind."""
    if t == V.ARRAY:
        return {"type": "array", "element_type": SHORT[sub], "values": [typed(x, sub, inner_type(x)) for x in v]}
    if t == V.FLOAT32:
        return {"type": "f32", "bits": int(np.array([v], dtype=np.float32).view(np.uint32)[0])}
    if t == V.FLOAT64:
        return {"type": "f64", "bits": int(np.array([v], dtype=np.float64).view(np.uint64)[0])}
    return {"type": SHORT[t], "value": v}


def inner_type(x):
    return V.get_type(x[0]) if isinstance(x, list) else None


SHORT = {V.UINT8: "u8", V.INT8: "i8", V.UINT16: "u16", V.INT16: "i16", V.UINT32: "u32", V.INT32: "i32",
         V.UINT64: "u64", V.INT64: "i64", V.FLOAT32: "f32", V.FLOAT64: "f64", V.BOOL: "bool",
         V.STRING: "string", V.ARRAY: "array", None: None}


def tiny_gguf(out, rng, name, alignment):
    path = f"{out}/{name}.gguf"
    w = gguf.GGUFWriter(path, "llama")
    expected_md = {"general.architecture": typed("llama", V.STRING)}
    if alignment is not None:
        w.add_custom_alignment(alignment)
        expected_md["general.alignment"] = typed(alignment, V.UINT32)

    def kv(key, value, vtype, sub=None):
        w.add_key_value(key, value, vtype, sub_type=sub)
        expected_md[key] = typed(value, vtype, sub if vtype == V.ARRAY else None)

    kv("t.u8", 255, V.UINT8)
    kv("t.i8", -128, V.INT8)
    kv("t.u16", 65535, V.UINT16)
    kv("t.i16", -32768, V.INT16)
    kv("t.u32", 2**32 - 1, V.UINT32)
    kv("t.i32", -2**31, V.INT32)
    kv("t.u64", 2**64 - 1, V.UINT64)
    kv("t.i64", -2**63, V.INT64)
    kv("t.f32", 3.14159, V.FLOAT32)
    kv("t.f32_tiny", 1e-45, V.FLOAT32)
    kv("t.f32_neg_zero", -0.0, V.FLOAT32)
    kv("t.f32_inf", float("inf"), V.FLOAT32)
    kv("t.f64", 1e-300, V.FLOAT64)
    kv("t.true", True, V.BOOL)
    kv("t.false", False, V.BOOL)
    kv("t.string", "h\u00e9llo \u2713 \U0001F600", V.STRING)
    kv("t.empty_string", "", V.STRING)
    for vt, vals in [(V.UINT8, [0, 1, 255]), (V.INT8, [-128, 0, 127]), (V.UINT16, [0, 65535]),
                     (V.INT16, [-32768, 32767]), (V.UINT32, [0, 2**32 - 1]), (V.INT32, [-2**31, 2**31 - 1]),
                     (V.UINT64, [0, 2**64 - 1]), (V.INT64, [-2**63, 2**63 - 1]),
                     (V.FLOAT32, [0.5, -1.25, 3.4e38]), (V.FLOAT64, [1e308, -2.5]),
                     (V.BOOL, [True, False, True]), (V.STRING, ["a", "", "\u00fcnicode", "x" * 300])]:
        kv(f"t.array.{SHORT[vt]}", vals, V.ARRAY, vt)
    kv("t.array.nested", [[1, 2, 3], [4], [5, 6]], V.ARRAY, V.ARRAY)
    kv("t.array.nested3", [[[1], [2, 3]], [[4, 5, 6]]], V.ARRAY, V.ARRAY)
    kv("t.array.nested_strings", [["a", "b"], ["c"]], V.ARRAY, V.ARRAY)
    kv("t.array.floats", [float(x) for x in rng.standard_normal(1000).astype(np.float32)], V.ARRAY, V.FLOAT32)

    tensors = []
    shapes = [(64,), (3, 64), (2, 2, 32), (2, 1, 3, 32)]
    k_shapes = [(256,), (2, 512), (3, 1, 256)]
    for q in [Q.F32, Q.F16, Q.BF16] + QUANTIZABLE + K_QUANTS:
        for i, shape in enumerate(k_shapes if q in K_QUANTS else shapes):
            tname = f"{cname(q)}.{i}"
            if q in K_QUANTS:
                n_blocks = int(np.prod(shape)) // 256
                raw = random_blocks(rng, q, max(n_blocks, 2))[:n_blocks]
                raw = raw.reshape(*shape[:-1], -1)
                w.add_tensor(tname, raw, raw_dtype=q)
            else:
                values = rng.standard_normal(shape).astype(np.float32)
                if q == Q.F32:
                    raw = values
                    w.add_tensor(tname, values)
                elif q == Q.F16:
                    raw = values.astype(np.float16)
                    w.add_tensor(tname, raw)
                else:
                    raw = gguf.quants.quantize(values, q)
                    w.add_tensor(tname, raw, raw_dtype=q)
            raw_bytes = np.ascontiguousarray(raw).view(np.uint8).ravel()
            deq = gguf.quants.dequantize(np.ascontiguousarray(raw).view(np.uint8).reshape(*shape[:-1], -1), q)
            write(f"{out}/{name}/{tname}.bin", raw_bytes)
            write(f"{out}/{name}/{tname}.f32", np.asarray(deq, dtype=np.float32))
            tensors.append({"name": tname, "type": cname(q), "shape": list(shape)})
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    with open(f"{out}/{name}.json", "w") as f:
        json.dump({"metadata": expected_md, "tensors": tensors}, f)


def checksum(values):
    """Order-sensitive sum over the float bit patterns, mod 2^64 (the C++ test computes the same)."""
    bits = np.ascontiguousarray(values, dtype=np.float32).ravel().view(np.uint32).astype(np.uint64)
    weights = np.arange(1, bits.size + 1, dtype=np.uint64)
    with np.errstate(over="ignore"):
        return int((bits * weights).sum(dtype=np.uint64))


def safetensors_fixtures(out):
    """Zero-size tensors first, last, between others and sharing an offset with a non-empty one:
    the writer puts an empty tensor's [n, n] right where the next tensor's bytes begin."""
    try:
        import safetensors.numpy
    except ImportError as e:
        print(f"no safetensors fixtures: {e}")
        return
    f32 = lambda *shape: np.arange(int(np.prod(shape)), dtype=np.float32).reshape(shape) + 0.5
    f16 = lambda *shape: (np.arange(int(np.prod(shape)), dtype=np.float32).reshape(shape) - 3).astype(np.float16)
    files = {
        # The file the fuzzer found: c at [24, 24] next to b at [24, 32].
        "empty_before_next": {"a": f32(6), "b": f16(4), "c": f32(0, 3)},
        "empty_first": {"a": f32(0, 3), "b": f32(2, 3)},
        "empty_last": {"a": f32(2), "y": f16(0), "z": f32(0)},
        "empty_everywhere": {"a": f32(0), "b": f32(3), "c": f32(0, 0), "d": f32(2), "e": f16(5, 0),
                             "f": f16(3), "g": f16(0), "h": f32(1, 0, 7)},
        "only_empty": {"x": f32(0, 3), "y": f16(0)},
    }
    os.makedirs(f"{out}/safetensors", exist_ok=True)
    manifest = []
    for name, tensors in files.items():
        path = f"{out}/safetensors/{name}.safetensors"
        safetensors.numpy.save_file(tensors, path)
        with open(path, "rb") as f:
            header = json.loads(f.read(struct.unpack("<Q", f.read(8))[0]))
        assert any(e["data_offsets"][0] == e["data_offsets"][1] for e in header.values())
        manifest.append({"file": f"safetensors/{name}.safetensors", "tensors": [
            {"name": k, "dtype": header[k]["dtype"], "shape": list(v.shape), "offsets": header[k]["data_offsets"],
             "hex": np.ascontiguousarray(v).tobytes().hex()} for k, v in tensors.items()]})
    with open(f"{out}/safetensors.json", "w") as f:
        json.dump(manifest, f)


def model_path():
    path = os.environ.get("NUCLEUS_SMOLLM2_GGUF")
    if path is not None:  # set, even empty, by CMake: its answer stands (empty: no model)
        return path or None
    import subprocess
    find = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "scripts", "find-model")
    r = subprocess.run([sys.executable, find], capture_output=True, text=True)
    return r.stdout.strip() if r.returncode == 0 else None


def smollm2(out):
    path = model_path()
    if not path or not os.path.exists(path):
        print("SmolLM2-135M-Instruct GGUF not found (scripts/deps installs it): no real-model fixture")
        return
    reader = gguf.GGUFReader(path)
    tensors = []
    for t in reader.tensors:
        deq = gguf.quants.dequantize(t.data, t.tensor_type)
        flat = np.asarray(deq, dtype=np.float32).ravel()
        tensors.append({"name": t.name, "type": t.tensor_type.name.lower(),
                        "shape": [int(x) for x in reversed(t.shape)], "checksum": checksum(flat),
                        "head_bits": [int(x) for x in flat[:32].view(np.uint32)],
                        "tail_bits": [int(x) for x in flat[-32:].view(np.uint32)]})
    metadata = {}
    for key, field in reader.fields.items():
        if key.startswith("GGUF."):
            continue
        types = [SHORT[V(x)] for x in field.types]
        value = field.contents()
        if types[0] == "array" and types[-1] in ("f32", "f64"):
            value = [float(x) for x in value]
        elif types[0] in ("f32", "f64"):
            value = float(value)
        metadata[key] = {"types": types, "value": value}
    with open(f"{out}/smollm2.json", "w") as f:
        json.dump({"path": path, "tensors": tensors, "metadata": metadata}, f)


def main():
    out = sys.argv[1]
    os.makedirs(out, exist_ok=True)
    rng = np.random.default_rng(20240531)
    quant_fixtures(out, rng)
    tiny_gguf(out, rng, "tiny", None)
    tiny_gguf(out, rng, "tiny_align64", 64)
    safetensors_fixtures(out)
    smollm2(out)
    with open(f"{out}/complete", "w") as f:  # the C++ tests run only against a complete set
        f.write("ok\n")


if __name__ == "__main__":
    main()
