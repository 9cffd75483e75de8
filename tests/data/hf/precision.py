#!/usr/bin/env python3
"""How far the bf16 references (logits-bf16.f32) and llmc's bf16 plans are
from the exact logits of the same bf16-rounded matrices: a diagnostic for
docs/architectures.md "The bf16 tolerance", run BY HAND (never in CI) with
the torch + transformers of generate.py, from the repository root:

    python3 tests/data/hf/precision.py [--llmc DIR] [--settings attn|all]
        [--islands] [--layers] [--exact-cache DIR] [--json FILE] [name ...]

The exact value is transformers run in float64 on the bf16-rounded matrices
(generate.round_matrices_to_bf16), with the f32 islands transformers keeps
even in float64 removed (RMSNorm's `.to(torch.float32)`, softmax's
`dtype=torch.float32`, Gemma's `.float()`): see float64_everywhere. RoPE's
cos/sin stay f32 on both sides, as transformers defines them (llmc computes
them the same way, runtime/kernels/common/rope.h), so they are not part of
the rounding measured here.

Each run feeds the same tokens: the prompt, then the committed
decode_ids_bf16 one at a time through transformers' KV cache, and compares
the rows generate.py keeps. Printed per fixture: max |ref - f64| for the
committed reference file, for transformers in f32 under each setting a user
may pick without changing the math (--settings: eager or sdpa attention, one
thread or all, oneDNN on or off), and with --llmc DIR (written by
`LLMC_HF_DUMP_DIR=DIR hf_logits_golden_test --gtest_filter='*Bf16*'`)
max |llmc - f64|, max |llmc - ref| and llmc against each setting's rows.
--layers adds transformers' relative f32 error per module, layer by layer.
--islands adds, per kind of op, float64 with only that op in f32
(f32_island): which rounding the reference's distance comes from. The
float64 forward of a 2100-token fixture takes minutes: --exact-cache keeps
its rows for the next run.
"""

import argparse
import contextlib
import json
import sys
import warnings
from pathlib import Path

import numpy as np
import torch
import torch.nn.functional as F
import transformers
from transformers import AutoModelForCausalLM

import generate

HERE = generate.HERE
# The real conversions, for the f32 islands (float64_everywhere replaces them).
TO, SOFTMAX, LINEAR, MATMUL = torch.Tensor.to, F.softmax, F.linear, torch.matmul


@contextlib.contextmanager
def float64_everywhere():
    """Within: a float64 tensor cast to float32 stays float64, and softmax's
    dtype=torch.float32 is ignored for float64 input, so that a float64
    model computes its norms and softmax in float64 too (transformers casts
    them to f32 whatever the model's dtype). Tensors that are not float64
    (positions, RoPE's f32 frequencies) convert as usual."""
    to, float_, softmax = torch.Tensor.to, torch.Tensor.float, F.softmax

    def to64(self, *args, **kwargs):
        out = to(self, *args, **kwargs)
        return self if self.dtype == torch.float64 and out.dtype == torch.float32 else out

    def float64(self, *args, **kwargs):
        return self if self.dtype == torch.float64 else float_(self, *args, **kwargs)

    def softmax64(input, dim=None, _stacklevel=3, dtype=None):
        if input.dtype == torch.float64 and dtype == torch.float32:
            dtype = None
        return softmax(input, dim=dim, _stacklevel=_stacklevel, dtype=dtype)

    torch.Tensor.to, torch.Tensor.float, F.softmax = to64, float64, softmax64
    try:
        yield
    finally:
        torch.Tensor.to, torch.Tensor.float, F.softmax = to, float_, softmax


def f32(t):
    return None if t is None else TO(t, torch.float32)


def f64(t):
    return TO(t, torch.float64)


ISLANDS = ("linear", "lm_head", "scores", "softmax", "pv", "norm")


@contextlib.contextmanager
def f32_island(model, which):
    """Within float64_everywhere: one kind of op of `model` computed in f32
    (inputs rounded to f32, output back to float64), the rest in float64.
    linear: every nn.Linear but the lm_head; lm_head: the one with VOCAB
    outputs; scores: attention's q @ k^T, pv: its p @ v (eager attention
    calls torch.matmul for these two, in this order, and for nothing else);
    softmax; norm: every RMSNorm/LayerNorm module (q/k norms included)."""
    saved = []
    if which in ("linear", "lm_head"):
        def linear(x, w, b=None):
            if (w.shape[0] == generate.VOCAB) == (which == "lm_head"):
                return f64(LINEAR(f32(x), f32(w), f32(b)))
            return LINEAR(x, w, b)
        saved.append((F, "linear", F.linear))
        F.linear = linear
    elif which in ("scores", "pv"):
        calls = [0]

        def matmul(a, b):
            calls[0] += 1
            if (calls[0] % 2 == 1) == (which == "scores"):
                return f64(MATMUL(f32(a), f32(b)))
            return MATMUL(a, b)
        saved.append((torch, "matmul", torch.matmul))
        torch.matmul = matmul
    elif which == "softmax":
        def softmax(x, dim=None, _stacklevel=3, dtype=None):
            return f64(SOFTMAX(f32(x), dim=dim))
        saved.append((F, "softmax", F.softmax))
        F.softmax = softmax
    elif which == "norm":
        for module in model.modules():
            if "norm" in type(module).__name__.lower():
                copy = {n: f32(t) for n, t in module.named_parameters(recurse=False)}
                forward = type(module).forward

                def run32(x, module=module, copy=copy, forward=forward):
                    params = {n: getattr(module, n) for n in copy}
                    for n, t in copy.items():
                        module._parameters[n] = torch.nn.Parameter(t, requires_grad=False)
                    try:
                        return f64(forward(module, f32(x)))
                    finally:
                        for n, t in params.items():
                            module._parameters[n] = t
                saved.append((module, "forward", None))
                module.forward = run32
    try:
        yield
    finally:
        for owner, attr, value in saved:
            if value is None:
                del owner.__dict__[attr]
            else:
                setattr(owner, attr, value)


def load_bf16(name, dtype, attn):
    """The fixture's checkpoint with its matrices rounded to bf16, in `dtype`;
    the rotary modules' frequencies stay f32 (see the top of this file)."""
    model = AutoModelForCausalLM.from_pretrained(HERE / name, dtype=torch.float32,
                                                 attn_implementation=attn).eval()
    generate.round_matrices_to_bf16(model)
    if dtype == torch.float64:
        rotary = {n: {b: t.clone() for b, t in m.named_buffers(recurse=False)}
                  for n, m in model.named_modules() if "rotary" in type(m).__name__.lower()}
        model.to(torch.float64)
        for n, buffers in rotary.items():
            module = model.get_submodule(n)
            for b, t in buffers.items():
                setattr(module, b, t)
    return model


def teacher_forced(model, ids, decode_ids, keep_last):
    """Rows as generate.run keeps them, feeding `decode_ids` (not the model's
    own argmax) so that every run sees the same tokens."""
    with torch.no_grad():
        out = model(torch.tensor([ids]), use_cache=True)
        rows = [out.logits[0] if keep_last is None else out.logits[0, -keep_last:]]
        cache = out.past_key_values
        for token in decode_ids:
            out = model(torch.tensor([[token]]), past_key_values=cache, use_cache=True)
            cache = out.past_key_values
            rows.append(out.logits[0, -1][None])
    return torch.cat(rows).to(torch.float64).numpy()


def exact(name, meta, attn="eager", island=None):
    """The float64 rows; with `island`, that kind of op in f32 (f32_island)."""
    with float64_everywhere():
        model = load_bf16(name, torch.float64, attn)
        with f32_island(model, island) if island else contextlib.nullcontext():
            return teacher_forced(model, meta["ids"], meta["decode_ids_bf16"],
                                  len(meta.get("prefill_rows", [])) or None)


@contextlib.contextmanager
def setting(threads, mkldnn):
    before = torch.get_num_threads()
    torch.set_num_threads(threads)
    try:
        with torch.backends.mkldnn.flags(enabled=mkldnn):
            yield
    finally:
        torch.set_num_threads(before)


def module_outputs(model, ids):
    """Every decoder layer's, its norms', attention's and MLP's output, the
    final norm's and the lm_head's, of one forward over `ids`, as float64."""
    out, hooks = {}, []
    for n, m in model.named_modules():
        layer = n.startswith("model.layers.") and n.count(".") <= 3
        if layer or n in ("model.norm", "model.final_layernorm", "lm_head"):
            def keep(module, args, o, n=n):
                out[n] = f64((o[0] if isinstance(o, tuple) else o).detach())
            hooks.append(m.register_forward_hook(keep))
    with torch.no_grad():
        model(torch.tensor([ids]), use_cache=False)
    for h in hooks:
        h.remove()
    return out


def layer_errors(name, meta):
    """Per module: max |f32 - float64| over one forward over the prompt and
    the decode ids, relative to the module's largest float64 output."""
    ids = meta["ids"] + meta["decode_ids_bf16"]
    with float64_everywhere():
        exact_out = module_outputs(load_bf16(name, torch.float64, "eager"), ids)
    f32_out = module_outputs(load_bf16(name, torch.float32, "eager"), ids)
    return {n: ((f32_out[n] - e).abs().max() / e.abs().max()).item() for n, e in exact_out.items()}


def f32_rows(name, meta, attn, threads, mkldnn):
    with setting(threads, mkldnn):
        model = load_bf16(name, torch.float32, attn)
        return teacher_forced(model, meta["ids"], meta["decode_ids_bf16"],
                              len(meta.get("prefill_rows", [])) or None)


def read_rows(path, shape):
    return np.fromfile(path, dtype="<f4").astype(np.float64).reshape(shape)


def worst(a, b):
    """max |a - b| and where: (row, column)."""
    d = np.abs(a - b)
    r, c = np.unravel_index(np.argmax(d), d.shape)
    return d[r, c], int(r), int(c)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--llmc", type=Path, help="LLMC_HF_DUMP_DIR of a bf16 test run")
    parser.add_argument("--settings", choices=["attn", "all"],
                        help="also transformers in f32 with eager and sdpa attention (attn), "
                             "and with one thread or oneDNN off (all)")
    parser.add_argument("--islands", action="store_true",
                        help="also float64 with one kind of op in f32 (f32_island), and "
                             "float64 with sdpa attention (a check of the exact value)")
    parser.add_argument("--layers", action="store_true",
                        help="also transformers' f32 error per module (layer_errors)")
    parser.add_argument("--exact-cache", type=Path,
                        help="keep the float64 rows here (<name>.f64) and reuse them")
    parser.add_argument("--json", type=Path, help="write every figure here")
    parser.add_argument("names", nargs="*")
    args = parser.parse_args()
    torch.use_deterministic_algorithms(True)
    transformers.logging.set_verbosity_error()
    transformers.utils.logging.disable_progress_bar()
    warnings.filterwarnings("ignore")
    names = args.names or [p.parent.name for p in sorted(HERE.glob("*/logits.json"))]
    all_threads = torch.get_num_threads()
    settings = [("eager", all_threads, True), ("sdpa", all_threads, True)] if args.settings else []
    if args.settings == "all":
        settings += [("eager", 1, True), ("eager", all_threads, False), ("sdpa", 1, True)]
    figures = {}
    for name in names:
        meta = json.loads((HERE / name / "logits.json").read_text())
        shape = meta["shape"]
        ref = read_rows(HERE / name / "logits-bf16.f32", shape)
        cached = args.exact_cache / f"{name}.f64" if args.exact_cache else None
        if cached is not None and cached.exists():
            f64 = np.fromfile(cached, dtype="<f8").reshape(shape)
        else:
            f64 = exact(name, meta)
            if cached is not None:
                cached.parent.mkdir(parents=True, exist_ok=True)
                f64.astype("<f8").tofile(cached)
        fig = {"ref_f64": worst(ref, f64)}
        dump = args.llmc / f"{name}.bf16.f32" if args.llmc else None
        for attn, threads, mkldnn in settings:
            try:
                rows = f32_rows(name, meta, attn, threads, mkldnn)
            except ValueError:  # e.g. Gemma2 has no sdpa attention
                continue
            key = f"{attn}/t{threads}/{'mkldnn' if mkldnn else 'nomkldnn'}"
            fig[key + "_f64"] = worst(rows, f64)
            fig[key + "_ref"] = worst(rows, ref)
            if dump is not None and dump.exists():
                fig[key + "_llmc"] = worst(read_rows(dump, shape), rows)
        if args.islands:
            for island in ISLANDS:
                fig["f32_" + island + "_f64"] = worst(exact(name, meta, island=island), f64)
            try:
                fig["f64_sdpa_f64"] = worst(exact(name, meta, attn="sdpa"), f64)
            except ValueError:
                pass
        if dump is not None and dump.exists():
            ours = read_rows(dump, shape)
            fig["llmc_f64"] = worst(ours, f64)
            fig["llmc_ref"] = worst(ours, ref)
        if args.layers:
            layers = layer_errors(name, meta)
            fig["layers"] = layers
            print(name + " relative f32 error per module: " +
                  ", ".join(f"{n} {e:.1e}" for n, e in layers.items()))
        figures[name] = fig
        print(name + ": " + ", ".join(f"{k} {v[0]:.3g} (row {v[1]})" for k, v in fig.items()
                                      if k != "layers"),
              flush=True)
    if args.json:
        args.json.write_text(json.dumps(figures, indent=1) + "\n")


if __name__ == "__main__":
    sys.exit(main())
