#!/usr/bin/env python3
"""Device benchmark of the generated constant-operator kernels (issue 21).

Reads the manifest written by `operator-kernels --out DIR` (hdg-bench) and, for each
operator, precision (f32, f64) and panel width n, times with CUDA events the device time of
one launch (warm-up; then --reps launches queued behind a spin kernel, so that the host's
launch cost is not counted; time / reps, the median of 5 such rounds):

  (a) our generated kernels (hdg_backend_cuda::codegen), every variant, the automatic choice
      (codegen::choose; on panels narrower than the device's resident threads, codegen::
      wide_panel, codegen::choose_narrow's kernel where the manifest marks one
      "chosen_narrow") marked; where the manifest says "gemm" (codegen::gemm_wins: the
      backend applies the operator with cuBLAS once it is loaded), the automatic choice is
      the cuBLAS timing of (b);
  (b) cuBLAS through cupy.matmul(A, B) (A on the device in the same precision, TF32 off), or
      for a manifest of beta = 1 kernels (`operator-kernels --beta 1`: C = A B + C) its GEMM
      with beta = 1 through cupy.cublas.gemm;
  (c) GiMMiK 4.0's CUDA kernels for the same matrix: gimmik.CUDAMatMul(A, beta, n=n,
      ldb=n, ldc=n).kernels(dtype) yields every variant it offers (cstream, bstream,
      bstream-msplit, cstream-ksplit, and float2 forms in f32); each is timed, the best kept.
      GiMMiK 4.0 declines dense operators with many distinct values (its _unrolled_viable:
      more than 28 distinct |a| and density above 0.15): such cases are recorded as declined
      and, so that the comparison exists, its kernels are generated anyway ("forced").

  (d) with a manifest of `operator-kernels --fixed-strides N,..`: our kernels of the automatic
      choice with the leading dimensions compiled in ("fixed_n": N; what the backend compiles
      at run time, DeviceOperator::compile_for_panel), timed on panels of n = N only; the
      automatic choice with them ("compiled auto") is reported beside the one without.

Every result is checked, after one launch from a known C, against a NumPy f64 product on a
sample of columns (relative to |A| |B| (+ |C|): 1e-12 in f64, 1e-5 in f32), then timed (with
beta = 1 the timed launches keep adding to C). Reported per case: time, useful GFLOP/s
(2 nnz n / t), effective bandwidth ((k_used + m) n bytes / t, with beta = 1 (k_used + 2 m) n:
C is read too) as a fraction of the device-to-device copy
bandwidth measured in the same run (a copy moving the same number of bytes, read plus
written), and the winner. Prints a Markdown table and writes the results as JSON (rewritten
after every case, so a run cut short keeps what it measured).

    python3 operator_bench.py MANIFEST_DIR --out results.json [--n 100000 1000000]
        [--only SUBSTRING ...] [--precisions f64 f32] [--reps 20] [--warmup 5]
        [--gimmik-variants cstream bstream ...]   # the others not compiled (large operators)
    python3 operator_bench.py MANIFEST_DIR --out results.json --fake   # no GPU: NumPy stands in
    python3 operator_bench.py MANIFEST_DIR --out bits.json --bitwise   # device bits = CPU bits
"""
import argparse
import json
import os
import statistics
import sys
import time
from pathlib import Path

import numpy as np

os.environ.setdefault('CUPY_TF32', '0')

DTYPES = {'f32': np.float32, 'f64': np.float64}

# Holds the stream for `ns` nanoseconds of the device's clock (CupyDevice.time_ms).
SPIN = r'''
extern "C" __global__ void spin(unsigned long long ns) {
    unsigned long long t0, t;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t0));
    do { asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t)); } while (t - t0 < ns);
}'''
TOL = {'f32': 1e-5, 'f64': 1e-12}


class CupyDevice:
    """CuPy: kernels through RawKernel, timing with CUDA events."""

    def __init__(self):
        import cupy
        self.cp = cupy
        props = cupy.cuda.runtime.getDeviceProperties(cupy.cuda.runtime.getDevice())
        self.name = props['name'].decode() if isinstance(props['name'], bytes) else props['name']
        # What the backend's wide_panel compares the panel width with.
        self.resident_threads = props['multiProcessorCount'] * props['maxThreadsPerMultiProcessor']
        self.spin = cupy.RawKernel(SPIN, 'spin')

    def asarray(self, a):
        return self.cp.asarray(a)

    def empty(self, shape, dtype):
        return self.cp.empty(shape, dtype=dtype)

    def random(self, shape, dtype, seed):
        rng = self.cp.random.default_rng(seed)
        return (rng.random(shape, dtype=np.float64) * 2 - 1).astype(dtype)

    def host(self, a):
        return self.cp.asnumpy(a)

    def matmul(self, a, b, out, beta=0):
        if beta == 0:
            return self.cp.matmul(a, b, out=out)
        from cupy import cublas
        return cublas.gemm('N', 'N', a, b, out=out, alpha=1.0, beta=float(beta))

    def copy(self, src, dst):
        self.cp.copyto(dst, src)

    def compile(self, source, name):
        kernel = self.cp.RawKernel(source, name, options=('--std=c++17',))
        kernel.compile()
        return lambda grid, block, args, _k=kernel: _k(tuple(grid), tuple(block), args)

    def time_ms(self, fn, warmup, reps, rounds=5):
        """Device time of one launch: a spin kernel holds the stream while `reps` launches queue
        behind it, then events around them, time / reps; the median of `rounds`. Events around
        a single launch would also count the host's launch cost wherever it exceeds the
        kernel's (CuPy's argument packing: 5-10 us, more for more arguments), which at n = 1e5
        is most of the time of the small operators."""
        cp = self.cp
        for _ in range(warmup):
            fn()
        start, end = cp.cuda.Event(), cp.cuda.Event()
        times = []
        for _ in range(rounds):
            # Long enough for the host to queue every launch (reps x at most ~50 us).
            self.spin((1,), (1,), (np.uint64(max(2_000_000, 50_000 * reps)),))
            start.record()
            for _ in range(reps):
                fn()
            end.record()
            end.synchronize()
            times.append(cp.cuda.get_elapsed_time(start, end) / reps)
        return statistics.median(times)


class FakeDevice:
    """NumPy in place of CuPy, to check the script's logic without a GPU: a "kernel" computes
    A B with NumPy (so the checks pass); times are host times and mean nothing."""

    name = 'fake (NumPy, no GPU)'
    resident_threads = 270_336

    def __init__(self):
        self.ops = {}
        self.beta = 0

    def asarray(self, a):
        return np.array(a)

    def empty(self, shape, dtype):
        return np.empty(shape, dtype=dtype)

    def random(self, shape, dtype, seed):
        return (np.random.default_rng(seed).random(shape) * 2 - 1).astype(dtype)

    def host(self, a):
        return np.asarray(a)

    def matmul(self, a, b, out, beta=0):
        # Not beta * out with beta = 0: out starts as NaN before a checked launch.
        out[...] = a @ b + out if beta else a @ b

    def copy(self, src, dst):
        np.copyto(dst, src)

    def compile(self, source, name):
        if name not in source or '__global__' not in source:
            raise RuntimeError(f'kernel {name} not in its source')
        a, beta = self.current_a, self.beta

        def launch(grid, block, args):
            b, c = [x for x in args if isinstance(x, np.ndarray)]
            c[...] = a.astype(c.dtype) @ b + c if beta else a.astype(c.dtype) @ b
        return launch

    def time_ms(self, fn, warmup, reps):
        fn()
        t = time.perf_counter()
        fn()
        return (time.perf_counter() - t) * 1e3


def gimmik_kernels(a, dtype, n, beta):
    """(declined, [(variant name, source, meta)]) from GiMMiK 4.0 for n and beta baked in."""
    import gimmik

    class Forced(gimmik.CUDAMatMul):
        def _unrolled_viable(self):
            return True

    aligne = 2 if dtype == np.float32 and n % 2 == 0 else None
    declined = not gimmik.CUDAMatMul(a, beta=float(beta), aligne=aligne, n=n, ldb=n, ldc=n
                                     )._unrolled_viable()
    mm = Forced(a, beta=float(beta), aligne=aligne, n=n, ldb=n, ldc=n)
    out = []
    for src, meta in mm.kernels(dtype, kname='gimmik_mm'):
        # GiMMiK's kernels are C++ (mangled) functions: give RawKernel an extern "C" name.
        src = src.replace('__global__ void', 'extern "C" __global__ void', 1)
        variant = meta['tplname'] + (f"-w{meta['width']}" if meta.get('width', 1) > 1 else '')
        out.append((variant, src, meta))
    return declined, out


def check(c_dev, dev, a64, b_host64, c0_host64, cols, tol):
    """Max error over the sampled columns relative to |A| |B| + |C0| (C0: the C the launch
    started from with beta = 1, else None); and whether it is within tol."""
    c = dev.host(c_dev)[:, cols].astype(np.float64)
    ref = a64 @ b_host64
    scale = np.abs(a64) @ np.abs(b_host64)
    if c0_host64 is not None:
        ref, scale = ref + c0_host64, scale + np.abs(c0_host64)
    err = float(np.max(np.abs(c - ref) / np.maximum(scale, np.finfo(np.float64).tiny)))
    return err, err <= tol


def main():
    ap = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    ap.add_argument('manifest_dir', type=Path)
    ap.add_argument('--out', type=Path, required=True, help='results JSON')
    ap.add_argument('--n', type=int, nargs='+', default=[100_000, 1_000_000])
    ap.add_argument('--precisions', nargs='+', default=['f64', 'f32'], choices=list(DTYPES))
    ap.add_argument('--only', nargs='+', default=None, help='operator name substrings')
    ap.add_argument('--reps', type=int, default=20)
    ap.add_argument('--warmup', type=int, default=5)
    ap.add_argument('--no-gimmik', action='store_true')
    ap.add_argument('--gimmik-variants', nargs='+', default=None,
                    help="time only these of GiMMiK's variants (e.g. cstream bstream-msplit "
                         "cstream-w2): a forced variant of a large operator takes minutes of NVRTC")
    ap.add_argument('--fake', action='store_true', help='NumPy in place of CuPy (no GPU)')
    ap.add_argument('--bitwise', action='store_true',
                    help='only run every kernel on its checks/ panel and compare the bits with '
                         'the CPU result stored there (no timing)')
    args = ap.parse_args()
    if args.bitwise:
        return bitwise(args)

    manifest = json.loads((args.manifest_dir / 'manifest.json').read_text())
    beta = manifest.get('beta', 0)
    dev = FakeDevice() if args.fake else CupyDevice()
    dev.beta = beta
    results = {'device': dev.name, 'n': args.n, 'reps': args.reps, 'warmup': args.warmup,
               'beta': beta, 'cases': []}
    copy_cache = {}
    rows = []

    def copy_bandwidth(nbytes):
        # A copy of nbytes / 2 bytes moves nbytes (read + written), like the kernel.
        if nbytes not in copy_cache:
            half = max(nbytes // 16, 1)
            src = dev.empty((half,), np.float64)
            dst = dev.empty((half,), np.float64)
            t = dev.time_ms(lambda: dev.copy(src, dst), args.warmup, args.reps)
            copy_cache[nbytes] = 2 * half * 8 / (t * 1e-3)
            del src, dst
        return copy_cache[nbytes]

    ops = manifest['operators']
    if args.only:
        ops = [o for o in ops if any(s in o['name'] for s in args.only)]
    for op in ops:
        data = json.loads((args.manifest_dir / op['file']).read_text())
        m, k = data['m'], data['k']
        a64 = np.array(data['values'], dtype=np.float64).reshape(m, k)
        for prec in args.precisions:
            dtype = DTYPES[prec]
            a = a64.astype(dtype)
            nnz = int(np.count_nonzero(a))
            k_used = int(np.count_nonzero(np.any(a != 0, axis=0)))
            dev.current_a = a
            ours = []
            for kern in op['kernels']:
                if kern['precision'] != prec:
                    continue
                src = (args.manifest_dir / kern['file']).read_text()
                ours.append((kern, dev.compile(src, kern['name'])))
            a_dev = dev.asarray(a)
            for n in args.n:
                case = {'operator': op['name'], 'precision': prec, 'n': n, 'm': m, 'k': k,
                        'nnz': nnz, 'k_used': k_used, 'beta': beta, 'timings': []}
                b = dev.random((k, n), dtype, seed=n + k)
                c = dev.empty((m, n), dtype)
                cols = np.random.default_rng(0).choice(n, size=min(n, 64), replace=False)
                b_host64 = dev.host(b)[:, cols].astype(np.float64)
                c0 = dev.random((m, n), dtype, seed=n + m + 1) if beta else None
                c0_host64 = dev.host(c0)[:, cols].astype(np.float64) if beta else None
                c_rows = 2 * m if beta else m  # with beta = 1, C is read and written
                bytes_moved = (k_used + c_rows) * n * np.dtype(dtype).itemsize
                bw_copy = copy_bandwidth(bytes_moved)
                case['copy_bandwidth_gbs'] = bw_copy / 1e9

                def checked_then_timed(fn):
                    """One launch from a known C, checked; then the timing."""
                    if beta:
                        dev.copy(c0, c)
                    else:
                        c.fill(np.nan)
                    fn()
                    err, ok = check(c, dev, a64, b_host64, c0_host64, cols, TOL[prec])
                    return dev.time_ms(fn, args.warmup, args.reps), err, ok

                def record(kind, variant, t_ms, err, ok, **extra):
                    t = t_ms * 1e-3
                    case['timings'].append({
                        'kind': kind, 'variant': variant, 'ms': t_ms,
                        'gflops': 2 * nnz * n / t / 1e9,
                        'bandwidth_fraction': bytes_moved / t / bw_copy,
                        'max_rel_error': err, 'ok': ok, **extra})

                # The backend's choice (codegen::wide_panel): on panels narrower than the
                # device's resident threads choose_narrow's kernel where it differs.
                narrow = (n < dev.resident_threads
                          and any(kern.get('chosen_narrow') for kern, _ in ours))
                for kern, launch in ours:
                    if kern.get('fixed_n') not in (None, n):
                        continue
                    grid = (-(-n // (kern['block'][0] * kern.get('columns_per_thread', 1))), kern['grid_y'])
                    block = (kern['block'][0], kern['block'][1])
                    kargs = (np.int32(n), b, np.int32(n), c, np.int32(n))

                    def fn(launch=launch, grid=grid, block=block, kargs=kargs):
                        launch(grid, block, kargs)
                    t_ms, err, ok = checked_then_timed(fn)
                    chosen = kern.get('chosen_narrow') if narrow else kern['chosen']
                    record('compiled' if kern.get('fixed_n') else 'ours', kern['variant'],
                           t_ms, err, ok, chosen=bool(chosen), gemm=kern.get('gemm', False),
                           narrow_panel=n < dev.resident_threads,
                           beats_gemm_narrow=kern.get('compiled_beats_gemm_narrow', False))

                t_ms, err, ok = checked_then_timed(lambda: dev.matmul(a_dev, b, c, beta))
                record('cublas', 'cupy.cublas.gemm' if beta else 'cupy.matmul', t_ms, err, ok)

                if not args.no_gimmik:
                    declined, kernels = gimmik_kernels(a, dtype, n, beta)
                    case['gimmik_declined'] = declined
                    if args.gimmik_variants:
                        kernels = [kn for kn in kernels if kn[0] in args.gimmik_variants]
                        case['gimmik_variants'] = args.gimmik_variants
                    for variant, src, meta in kernels:
                        try:
                            launch = dev.compile(src, 'gimmik_mm')
                        except Exception as e:  # a variant NVRTC refuses is reported, not fatal
                            case['timings'].append({'kind': 'gimmik', 'variant': variant,
                                                    'error': str(e)[:500]})
                            continue
                        grid, block = meta['grid'], meta['block']
                        t_ms, err, ok = checked_then_timed(
                            lambda: launch(grid, block, (b, c)))
                        record('gimmik', variant, t_ms, err, ok, forced=declined)

                del b, c, c0
                summarize(case)
                results['cases'].append(case)
                rows.append(case)
                args.out.write_text(json.dumps(results, indent=1))
                print(row_line(case), flush=True)
    print()
    print(table(rows))


def bitwise(args):
    """Every kernel of the manifest on its operator's check panel (written by operator-kernels
    with the CPU panel loop's result): the device's C must equal the CPU's to the bit."""
    import cupy as cp
    manifest = json.loads((args.manifest_dir / 'manifest.json').read_text())
    ops = manifest['operators']
    if args.only:
        ops = [o for o in ops if any(s in o['name'] for s in args.only)]
    report = {'kernels': 0, 'mismatched': []}
    for op in ops:
        m, k = op['m'], op['k']
        for check in op['checks']:
            dtype = DTYPES[check['precision']]
            n, ld = check['n'], check['ld']
            raw = np.fromfile(args.manifest_dir / check['file'], dtype=dtype)
            # B, with beta = 1 the C the kernel starts from, then the C it must give.
            b_host, c_want = raw[:k * ld], raw[-m * ld:]
            beta1 = check.get('beta', 0) == 1
            c_start = raw[k * ld:(k + m) * ld] if beta1 else np.zeros(m * ld, dtype)
            assert raw.size == (k + (2 if beta1 else 1) * m) * ld, check['file']
            b = cp.asarray(b_host)
            for kern in op['kernels']:
                # Kernels compiled for another panel's strides (fixed_n) cannot run on this one.
                if kern['precision'] != check['precision'] or kern.get('fixed_n'):
                    continue
                src = (args.manifest_dir / kern['file']).read_text()
                fn = cp.RawKernel(src, kern['name'], options=('--std=c++17',))
                c = cp.asarray(c_start)
                grid = (-(-n // (kern['block'][0] * kern.get('columns_per_thread', 1))),
                        kern['grid_y'])
                fn(grid, tuple(kern['block']), (np.int32(n), b, np.int32(ld), c, np.int32(ld)))
                got = cp.asnumpy(c)
                bits = np.uint64 if dtype == np.float64 else np.uint32
                bad = int(np.count_nonzero(got.view(bits) != c_want.view(bits)))
                report['kernels'] += 1
                if bad:
                    report['mismatched'].append({'kernel': kern['name'], 'values': bad})
        # Rewritten after every operator: a run cut short keeps what it checked.
        args.out.write_text(json.dumps(report, indent=1))
        print(f"{op['name']}: {report['kernels']} kernels so far, "
              f"{len(report['mismatched'])} differ", flush=True)
    args.out.write_text(json.dumps(report, indent=1))
    print(f"bitwise: {report['kernels']} kernels, {len(report['mismatched'])} differ from the "
          f"CPU: {report['mismatched'][:10]}")


def summarize(case):
    valid = [t for t in case['timings'] if 'ms' in t and t['ok']]
    best = {}
    for t in valid:
        if t['kind'] not in best or t['ms'] < best[t['kind']]['ms']:
            best[t['kind']] = t
    chosen = [t for t in valid if t.get('chosen') and t['kind'] == 'ours']
    case['auto'] = chosen[0] if chosen else None
    # With kernels compiled for the panel (DeviceOperator::compile_for_panel): they replace the
    # built-in ones, and cuBLAS only on narrow panels where codegen::compiled_beats_gemm says so.
    compiled = [t for t in valid if t.get('chosen') and t['kind'] == 'compiled']
    case['auto_compiled'] = compiled[0] if compiled else None
    if compiled and compiled[0].get('gemm') and not (compiled[0].get('narrow_panel')
                                                     and compiled[0].get('beats_gemm_narrow')):
        cublas = [t for t in valid if t['kind'] == 'cublas']
        case['auto_compiled'] = dict(cublas[0], variant='cuBLAS') if cublas else None
    # Where codegen::gemm_wins sends the operator to cuBLAS (the backend's choice once cuBLAS
    # is loaded), the automatic choice is cuBLAS's GEMM: the same call as cupy.matmul's.
    if case['auto'] and case['auto'].get('gemm'):
        cublas = [t for t in valid if t['kind'] == 'cublas']
        case['auto'] = dict(cublas[0], variant='cuBLAS') if cublas else None
    case['best'] = best
    case['winner'] = min(best.values(), key=lambda t: t['ms'])['kind'] if best else None
    others = [best[k]['ms'] for k in ('cublas', 'gimmik') if k in best]
    case['auto_vs_best_other'] = (case['auto']['ms'] / min(others)
                                  if case['auto'] and others else None)
    case['compiled_vs_best_other'] = (case['auto_compiled']['ms'] / min(others)
                                      if case['auto_compiled'] and others else None)
    case['failed'] = [f"{t['kind']}:{t['variant']}" for t in case['timings']
                      if 'ms' in t and not t['ok']]


HEADER = ('| operator | prec | n | m x k | nnz | auto (variant) ms | GFLOP/s | BW/copy | '
          'best ours ms | cuBLAS ms | GiMMiK best ms | winner | auto / best other | '
          'compiled auto (variant) ms | compiled / best other |')


def fmt(t):
    return f"{t['ms']:.4f}" if t else '-'


def row_line(case):
    auto, best = case['auto'], case['best']
    head = (f"| {case['operator']} | {case['precision']} | {case['n']} | "
            f"{case['m']} x {case['k']} | {case['nnz']} | ")
    if not auto:
        return head + 'failed: ' + ', '.join(case['failed']) + ' |' + ' |' * 10
    g = best.get('gimmik')
    declined = ', declined' if case.get('gimmik_declined') else ''
    gtxt = f"{g['ms']:.4f} ({g['variant']}{declined})" if g else (declined[2:] or '-')
    ratio = case['auto_vs_best_other']
    rtxt = f'{ratio:.2f}' if ratio is not None else '-'
    comp = case.get('auto_compiled')
    ctxt = f"{fmt(comp)} ({comp['variant']})" if comp else '-'
    cratio = case.get('compiled_vs_best_other')
    crtxt = f'{cratio:.2f}' if cratio is not None else '-'
    return head + (f"{fmt(auto)} ({auto['variant']}) | {auto['gflops']:.1f} | "
                   f"{auto['bandwidth_fraction']:.2f} | {fmt(best.get('ours'))} | "
                   f"{fmt(best.get('cublas'))} | {gtxt} | {case['winner']} | {rtxt} | "
                   f"{ctxt} | {crtxt} |")


def table(rows):
    sep = '|' + '---|' * (HEADER.count('|') - 1)
    return '\n'.join([HEADER, sep] + [row_line(r) for r in rows])


if __name__ == '__main__':
    sys.exit(main())
