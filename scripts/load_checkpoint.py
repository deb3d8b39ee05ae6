#!/usr/bin/env python3
"""Read an sdp-train checkpoint (or final model) into NumPy arrays: NumPy only, no torch.

    python3 scripts/load_checkpoint.py out/checkpoints/ckpt-000000500.safetensors
    python3 scripts/load_checkpoint.py --compare A.safetensors B.safetensors

--compare exits 0 when both files hold the same tensors, bitwise (the metadata, which names
the job's paths, may differ), and 1 naming the tensors that differ.

As a module: `tensors, metadata = load_checkpoint(path)`; tensors is a dict name -> array
(model parameters and buffers under their layer names, optimizer state under
"optimizer.<param>.<kind>", other ranks' BatchNorm statistics under "ranks.<r>.<buffer>"),
metadata a dict of strings (step, cursor_epoch,
cursor_offset, world_size, global_batch, optimizer_steps, lr_next, model, fingerprint,
job_spec, version, ...). The file is safetensors: an 8-byte little-endian header length,
a JSON header, then the raw little-endian tensor bytes.
"""
import json
import struct
import sys

import numpy as np

_DTYPES = {"F32": np.dtype("<f4"), "F16": np.dtype("<f2"), "F64": np.dtype("<f8"),
           "I32": np.dtype("<i4"), "I64": np.dtype("<i8"), "U8": np.dtype("u1")}


def _bf16_to_f32(raw):
    # bfloat16 is the high half of a float32.
    return (np.frombuffer(raw, dtype="<u2").astype("<u4") << 16).view("<f4")


def load_checkpoint(path):
    with open(path, "rb") as f:
        data = f.read()
    if len(data) < 8:
        raise ValueError(f"{path}: shorter than the 8-byte header length")
    (n,) = struct.unpack("<Q", data[:8])
    if n > len(data) - 8:
        raise ValueError(f"{path}: header length {n} beyond the file ({len(data)} bytes)")
    header = json.loads(data[8:8 + n])
    metadata = header.pop("__metadata__", {})
    body = memoryview(data)[8 + n:]
    tensors = {}
    for name, info in header.items():
        begin, end = info["data_offsets"]
        if not 0 <= begin <= end <= len(body):
            raise ValueError(f"{path}: tensor {name!r} lies outside the file (truncated?)")
        raw = body[begin:end]
        if info["dtype"] == "BF16":
            array = _bf16_to_f32(raw)
        else:
            array = np.frombuffer(raw, dtype=_DTYPES[info["dtype"]])
        tensors[name] = array.reshape(info["shape"]).copy()
    return tensors, metadata


def compare(path_a, path_b):
    a, _ = load_checkpoint(path_a)
    b, _ = load_checkpoint(path_b)
    if a.keys() != b.keys():
        print(f"tensor names differ: only in {path_a}: {sorted(a.keys() - b.keys())}, "
              f"only in {path_b}: {sorted(b.keys() - a.keys())}")
        return 1
    differing = [k for k in a if a[k].dtype != b[k].dtype or a[k].shape != b[k].shape
                 or a[k].tobytes() != b[k].tobytes()]
    if differing:
        print(f"{len(differing)} of {len(a)} tensors differ: {differing}")
        return 1
    print(f"{len(a)} tensors bitwise identical")
    return 0


def main():
    if len(sys.argv) == 4 and sys.argv[1] == "--compare":
        sys.exit(compare(sys.argv[2], sys.argv[3]))
    if len(sys.argv) != 2:
        sys.exit("usage: load_checkpoint.py FILE.safetensors | --compare A.safetensors B.safetensors")
    tensors, metadata = load_checkpoint(sys.argv[1])
    for key in sorted(metadata):
        if key != "job_spec":
            print(f"{key}: {metadata[key]}")
    for name, array in tensors.items():
        print(f"{name} {array.dtype} {list(array.shape)}")


if __name__ == "__main__":
    main()
