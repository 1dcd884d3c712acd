#!/usr/bin/env python3
"""cuSPARSE SpMV (CuPy) on the very matrices gpu-bench timed with the DBF kernel.

Run on the GPU machine after `gpu-bench --export DIR`:

    python3 cusparse_spmv.py DIR [--samples 50]

For every DIR/k*/ (written by gpu-bench: indptr.i64, indices.i32, values.f64, meta.txt) it
loads the CSR matrix, times y = A @ x with cupyx.scipy.sparse.csr_matrix (cuSPARSE SpMV) in
f64 and f32 with CUDA events (median of --samples single products after a warm-up, x
alternating between two vectors), and prints GB/s with the byte count of gpu-bench
(`spmv_bytes_*` in meta.txt: active DBF blocks + block-column table + x + y), next to the DBF
kernel's numbers from the same meta.txt, and with the bytes CSR itself moves (values,
column indices, row pointers, x, y) for reference.
"""
import argparse
import pathlib
import sys

import numpy as np
import cupy as cp
import cupyx.scipy.sparse as cps


def read_meta(path):
    meta = {}
    for line in path.read_text().splitlines():
        if "=" in line:
            key, value = (s.strip() for s in line.split("=", 1))
            meta[key] = value
    return meta


def time_spmv(a, xs, samples, warmup=5):
    """Median seconds of a single a @ x (x alternating), CUDA events around each product."""
    y = None
    for i in range(warmup):
        y = a @ xs[i % 2]
    cp.cuda.Stream.null.synchronize()
    start, stop = cp.cuda.Event(), cp.cuda.Event()
    times = []
    for i in range(samples):
        start.record()
        y = a @ xs[i % 2]
        stop.record()
        stop.synchronize()
        times.append(cp.cuda.get_elapsed_time(start, stop) * 1e-3)
    del y
    return float(np.median(times))


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("dir", type=pathlib.Path, help="the --export DIR of gpu-bench")
    parser.add_argument("--samples", type=int, default=50)
    args = parser.parse_args()

    dirs = sorted(args.dir.glob("k*/meta.txt"), key=lambda p: int(p.parent.name[1:]))
    if not dirs:
        sys.exit(f"no k*/meta.txt under {args.dir}")
    props = cp.cuda.runtime.getDeviceProperties(cp.cuda.Device().id)
    name = props["name"]
    name = name.decode() if isinstance(name, bytes) else name
    print(f"device: {name}, CuPy {cp.__version__}, "
          f"CUDA runtime {cp.cuda.runtime.runtimeGetVersion()}")
    header = (f"{'k':>2} {'unknowns':>11} {'nnz':>12} | {'prec':>4} {'cuSPARSE us':>11} "
              f"{'GB/s':>8} {'CSR GB/s':>8} {'err':>9} | {'DBF us':>9} {'DBF GB/s':>8} "
              f"{'DBF/cuSPARSE':>12}")
    print(header)
    for meta_path in dirs:
        d = meta_path.parent
        meta = read_meta(meta_path)
        n, nnz, k = int(meta["n"]), int(meta["nnz"]), int(meta["k"])
        indptr = np.fromfile(d / "indptr.i64", dtype="<i8")
        indices = np.fromfile(d / "indices.i32", dtype="<i4")
        values = np.fromfile(d / "values.f64", dtype="<f8")
        assert indptr.size == n + 1 and indices.size == nnz and values.size == nnz, d
        if nnz >= 2**31:
            print(f"k = {k}: nnz = {nnz} does not fit 32-bit CSR indices; skipped")
            continue
        a64 = cps.csr_matrix(
            (cp.asarray(values), cp.asarray(indices), cp.asarray(indptr.astype(np.int32))),
            shape=(n, n),
        )
        del indptr, indices, values
        i = np.arange(n, dtype=np.float64)
        x_host = [np.sin(i * 0.618), np.cos(i * 0.377)]
        for prec, dtype in (("f64", cp.float64), ("f32", cp.float32)):
            a = a64 if dtype == cp.float64 else a64.astype(cp.float32)
            xs = [cp.asarray(x, dtype=dtype) for x in x_host]
            t = time_spmv(a, xs, args.samples)
            # Check against the f64 product.
            ref = a64 @ cp.asarray(x_host[0])
            y = (a @ xs[0]).astype(cp.float64)
            err = float(cp.abs(y - ref).max() / cp.abs(ref).max())
            size = np.dtype(dtype).itemsize
            ours = int(meta[f"spmv_bytes_{prec}"])
            csr_bytes = nnz * (size + 4) + (n + 1) * 4 + 2 * n * size
            t_dbf = float(meta[f"dbf_{prec}_seconds"])
            print(f"{k:>2} {n:>11} {nnz:>12} | {prec:>4} {t * 1e6:>11.1f} {ours / t * 1e-9:>8.1f} "
                  f"{csr_bytes / t * 1e-9:>8.1f} {err:>9.1e} | {t_dbf * 1e6:>9.1f} "
                  f"{ours / t_dbf * 1e-9:>8.1f} {t / t_dbf:>11.2f}x")
            del a, xs, ref, y
        del a64
        cp.get_default_memory_pool().free_all_blocks()
    print("GB/s: gpu-bench's bytes per SpMV (active DBF blocks + block-column table + x + y); "
          "CSR GB/s: values + int32 indices + row pointers + x + y.")
    copy = float(read_meta(dirs[0])["copy_bytes_per_second"])
    print(f"device-to-device copy measured by gpu-bench: {copy * 1e-9:.1f} GB/s")


if __name__ == "__main__":
    main()
