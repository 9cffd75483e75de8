#!/usr/bin/env python3
"""Writes the seed corpus of fuzz_safetensors into corpus/ (run once; the
files are committed). Small valid files give the fuzzer the structure to
mutate; a few invalid ones start it next to the interesting boundaries."""
import json
import os
import struct

HERE = os.path.dirname(os.path.abspath(__file__))
SIZES = {"F32": 4, "F16": 2, "BF16": 2, "I8": 1, "U8": 1, "I32": 4, "I64": 8}


def image(tensors, metadata=None, pad_to=8):
    """tensors: [(name, dtype, shape)], laid out in order. Returns the file bytes."""
    header, data = {}, b""
    for i, (name, dtype, shape) in enumerate(tensors):
        size = SIZES.get(dtype, 8)
        for d in shape:
            size *= d
        header[name] = {"dtype": dtype, "shape": shape,
                        "data_offsets": [len(data), len(data) + size]}
        data += bytes((i * 31 + k * 7 + 1) & 0xFF for k in range(size))
    if metadata:
        header["__metadata__"] = metadata
    return raw(json.dumps(header, separators=(",", ":")), data, pad_to)


def raw(text, data=b"", pad_to=1, length=None):
    text = text.encode("utf-8", "surrogateescape")
    while (8 + len(text)) % pad_to:
        text += b" "
    return struct.pack("<Q", len(text) if length is None else length) + text + data


def main():
    two = [("a", "F32", [2, 3]), ("b", "F16", [4])]
    seeds = {
        "valid_two_tensors": image(two, {"format": "pt"}),
        "valid_every_dtype": image([(d.lower(), d, [2]) for d in SIZES] + [("s", "F32", [])]),
        "valid_zero_size": image([("e", "F32", [0, 4]), ("a", "U8", [3]), ("z", "BF16", [0])]),
        "valid_empty": raw("{}"),
        "invalid_overlap": raw('{"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},'
                               '"b":{"dtype":"F32","shape":[1],"data_offsets":[4,8]}}', bytes(8)),
        "invalid_trailing_bytes": image(two) + b"\0\0\0\0",
        "invalid_unsupported_dtype": image([("f", "F64", [1])]),
        "invalid_header_length": raw("{}", length=1 << 40),
        "invalid_duplicate_name": raw('{"a":{"dtype":"U8","shape":[1],"data_offsets":[0,1]},'
                                      '"a":{"dtype":"U8","shape":[1],"data_offsets":[0,1]}}',
                                      b"\1"),
    }
    out = os.path.join(HERE, "corpus")
    os.makedirs(out, exist_ok=True)
    for name, data in seeds.items():
        assert len(data) < 1024, name
        with open(os.path.join(out, name + ".safetensors"), "wb") as f:
            f.write(data)


if __name__ == "__main__":
    main()
