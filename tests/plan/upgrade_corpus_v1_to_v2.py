#!/usr/bin/env python3
"""Moves the fuzz corpora's hand-kept plan files from format version 1 to 2.

Version 2 changed only the weight checksum (FNV-1a over 64-bit words ->
XXH3-64, runtime/plan/checksum.h). Files that are crash reproducers cannot be
rewritten by the writer, so this patches their header in place: version 2,
and the XXH3-64 of the weight section where the header's range lies inside
the file (the replays turn checksums off, but a plan that was consistent
stays consistent). The writer-made seeds are regenerated instead:
  build/tests/plan/plan_run_test --gtest_also_run_disabled_tests --gtest_filter=*WriteSeeds
Usage: tests/plan/upgrade_corpus_v1_to_v2.py tests/plan/corpus/*.bin tests/plan/run_corpus/*.bin
"""
import ctypes
import struct
import sys

xxhash = ctypes.CDLL("libxxhash.so.0")
xxhash.XXH3_64bits.restype = ctypes.c_uint64
xxhash.XXH3_64bits.argtypes = [ctypes.c_char_p, ctypes.c_size_t]

for path in sys.argv[1:]:
    data = bytearray(open(path, "rb").read())
    if len(data) < 64 or data[:8] != b"LLMCPLAN":
        continue
    version, = struct.unpack_from("<I", data, 8)
    if version != 1:
        continue
    struct.pack_into("<I", data, 8, 2)
    weights_offset, weights_size = struct.unpack_from("<QQ", data, 32)
    if weights_offset + weights_size <= len(data):
        section = bytes(data[weights_offset:weights_offset + weights_size])
        struct.pack_into("<Q", data, 56, xxhash.XXH3_64bits(section, len(section)))
    open(path, "wb").write(data)
    print(f"{path}: version 1 -> 2")
