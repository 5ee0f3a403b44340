#!/usr/bin/env python3
"""Writes an all-F32 copy of a GGUF model: every tensor dequantized with gguf-py, every metadata key kept.

usage: make_f32.py --out F32.gguf [--model GGUF]

llama.cpp running this copy does its products in f32, so it is the fair peer for nucleus's f32
forward pass; on the quantized file it rounds activations to 8 bits first. Only general.file_type
changes (to ALL_F32). The model defaults to $NUCLEUS_SMOLLM2_GGUF, else scripts/find-model's answer.
Exit code 77 (ctest SKIP_RETURN_CODE) when numpy, gguf or the model is unavailable.
"""

import argparse
import os
import sys
import time

from interop import default_model


def copy_field(writer, field, gguf):
    """One metadata key as the reader holds it, written back with the same value type."""
    kind = field.types[0]
    sub = field.types[-1] if kind == gguf.GGUFValueType.ARRAY else None
    value = field.contents()
    if kind == gguf.GGUFValueType.ARRAY and sub == gguf.GGUFValueType.ARRAY:
        raise SystemExit(f"make_f32.py: {field.name}: nested arrays are not copied")
    writer.add_key_value(field.name, value, kind, sub_type=sub)


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--model", default=default_model())
    p.add_argument("--out", required=True)
    args = p.parse_args()
    try:
        import numpy as np
        import gguf
        from gguf.quants import dequantize
    except ImportError as e:
        print(f"make_f32.py: skipping, {e}")
        sys.exit(77)
    if not args.model or not os.path.exists(args.model):
        print("make_f32.py: skipping, no GGUF model (scripts/deps installs it, or pass --model)")
        sys.exit(77)

    t0 = time.perf_counter()
    reader = gguf.GGUFReader(args.model)
    arch = reader.fields["general.architecture"].contents()
    os.makedirs(os.path.dirname(os.path.abspath(args.out)), exist_ok=True)
    tmp = args.out + ".tmp"
    writer = gguf.GGUFWriter(tmp, arch)
    for name, field in reader.fields.items():
        if name.startswith("GGUF.") or name == "general.architecture":
            continue  # the header's own fields, and the key the writer sets from arch
        if name == "general.file_type":
            writer.add_file_type(gguf.LlamaFileType.ALL_F32)
        elif name == "general.alignment":
            writer.add_custom_alignment(int(field.contents()))
        else:
            copy_field(writer, field, gguf)
    kinds = {}
    for t in reader.tensors:
        # dequantize gives numpy's shape (outermost first): the reverse of GGUF's ne, as the writer expects.
        data = np.ascontiguousarray(dequantize(t.data, t.tensor_type), dtype=np.float32)
        expected = tuple(int(n) for n in reversed(t.shape))
        if data.shape != expected:
            data = data.reshape(expected)
        writer.add_tensor(t.name, data)
        kinds[t.tensor_type.name] = kinds.get(t.tensor_type.name, 0) + 1
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    os.replace(tmp, args.out)
    summary = ", ".join(f"{n} {k}" for k, n in sorted(kinds.items()))
    print(f"make_f32.py: {len(reader.tensors)} tensors ({summary}) and {len(reader.fields)} fields -> "
          f"{args.out} ({os.path.getsize(args.out) / 2**20:.0f} MiB) in {time.perf_counter() - t0:.1f} s")


if __name__ == "__main__":
    main()
