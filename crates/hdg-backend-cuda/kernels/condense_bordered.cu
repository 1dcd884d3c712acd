// The BORDERED design of the condensation (one thread block per element, a persistent grid),
// the design for the mid and high orders: every phase keeps all warps busy, with one or two
// barriers per NB columns instead of one per column, and no thread walks a whole column alone.
// Loaded by src/element_kernels.rs; src/design.rs chooses it and its launch, from the table of
// src/element_instances.rs, from which build.rs generates the instantiations at the end.
//
// The algebra. The element's condensation needs, with W = [P | F] (n x (nl + 1)):
//     L = chol(S),  Y = W^T L^-T,  K_e = A - Y Y^T (its last row: b_e),  [Z | u0] = L^-T Y^T.
// The first two are the first n steps of the Cholesky factorisation of the bordered matrix
// [[S, W], [W^T, *]] of order R = n + nl + 1: its rows n.. of the first n columns end up holding
// Y (the forward substitution L^-1 W comes with the factorisation, parallel over all rows).
//
// Storage (dynamic shared memory, BorderedLayout): those first n columns, column-major, column
// j holding rows j..R-1 (a trapezoid: entry (i, j) at col_start(R, j) + i - j); rows i < n are
// S, then L; rows n + a are W^T, then Y, then (step 4) Z^T; and dinv (n values, 1 / L(j, j)).
// Its size is computed once, by bordered_shared_values in src/element_instances.rs: src/design.rs
// launches with it, and build.rs generates it per instantiation (SHARED_BYTES), which the
// kernel checks against its layout at compile time.
//
// Passes (PW < nl + 1; the f64 tetrahedron at k = 8, whose whole trapezoid, 349928 B, does not
// fit the 227 KB of a block): the panel rows hold PW columns of W at a time (R = n + PW; two
// passes of 91 columns: 231128 B), and steps 1 to 4 run once per pass. The first pass factors
// S as above; the later ones keep L and solve only their panel rows (the same left-looking or
// right-looking steps, restricted to the rows n..). Step 3 takes the pass's rows of Y with
// themselves and with the rows of every earlier pass, which each pass before the last leaves
// in the block's own part of the global scratch (n x PW values per pass, read back within
// microseconds: from L2). Flops as in one pass, plus the scratch's traffic.
//   1. S and W formed from the tables (parallel over the entries of S's lower triangle, then
//      over those of W).
//   2. Blocked right-looking Cholesky, NB columns per step: (a) every thread factors the
//      NB x NB diagonal block in registers (identical values in every thread, so a failing
//      pivot is seen by all); (b) the panel rows below it, one thread per row (x L_d^T = a);
//      barrier; (c) the trailing columns' update, rank NB: the rows come in 32-row chunks,
//      the warps in RW groups; group g takes the chunks g, g + RW, ..., its warps the columns
//      in turn, lane l row l of each chunk (a warp reads consecutive rows of one column: no
//      bank conflict; the panel values of the thread's rows stay in registers for all its
//      columns); barrier. Or (LEFT, on sm_80 and later, where the table says so)
//      left-looking on the tensor cores (MmaTile: f64, or f32 as 3xTF32), 8 columns per
//      step: the block column takes the updates of all the columns left of it at once
//      (M x 8 mma tiles, the sums in registers, each entry read and
//      written once per step instead of once per step of every column left of it), warp 0
//      factors the diagonal block, one thread per row the panel below it; three barriers per
//      step.
//   3. K_e = A - Y Y^T and b_e (row nl). On sm_80 and later, in f64 and in f32 where the
//      factorisation is LEFT, on the tensor cores: warp tasks of M x 8 tiles at or below the
//      diagonal, k-steps of K columns of Y (every fragment value one shared-memory read, the
//      A fragment split once for all the task's tiles; the CUDA-core path's broadcast reads
//      of Y cost more). Elsewhere (older GPUs; f32 right-looking): warp w takes TR rows at a
//      time, lane l the columns l, l + 32, ... at or below the diagonal, the sums in
//      registers over j < n (broadcast reads of the rows, consecutive reads of the columns).
//      Both: A formed on the fly from the tables; K_e written to both triangles, so it is
//      exactly symmetric.
//   4. [Z | u0] = L^-T Y^T, blocked from the last NB rows up: the panel columns come in
//      32-column chunks, group g takes the chunks g, g + RW, ...; every warp of the group
//      solves the NB x NB diagonal block for those columns in registers (the same numbers in
//      each), writes its share of the NB rows out, and updates its rows above the block,
//      rank NB; one barrier per block. Or (LEFT, on the tensor cores) left-looking, with no
//      barriers: warp w owns M-row tiles of the panel columns and takes them through all the
//      blocks from the bottom up, a tile product with the rows of Z below the block, then
//      the 8 x 8 diagonal solve one lane per column (see there).
// Outputs (sector-blocked, condensed_at in condensed_layout.cuh): written straight from the
// registers (G = 1; a warp's 32 values of one element fall in 8 cache lines), or, with G > 1,
// staged for G = 32 / sizeof(T) consecutive elements (one block of the layout), condensed one
// after the other by the block, and written out as one contiguous range (where one store per
// value would touch a sector per value). The staging area is in shared memory, or
// (GLOBAL_STAGE) the block's own G OUT values of the global scratch (`scratch`, grid x G x
// OUT values): written and read back by the same block within a few microseconds, it stays in
// L2, costs no shared memory and so no occupancy.
// Free to fuse multiply-adds: agrees with the CPU to rounding, like the block design.
// Launched with any multiple of 32 threads up to its launch bound (when RW does not divide the
// warps, one group); checks that it got SHARED_BYTES of dynamic shared memory.
//
// The code: one inlined function per step above (bordered_form, bordered_factor_left and
// bordered_factor_right, bordered_gram, bordered_solve_left and bordered_solve_right, and
// bordered_write_group for the staged outputs), and condense_bordered, at the end, which runs
// them in turn for every element.
//
// Names (src/element_kernels.rs: the scheme): condense_bordered_{f32,f64}_{tri,tet}{K}, for
// triangles and tetrahedra at the orders of the table (the f64 tetrahedron at k = 8 in two
// passes; src/design.rs falls back to the block design's global
// panel where even that does not fit, as with 163 KB of shared memory per block).
#include "block_common.cuh"
#ifndef HDG_EMULATION  // the emulation defines BORDERED_SLACK and instantiates its own kernels
#include "element_instances.cuh"  // generated by build.rs from src/element_instances.rs
#endif

// Tensor-core tiles (sm_80 and later; the host emulation supplies the products): one warp-wide
// D = A B + C of an M x K tile A, a K x 8 tile B and an M x 8 tile C, every lane holding AV
// values of A, BV of B and CV of C at the positions below.
//   f64: mma.m8n8k4, exact f64 products and sums (the order of the four-term sums is the
//        unit's).
//   f32: mma.m16n8k8 on TF32 inputs (11 significant bits), three products per tile
//        ("3xTF32"): each input x = hi + lo with hi = tf32(x), lo = tf32(x - hi), and
//        A B = hi_a hi_b + (hi_a lo_b + lo_a hi_b), the dropped lo_a lo_b 2^-22 relative; the
//        products of TF32 values are exact in f32 and the sums are f32 ones, so this agrees
//        with the CUDA-core f32 path to a few units of rounding (cuBLAS's 3xTF32 argument). The
//        two parts accumulate in separate registers (two independent chains), on the CUDA
//        cores (see mma).
// HDG_NO_MMA takes the CUDA-core paths everywhere (the host emulation checks both paths).
#if !defined(HDG_NO_MMA) && (defined(HDG_EMULATION) || (defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800))
#define HDG_HAS_MMA 1
#ifdef HDG_EMULATION
#define dmma_8x8x4 hdg_emulated_dmma_8x8x4
#define mma_tf32_16x8x8 hdg_emulated_mma_tf32_16x8x8
#else
__device__ __forceinline__ void dmma_8x8x4(f64& c0, f64& c1, f64 a, f64 b) {
    asm("mma.sync.aligned.m8n8k4.row.col.f64.f64.f64.f64 {%0, %1}, {%2}, {%3}, {%0, %1};"
        : "+d"(c0), "+d"(c1)
        : "d"(a), "d"(b));
}
__device__ __forceinline__ void mma_tf32_16x8x8(f32 (&c)[4], const f32 (&a)[4], const f32 (&b)[2]) {
    asm("mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, "
        "{%8, %9}, {%0, %1, %2, %3};"
        : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
        : "r"(__float_as_uint(a[0])), "r"(__float_as_uint(a[1])), "r"(__float_as_uint(a[2])),
          "r"(__float_as_uint(a[3])), "r"(__float_as_uint(b[0])), "r"(__float_as_uint(b[1])));
}
#endif
#else
#define HDG_HAS_MMA 0
#endif

template <typename T>
struct MmaTile;

template <>
struct MmaTile<f64> {
    static constexpr int M = 8, K = 4, AV = 1, BV = 1, CV = 2;
    struct Acc {
        f64 c[2];
    };
    __device__ static int a_row(int lane, int) { return lane >> 2; }
    __device__ static int a_col(int lane, int) { return lane & 3; }
    __device__ static int b_k(int lane, int) { return lane & 3; }
    __device__ static int b_n(int lane, int) { return lane >> 2; }
    __device__ static int c_row(int lane, int) { return lane >> 2; }
    __device__ static int c_col(int lane, int v) { return 2 * (lane & 3) + v; }
    __device__ static void set(Acc& acc, int v, f64 x) { acc.c[v] = x; }
    __device__ static f64 get(const Acc& acc, int v) { return acc.c[v]; }
    // Fragments as the unit takes them (f64: the values themselves).
    struct FragA {
        f64 x;
    };
    struct FragB {
        f64 x;
    };
    __device__ static FragA frag_a(const f64 (&x)[AV]) { return {x[0]}; }
    __device__ static FragB frag_b(const f64 (&x)[BV]) { return {x[0]}; }
#if HDG_HAS_MMA
    __device__ static void mma(Acc& acc, const FragA& a, const FragB& b) {
        dmma_8x8x4(acc.c[0], acc.c[1], a.x, b.x);
    }
#endif
};

// The TF32 part of x (round to nearest, ties away from zero, as cvt.rna.tf32.f32; in integer
// operations, so that the host emulation rounds the same), as an f32 with its low 13 bits zero.
__host__ __device__ __forceinline__ f32 tf32_hi(f32 x) {
#ifdef HDG_EMULATION
    unsigned u;
    std::memcpy(&u, &x, 4);
    u = (u + 0x1000u) & 0xffffe000u;
    std::memcpy(&x, &u, 4);
    return x;
#else
    return __uint_as_float((__float_as_uint(x) + 0x1000u) & 0xffffe000u);
#endif
}

template <>
struct MmaTile<f32> {
    static constexpr int M = 16, K = 8, AV = 4, BV = 2, CV = 4;
    struct Acc {
        f32 hi[4], lo[4];
    };
    __device__ static int a_row(int lane, int v) { return (lane >> 2) + 8 * (v & 1); }
    __device__ static int a_col(int lane, int v) { return (lane & 3) + 4 * (v >> 1); }
    __device__ static int b_k(int lane, int v) { return (lane & 3) + 4 * v; }
    __device__ static int b_n(int lane, int) { return lane >> 2; }
    __device__ static int c_row(int lane, int v) { return (lane >> 2) + 8 * (v >> 1); }
    __device__ static int c_col(int lane, int v) { return 2 * (lane & 3) + (v & 1); }
    __device__ static void set(Acc& acc, int v, f32 x) {
        acc.hi[v] = x;
        acc.lo[v] = 0.0f;
    }
    __device__ static f32 get(const Acc& acc, int v) { return acc.hi[v] + acc.lo[v]; }
    // Fragments split once into their TF32 parts (a fragment used in several products is
    // split once: the split is most of the instructions per product).
    struct FragA {
        f32 hi[AV], lo[AV];
    };
    struct FragB {
        f32 hi[BV], lo[BV];
    };
    template <int V>
    __device__ static void split(const f32 (&x)[V], f32 (&hi)[V], f32 (&lo)[V]) {
#pragma unroll
        for (int v = 0; v < V; ++v) {
            hi[v] = tf32_hi(x[v]);
            lo[v] = tf32_hi(x[v] - hi[v]);
        }
    }
    __device__ static FragA frag_a(const f32 (&x)[AV]) {
        FragA f;
        split(x, f.hi, f.lo);
        return f;
    }
    __device__ static FragB frag_b(const f32 (&x)[BV]) {
        FragB f;
        split(x, f.hi, f.lo);
        return f;
    }
#if HDG_HAS_MMA
    // Each k-step's products start from zero and are added to the sums on the CUDA cores
    // (rounded to nearest): the tensor cores' own f32 accumulation truncates, and summed there
    // over all the k-steps of a column its bias showed (f32 property tests, tetrahedra at
    // k = 6: q_h 2.2e-4 from the CPU's, against at most 9.1e-5 on the CUDA cores).
    __device__ static void mma(Acc& acc, const FragA& a, const FragB& b) {
        f32 lo[CV] = {0.0f, 0.0f, 0.0f, 0.0f}, hi[CV] = {0.0f, 0.0f, 0.0f, 0.0f};
        mma_tf32_16x8x8(lo, a.lo, b.hi);
        mma_tf32_16x8x8(lo, a.hi, b.lo);
        mma_tf32_16x8x8(hi, a.hi, b.hi);
#pragma unroll
        for (int v = 0; v < CV; ++v) {
            acc.hi[v] += hi[v];
            acc.lo[v] += lo[v];
        }
    }
#endif
};

// C += A B over the k-steps from k_begin to k_end (K values each, the last one possibly
// partial: the loaders give finite values past k_end, zeros where they would reach kept
// entries), in two chains of accumulators (acc[0] the even steps, acc[1] the odd ones: two
// independent products in flight); a_at(k, row) and b_at(k, col) give the lane's values of
// the step's A (M x K) and B (K x 8). The left-looking factorisation and back substitution
// (instantiated only where HDG_HAS_MMA: MmaTile::mma exists only there).
template <typename T, class AAt, class BAt>
__device__ __forceinline__ void mma_steps(typename MmaTile<T>::Acc (&acc)[2], int lane,
                                          int k_begin, int k_end, AAt a_at, BAt b_at) {
    using Mma = MmaTile<T>;
    for (int k0 = k_begin; k0 < k_end; k0 += 2 * Mma::K) {
#pragma unroll
        for (int u = 0; u < 2; ++u) {
            const int kb = k0 + Mma::K * u;
            if (kb >= k_end) break;  // the same in every lane
            T fa[Mma::AV], fb[Mma::BV];
#pragma unroll
            for (int v = 0; v < Mma::AV; ++v)
                fa[v] = a_at(kb + Mma::a_col(lane, v), Mma::a_row(lane, v));
#pragma unroll
            for (int v = 0; v < Mma::BV; ++v)
                fb[v] = b_at(kb + Mma::b_k(lane, v), Mma::b_n(lane, v));
            Mma::mma(acc[u], Mma::frag_a(fa), Mma::frag_b(fb));
        }
    }
}

// (row i, column j) of entry t of a column-major packed lower triangle of order r:
// t = col_start(r, j) + i - j, i >= j.
__device__ __forceinline__ void packed_col_row(int r, int t, int& i, int& j) {
    const float b = (float)(2 * r + 1);
    j = (int)((b - sqrtf(b * b - 8.0f * (float)t)) * 0.5f);
    if (j < 0) j = 0;
    while (j > 0 && col_start(r, j) > t) --j;
    while (j + 1 < r && col_start(r, j + 1) <= t) ++j;
    i = t - col_start(r, j) + j;
}

// Values of one element's outputs in the staging area: K_e (nl x nl), b_e (nl), Z (n x nl),
// u0 (n), in that order, each in its plane order.
template <int N, int NL>
__host__ __device__ constexpr int bordered_outputs() {
    return NL * NL + NL + N * NL + N;
}

// BORDERED_SLACK (src/element_instances.rs): values of slack at the end of the shared memory,
// which the tensor-core tiles read into (whole tiles of rows, up to M - 1 past the last row of
// the last column; those extra rows only reach entries that are not written back).
static_assert(BORDERED_SLACK >= MmaTile<f32>::M - 1 && BORDERED_SLACK >= MmaTile<f64>::M - 1,
              "the slack must cover a tile's rows past the end");

// The dynamic shared memory of condense_bordered<..., N, NL / F, ..., G, GLOBAL_STAGE, ..., CH>,
// in values of T from its start: the trapezoid (the first n columns of the bordered matrix of
// order R = n + PW) at 0, dinv (n) at DINV, with G > 1 and not GLOBAL_STAGE the outputs of the
// group's G elements at STAGE, END values in all; then the slack. BYTES: its size, which must
// be the one src/element_instances.rs computes (bordered_shared_values) and build.rs generates
// for every instantiation: condense_bordered checks that at compile time.
template <typename T, int N, int NL, int G, bool GLOBAL_STAGE, int CH>
struct BorderedLayout {
    static constexpr int LD = NL + 1;  // columns of W: P (NL), then F
    // Columns of W per pass (PASSES > 1: the panel in passes, see the top of this file).
    static constexpr int PW = CH > 0 && CH < LD ? CH : LD;
    static constexpr int R = N + PW;
    static constexpr int SHARED_G = GLOBAL_STAGE ? 1 : G;  // elements staged in shared memory
    static constexpr int DINV = N * R - N * (N - 1) / 2;
    static constexpr int STAGE = DINV + N;
    static constexpr int END = STAGE + (SHARED_G > 1 ? SHARED_G * bordered_outputs<N, NL>() : 0);
    static constexpr u64 BYTES = (u64)sizeof(T) * ((u64)END + BORDERED_SLACK);
};

// The phases, in the order condense_bordered (at the end) runs them: the numbered steps at the
// top of this file, one function each, of the values it needs (by value; the compile-time sizes
// as template parameters), inlined into the kernel. Every thread of the block calls every
// phase. They read and write the trapezoid a (R = N + PW rows per column, col_start) and dinv in
// shared memory, and write the outputs through the caller's out function. The partly written
// register tiles (x, dv) and the pivot verdict come from the caller (see condense_bordered).

// 1. S (rows i >= j of column j; the first pass) and W^T (rows n + r of column j), for the
// pass's columns c0..c0 + PW - 1 of W, from the tables and the element's coefficients cf.
template <class C, typename T, int N, int NF, int PW>
__device__ __forceinline__ void bordered_form(T* a, const CondenseCoefficients<C, T>& cf,
                                              const Tables& tb, const T* fk, u64 nc, u64 e,
                                              int pass, int c0, int tid, int nt) {
    constexpr int NL = C::NFACES * NF;
    constexpr int R = N + PW;
    // S: the lower triangle as one list (column-major packed), entry t by thread t, t + nt, ...
    // (every lane busy, where a warp per column leaves the lanes past the diagonal idle);
    // two entries per pass, so that the reads of both are in flight at once.
    if (pass == 0) {
        constexpr int NS = N * (N + 1) / 2;
#pragma unroll 2
        for (int t = tid; t < NS; t += nt) {
            int i, j;
            packed_col_row(N, t, i, j);
            a[col_start(R, j) + i - j] = cf.template volume<N>(tb, i, j);
        }
    }
    // W^T, the pass's columns: those of P (consecutive threads take consecutive entries of
    // a row of W^T; one loop for P alone measured a little faster than one for all of W at
    // k = 6..8), then F, and zero past it.
    {
        const int np = NL - c0 < PW ? NL - c0 : PW;  // columns of P in this pass
#pragma unroll 2
        for (int t = tid; t < N * np; t += nt) {
            const int j = t / np;
            const int r = t - j * np;
            a[col_start(R, j) + N + r - j] = cf.template panel<N, NF>(tb, j, c0 + r);
        }
        const int rest = PW - np;
        for (int t = tid; t < N * rest; t += nt) {
            const int j = t / rest;
            const int r = np + t - j * rest;
            a[col_start(R, j) + N + r - j] = c0 + r == NL ? fk[(u64)j * nc + e] : T(0);
        }
    }
}

// 2. The first n steps of the bordered Cholesky factorisation, left-looking on the tensor
// cores (in the later passes L is known and only the panel's rows are solved). bad (in and
// out): 0, or the column + 1 of the first pivot that is not positive (its value in bad_value),
// the same in every thread; warp 0 decides it, in bad_shared and bad_value_shared. x: the
// row's tile of (3).
template <typename T, int N, int PW>
__device__ __forceinline__ void bordered_factor_left(T* a, T* dinv, int pass, int tid, int nt,
                                                     const int& lane, int warp, int warps,
                                                     int& bad_io, T& bad_value_io, T (&x)[8],
                                                     int& bad_shared, T& bad_value_shared) {
    constexpr int R = N + PW;
    int bad = bad_io;
    T bad_value = bad_value_io;
    // Left-looking, LB = 8 columns per step, on the tensor cores (MmaTile: f64, or f32
    // as 3xTF32): (1) the block column takes the updates of all the columns left of it
    // at once, one M x 8 tile of rows per warp task, its sums in registers over k < jb
    // (each entry read and written once per step, where the right-looking update
    // (bordered_factor_right) reads and writes the whole trailing matrix every step); (2) warp
    // 0 factors the diagonal block, one lane per row; (3) the panel rows below it, one thread
    // per row.
    using Mma = MmaTile<T>;
    constexpr int LB = 8, TM = Mma::M;
    for (int jb = 0; jb < N; jb += LB) {
        const int nb = N - jb < LB ? N - jb : LB;
        // (1) Block column jb..jb+nb-1, rows i >= jb: C(i, c) -= sum_{k < jb} L(i, k)
        // L(c, k); M x 8 tiles (rows jb + M I.., the block's columns), k-steps of K in
        // two chains of accumulators (A = L(i, k), B = -L(c, k)^T: fewer values to negate).
        // Later passes: the panel's rows only.
        if (jb > 0) {
            const int first_row = pass > 0 ? N : jb;
            const int tiles = (R - first_row + TM - 1) / TM;
            for (int I = warp; I < tiles; I += warps) {
                const int i0 = first_row + TM * I;
                typename Mma::Acc acc[2];
#pragma unroll
                for (int v = 0; v < Mma::CV; ++v) {
                    const int i = i0 + Mma::c_row(lane, v), c = jb + Mma::c_col(lane, v);
                    const bool mine = c < jb + nb && i >= c && i < R;
                    Mma::set(acc[0], v, mine ? a[col_start(R, c) + i - c] : T(0));
                    Mma::set(acc[1], v, T(0));
                }
                // Rows past R read on into the next columns (k < jb < n): they only
                // reach rows of C that are not written back.
                mma_steps<T>(
                    acc, lane, 0, jb,
                    [&](int k, int r) { return a[col_start(R, k) - k + i0 + r]; },
                    [&](int k, int c) { return -a[col_start(R, k) - k + jb + c]; });
#pragma unroll
                for (int v = 0; v < Mma::CV; ++v) {
                    const int i = i0 + Mma::c_row(lane, v), c = jb + Mma::c_col(lane, v);
                    if (c < jb + nb && i >= c && i < R)
                        a[col_start(R, c) + i - c] = Mma::get(acc[0], v) + Mma::get(acc[1], v);
                }
            }
            __syncthreads();
        }
        // (2) The diagonal block, by warp 0 (the first pass): column s scaled by lane, the
        // rank-1 update of the rest of the block one entry per lane.
        if (warp == 0 && pass == 0) {
            int wbad = 0;
            T wbad_value = T(0);
            for (int s = 0; s < nb; ++s) {
                T* cs = a + col_start(R, jb + s) - s;  // cs[r] = entry (jb + r, jb + s)
                const T d = cs[s];
                if (!(d > T(0))) {
                    wbad = jb + s + 1;
                    wbad_value = d;
                    break;
                }
                // 1 / sqrt(d) to an ulp in one step (the chain of pivots is serial).
                const T inv = rsqrt(d);
                const T piv = d * inv;
                __syncwarp();
                if (lane == 0) {
                    cs[s] = piv;
                    dinv[jb + s] = inv;
                }
                if (lane > s && lane < nb) cs[lane] *= inv;
                __syncwarp();
                const int m = nb - 1 - s;
                if (lane < m * (m + 1) / 2) {
                    int rr, qq;
                    packed_row_col(lane, rr, qq);
                    const int r = s + 1 + rr, q = s + 1 + qq;
                    T* cq = a + col_start(R, jb + q) - q;
                    cq[r] = fmad(-cs[r], cs[q], cq[r]);
                }
                __syncwarp();
            }
            if (lane == 0) {
                bad_shared = wbad;
                bad_value_shared = wbad_value;
            }
        }
        __syncthreads();
        if (pass == 0) {
            bad = bad_shared;
            bad_value = bad_value_shared;
        }
        if (bad) break;  // the same decision in every thread
        // (3) The rows below the block (later passes: the panel's): x L_d^T =
        // a(i, jb..jb+nb-1).
        for (int i = (pass > 0 ? N : jb + nb) + tid; i < R; i += nt) {
#pragma unroll
            for (int s = 0; s < LB; ++s) {
                if (s < nb) {
                    const T* cs = a + col_start(R, jb + s) - s;
                    T* p = a + col_start(R, jb + s) + i - jb - s;
                    T v = *p;
#pragma unroll
                    for (int q = 0; q < s; ++q) {
                        const T* cq = a + col_start(R, jb + q) - q;
                        v = fmad(-x[q], cq[s], v);
                    }
                    x[s] = v * dinv[jb + s];
                    *p = x[s];
                }
            }
        }
        __syncthreads();
    }
    bad_io = bad;
    bad_value_io = bad_value;
}

// 2. The same, right-looking on the CUDA cores, NB columns at a time (steps (a) to (c) at the
// top of this file); bad as in bordered_factor_left. PMW: the 32-row chunks a row group holds
// at a time; dv and x: the tiles of (a) and (b).
template <typename T, int N, int NB, int PW, int PMW>
__device__ __forceinline__ void bordered_factor_right(T* a, T* dinv, int pass, int tid, int nt,
                                                      int lane, int group, int groups,
                                                      int member, int members, int& bad_io,
                                                      T& bad_value_io, T (&dv)[NB], T (&x)[NB]) {
    constexpr int R = N + PW;
    int bad = bad_io;
    T bad_value = bad_value_io;
    for (int jb = 0; jb < N; jb += NB) {
        const int nb = N - jb < NB ? N - jb : NB;
        const int r0 = jb + nb;  // first row (and column) below the block
        // (a) The diagonal block, factored by every thread (later passes: read back): dl =
        // L_d, dv = 1 / diag(L_d).
        T dl[NB][NB];
#pragma unroll
        for (int r = 0; r < NB; ++r)
#pragma unroll
            for (int s = 0; s <= r; ++s)
                dl[r][s] = (r < nb) ? a[col_start(R, jb + s) + r - s] : T(1);
#pragma unroll
        for (int s = 0; s < NB; ++s) {
            if (pass > 0) {
                dv[s] = (s < nb) ? dinv[jb + s] : T(1);
            } else if (s < nb) {
                const T d = dl[s][s];
                if (!(d > T(0)) && bad == 0) {
                    bad = jb + s + 1;
                    bad_value = d;
                }
                // f32: 1 / sqrt(d) to 2 ulp in one step (faster at every order k = 2..8);
                // f64 keeps the correctly rounded root and quotient.
                T piv, inv;
                if constexpr (sizeof(T) == 4) {
                    inv = rsqrt(d);
                    piv = d * inv;
                } else {
                    piv = root(d);
                    inv = T(1) / piv;
                }
                dl[s][s] = piv;
                dv[s] = inv;
#pragma unroll
                for (int r = s + 1; r < NB; ++r) dl[r][s] *= inv;
#pragma unroll
                for (int r = s + 1; r < NB; ++r)
#pragma unroll
                    for (int q = s + 1; q <= r; ++q) dl[r][q] = fmad(-dl[r][s], dl[q][s], dl[r][q]);
            }
        }
        if (bad) break;  // the same decision in every thread
        // (b) The rows below the block (later passes: the panel's): x L_d^T =
        // a(i, jb..jb+nb).
        const int row0 = pass > 0 ? N : r0;
        for (int i = row0 + tid; i < R; i += nt) {
#pragma unroll
            for (int s = 0; s < NB; ++s) {
                if (s < nb) {
                    T* p = a + col_start(R, jb + s) + i - jb - s;
                    T v = *p;
#pragma unroll
                    for (int q = 0; q < s; ++q) v = fmad(-x[q], dl[s][q], v);
                    x[s] = v * dv[s];
                    *p = x[s];
                }
            }
        }
        __syncthreads();
        // (c) The trailing columns r0..N-1 (rows i >= column): rank-nb update. The rows below
        // the block come in 32-row chunks; row group g takes chunks g, g + groups, ...
        // (PMW at a time, their panel values in registers), its warps the columns.
        if (r0 < N) {
            const int chunks = (R - row0 + 31) / 32;
            for (int u0 = 0; group + groups * u0 < chunks; u0 += PMW) {
                T li[PMW][NB];
#pragma unroll
                for (int p = 0; p < PMW; ++p) {
                    const int i = row0 + 32 * (group + groups * (u0 + p)) + lane;
#pragma unroll
                    for (int s = 0; s < NB; ++s)
                        li[p][s] =
                            (i < R && s < nb) ? a[col_start(R, jb + s) + i - jb - s] : T(0);
                }
                for (int cc = r0 + member; cc < N; cc += members) {
                    T lc[NB];
#pragma unroll
                    for (int s = 0; s < NB; ++s)
                        lc[s] = (s < nb) ? a[col_start(R, jb + s) + cc - jb - s] : T(0);
                    T* col = a + col_start(R, cc) - cc;  // col[i] = entry (i, cc)
#pragma unroll
                    for (int p = 0; p < PMW; ++p) {
                        const int first = row0 + 32 * (group + groups * (u0 + p));
                        if (first + 31 < cc || first >= R) continue;  // the whole warp
                        const int i = first + lane;
                        if (i >= cc && i < R) {
                            T v = col[i];
#pragma unroll
                            for (int s = 0; s < NB; ++s) v = fmad(-li[p][s], lc[s], v);
                            col[i] = v;
                        }
                    }
                }
            }
        }
        // The factored diagonal block and its inverse pivots: nothing reads them in (c).
        if (tid == 0 && pass == 0) {
#pragma unroll
            for (int r = 0; r < NB; ++r) {
                if (r < nb) {
                    dinv[jb + r] = dv[r];
#pragma unroll
                    for (int s = 0; s <= r; ++s) a[col_start(R, jb + s) + r - s] = dl[r][s];
                }
            }
        }
        __syncthreads();
    }
    bad_io = bad;
    bad_value_io = bad_value;
}

// 3. K_e = A - Y Y^T (a >= b, both < nl) and b_e = Y Y(nl)^T (a = nl). In blocks: the pass's
// rows of Y with themselves (at or below the diagonal) and with the rows of each earlier pass
// (read back from y_saved; this pass's go there first, if a later one needs them). Every
// entry (a, b) of the result, sum = (Y Y^T)(a, b), goes to out(a, b, sum) (out skips those
// that are not outputs). TENSOR: on the tensor cores, else on the CUDA cores.
template <typename T, int N, int NL, int TR, int PW, int PASSES, bool TENSOR, class Out>
__device__ __forceinline__ void bordered_gram(const T* a, T* y_saved, int pass, int c0, int tid,
                                              int nt, int lane, int warp, int warps, Out out) {
    constexpr int R = N + PW;
    constexpr int QA = (PW + 31) / 32;  // 32-column chunks of the panel
    if (pass + 1 < PASSES) {
        T* ys = y_saved + (u64)pass * PW * N;
        for (int t = tid; t < N * PW; t += nt) {
            const int j = t / PW;
            const int r = t - j * PW;
            ys[t] = a[col_start(R, j) + N + r - j];
        }
    }
    // The block of rows r of pass rp (this one: here) with the columns s of this pass.
    for (int rp = 0; rp <= pass; ++rp) {
        const bool here = rp == pass;
        const T* ys = y_saved + (u64)rp * PW * N;  // entry (r, j) at j PW + r (rp < pass)
        // The block's (r, s) out: at or below the diagonal of this pass's own block (the
        // entries of K_e at or above it come with the row), as (c0 + s, rp PW + r) with an
        // earlier pass's rows (which come first).
        auto block_out = [&](int r, int s, T sum) {
            if (r >= PW || s >= PW) return;
            if (here)
                out(c0 + r, c0 + s, sum);
            else
                out(c0 + s, rp * PW + r, sum);
        };
        if constexpr (TENSOR) {
            // On the tensor cores (f64; f32 as 3xTF32 where the factorisation is left-looking):
            // M x 8 tiles (I, J) of the block (this pass's own: at or below the diagonal,
            // 8 J < M (I + 1)), k-steps of K columns of Y (A zero past n). A warp task: tile
            // row I, up to JC of its column tiles (JC accumulators). Lane l reads its A
            // fragment from rows M I.. of the rows' Y (from global memory for an earlier
            // pass's rows; reading the next k-step's ahead measured no faster there, and
            // slower from shared memory), its B fragments (B = Y^T) from rows 8 J..
            // (every value one read).
            using Mma = MmaTile<T>;
            constexpr int TM = Mma::M, TK = Mma::K;
            constexpr int TROWS = (PW + TM - 1) / TM, TCOLS = (PW + 7) / 8;
            constexpr int JC = TCOLS < 8 ? TCOLS : 8;
            // Column tiles of tile row I: those at or below the diagonal, within the matrix.
            auto row_tiles = [&](int I) {
                const int c = (TM * (I + 1) - 1) / 8 + 1;
                return c < TCOLS && here ? c : TCOLS;
            };
            // A(r, j), j < k-step end: Y(r, j), zero for j >= n (the last k-step reads column
            // n - 1). This pass's rows past PW read on past the column (into the next one,
            // dinv, or the slack at the end): they only reach entries that are not written;
            // an earlier pass's are zero.
            auto load_a = [&](T (&fa)[Mma::AV], int j0, int I) {
#pragma unroll
                for (int v = 0; v < Mma::AV; ++v) {
                    const int j = j0 + Mma::a_col(lane, v), jc = j < N ? j : N - 1;
                    const int r = TM * I + Mma::a_row(lane, v);
                    T x;
                    if (here)
                        x = a[col_start(R, jc) + N - jc + r];
                    else
                        x = r < PW ? ys[jc * PW + r] : T(0);
                    fa[v] = j < N ? x : T(0);
                }
            };
            int I = 0, J0 = 0;  // the task of index `warp`, then every warps-th one
            for (int skip = warp; skip > 0; --skip) {
                J0 += JC;
                if (J0 >= row_tiles(I)) { ++I; J0 = 0; }
            }
            while (I < TROWS) {
                const int jend = row_tiles(I);
                typename Mma::Acc acc[JC];
#pragma unroll
                for (int t = 0; t < JC; ++t)
#pragma unroll
                    for (int v = 0; v < Mma::CV; ++v) Mma::set(acc[t], v, T(0));
                for (int j0 = 0; j0 < N; j0 += TK) {
                    T fa[Mma::AV];
                    load_a(fa, j0, I);
                    const typename Mma::FragA fra = Mma::frag_a(fa);
#pragma unroll
                    for (int t = 0; t < JC; ++t) {
                        const int J = J0 + t;
                        if (J < jend) {  // the same in every lane
                            T fb[Mma::BV];
#pragma unroll
                            for (int v = 0; v < Mma::BV; ++v) {
                                const int j = j0 + Mma::b_k(lane, v), jc = j < N ? j : N - 1;
                                fb[v] = a[col_start(R, jc) + N - jc + 8 * J + Mma::b_n(lane, v)];
                            }
                            Mma::mma(acc[t], fra, Mma::frag_b(fb));
                        }
                    }
                }
#pragma unroll
                for (int t = 0; t < JC; ++t) {
                    const int J = J0 + t;
                    if (J < jend) {
#pragma unroll
                        for (int v = 0; v < Mma::CV; ++v)
                            block_out(TM * I + Mma::c_row(lane, v), 8 * J + Mma::c_col(lane, v),
                                      Mma::get(acc[t], v));
                    }
                }
                for (int skip = warps; skip > 0; --skip) {
                    J0 += JC;
                    if (J0 >= row_tiles(I)) { ++I; J0 = 0; }
                }
            }
        } else {
            // Warp tasks of TR rows, lane l the columns l + 32 q; the sums stay in registers.
            constexpr int NRB = (PW + TR - 1) / TR;
            for (int rb = warp; rb < NRB; rb += warps) {
                const int a0 = rb * TR;
                // Columns b < bmax: in this pass's own block those of P at or below the
                // diagonal; with an earlier pass's rows all (they are the rows of K_e and b_e).
                const int smax = NL - c0 < PW ? NL - c0 : PW;
                const int bmax = !here ? PW : a0 + TR < smax ? a0 + TR : smax;
                const int qmax = (bmax + 31) / 32;
                T acc[TR][QA];
#pragma unroll
                for (int r = 0; r < TR; ++r)
#pragma unroll
                    for (int q = 0; q < QA; ++q) acc[r][q] = T(0);
#pragma unroll 2
                for (int j = 0; j < N; ++j) {
                    const T* y = a + col_start(R, j) + N - j;  // y[r] = Y(r, j) of this pass
                    T ya[TR];
#pragma unroll
                    for (int r = 0; r < TR; ++r)
                        ya[r] = a0 + r >= PW ? T(0) : here ? y[a0 + r] : ys[j * PW + a0 + r];
#pragma unroll
                    for (int q = 0; q < QA; ++q) {
                        const int b = lane + 32 * q;
                        if (q < qmax) {
                            const T yb = (b < PW) ? y[b] : T(0);
#pragma unroll
                            for (int r = 0; r < TR; ++r) acc[r][q] = fmad(ya[r], yb, acc[r][q]);
                        }
                    }
                }
#pragma unroll
                for (int r = 0; r < TR; ++r)
#pragma unroll
                    for (int q = 0; q < QA; ++q)
                        if (q < qmax) block_out(a0 + r, lane + 32 * q, acc[r][q]);
            }
        }
    }  // rp
}

// 4. [Z | u0] = L^-T Y^T, left-looking on the tensor cores from the bottom, in the transposed
// form Z^T L = Y; every entry goes to out(row of Z, panel column of the pass, value).
template <typename T, int N, int PW, class Out>
__device__ __forceinline__ void bordered_solve_left(T* a, const T* dinv, int lane, int warp,
                                                    int warps, Out out) {
    constexpr int R = N + PW;
    // Warp w owns the M-row tiles w, w + warps, ... of the panel columns col (the rows of Z^T,
    // stored where Y was), and for each block of LB = 8 rows of Z, from the bottom up: (i)
    // X(col, s) = Y(col, jb + s) - sum over the rows r below the block of Z^T(col, r)
    // L(r, jb + s) (M x 8 tiles, k-steps of K rows, two chains), in place; (ii) lane c < M of
    // the warp solves L_d^T z = x for column c of its tile, from the last row up, in place and
    // out (col: the pass's panel columns). A warp reads only its own columns of Y and Z and the
    // finished L: no barriers (the right-looking bordered_solve_right needs one per block).
    using Mma = MmaTile<T>;
    constexpr int LB = 8, TM = Mma::M;
    constexpr int TILES = (PW + TM - 1) / TM;
    for (int I = warp; I < TILES; I += warps) {
        const int t0 = TM * I;
        for (int jb = (N - 1) / LB * LB; jb >= 0; jb -= LB) {
            const int nb = N - jb < LB ? N - jb : LB;
            typename Mma::Acc acc[2];
#pragma unroll
            for (int v = 0; v < Mma::CV; ++v) {
                const int col = t0 + Mma::c_row(lane, v), s = Mma::c_col(lane, v);
                const int at = col_start(R, jb + s) + N - jb - s + col;
                Mma::set(acc[0], v, (col < PW && s < nb) ? a[at] : T(0));
                Mma::set(acc[1], v, T(0));
            }
            // Every block with rows below it has nb = LB. Rows r >= n (the last
            // k-step) read row n - 1 of Z^T and are zero in A (B reads on into W^T
            // there: finite). Columns past the pass's read on past the column: only
            // rows of C that are not written.
            mma_steps<T>(
                acc, lane, jb + nb, N,
                [&](int r, int col) {
                    const int rc = r < N ? r : N - 1;
                    const T x = a[col_start(R, rc) + N - rc + t0 + col];
                    return r < N ? x : T(0);
                },
                [&](int r, int s) { return -a[col_start(R, jb + s) - jb - s + r]; });
#pragma unroll
            for (int v = 0; v < Mma::CV; ++v) {
                const int col = t0 + Mma::c_row(lane, v), s = Mma::c_col(lane, v);
                if (col < PW && s < nb)
                    a[col_start(R, jb + s) + N - jb - s + col] =
                        Mma::get(acc[0], v) + Mma::get(acc[1], v);
            }
            __syncwarp();
            const int col = t0 + lane;
            if (lane < TM && col < PW) {
                T z[LB];
#pragma unroll
                for (int s = 0; s < LB; ++s)
                    z[s] = (s < nb) ? a[col_start(R, jb + s) + N - jb - s + col] : T(0);
#pragma unroll
                for (int s = LB - 1; s >= 0; --s) {
                    if (s < nb) {
                        const T* ls = a + col_start(R, jb + s) - s;  // ls[t] = L(jb + t, jb + s)
#pragma unroll
                        for (int t = s + 1; t < LB; ++t)
                            if (t < nb) z[s] = fmad(-ls[t], z[t], z[s]);
                        z[s] *= dinv[jb + s];
                        a[col_start(R, jb + s) + N - jb - s + col] = z[s];
                        out(jb + s, col, z[s]);
                    }
                }
            }
            __syncwarp();
        }
    }
    __syncthreads();
}

// 4. The same, right-looking on the CUDA cores, NB rows at a time from the bottom; out as in
// bordered_solve_left. QA: the 32-column chunks of the panel, QAW: those a column group holds
// at a time.
template <typename T, int N, int NB, int PW, int QA, int QAW, class Out>
__device__ __forceinline__ void bordered_solve_right(T* a, const T* dinv, int lane, int group,
                                                     int groups, int member, int members,
                                                     Out out) {
    constexpr int R = N + PW;
    // The panel columns come in 32-column chunks; column group g takes chunks g, g + groups,
    // ... (QAW at a time, lane l column l of each), its warps the rows above the block.
    constexpr int NBLK = (N + NB - 1) / NB;
    for (int blk = NBLK - 1; blk >= 0; --blk) {
        const int jb = blk * NB;
        const int nb = N - jb < NB ? N - jb : NB;
        for (int u0 = 0; group + groups * u0 < QA; u0 += QAW) {
            T z[QAW][NB];
#pragma unroll
            for (int q = 0; q < QAW; ++q) {
                const int col = 32 * (group + groups * (u0 + q)) + lane;
#pragma unroll
                for (int s = 0; s < NB; ++s)
                    z[q][s] = (col < PW && s < nb) ? a[col_start(R, jb + s) + N + col - jb - s]
                                                   : T(0);
            }
            // The diagonal block: L_d^T z = y, from its last row up.
#pragma unroll
            for (int s = NB - 1; s >= 0; --s) {
                if (s < nb) {
                    const int cs = col_start(R, jb + s) - s;  // cs + t: L(jb + t, jb + s)
                    const T ds = dinv[jb + s];
#pragma unroll
                    for (int t = s + 1; t < NB; ++t) {
                        if (t < nb) {
                            const T lts = a[cs + t];
#pragma unroll
                            for (int q = 0; q < QAW; ++q) z[q][s] = fmad(-lts, z[q][t], z[q][s]);
                        }
                    }
#pragma unroll
                    for (int q = 0; q < QAW; ++q) z[q][s] *= ds;
                }
            }
            // Out: row jb + s by the group's member s % members.
#pragma unroll
            for (int s = 0; s < NB; ++s) {
                if (s < nb && s % members == member) {
#pragma unroll
                    for (int q = 0; q < QAW; ++q) {
                        const int col = 32 * (group + groups * (u0 + q)) + lane;
                        out(jb + s, col, z[q][s]);
                    }
                }
            }
            // The rows above: Y(col, cc) -= sum_s L(jb + s, cc) z(s, col), cc < jb.
            for (int cc = member; cc < jb; cc += members) {
                const int base = col_start(R, cc) - cc;  // base + i: entry (i, cc)
                T lc[NB];
#pragma unroll
                for (int s = 0; s < NB; ++s) lc[s] = (s < nb) ? a[base + jb + s] : T(0);
#pragma unroll
                for (int q = 0; q < QAW; ++q) {
                    const int col = 32 * (group + groups * (u0 + q)) + lane;
                    if (col < PW) {
                        T v = a[base + N + col];
#pragma unroll
                        for (int s = 0; s < NB; ++s) v = fmad(-lc[s], z[q][s], v);
                        a[base + N + col] = v;
                    }
                }
            }
        }
        __syncthreads();
    }
}

// G > 1: the outputs of group group_index (those of its G elements that are among the nc) out
// of the staging area, value by value, its G elements side by side: with G = 32 / sizeof(T),
// one block of the sector-blocked layout, consecutive threads write consecutive addresses (a
// failed element's slot holds stale values: it is flagged in info). x: the batch of U values.
template <typename T, int N, int NL, int G>
__device__ __forceinline__ void bordered_write_group(const T* stage, u64 group_index, u64 nc,
                                                     int tid, int nt, T* k_out, T* b_out,
                                                     T* z_out, T* u0_out, T (&x)[4]) {
    constexpr int OUT = bordered_outputs<N, NL>();
    constexpr int OFF_B = NL * NL, OFF_Z = OFF_B + NL, OFF_U0 = OFF_Z + N * NL;
    const u64 first = group_index * G;
    const int valid = nc - first < (u64)G ? (int)(nc - first) : G;
    // U values per thread and pass (x), their reads issued together: the staging area in global
    // memory is read back from L2, and one read in flight at a time left the loop waiting
    // on it (4 measured fastest at k = 2..4 in f64; 1, 8 and 16 slower).
    constexpr int U = 4;
    for (int t0 = tid; t0 < OUT * G; t0 += U * nt) {
#pragma unroll
        for (int u = 0; u < U; ++u) {
            const int t = t0 + u * nt;
            if (t < OUT * G) x[u] = stage[(t % G) * OUT + t / G];
        }
#pragma unroll
        for (int u = 0; u < U; ++u) {
            const int t = t0 + u * nt;
            const int v = t / G;
            const int gi = t - v * G;
            if (t >= OUT * G || gi >= valid) continue;
            const u64 e = first + gi;
            if (v < OFF_B)
                k_out[condensed_at<T>(NL * NL, v, e)] = x[u];
            else if (v < OFF_Z)
                b_out[condensed_at<T>(NL, v - OFF_B, e)] = x[u];
            else if (v < OFF_U0)
                z_out[condensed_at<T>(N * NL, v - OFF_Z, e)] = x[u];
            else
                u0_out[condensed_at<T>(N, v - OFF_U0, e)] = x[u];
        }
    }
}

// The kernel: the phases above, in turn, for every element of the block's groups. Its machine
// code has the resource use of the single function the phases were cut from (ptxas: the same
// registers, stack frame, spills and shared memory for every instantiation, in the sm_90 cubin
// and in the compute_75 PTX compiled for sm_80 to sm_120). The compiler is sensitive to where
// values live (an earlier split into member functions spilled 372/412 bytes instead of 324/336
// at f64 tetrahedra k = 4, and ran slower), and that takes a few things here: the register tiles
// that a phase fills only in part (x, dv: the entries past nb are never written) are declared
// here, not in the phase, so that the compiler carries them through the kernel's loops as
// before (declared in the phases: f64 triangles at k = 4 went from 79 to 76 registers, but the
// f32 tetrahedra at k = 6 spilled more); the factorisations copy bad and bad_value into locals
// and back; and the left-looking one gets lane by reference and its pivot verdict's shared
// variables from here.
template <class C, typename T, int N, int NF, int NB, int RW, int TR, int G, bool GLOBAL_STAGE,
          bool LEFT, int CH, u64 SHARED_BYTES>
__device__ void condense_bordered(const Tables& tb, const Cells& c, T* __restrict__ k_out,
                                  T* __restrict__ b_out, T* __restrict__ z_out,
                                  T* __restrict__ u0_out, int* __restrict__ info,
                                  T* __restrict__ pivot_value, T* __restrict__ scratch) {
    constexpr int F = C::NFACES;
    constexpr int NL = F * NF;
    using Layout = BorderedLayout<T, N, NL, G, GLOBAL_STAGE, CH>;
    static_assert(Layout::BYTES == SHARED_BYTES,
                  "the shared memory of src/element_instances.rs (bordered_shared_values) is not "
                  "this kernel's layout");
    constexpr int LD = Layout::LD;
    constexpr int PW = Layout::PW;
    constexpr int PASSES = (LD + PW - 1) / PW;
    static_assert(PASSES == 1 || G == 1, "a panel in passes writes its outputs directly");
    constexpr int R = Layout::R;  // order of the bordered matrix (of one pass)
    constexpr int PM = (R + 31) / 32;         // 32-row chunks of the bordered matrix
    constexpr int PMW = (PM + RW - 1) / RW;   // chunks per row group (trailing update)
    constexpr int QA = (PW + 31) / 32;        // 32-column chunks of the panel (steps 3, 4)
    constexpr int QAW = (QA + RW - 1) / RW;   // chunks per column group (step 4)
    constexpr int OUT = bordered_outputs<N, NL>();
    constexpr int OFF_B = NL * NL, OFF_Z = OFF_B + NL, OFF_U0 = OFF_Z + N * NL;
    if (!shared_memory_ok(SHARED_BYTES, info)) return;
    HDG_DYNAMIC_SHARED(smem_raw);
    T* a = reinterpret_cast<T*>(smem_raw);
    T* dinv = a + Layout::DINV;
    // G > 1: the outputs of the group's elements, OUT values each, after dinv in shared memory
    // or in the block's own G OUT values of the global scratch.
    T* stage = GLOBAL_STAGE ? scratch + (u64)blockIdx.x * G * OUT : a + Layout::STAGE;
    // PASSES > 1: Y of the passes before the last, in the block's own part of the global
    // scratch (PASSES - 1 blocks of n x PW values; entry (row r of the pass, column j) at
    // j PW + r), read back by the Gram products of the later passes while still in L2.
    T* y_saved = scratch + (u64)blockIdx.x * (PASSES - 1) * PW * N;
    __shared__ CondenseCoefficients<C, T> cf;

    const int tid = threadIdx.x;
    const int nt = blockDim.x;
    const int lane = tid & 31;
    const int warp = tid >> 5;
    const int warps = nt >> 5;
    // Warp groups of steps 2c and 4: RW groups (of rows, of panel columns) when the warps
    // divide evenly, else one; each group's warps share out the columns (rows) cyclically.
    const int groups = (warps % RW == 0) ? RW : 1;
    const int group = warp % groups;
    const int member = warp / groups;
    const int members = warps / groups;
    const u64 nc = c.n_cells;
    const T* fk = ptr<T>(c.load);

    // Groups of G consecutive elements (G = 1: one element), block b the groups b, b + grid, ...
    const u64 n_groups = (nc + G - 1) / G;
    for (u64 group_index = blockIdx.x; group_index < n_groups; group_index += gridDim.x) {
        for (int gi = 0; gi < G; ++gi) {
            const u64 e = group_index * G + gi;
            if (e >= nc) break;  // the same for every thread
            T* st = stage + gi * OUT;
            if (tid == 0) cf.load(c, e);
            __syncthreads();
            int bad = 0;
            T bad_value = T(0);
            // The panel's passes (one but for the largest elements): the columns c0..c0 + PW - 1
            // of W.
            for (int pass = 0; pass < PASSES; ++pass) {
                const int c0 = pass * PW;

                // 1. S and W^T, formed.
                bordered_form<C, T, N, NF, PW>(a, cf, tb, fk, nc, e, pass, c0, tid, nt);
                __syncthreads();

                // 2. The first n steps of the bordered Cholesky factorisation (L, Y = W^T L^-T);
                // in the later passes L is known and only the panel's rows are solved.
                if constexpr (LEFT && HDG_HAS_MMA) {
                    __shared__ int bad_shared;
                    __shared__ T bad_value_shared;
                    T x[8];
                    bordered_factor_left<T, N, PW>(a, dinv, pass, tid, nt, lane, warp, warps, bad,
                                                   bad_value, x, bad_shared, bad_value_shared);
                } else {
                    T dv[NB], x[NB];
                    bordered_factor_right<T, N, NB, PW, PMW>(a, dinv, pass, tid, nt, lane, group,
                                                             groups, member, members, bad,
                                                             bad_value, dv, x);
                }
                if (bad) {
                    report_failure(e, bad, bad_value, info, pivot_value);
                    break;
                }

                // 3. K_e = A - Y Y^T and b_e. The entry (a, b) of the result, sum = (Y Y^T)(a, b),
                // goes out here: K_e(a, b) = A(a, b) - sum to both triangles, b_e(b) = sum on
                // row nl.
                auto gram_out = [&](int ar, int b, T sum) {
                    if (ar >= LD || b >= NL || (ar < NL && b > ar)) return;
                    if (ar == NL) {
                        if constexpr (G > 1)
                            st[OFF_B + b] = sum;
                        else
                            b_out[condensed_at<T>(NL, b, e)] = sum;
                    } else {
                        const T v = cf.template trace<NF>(tb, ar, b) - sum;
                        if constexpr (G > 1) {
                            st[ar * NL + b] = v;
                            st[b * NL + ar] = v;
                        } else {
                            k_out[condensed_at<T>(NL * NL, ar * NL + b, e)] = v;
                            if (ar != b) k_out[condensed_at<T>(NL * NL, b * NL + ar, e)] = v;
                        }
                    }
                };
                bordered_gram<T, N, NL, TR, PW, PASSES,
                              HDG_HAS_MMA && (sizeof(T) == 8 || LEFT)>(
                    a, y_saved, pass, c0, tid, nt, lane, warp, warps, gram_out);
                __syncthreads();

                // 4. [Z | u0] = L^-T Y^T. Z(row, col) (col < nl) and u0(row) (col = nl) out, for
                // the pass's column r (col = c0 + r): staged (G > 1) or straight.
                auto z_write = [&](int row, int r, T v) {
                    const int col = c0 + r;
                    if (r >= PW) return;
                    if constexpr (G > 1) {
                        if (col < NL)
                            st[OFF_Z + row * NL + col] = v;
                        else if (col == NL)
                            st[OFF_U0 + row] = v;
                    } else if (col < NL) {
                        z_out[condensed_at<T>(N * NL, row * NL + col, e)] = v;
                    } else if (col == NL) {
                        u0_out[condensed_at<T>(N, row, e)] = v;
                    }
                };
                if constexpr (LEFT && HDG_HAS_MMA)
                    bordered_solve_left<T, N, PW>(a, dinv, lane, warp, warps, z_write);
                else
                    bordered_solve_right<T, N, NB, PW, QA, QAW>(a, dinv, lane, group, groups,
                                                                member, members, z_write);
            }  // pass
            if (tid == 0 && !bad) info[e] = 0;
        }
        // The group's outputs, out of the staging area (G > 1).
        if constexpr (G > 1) {
            __syncthreads();
            T x[4];
            bordered_write_group<T, N, NL, G>(stage, group_index, nc, tid, nt, k_out, b_out,
                                              z_out, u0_out, x);
            __syncthreads();
        }
    }
}

#ifndef HDG_EMULATION
// Instantiations: one per row of the table in src/element_instances.rs (BorderedTuning there
// says what each parameter tunes; benchmarks/history/cuda-element-kernels.md, section
// 'Design choices of the CUDA element kernels: the figures behind `design.rs`', has the
// measurements behind the choices).
#define BORDERED(T, CELL, NAME, K, NB, RW, TR, BOUNDS, G, GLOBAL_STAGE, LEFT, PW, SHARED)      \
    extern "C" __global__ void __launch_bounds__ BOUNDS                                        \
        condense_bordered_##T##_##NAME##K(Tables tb, Cells c, T* k_out, T* b_out, T* z_out,    \
                                          T* u0_out, int* info, T* pv, T* scratch) {           \
        condense_bordered<CELL, T, CELL::n(K), CELL::nf(K), NB, RW, TR, G, GLOBAL_STAGE, LEFT, \
                          PW, SHARED>(tb, c, k_out, b_out, z_out, u0_out, info, pv, scratch);  \
    }
FOR_EACH_BORDERED(BORDERED)
#endif  // HDG_EMULATION
