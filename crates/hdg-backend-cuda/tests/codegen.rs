//! The generated constant-operator kernels (`hdg_backend_cuda::codegen`), checked on the host
//! without a GPU: the CUDA source is compiled by g++ as C++ with a prelude that emulates the
//! launch grid (every block and thread in turn), run on random panels, and compared with
//! products computed here in plain loops. g++ is required (CI has it): the tests fail without.
//!
//! What is checked:
//! - every kernel (f32 and f64, beta 0 and 1, both variants, n = 1000 and 37, i.e. not a
//!   multiple of the block) against the f64 product, to 1e-13 (f64) and 1e-5 (f32) relative to
//!   the sum of the magnitudes, and to the bit against the documented operation sequence
//!   (first product or old C, then fma in column order) evaluated here with `mul_add`; columns
//!   past n and rows past k of B are left alone, zero rows write exactly 0 or leave C;
//! - the structure of the source: loads of B = used rows (per chunk), one literal per nonzero;
//! - the hexadecimal literals: parsed back here and by g++ to the exact bits;
//! - determinism: the same matrix gives the same source, two runs the same bits;
//! - the CPU backend's panel loop (`hdg_backend_cpu::constant_operator`) gives the same bits as
//!   every generated kernel on every panel above.
use std::fmt::Write as _;
use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use hdg_backend_cpu::constant_operator::{PanelOperator, PanelReal};
use hdg_backend_cuda::codegen::{
    choose, generate, hex_f32, hex_f64, Beta, ConstOperator, GeneratedKernel, Precision, Variant,
    BLOCK_X,
};
use hdg_core::{ElementTables, ReferenceTetrahedron, ReferenceTriangle};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

/// A scratch folder of this test binary's own.
fn scratch(tag: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("hdg-codegen-{}-{tag}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

fn gxx(args: &[&str], dir: &Path) {
    let out = Command::new("g++").args(args).current_dir(dir).output().unwrap_or_else(|e| {
        panic!("g++ is needed to check the generated kernels on the host (CI has it): {e}")
    });
    assert!(out.status.success(), "g++ failed:\n{}", String::from_utf8_lossy(&out.stderr));
}

const PRELUDE: &str = r#"
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>
#include <unistd.h>
struct Dim3 { unsigned x, y, z; };
static Dim3 threadIdx, blockIdx, blockDim, gridDim;
#define __global__
#define __launch_bounds__(x)
using std::fma;
using std::fmaf;
struct float2 { float x, y; };
struct double2 { double x, y; };
"#;

/// Compiles all kernels into one emulator. Protocol on stdin: i32 kernel index, n, ldb, ldc,
/// then B (k * ldb values) and C (m * ldc values) in the kernel's precision; stdout: C.
fn build_emulator(kernels: &[GeneratedKernel], tag: &str) -> PathBuf {
    let dir = scratch(tag);
    let mut src = String::from(PRELUDE);
    for kernel in kernels {
        src.push_str(&kernel.source);
    }
    src.push_str("typedef void (*Launch)(int, const void*, int, void*, int);\n");
    for (i, kernel) in kernels.iter().enumerate() {
        let t = if kernel.precision == Precision::F64 { "double" } else { "float" };
        let _ = writeln!(
            src,
            "static void run{i}(int n, const void* b, int ldb, void* c, int ldc) {{\n\
             blockDim = Dim3{{{bx}, {by}, 1}}; gridDim = Dim3{{(unsigned)((n + {w} - 1) / {w}), {gy}, 1}};\n\
             for (unsigned y = 0; y < gridDim.y; ++y) for (unsigned x = 0; x < gridDim.x; ++x)\n\
             for (unsigned ty = 0; ty < blockDim.y; ++ty) for (unsigned tx = 0; tx < blockDim.x; ++tx) {{\n\
             blockIdx = Dim3{{x, y, 0}}; threadIdx = Dim3{{tx, ty, 0}};\n\
             {name}(n, (const {t}*)b, ldb, ({t}*)c, ldc); }} }}",
            bx = kernel.block.0,
            by = kernel.block.1,
            w = kernel.block.0 * kernel.columns_per_thread,
            gy = kernel.grid_y,
            name = kernel.name,
        );
    }
    src.push_str("static const Launch launches[] = {");
    for i in 0..kernels.len() {
        let _ = write!(src, "run{i}, ");
    }
    src.push_str("};\nstatic const int shapes[][3] = {");
    for kernel in kernels {
        let size = if kernel.precision == Precision::F64 { 8 } else { 4 };
        let _ = write!(src, "{{{}, {}, {size}}}, ", kernel.m, kernel.k);
    }
    src.push_str(
        r#"};
static void read_all(void* p, size_t bytes) {
    if (fread(p, 1, bytes, stdin) != bytes) { fprintf(stderr, "short input\n"); exit(2); }
}
int main() {
    int head[4];
    read_all(head, sizeof head);
    const int i = head[0], n = head[1], ldb = head[2], ldc = head[3];
    const size_t m = shapes[i][0], k = shapes[i][1], size = shapes[i][2];
    std::vector<unsigned char> b(k * ldb * size), c(m * ldc * size);
    read_all(b.data(), b.size());
    read_all(c.data(), c.size());
    launches[i](n, b.data(), ldb, c.data(), ldc);
    fwrite(c.data(), 1, c.size(), stdout);
    return 0;
}
"#,
    );
    std::fs::write(dir.join("emulate.cpp"), src).unwrap();
    gxx(
        &[
            "-std=c++17",
            "-O1",
            "-ffp-contract=off",
            "-fno-strict-aliasing",
            "emulate.cpp",
            "-o",
            "emulate",
        ],
        &dir,
    );
    dir.join("emulate")
}

/// Runs kernel `index` of the emulator on B and C given as f64 (converted to the kernel's
/// precision), returns C as f64.
fn run(
    exe: &Path,
    index: usize,
    kernel: &GeneratedKernel,
    n: usize,
    (b, ldb): (&[f64], usize),
    (c, ldc): (&[f64], usize),
) -> Vec<f64> {
    let mut input = Vec::new();
    for v in [index, n, ldb, ldc] {
        input.extend_from_slice(&(v as i32).to_le_bytes());
    }
    for &v in b.iter().chain(c) {
        match kernel.precision {
            Precision::F64 => input.extend_from_slice(&v.to_le_bytes()),
            Precision::F32 => input.extend_from_slice(&(v as f32).to_le_bytes()),
        }
    }
    let mut child = Command::new(exe).stdin(Stdio::piped()).stdout(Stdio::piped()).spawn().unwrap();
    child.stdin.take().unwrap().write_all(&input).unwrap();
    let out = child.wait_with_output().unwrap();
    assert!(out.status.success(), "emulator failed on {}", kernel.name);
    match kernel.precision {
        Precision::F64 => {
            out.stdout.chunks_exact(8).map(|c| f64::from_le_bytes(c.try_into().unwrap())).collect()
        }
        Precision::F32 => out
            .stdout
            .chunks_exact(4)
            .map(|c| f64::from(f32::from_le_bytes(c.try_into().unwrap())))
            .collect(),
    }
}

fn random_matrix(rng: &mut StdRng, m: usize, k: usize, zero_fraction: f64) -> Vec<f64> {
    (0..m * k)
        .map(|_| if rng.gen::<f64>() < zero_fraction { 0.0 } else { rng.gen_range(-2.0..2.0) })
        .collect()
}

/// The test operators: random ones and the pipeline's real ones.
fn operators() -> Vec<ConstOperator> {
    let mut rng = StdRng::seed_from_u64(21);
    let mut ops = vec![
        ConstOperator::new("dense", 7, 5, random_matrix(&mut rng, 7, 5, 0.0)).unwrap(),
        ConstOperator::new("half-zero", 19, 9, random_matrix(&mut rng, 19, 9, 0.5)).unwrap(),
    ];
    // A zero row (2) and a zero column (3).
    let mut z = random_matrix(&mut rng, 6, 5, 0.0);
    for j in 0..5 {
        z[2 * 5 + j] = 0.0;
    }
    for i in 0..6 {
        z[i * 5 + 3] = if i == 4 { -0.0 } else { 0.0 };
    }
    ops.push(ConstOperator::new("zero-row-col", 6, 5, z).unwrap());

    for k in [1, 3] {
        let t = ElementTables::<f64>::new(
            &ReferenceTriangle::new(k).unwrap(),
            &ReferenceTriangle::new(k + 1).unwrap(),
            2 * k + 4,
        );
        ops.push(error_basis(&t, &format!("tri-k{k}-error-basis")));
        ops.push(face_trace(&t, 1, &format!("tri-k{k}-face-trace-f1")));
    }
    let t = ElementTables::<f64>::new(
        &ReferenceTetrahedron::new(2).unwrap(),
        &ReferenceTetrahedron::new(3).unwrap(),
        8,
    );
    ops.push(error_basis(&t, "tet-k2-error-basis"));
    ops.push(face_trace(&t, 3, "tet-k2-face-trace-f3"));
    ops
}

/// `error_basis` is `[qp][i]`: A = points x n.
fn error_basis(t: &ElementTables<f64>, name: &str) -> ConstOperator {
    let points = t.error_rule.n_points();
    assert_eq!(t.error_basis.len(), points * t.n);
    ConstOperator::new(name, points, t.n, t.error_basis.clone()).unwrap()
}

/// G_{f,0} is `[i][m]`: A = n x n_f.
fn face_trace(t: &ElementTables<f64>, f: usize, name: &str) -> ConstOperator {
    ConstOperator::new(name, t.n, t.n_f, t.face_trace(f, 0).to_vec()).unwrap()
}

const VARIANTS: [Variant; 4] = [
    Variant::Unrolled,
    Variant::UnrolledPairs,
    Variant::RowSplit { rows_per_thread: 4 },
    Variant::RowSplit { rows_per_thread: 16 },
];

/// The entries as the kernel of `precision` uses them.
fn rounded(v: f64, precision: Precision) -> f64 {
    match precision {
        Precision::F64 => v,
        Precision::F32 => f64::from(v as f32),
    }
}

/// The documented operation sequence for one output, in the kernel's precision.
fn sequence(row: &[f64], col: &[f64], old: f64, beta: Beta, precision: Precision) -> f64 {
    let nz: Vec<usize> = (0..row.len()).filter(|&j| rounded(row[j], precision) != 0.0).collect();
    match precision {
        Precision::F64 => {
            let (mut s, rest) = match (beta, nz.first()) {
                (Beta::One, _) => (old, &nz[..]),
                (Beta::Zero, None) => return 0.0,
                (Beta::Zero, Some(&j)) => (col[j] * row[j], &nz[1..]),
            };
            for &j in rest {
                s = col[j].mul_add(row[j], s);
            }
            s
        }
        Precision::F32 => {
            let (a, b): (Vec<f32>, Vec<f32>) =
                (row.iter().map(|&v| v as f32).collect(), col.iter().map(|&v| v as f32).collect());
            let (mut s, rest) = match (beta, nz.first()) {
                (Beta::One, _) => (old as f32, &nz[..]),
                (Beta::Zero, None) => return 0.0,
                (Beta::Zero, Some(&j)) => (b[j] * a[j], &nz[1..]),
            };
            for &j in rest {
                s = b[j].mul_add(a[j], s);
            }
            f64::from(s)
        }
    }
}

/// `hdg_backend_cpu::constant_operator` on the same panel, in the kernel's precision.
fn cpu_apply(
    op: &ConstOperator,
    kernel: &GeneratedKernel,
    n: usize,
    (b, ldb): (&[f64], usize),
    (c, ldc): (&[f64], usize),
) -> Vec<f64> {
    fn apply<T: PanelReal>(
        op: &ConstOperator,
        beta: Beta,
        n: usize,
        (b, ldb): (&[f64], usize),
        (c, ldc): (&[f64], usize),
    ) -> Vec<f64> {
        let b: Vec<T> = b.iter().map(|&v| T::from_f64_lossy(v)).collect();
        let mut c: Vec<T> = c.iter().map(|&v| T::from_f64_lossy(v)).collect();
        PanelOperator::<T>::new(op).unwrap().apply(beta, n, &b, ldb, &mut c, ldc).unwrap();
        c.iter().map(|v| v.as_f64()).collect()
    }
    match kernel.precision {
        Precision::F64 => apply::<f64>(op, kernel.beta, n, (b, ldb), (c, ldc)),
        Precision::F32 => apply::<f32>(op, kernel.beta, n, (b, ldb), (c, ldc)),
    }
}

#[test]
fn emulated_kernels_match_reference_products() {
    let ops = operators();
    let mut cases = Vec::new();
    let mut kernels = Vec::new();
    for (o, op) in ops.iter().enumerate() {
        for precision in [Precision::F64, Precision::F32] {
            for beta in Beta::ALL {
                for variant in VARIANTS {
                    kernels.push(generate(op, precision, beta, variant).unwrap());
                    cases.push(o);
                }
            }
        }
    }
    let exe = build_emulator(&kernels, "products");
    let mut rng = StdRng::seed_from_u64(4);
    for (index, (kernel, &o)) in kernels.iter().zip(&cases).enumerate() {
        let op = &ops[o];
        let (m, k, a) = (op.m(), op.k(), op.values());
        for n in [1000, 37] {
            // Padding columns (ldb > n, ldc > n) must be neither read into C nor written; the
            // leading dimensions are even, as the pair kernels need.
            let (ldb, ldc) = ((n + 4) & !1, (n + 6) & !1);
            assert!(kernel.launchable(0, ldb, 16, ldc));
            let b: Vec<f64> = (0..k * ldb).map(|_| rng.gen_range(-1.0..1.0)).collect();
            let b = b.iter().map(|&v| rounded(v, kernel.precision)).collect::<Vec<_>>();
            let c0: Vec<f64> =
                (0..m * ldc).map(|_| rounded(rng.gen_range(-1.0..1.0), kernel.precision)).collect();
            let c = run(&exe, index, kernel, n, (&b, ldb), (&c0, ldc));
            assert_eq!(c.len(), m * ldc);
            // The CPU backend's loop gives the same bits as the generated kernel, padding
            // included.
            let cpu = cpu_apply(op, kernel, n, (&b, ldb), (&c0, ldc));
            assert!(
                cpu.iter().zip(&c).all(|(x, y)| x.to_bits() == y.to_bits()),
                "{} n={n}: the CPU panel loop differs from the generated kernel",
                kernel.name
            );
            let tol = if kernel.precision == Precision::F64 { 1e-13 } else { 1e-5 };
            for i in 0..m {
                let row = &a[i * k..(i + 1) * k];
                for jj in 0..ldc {
                    let got = c[i * ldc + jj];
                    let old = c0[i * ldc + jj];
                    if jj >= n {
                        assert_eq!(
                            got.to_bits(),
                            old.to_bits(),
                            "{} wrote column {jj}",
                            kernel.name
                        );
                        continue;
                    }
                    let col: Vec<f64> = (0..k).map(|r| b[r * ldb + jj]).collect();
                    let mut exact = if kernel.beta == Beta::One { old } else { 0.0 };
                    let mut scale = exact.abs();
                    for r in 0..k {
                        exact += row[r] * col[r];
                        scale += (row[r] * col[r]).abs();
                    }
                    assert!(
                        (got - exact).abs() <= tol * scale.max(f64::MIN_POSITIVE),
                        "{} n={n} C[{i}][{jj}] = {got}, expected {exact}",
                        kernel.name
                    );
                    let seq = sequence(row, &col, old, kernel.beta, kernel.precision);
                    assert_eq!(
                        got.to_bits(),
                        seq.to_bits(),
                        "{} n={n} C[{i}][{jj}] not the documented fma sequence",
                        kernel.name
                    );
                    if row.iter().all(|&v| rounded(v, kernel.precision) == 0.0) {
                        let want = if kernel.beta == Beta::One { old } else { 0.0 };
                        assert_eq!(
                            got.to_bits(),
                            want.to_bits(),
                            "zero row {i} of {}",
                            kernel.name
                        );
                    }
                }
            }
        }
    }
    // Two runs of the same kernel on the same data: the same bits.
    let (kernel, n, ldb, ldc) = (&kernels[0], 37, 37, 37);
    let op = &ops[cases[0]];
    let b: Vec<f64> = (0..op.k() * ldb).map(|i| (i as f64 * 0.37).sin()).collect();
    let c0 = vec![0.0; op.m() * ldc];
    let first = run(&exe, 0, kernel, n, (&b, ldb), (&c0, ldc));
    let second = run(&exe, 0, kernel, n, (&b, ldb), (&c0, ldc));
    assert_eq!(
        first.iter().map(|v| v.to_bits()).collect::<Vec<_>>(),
        second.iter().map(|v| v.to_bits()).collect::<Vec<_>>()
    );
}

#[test]
fn zeros_are_skipped_in_the_source() {
    for op in operators() {
        let (m, k, a) = (op.m(), op.k(), op.values());
        for precision in [Precision::F64, Precision::F32] {
            let nz = |i: usize, j: usize| rounded(a[i * k + j], precision) != 0.0;
            let nnz = (0..m).flat_map(|i| (0..k).map(move |j| (i, j))).filter(|&(i, j)| nz(i, j));
            let nnz = nnz.count();
            for beta in Beta::ALL {
                for variant in VARIANTS {
                    let kernel = generate(&op, precision, beta, variant).unwrap();
                    let code: String = kernel
                        .source
                        .lines()
                        .filter(|l| !l.trim_start().starts_with("//"))
                        .collect::<Vec<_>>()
                        .join("\n");
                    let r = match variant {
                        Variant::Unrolled | Variant::UnrolledPairs => m,
                        Variant::RowSplit { rows_per_thread } => rows_per_thread,
                    };
                    // The pair form has its body twice: for two columns (every statement once
                    // per lane) and for the last column of an odd n.
                    let pairs = variant == Variant::UnrolledPairs;
                    let (bodies, lanes) = if pairs { (2, 3) } else { (1, 1) };
                    // Loads of B: the columns a chunk of rows uses, once per chunk.
                    let loads: usize = (0..m)
                        .step_by(r)
                        .map(|i0| {
                            (0..k).filter(|&j| (i0..(i0 + r).min(m)).any(|i| nz(i, j))).count()
                        })
                        .sum();
                    let b_loads = code.matches("b[").count() + code.matches("*)(b + ").count();
                    assert_eq!(b_loads, bodies * loads, "{}", kernel.name);
                    assert_eq!(kernel.b_rows_loaded, loads, "{}", kernel.name);
                    assert_eq!(code.matches("0x").count(), lanes * nnz, "{}", kernel.name);
                    assert_eq!((kernel.nnz, kernel.flops_per_column), (nnz, 2 * nnz));
                    assert_eq!(kernel.grid_y as usize, m.div_ceil(r));
                    assert_eq!(kernel.block, (BLOCK_X, 1));
                    // Reads of C only with beta = 1 and only for rows with a nonzero.
                    let nonzero_rows = (0..m).filter(|&i| (0..k).any(|j| nz(i, j))).count();
                    let c_reads = code.matches("= c[").count() + code.matches("s = *(").count();
                    let want = if beta == Beta::One { bodies * nonzero_rows } else { 0 };
                    assert_eq!(c_reads, want, "{}", kernel.name);
                    let grid = kernel.grid(1000).unwrap();
                    let per_block = BLOCK_X * kernel.columns_per_thread;
                    assert_eq!(grid, (1000u32.div_ceil(per_block), kernel.grid_y));
                }
            }
        }
    }
}

#[test]
fn zero_column_is_never_loaded() {
    let op = operators().into_iter().find(|o| o.name() == "zero-row-col").unwrap();
    for variant in VARIANTS {
        let kernel = generate(&op, Precision::F64, Beta::Zero, variant).unwrap();
        assert!(!kernel.source.contains("b[3 * sb]"), "{}", kernel.source);
        assert!(!kernel.source.contains("(b + 3 * sb)"), "{}", kernel.source);
        assert!(kernel.source.contains("c[2 * sc]"));
        assert_eq!(kernel.b_rows_used, 4);
        let kernel = generate(&op, Precision::F64, Beta::One, variant).unwrap();
        assert!(!kernel.source.contains("c[2 * sc]"), "{}", kernel.source);
    }
}

#[test]
fn generation_is_deterministic() {
    for (a, b) in operators().iter().zip(operators().iter()) {
        for variant in VARIANTS {
            let x = generate(a, Precision::F64, Beta::One, variant).unwrap();
            let y = generate(b, Precision::F64, Beta::One, variant).unwrap();
            assert_eq!(x, y);
        }
        for precision in [Precision::F64, Precision::F32] {
            let chosen = choose(a.m(), a.k(), a.nnz(), precision);
            assert!(generate(a, precision, Beta::Zero, chosen).is_ok());
        }
    }
}

/// Parses a C99 hexadecimal float literal (as [`hex_f64`] writes them) exactly.
fn parse_hex(s: &str) -> f64 {
    let (neg, s) = s.strip_prefix('-').map_or((false, s), |r| (true, r));
    let s = s.strip_suffix('f').unwrap_or(s);
    let s = s.strip_prefix("0x").expect("0x");
    let (mantissa, exp) = s.split_once('p').expect("p");
    let (int, frac) = mantissa.split_once('.').unwrap_or((mantissa, ""));
    let digits = format!("{int}{frac}");
    let value = u64::from_str_radix(&digits, 16).unwrap();
    let mut e: i32 = exp.parse().unwrap();
    e -= 4 * frac.len() as i32;
    // value * 2^e, exactly (every intermediate lies on the target's grid).
    let mut v = value as f64;
    assert_eq!(v as u64, value, "mantissa wider than 53 bits");
    while e > 0 {
        v *= 2.0;
        e -= 1;
    }
    while e < 0 {
        v *= 0.5;
        e += 1;
    }
    if neg {
        -v
    } else {
        v
    }
}

fn special_values() -> Vec<f64> {
    let mut rng = StdRng::seed_from_u64(7);
    let mut v = vec![
        0.0,
        -0.0,
        1.0,
        -1.0,
        0.5,
        2.0f64.powi(-1022),
        f64::from_bits(1),
        f64::from_bits(0x000f_ffff_ffff_ffff),
        f64::from_bits(0x0008_0000_0000_0000),
        f64::MAX,
        f64::MIN_POSITIVE,
        1.0 / 3.0,
        -1.0 / 3.0,
        std::f64::consts::PI,
        1e-310,
        2.0f64.powi(100),
        2.0f64.powi(-100),
    ];
    for _ in 0..500 {
        v.push(f64::from_bits(
            rng.gen::<u64>() & !(0x7ff << 52) | (rng.gen_range(1..2046u64) << 52),
        ));
        v.push(rng.gen_range(-10.0..10.0));
    }
    v
}

#[test]
fn hex_literals_round_trip() {
    let values = special_values();
    let floats: Vec<f32> = values
        .iter()
        .map(|&v| v as f32)
        .filter(|v| v.is_finite())
        .chain([f32::from_bits(1), f32::MIN_POSITIVE, f32::MAX, 1.0 / 3.0])
        .collect();
    for &v in &values {
        assert_eq!(parse_hex(&hex_f64(v)).to_bits(), v.to_bits(), "{v:e} -> {}", hex_f64(v));
    }
    for &v in &floats {
        let back = parse_hex(&hex_f32(v));
        assert_eq!((back as f32).to_bits(), v.to_bits(), "{v:e} -> {}", hex_f32(v));
        assert_eq!(f64::from(back as f32), back, "{} not an f32", hex_f32(v));
    }
    // The same literals through a C++ compiler.
    let dir = scratch("hex");
    let mut src = String::from(
        "#include <cstdio>\n#include <cstring>\n#include <cstdint>\nstatic const double d[] = {",
    );
    for &v in &values {
        let _ = write!(src, "{}, ", hex_f64(v));
    }
    src.push_str("};\nstatic const float f[] = {");
    for &v in &floats {
        let _ = write!(src, "{}, ", hex_f32(v));
    }
    src.push_str(
        "};\nint main() {\n for (double x : d) { uint64_t u; memcpy(&u, &x, 8); printf(\"%llx\\n\", (unsigned long long)u); }\n \
         for (float x : f) { uint32_t u; memcpy(&u, &x, 4); printf(\"%x\\n\", u); }\n}\n",
    );
    std::fs::write(dir.join("hex.cpp"), src).unwrap();
    gxx(&["-std=c++17", "hex.cpp", "-o", "hex"], &dir);
    let out = Command::new(dir.join("hex")).output().unwrap();
    let lines: Vec<u64> = String::from_utf8(out.stdout)
        .unwrap()
        .lines()
        .map(|l| u64::from_str_radix(l, 16).unwrap())
        .collect();
    let want: Vec<u64> = values
        .iter()
        .map(|v| v.to_bits())
        .chain(floats.iter().map(|v| u64::from(v.to_bits())))
        .collect();
    assert_eq!(lines, want);
}

/// The cuBLAS line (`gemm_wins`) on the pipeline operators whose side it was measured on
/// (`gpu-bench --operators`; benchmarks/history/constant-operators.md, section 'Constant operators
/// through cuBLAS where it is faster, checked path by path'): (m, used columns, nonzeros).
#[test]
fn gemm_line_follows_the_measurements() {
    use hdg_backend_cuda::codegen::gemm_wins;
    let f64_cases = [
        // The generated kernels win: tri error basis k = 5, tet error basis k = 3, tri error
        // basis k = 7 (unrolled).
        ((60, 21, 1206), false),
        ((145, 20, 2760), false),
        ((79, 36, 2715), false),
        // cuBLAS wins: row-split kernels (the tri k = 7 postprocessing basis) and large
        // operators (tri error basis k = 8, tet error basis k = 4, tet k = 5: not built in).
        ((79, 45, 3394), true),
        ((144, 45, 6480), true),
        ((213, 35, 7165), true),
        ((251, 56, 13485), true),
    ];
    for ((m, k, nnz), wins) in f64_cases {
        assert_eq!(gemm_wins(m, k, nnz, Precision::F64), wins, "f64 {m} x {k}, {nnz}");
    }
    let f32_cases = [
        // Every built-in f32 kernel wins or ties (tet postprocessing basis k = 4: 11445).
        ((144, 45, 6480), false),
        ((213, 56, 11445), false),
        // The dense fallback loses (tet error basis k = 5).
        ((251, 56, 13485), true),
    ];
    for ((m, k, nnz), wins) in f32_cases {
        assert_eq!(gemm_wins(m, k, nnz, Precision::F32), wins, "f32 {m} x {k}, {nnz}");
    }
}
