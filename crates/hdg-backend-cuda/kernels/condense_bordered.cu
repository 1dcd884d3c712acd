// The BORDERED design of the condensation (one thread block per element, a persistent grid),
// the design for the mid and high orders: every phase keeps all warps busy, with one or two
// barriers per NB columns instead of one per column, and no thread walks a whole column alone.
// Loaded by src/element_kernels.rs as a module of its own; src/design.rs chooses it and mirrors
// the sizes below.
//
// The algebra. The element's condensation needs, with W = [P | F] (n x (nl + 1)):
//     L = chol(S),  Y = W^T L^-T,  K_e = A - Y Y^T (its last row: b_e),  [Z | u0] = L^-T Y^T.
// The first two are the first n steps of the Cholesky factorisation of the bordered matrix
// [[S, W], [W^T, *]] of order R = n + nl + 1: its rows n.. of the first n columns end up holding
// Y (the forward substitution L^-1 W comes with the factorisation, parallel over all rows).
//
// Storage (dynamic shared memory): those first n columns, column-major, column j holding rows
// j..R-1 (a trapezoid: entry (i, j) at col_start(R, j) + i - j); rows i < n are S, then L;
// rows n + a are W^T, then Y, then (step 4) Z^T; and dinv (n values, 1 / L(j, j)).
//   1. S and W formed from the tables (parallel over the entries of S's lower triangle, then
//      over those of W).
//   2. Blocked right-looking Cholesky, NB columns per step: (a) every thread factors the
//      NB x NB diagonal block in registers (identical values in every thread, so a failing
//      pivot is seen by all); (b) the panel rows below it, one thread per row (x L_d^T = a);
//      barrier; (c) the trailing columns' update, rank NB: the rows come in 32-row chunks,
//      the warps in RW groups; group g takes the chunks g, g + RW, ..., its warps the columns
//      in turn, lane l row l of each chunk (a warp reads consecutive rows of one column: no
//      bank conflict; the panel values of the thread's rows stay in registers for all its
//      columns); barrier. Or (LEFT, f64 on sm_80 and later, where measured faster: tetrahedra
//      at k = 5 and 7) left-looking on the tensor cores, 8 columns per step: the block column
//      takes the updates of all the columns left of it at once (8 x 8 mma tiles, the sums in
//      registers, each entry read and written once per step instead of once per step of
//      every column left of it), warp 0 factors the diagonal block, one thread per row the
//      panel below it; three barriers per step.
//   3. K_e = A - Y Y^T and b_e (row nl). In f64 on sm_80 and later, on the tensor cores: warp
//      tasks of 8 x 8 tiles at or below the diagonal, k-steps of 4 columns of Y (mma.m8n8k4,
//      every fragment one shared-memory read per lane); 1.2x to 1.3x over the CUDA-core
//      path below at k = 2..5 on an H200, where that path's broadcast reads of Y were a fifth
//      of all instructions. Elsewhere (f32, older GPUs): warp w takes TR rows at a time, lane
//      l the columns l, l + 32, ... at or below the diagonal, the sums in registers over j < n
//      (broadcast reads of the rows, consecutive reads of the columns). Both: A formed on the
//      fly from the tables; K_e written to both triangles, so it is exactly symmetric.
//   4. [Z | u0] = L^-T Y^T, blocked from the last NB rows up: the panel columns come in
//      32-column chunks, group g takes the chunks g, g + RW, ...; every warp of the group
//      solves the NB x NB diagonal block for those columns in registers (the same numbers in
//      each), writes its share of the NB rows out, and updates its rows above the block,
//      rank NB; one barrier per block.
// Outputs (sector-blocked, condensed_at in condensed_layout.cuh): written straight from the
// registers (G = 1; a warp's 32 values of one element fall in 8 cache lines), or, with G > 1,
// staged for G = 32 / sizeof(T) consecutive elements (one block of the layout), condensed one
// after the other by the block, and written out as one contiguous range (where one store per
// value would touch a sector per value). The staging area is
// in shared memory, or (GLOBAL_STAGE) the block's own G OUT values of the global scratch
// (`scratch`, grid x G x OUT values): written and read back by the same block within a few
// microseconds, it stays in L2, costs no shared memory and so no occupancy.
// Free to fuse multiply-adds: agrees with the CPU to rounding, like the block design.
// Launched with any multiple of 32 threads (up to the launch bound: 512 in f32 and for the
// f64 tetrahedron at k = 7, else 256 in f64; when RW does not divide the warps, one group);
// checks its dynamic shared memory.
//
// Names: condense_bordered_{f32,f64}_{tri,tet}{K}, for triangles and tetrahedra k = 1..8 (the
// f64 tetrahedron at k = 8 needs 348 KB and cannot run on an H100 or H200: src/design.rs falls
// back to the block design's global panel there).
#include "block_common.cuh"

// The f64 tensor-core product (sm_80 and later; the host emulation supplies its own): one
// warp-wide D = A B + C of an 8 x 4 A, a 4 x 8 B and an 8 x 8 C, every lane holding
// a = A(lane / 4, lane % 4), b = B(lane % 4, lane / 4) and c0, c1 = C(lane / 4, 2 (lane % 4)
// + {0, 1}). Exact f64 products and sums (the order of the four-term sums is the unit's).
// HDG_NO_DMMA takes the CUDA-core path everywhere (the host emulation checks both paths).
#if !defined(HDG_NO_DMMA) && (defined(HDG_EMULATION) || (defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800))
#define HDG_HAS_DMMA 1
#ifdef HDG_EMULATION
#define dmma_8x8x4 hdg_emulated_dmma_8x8x4
#else
__device__ __forceinline__ void dmma_8x8x4(f64& c0, f64& c1, f64 a, f64 b) {
    asm("mma.sync.aligned.m8n8k4.row.col.f64.f64.f64.f64 {%0, %1}, {%2}, {%3}, {%0, %1};"
        : "+d"(c0), "+d"(c1)
        : "d"(a), "d"(b));
}
#endif
#else
#define HDG_HAS_DMMA 0
#endif

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

// Bytes of dynamic shared memory of the bordered condensation (src/design.rs mirrors this):
// the trapezoid (n columns of order R = n + nl + 1), dinv (n), and with G > 1 the staged
// outputs of G elements.
template <typename T, int N, int NL, int G>
__host__ __device__ constexpr u64 condense_bordered_shared_bytes() {
    return (u64)sizeof(T) * ((u64)N * (N + NL + 1) - (u64)N * (N - 1) / 2 + N +
                             (G > 1 ? (u64)G * bordered_outputs<N, NL>() : 0));
}

template <class C, typename T, int N, int NF, int NB, int RW, int TR, int G, bool GLOBAL_STAGE,
          bool LEFT>
__device__ void condense_bordered(const Tables& tb, const Cells& c, T* __restrict__ k_out,
                                  T* __restrict__ b_out, T* __restrict__ z_out,
                                  T* __restrict__ u0_out, int* __restrict__ info,
                                  T* __restrict__ pivot_value, T* __restrict__ scratch) {
    constexpr int F = C::NFACES;
    constexpr int NL = F * NF;
    constexpr int LD = NL + 1;  // columns of W: P (NL), then F
    constexpr int R = N + LD;   // order of the bordered matrix
    constexpr int PM = (R + 31) / 32;         // 32-row chunks of the bordered matrix
    constexpr int PMW = (PM + RW - 1) / RW;   // chunks per row group (trailing update)
    constexpr int QA = (LD + 31) / 32;        // 32-column chunks of the panel (steps 3, 4)
    constexpr int QAW = (QA + RW - 1) / RW;   // chunks per column group (step 4)
    constexpr int OUT = bordered_outputs<N, NL>();
    constexpr int OFF_B = NL * NL, OFF_Z = OFF_B + NL, OFF_U0 = OFF_Z + N * NL;
    constexpr int SHARED_G = GLOBAL_STAGE ? 1 : G;  // groups staged in shared memory
    if (!shared_memory_ok(condense_bordered_shared_bytes<T, N, NL, SHARED_G>(), info)) return;
    HDG_DYNAMIC_SHARED(smem_raw);
    T* a = reinterpret_cast<T*>(smem_raw);
    T* dinv = a + (N * R - N * (N - 1) / 2);
    // G > 1: the outputs of the group's elements, OUT values each, after dinv in shared memory
    // or in the block's own G OUT values of the global scratch.
    T* stage = GLOBAL_STAGE ? scratch + (u64)blockIdx.x * G * OUT : dinv + N;
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

        // 1. S (rows i >= j of column j) and W^T (rows n + a of column j).
        // S: the lower triangle as one list (column-major packed), entry t by thread t, t + nt, ...
        // (every lane busy, where a warp per column leaves the lanes past the diagonal idle);
        // two entries per pass, so that the reads of both are in flight at once.
        {
            constexpr int NS = N * (N + 1) / 2;
#pragma unroll 2
            for (int t = tid; t < NS; t += nt) {
                int i, j;
                packed_col_row(N, t, i, j);
                a[col_start(R, j) + i - j] = cf.template volume<N>(tb, i, j);
            }
        }
        // W^T: consecutive threads take consecutive entries of a row of W^T.
#pragma unroll 2
        for (int t = tid; t < N * NL; t += nt) {
            const int j = t / NL;
            const int col = t - j * NL;
            a[col_start(R, j) + N + col - j] = cf.template panel<N, NF>(tb, j, col);
        }
        for (int j = tid; j < N; j += nt) a[col_start(R, j) + N + NL - j] = fk[(u64)j * nc + e];
        __syncthreads();

        // 2. The first n steps of the bordered Cholesky factorisation, NB columns at a time.
        int bad = 0;
        T bad_value = T(0);
        if constexpr (LEFT && sizeof(T) == 8 && HDG_HAS_DMMA) {
            // Left-looking, LB = 8 columns per step, in f64 on the tensor cores: (1) the block
            // column takes the updates of all the columns left of it at once, one 8 x 8 tile of
            // rows per warp task, its sums in registers over k < jb (each entry read and
            // written once per step, where the right-looking update below reads and writes the
            // whole trailing matrix every step); (2) warp 0 factors the diagonal block, one
            // lane per row; (3) the panel rows below it, one thread per row.
            constexpr int LB = 8;
            const int fr = lane >> 2, fc = lane & 3;
            __shared__ int bad_shared;
            __shared__ T bad_value_shared;
            for (int jb = 0; jb < N; jb += LB) {
                const int nb = N - jb < LB ? N - jb : LB;
                // (1) Block column jb..jb+nb-1, rows i >= jb: C(i, c) -= sum_{k < jb} L(i, k)
                // L(c, k); 8 x 8 tiles (rows jb + 8 I.., the block's columns), k-steps of 4 in
                // two chains of accumulators (A = -L(i, k), B = L(c, k)^T).
                if (jb > 0) {
                    const int tiles = (R - jb + 7) / 8;
                    for (int I = warp; I < tiles; I += warps) {
                        const int i = jb + 8 * I + fr;
                        T acc[2][2];
#pragma unroll
                        for (int h = 0; h < 2; ++h) {
                            const int c = jb + 2 * fc + h;
                            const bool mine = c < jb + nb && i >= c && i < R;
                            acc[0][h] = mine ? a[col_start(R, c) + i - c] : T(0);
                            acc[1][h] = T(0);
                        }
                        for (int k0 = 0; k0 < jb; k0 += 8) {
#pragma unroll
                            for (int u = 0; u < 2; ++u) {
                                const int k = k0 + 4 * u + fc;
                                const T* lk = a + col_start(R, k) - k;  // lk[r] = L(r, k), r >= k
                                const T fa = (i < R) ? -lk[i] : T(0);
                                const T fb = lk[jb + fr];
                                dmma_8x8x4(acc[u][0], acc[u][1], fa, fb);
                            }
                        }
#pragma unroll
                        for (int h = 0; h < 2; ++h) {
                            const int c = jb + 2 * fc + h;
                            if (c < jb + nb && i >= c && i < R)
                                a[col_start(R, c) + i - c] = acc[0][h] + acc[1][h];
                        }
                    }
                    __syncthreads();
                }
                // (2) The diagonal block, by warp 0: column s scaled by lane, the rank-1 update of
                // the rest of the block one entry per lane.
                if (warp == 0) {
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
                bad = bad_shared;
                bad_value = bad_value_shared;
                if (bad) break;  // the same decision in every thread
                // (3) The panel rows below the block: x L_d^T = a(i, jb..jb+nb-1).
                for (int i = jb + nb + tid; i < R; i += nt) {
                    T x[LB];
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
        } else
        for (int jb = 0; jb < N; jb += NB) {
            const int nb = N - jb < NB ? N - jb : NB;
            const int r0 = jb + nb;  // first row (and column) below the block
            // (a) The diagonal block, factored by every thread: dl = L_d, dv = 1 / diag(L_d).
            T dl[NB][NB], dv[NB];
#pragma unroll
            for (int r = 0; r < NB; ++r)
#pragma unroll
                for (int s = 0; s <= r; ++s)
                    dl[r][s] = (r < nb) ? a[col_start(R, jb + s) + r - s] : T(1);
#pragma unroll
            for (int s = 0; s < NB; ++s) {
                if (s < nb) {
                    const T d = dl[s][s];
                    if (!(d > T(0)) && bad == 0) {
                        bad = jb + s + 1;
                        bad_value = d;
                    }
                    // f32: 1 / sqrt(d) to 2 ulp in one step (1.01x to 1.07x at k = 2..8 on an
                    // H200); f64 keeps the correctly rounded root and quotient.
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
            // (b) The panel rows below the block: x L_d^T = a(i, jb..jb+nb).
            for (int i = r0 + tid; i < R; i += nt) {
                T x[NB];
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
                const int chunks = (R - r0 + 31) / 32;
                for (int u0 = 0; group + groups * u0 < chunks; u0 += PMW) {
                    T li[PMW][NB];
#pragma unroll
                    for (int p = 0; p < PMW; ++p) {
                        const int i = r0 + 32 * (group + groups * (u0 + p)) + lane;
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
                            const int first = r0 + 32 * (group + groups * (u0 + p));
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
            if (tid == 0) {
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
        if (bad) {
            if (tid == 0) {
                info[e] = bad;
                pivot_value[e] = bad_value;
            }
            __syncthreads();
            continue;
        }

        // 3. K_e = A - Y Y^T (a >= b, both < nl) and b_e = Y Y(nl)^T (a = nl).
        // The entry (a, b) of the result, sum = (Y Y^T)(a, b), goes out here: K_e(a, b) =
        // A(a, b) - sum to both triangles, b_e(b) = sum on row nl.
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
        if constexpr (sizeof(T) == 8 && HDG_HAS_DMMA) {
            // f64 on tensor cores: 8 x 8 tiles (I, J), J <= I, of Y Y^T, k-steps of 4 columns
            // of Y (zeros past n and past row nl). A warp task: tile row I, up to JC of its
            // column tiles (2 JC accumulators). Lane l reads Y(8 I + l / 4, j0 + l % 4) as the
            // A fragment and Y(8 J + l / 4, j0 + l % 4) as the B fragment (B = Y^T).
            constexpr int TM = (LD + 7) / 8;
            constexpr int JC = TM < 8 ? TM : 8;
            const int fr = lane >> 2, fc = lane & 3;
            int I = 0, J0 = 0;  // the task of index `warp`, then every warps-th one
            for (int skip = warp; skip > 0; --skip) {
                J0 += JC;
                if (J0 > I) { ++I; J0 = 0; }
            }
            while (I < TM) {
                T acc[JC][2];
#pragma unroll
                for (int t = 0; t < JC; ++t) acc[t][0] = acc[t][1] = T(0);
                for (int j0 = 0; j0 < N; j0 += 4) {
                    const int j = j0 + fc;
                    const T* y = a + col_start(R, j) + N - j;  // y[r] = Y(r, j) for j < n
                    const int ra = 8 * I + fr;
                    const T fa = (j < N && ra < LD) ? y[ra] : T(0);
#pragma unroll
                    for (int t = 0; t < JC; ++t) {
                        const int J = J0 + t;
                        if (J <= I) {  // the same in every lane
                            const int rb = 8 * J + fr;
                            const T fb = (j < N && rb < LD) ? y[rb] : T(0);
                            dmma_8x8x4(acc[t][0], acc[t][1], fa, fb);
                        }
                    }
                }
#pragma unroll
                for (int t = 0; t < JC; ++t) {
                    const int J = J0 + t;
                    if (J <= I) {
                        gram_out(8 * I + fr, 8 * J + 2 * fc, acc[t][0]);
                        gram_out(8 * I + fr, 8 * J + 2 * fc + 1, acc[t][1]);
                    }
                }
                for (int skip = warps; skip > 0; --skip) {
                    J0 += JC;
                    if (J0 > I) { ++I; J0 = 0; }
                }
            }
        } else {
            // Warp tasks of TR rows, lane l the columns l + 32 q; the sums stay in registers.
            constexpr int NRB = (LD + TR - 1) / TR;
            for (int rb = warp; rb < NRB; rb += warps) {
                const int a0 = rb * TR;
                const int bmax = a0 + TR < NL ? a0 + TR : NL;  // columns b < bmax
                const int qmax = (bmax + 31) / 32;
                T acc[TR][QA];
#pragma unroll
                for (int r = 0; r < TR; ++r)
#pragma unroll
                    for (int q = 0; q < QA; ++q) acc[r][q] = T(0);
#pragma unroll 2
                for (int j = 0; j < N; ++j) {
                    const T* y = a + col_start(R, j) + N - j;  // y[a] = Y(a, j)
                    T ya[TR];
#pragma unroll
                    for (int r = 0; r < TR; ++r) ya[r] = (a0 + r < LD) ? y[a0 + r] : T(0);
#pragma unroll
                    for (int q = 0; q < QA; ++q) {
                        const int b = lane + 32 * q;
                        if (q < qmax) {
                            const T yb = (b < LD) ? y[b] : T(0);
#pragma unroll
                            for (int r = 0; r < TR; ++r) acc[r][q] = fmad(ya[r], yb, acc[r][q]);
                        }
                    }
                }
#pragma unroll
                for (int r = 0; r < TR; ++r)
#pragma unroll
                    for (int q = 0; q < QA; ++q)
                        if (q < qmax) gram_out(a0 + r, lane + 32 * q, acc[r][q]);
            }
        }
        __syncthreads();

        // 4. [Z | u0] = L^-T Y^T, NB rows at a time from the bottom. The panel columns come in
        // 32-column chunks; column group g takes chunks g, g + groups, ... (QAW at a time, lane
        // l column l of each), its warps the rows above the block.
        {
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
                            z[q][s] = (col < LD && s < nb)
                                          ? a[col_start(R, jb + s) + N + col - jb - s]
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
                                    for (int q = 0; q < QAW; ++q)
                                        z[q][s] = fmad(-lts, z[q][t], z[q][s]);
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
                                if constexpr (G > 1) {
                                    if (col < NL)
                                        st[OFF_Z + (jb + s) * NL + col] = z[q][s];
                                    else if (col == NL)
                                        st[OFF_U0 + jb + s] = z[q][s];
                                } else if (col < NL) {
                                    z_out[condensed_at<T>(N * NL, (jb + s) * NL + col, e)] = z[q][s];
                                } else if (col == NL) {
                                    u0_out[condensed_at<T>(N, jb + s, e)] = z[q][s];
                                }
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
                            if (col < LD) {
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
        if (tid == 0) info[e] = 0;
    }
    if constexpr (G > 1) {
        // The group's outputs, value by value, its G elements side by side: with G = 32 /
        // sizeof(T), one block of the sector-blocked layout, consecutive threads write
        // consecutive addresses (a failed element's slot holds stale values: it is flagged in
        // info).
        __syncthreads();
        const u64 first = group_index * G;
        const int valid = nc - first < (u64)G ? (int)(nc - first) : G;
        // U values per thread and pass, their reads issued together: the staging area in global
        // memory is read back from L2, and one read in flight at a time left the loop waiting
        // on it (4: 1.05x to 1.17x over 1 at k = 2..4 in f64 on an H200; 8 and 16 less).
        constexpr int U = 4;
        for (int t0 = tid; t0 < OUT * G; t0 += U * nt) {
            T x[U];
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
        __syncthreads();
    }
    }
}

#ifndef HDG_EMULATION
// Instantiations: NB columns per factorisation step, RW warp groups, TR rows per Gram task,
// the launch bounds (max threads: 512 in f32, 256 in f64, whose register tiles are twice as
// large, but for the tetrahedron at k = 7; and where given, the minimum of resident blocks,
// which caps the registers), G elements
// per output group (1: direct stores), staged in shared (SMEM) or global (GMEM) memory, and
// the factorisation: right-looking (RIGHT) or, in f64 where the GPU has tensor cores,
// left-looking on them (LEFT).
#define SMEM false
#define GMEM true
#define RIGHT false
#define LEFT true
#define BORDERED(T, CELL, NAME, K, NB, RW, TR, BOUNDS, G, STAGE, FACTOR)                           \
    extern "C" __global__ void __launch_bounds__ BOUNDS                                            \
        condense_bordered_##T##_##NAME##K(Tables tb, Cells c, T* k_out, T* b_out, T* z_out,        \
                                          T* u0_out, int* info, T* pv, T* scratch) {               \
        condense_bordered<CELL, T, CELL::n(K), CELL::nf(K), NB, RW, TR, G, STAGE, FACTOR>(         \
            tb, c, k_out, b_out, z_out, u0_out, info, pv, scratch);                                \
    }

// Per order: (NB, RW, TR, bounds, G, staging, factorisation), measured on an H200
// (src/design.rs mirrors the launch: bordered_threads, bordered_output_group). Triangles:
// (4, 1), TR = 8 in f32, 4 in f64, direct stores, right-looking. Tetrahedra: one warp group
// but for f32 at k = 8 and f64 at k = 6 and 8 (two: 1.08x at f32 k = 8; one group is 1.12x at
// f32 k = 7 and 1.05x to 1.08x at f64 k = 5, 7); at k = 2 the outputs of a sector's worth of
// elements staged in shared memory;
// at k = 3..5 (and 6 in f32) staged in a global scratch per block, with the registers capped
// (the bounds' minimum of resident blocks; some spill, and still win) so that more blocks
// are resident: 1.1x (f64, k = 5) to 2x (f32, k = 3, 4) over direct stores. Left-looking at
// f64 k = 5 and 7 (1.15x and 1.10x over right-looking; 0.8x to 0.95x at k = 2, 3, 4 and on
// triangles; at k = 6 from 0.9x to 1.03x from call to call, so right-looking there).
// The f64 tetrahedron at k = 7 (one block per SM: 197 KB of shared memory) runs 16 warps: its
// time was latency (8 warps, 0.26 eligible per scheduler, ncu); 512 threads under (512)
// bounds (128 registers, 4 bytes spilled) are 1.26x over 256 (146.6 against 185.3 ms, 1e5
// cells, H200, twice); 640 and 768 threads spill (1.08x slower), one group beats two or four
// (156, 165 ms), and f64 k = 6 gains nothing from it (75 to 89 ms against 68).
// The f32 tetrahedron at k = 8: TR = 4 is 1.03x over 8 (308.8 against 317.4 ms, twice); 640
// to 1024 threads are slower with every RW and TR tried (338 to 510 ms).
#define BORDERED_TRI(T, TR, BOUNDS)                                                                \
    BORDERED(T, Tri, tri, 1, 4, 1, TR, BOUNDS, 1, SMEM, RIGHT)                                     \
    BORDERED(T, Tri, tri, 2, 4, 1, TR, BOUNDS, 1, SMEM, RIGHT)                                     \
    BORDERED(T, Tri, tri, 3, 4, 1, TR, BOUNDS, 1, SMEM, RIGHT)                                     \
    BORDERED(T, Tri, tri, 4, 4, 1, TR, BOUNDS, 1, SMEM, RIGHT)                                     \
    BORDERED(T, Tri, tri, 5, 4, 1, TR, BOUNDS, 1, SMEM, RIGHT)                                     \
    BORDERED(T, Tri, tri, 6, 4, 1, TR, BOUNDS, 1, SMEM, RIGHT)                                     \
    BORDERED(T, Tri, tri, 7, 4, 1, TR, BOUNDS, 1, SMEM, RIGHT)                                     \
    BORDERED(T, Tri, tri, 8, 4, 1, TR, BOUNDS, 1, SMEM, RIGHT)

BORDERED_TRI(f32, 8, (512))
BORDERED(f32, Tet, tet, 1, 4, 1, 8, (512), 1, SMEM, RIGHT)
BORDERED(f32, Tet, tet, 2, 4, 1, 8, (512), 8, SMEM, RIGHT)
BORDERED(f32, Tet, tet, 3, 4, 1, 8, (512, 2), 8, GMEM, RIGHT)
BORDERED(f32, Tet, tet, 4, 4, 1, 8, (512, 2), 8, GMEM, RIGHT)
BORDERED(f32, Tet, tet, 5, 4, 1, 8, (512, 2), 8, GMEM, RIGHT)
BORDERED(f32, Tet, tet, 6, 4, 1, 8, (512, 2), 8, GMEM, RIGHT)
BORDERED(f32, Tet, tet, 7, 8, 1, 8, (512), 1, SMEM, RIGHT)
BORDERED(f32, Tet, tet, 8, 8, 2, 4, (512), 1, SMEM, RIGHT)
BORDERED_TRI(f64, 4, (256))
BORDERED(f64, Tet, tet, 1, 4, 1, 4, (256), 1, SMEM, RIGHT)
BORDERED(f64, Tet, tet, 2, 4, 1, 4, (256), 4, SMEM, RIGHT)
BORDERED(f64, Tet, tet, 3, 4, 1, 4, (256, 3), 4, GMEM, RIGHT)
BORDERED(f64, Tet, tet, 4, 4, 1, 4, (256, 4), 4, GMEM, RIGHT)
BORDERED(f64, Tet, tet, 5, 4, 1, 2, (256, 4), 4, GMEM, LEFT)
BORDERED(f64, Tet, tet, 6, 4, 2, 4, (256), 1, SMEM, RIGHT)
BORDERED(f64, Tet, tet, 7, 8, 1, 4, (512), 1, SMEM, LEFT)
BORDERED(f64, Tet, tet, 8, 8, 2, 4, (256), 1, SMEM, RIGHT)
#endif  // HDG_EMULATION
