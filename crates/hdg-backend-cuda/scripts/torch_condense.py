#!/usr/bin/env python3
"""Batched static condensation in PyTorch (cuSOLVER / cuBLAS) on the element matrices that
condense-bench exported, against condense-bench's own kernels.

Run on the GPU machine after `condense-bench --export DIR`:

    python3 torch_condense.py DIR [--samples 10] [--warmup 2] [--precisions f64,f32]
                                  [--memory-fraction 0.5]

For every DIR/{tri,tet}_k*/ (written by condense-bench: S.f64 (B x n x n, SPD), P.f64
(B x n x nl), C.f64 (the trace-trace block A, B x nl x nl), F.f64 (B x n), our K.f64 and b.f64
for the same B elements, meta.txt) it replicates the batch to the cell count condense-bench
timed (`cells` in meta.txt) and times, with torch.cuda events (median of --samples after
--warmup), the same condensation our kernels do:

    L, info = torch.linalg.cholesky_ex(S)      batched Cholesky, S = L L^T (no host sync)
    Z  = torch.cholesky_solve(P, L)            S^-1 P       (the recovery operator)
    u0 = torch.cholesky_solve(F, L)            S^-1 F       (the recovery load)
    K  = torch.baddbmm(C, P^T, Z, alpha=-1)    C - P^T S^-1 P  (the element trace matrix)
    b  = torch.bmm(P^T, u0)                    P^T S^-1 F      (the element trace load)

in f64 and f32 (TF32 off), and prints cells/s and GFLOP/s with condense-bench's flop count
(`flops_per_element` in meta.txt: hdg_backend_cpu::condense::condensation_flops, the same count
condense-bench prints), next to our median times (meta.txt: the fastest design condense-bench
measured in each precision) and our speed-up. When the replicated batch does not fit in
--memory-fraction of the free memory, it runs as equal chunks, all inside the timed region.

Checks: torch's K and b of the B exported elements (f64 and f32) against ours (K.f64, b.f64),
max |torch - ours| / max |ours|.

Note: PyTorch gets S, P and C pre-formed. Our kernels form them inside their timed region, from
the geometry and the reference tables, which favours PyTorch. The loads F are an input to both
(evaluated on the host).
"""
import argparse
import math
import pathlib
import sys

import numpy as np
import torch


def read_meta(path):
    meta = {}
    for line in path.read_text().splitlines():
        if "=" in line:
            key, value = (s.strip() for s in line.split("=", 1))
            meta[key] = value
    return meta


def load(d, name, shape):
    a = np.fromfile(d / name, dtype="<f8")
    assert a.size == math.prod(shape), (d / name, a.size, shape)
    return torch.from_numpy(a.reshape(shape))


def condense(S, P, C, F):
    """The condensation: returns K, b, Z, u0 (and the Cholesky info)."""
    L, info = torch.linalg.cholesky_ex(S)
    Z = torch.cholesky_solve(P, L)
    u0 = torch.cholesky_solve(F, L)
    Pt = P.transpose(1, 2)
    K = torch.baddbmm(C, Pt, Z, alpha=-1.0)
    b = torch.bmm(Pt, u0)
    return K, b, Z, u0, info


def time_chunks(chunks, inputs, samples, warmup):
    """Median seconds of `chunks` condensations of the replicated chunk `inputs`."""
    for _ in range(warmup):
        for _ in range(chunks):
            out = condense(*inputs)
    torch.cuda.synchronize()
    start, stop = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    times = []
    for _ in range(samples):
        start.record()
        for _ in range(chunks):
            out = condense(*inputs)
        stop.record()
        stop.synchronize()
        times.append(start.elapsed_time(stop) * 1e-3)
    info = out[4]
    if int((info != 0).sum()) != 0:
        print(f"    warning: {int((info != 0).sum())} Cholesky factorisations failed (info != 0)")
    del out
    return float(np.median(times))


def rel(a, b):
    scale = float(b.abs().max())
    err = float((a - b).abs().max())
    return err / scale if scale > 0 else err


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("dir", type=pathlib.Path, help="the --export DIR of condense-bench")
    parser.add_argument("--samples", type=int, default=10)
    parser.add_argument("--warmup", type=int, default=2)
    parser.add_argument("--precisions", default="f64,f32")
    parser.add_argument("--memory-fraction", type=float, default=0.5)
    args = parser.parse_args()

    metas = sorted(args.dir.glob("*_k*/meta.txt"), key=lambda p: (p.parent.name[:3],
                                                               int(p.parent.name.split("_k")[1])))
    if not metas:
        sys.exit(f"no */meta.txt under {args.dir}")
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    dev = torch.device("cuda")
    props = torch.cuda.get_device_properties(dev)
    print(f"device: {props.name}, {props.multi_processor_count} SMs, torch {torch.__version__}, "
          f"CUDA {torch.version.cuda}")
    print("times: median of %d runs after %d warm-ups, torch.cuda events; GFLOP/s with "
          "condense-bench's flop count (meta.txt flops_per_element)" % (args.samples, args.warmup))
    header = (f"{'cell':>4} {'k':>2} {'n':>4} {'nl':>4} {'cells':>8} {'prec':>4} | "
              f"{'torch ms':>10} {'cells/s':>10} {'GFLOP/s':>8} {'chunks':>6} | "
              f"{'ours ms':>9} {'cells/s':>10} {'GFLOP/s':>8} {'design':>12} | "
              f"{'ours/torch':>10} | {'K err':>8} {'b err':>8}")
    print(header)
    summary = []
    for meta_path in metas:
        d = meta_path.parent
        meta = read_meta(meta_path)
        if "batch" not in meta:
            print(f"{d.name}: no exported batch (f64 not run?); skipped")
            continue
        n, nl, B = int(meta["n"]), int(meta["nl"]), int(meta["batch"])
        cells, k, cell = int(meta["cells"]), int(meta["k"]), meta["cell"]
        flops = float(meta["flops_per_element"])
        S = load(d, "S.f64", (B, n, n))
        P = load(d, "P.f64", (B, n, nl))
        C = load(d, "C.f64", (B, nl, nl))
        F = load(d, "F.f64", (B, n, 1))
        K_ours = load(d, "K.f64", (B, nl, nl))
        b_ours = load(d, "b.f64", (B, nl, 1))
        for prec in args.precisions.split(","):
            dtype = torch.float64 if prec == "f64" else torch.float32
            size = torch.finfo(dtype).bits // 8
            # Check on the exported elements themselves.
            batch = [t.to(dev, dtype) for t in (S, P, C, F)]
            K, b, _, _, info = condense(*batch)
            k_err = rel(K.double().cpu(), K_ours)
            b_err = rel(b.double().cpu(), b_ours)
            del K, b, info
            # The replicated batch, in equal chunks that fit.
            per_cell = size * (2 * n * n + 2 * n * nl + 2 * nl * nl + 3 * n + nl) * 1.3
            free, _ = torch.cuda.mem_get_info()
            fit = max(1, int(args.memory_fraction * free / per_cell))
            chunks = math.ceil(cells / fit)
            chunk = math.ceil(cells / chunks)
            reps = math.ceil(chunk / B)
            inputs = [t.repeat(reps, 1, 1)[:chunk].contiguous() for t in batch]
            del batch
            t = time_chunks(chunks, inputs, args.samples, args.warmup)
            done = chunks * chunk
            del inputs
            torch.cuda.empty_cache()
            torch_rate = done / t
            ours_t = float(meta.get(f"ours_{prec}_seconds", "nan"))
            ours_rate = cells / ours_t
            design = meta.get(f"ours_{prec}_design", "-")
            speedup = ours_rate / torch_rate
            print(f"{cell:>4} {k:>2} {n:>4} {nl:>4} {cells:>8} {prec:>4} | "
                  f"{t * 1e3:>10.3f} {torch_rate:>10.3e} {flops * torch_rate * 1e-9:>8.1f} "
                  f"{chunks:>6} | {ours_t * 1e3:>9.3f} {ours_rate:>10.3e} "
                  f"{flops * ours_rate * 1e-9:>8.1f} {design:>12} | {speedup:>9.2f}x | "
                  f"{k_err:>8.1e} {b_err:>8.1e}", flush=True)
            summary.append((cell, k, prec, speedup))
    print("ours/torch: our cells/s over PyTorch's (> 1: ours faster; the issue's target is 2).")
    print("PyTorch is given S, P, C pre-formed; our timed region forms them from geometry and "
          "reference tables.")
    if summary:
        worst = min(summary, key=lambda s: s[3])
        print(f"smallest speed-up: {worst[0]} k = {worst[1]} {worst[2]}: {worst[3]:.2f}x")


if __name__ == "__main__":
    main()
