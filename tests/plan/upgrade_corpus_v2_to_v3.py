#!/usr/bin/env python3
"""Moves the fuzz corpora's hand-kept plan files from format version 2 to 3.

Version 3 replaced the steps' positional int_params/float_params by named
parameter tables (runtime/schema/engine.fbs Step.params); a version-2
FlatBuffer does not describe a version-3 plan, so a runtime refuses version 2
at the header. The crash reproducers are patched to version 3 anyway (their
metadata checksum too, so the structural checks behind it see them): they
stay inputs that must not crash the loader, which is all a corpus file has to
be. The writer-made seeds are regenerated instead:
  build/tests/plan/plan_run_test --gtest_also_run_disabled_tests --gtest_filter=*WriteSeeds
Usage: tests/plan/upgrade_corpus_v2_to_v3.py tests/plan/corpus/*.bin tests/plan/run_corpus/*.bin
"""
import struct
import sys


def fnv1a64(data):
    h = 0xcbf29ce484222325
    for b in data:
        h ^= b
        h = (h * 0x100000001b3) & 0xFFFFFFFFFFFFFFFF
    return h


for path in sys.argv[1:]:
    data = bytearray(open(path, "rb").read())
    if len(data) < 64 or data[:8] != b"LLMCPLAN":
        continue
    version, = struct.unpack_from("<I", data, 8)
    if version != 2:
        continue
    struct.pack_into("<I", data, 8, 3)
    meta_offset, meta_size = struct.unpack_from("<QQ", data, 16)
    if meta_offset + meta_size <= len(data):
        struct.pack_into("<Q", data, 48, fnv1a64(bytes(data[meta_offset:meta_offset + meta_size])))
    open(path, "wb").write(data)
    print(f"{path}: version 2 -> 3")
