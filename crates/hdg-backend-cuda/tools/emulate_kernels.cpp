// Host emulation of the element kernels (kernels/condense.cu, condense_bordered.cu,
// recover.cu, postprocess.cu, assemble.cu and weighted.cu):
// checks their index arithmetic and barrier structure without a GPU.
//
//     g++ -std=c++20 -O1 -ffp-contract=off -pthread -I crates/hdg-backend-cuda/kernels \
//         crates/hdg-backend-cuda/tools/emulate_kernels.cpp -o /tmp/emulate && /tmp/emulate
//     (-DBIG adds tetrahedra at k = 5 and 8; -DHDG_NO_MMA checks the bordered condensation's
//     CUDA-core paths instead of its tensor-core ones, emulated warp by warp; EMU_NT=7 runs
//     the block kernels with 7 threads, EMU_BAD=1 makes one element indefinite and prints the
//     pivot flags of every design. .ci/run builds and runs it with and without -DHDG_NO_MMA.)
//
// Every CUDA thread of a block is an OS thread, __syncthreads is a std::barrier, __shared__ is
// static, the round-to-nearest intrinsics are plain operations (with -ffp-contract=off the
// thread design then performs the CPU backend's operations). On random data with the tables'
// structure (products of random reference matrices, so S and the postprocessing matrix are
// SPD) it compares, per cell type and order: the block condensation (shared and global panel,
// fewer blocks than cells) with the thread condensation (K_e, b_e, Z, u0; K_e symmetric),
// the weighted condensation and flux (constant coefficients given at points) with the thread
// condensation and recovery, the block recovery and postprocessing with the thread ones, the
// gather, and the assembly
// with a transcription of hdg-backend-cpu's dbf::assemble (to the bit).
#include <barrier>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <memory>
#include <random>
#include <thread>
#include <vector>

struct Dim3 {
    unsigned x;
};
thread_local Dim3 threadIdx, blockIdx;
Dim3 blockDim, gridDim;
std::barrier<>* g_barrier = nullptr;
inline void __syncthreads() { g_barrier->arrive_and_wait(); }
std::vector<unsigned char> g_shared;
inline unsigned hdg_emulated_dynamic_smem_size() { return (unsigned)g_shared.size(); }

#define HDG_EMULATION 1
#define __global__
#define __device__
#define __host__
#define __forceinline__ inline
#define __launch_bounds__(x)
#define __restrict__
#define __shared__ static
#define __align__(n) alignas(n)
#define HDG_DYNAMIC_SHARED(name) unsigned char* name = g_shared.data()
inline double __dmul_rn(double a, double b) { return a * b; }
inline double __dadd_rn(double a, double b) { return a + b; }
inline double __dsub_rn(double a, double b) { return a - b; }
inline float __fmul_rn(float a, float b) { return a * b; }
inline float __fadd_rn(float a, float b) { return a + b; }
inline float __fsub_rn(float a, float b) { return a - b; }
inline double rsqrt(double a) { return 1.0 / std::sqrt(a); }
inline float rsqrt(float a) { return 1.0f / std::sqrt(a); }

// The warp-wide f64 tensor-core product (mma.m8n8k4, see condense_bordered.cu): the lanes of a
// warp post their fragments, meet at the warp's barrier, and each computes its two entries of
// D = A B + C (four fused multiply-adds in k order), then meet again before the buffer is reused.
struct WarpFragments {
    double a[32], b[32];
    float fa[32][4], fb[32][2];
};
std::vector<WarpFragments> g_warp_fragments;
std::vector<std::unique_ptr<std::barrier<>>> g_warp_barriers;
inline void __syncwarp() { g_warp_barriers[threadIdx.x >> 5]->arrive_and_wait(); }
inline void hdg_emulated_dmma_8x8x4(double& c0, double& c1, double a, double b) {
    const unsigned lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    if (warp >= g_warp_barriers.size() || (blockDim.x & 31) != 0) {
        std::fprintf(stderr, "dmma in a block of %u threads: needs whole warps\n", blockDim.x);
        std::abort();
    }
    WarpFragments& f = g_warp_fragments[warp];
    f.a[lane] = a;
    f.b[lane] = b;
    g_warp_barriers[warp]->arrive_and_wait();
    const unsigned row = lane >> 2;
    double* c[2] = {&c0, &c1};
    for (unsigned i = 0; i < 2; ++i) {
        const unsigned col = (lane & 3) * 2 + i;
        double s = *c[i];
        for (unsigned k = 0; k < 4; ++k) s = std::fma(f.a[row * 4 + k], f.b[col * 4 + k], s);
        *c[i] = s;
    }
    g_warp_barriers[warp]->arrive_and_wait();
}

// The warp-wide TF32 tensor-core product (mma.m16n8k8, see condense_bordered.cu): lane l holds
// A(l / 4 + 8 (v % 2), l % 4 + 4 (v / 2)), B(l % 4 + 4 v, l / 4) and C(l / 4 + 8 (v / 2),
// 2 (l % 4) + v % 2); the inputs are already TF32 values, so the products are exact in f32.
inline void hdg_emulated_mma_tf32_16x8x8(float (&c)[4], const float (&a)[4], const float (&b)[2]) {
    const unsigned lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    if (warp >= g_warp_barriers.size() || (blockDim.x & 31) != 0) {
        std::fprintf(stderr, "mma in a block of %u threads: needs whole warps\n", blockDim.x);
        std::abort();
    }
    WarpFragments& f = g_warp_fragments[warp];
    for (int v = 0; v < 4; ++v) f.fa[lane][v] = a[v];
    for (int v = 0; v < 2; ++v) f.fb[lane][v] = b[v];
    g_warp_barriers[warp]->arrive_and_wait();
    for (unsigned v = 0; v < 4; ++v) {
        const unsigned row = (lane >> 2) + 8 * (v >> 1), col = 2 * (lane & 3) + (v & 1);
        float s = c[v];
        for (unsigned k = 0; k < 8; ++k)
            s = std::fma(f.fa[4 * (row % 8) + k % 4][(row >= 8) + 2 * (k >= 4)],
                         f.fb[4 * col + k % 4][k >= 4], s);
        c[v] = s;
    }
    g_warp_barriers[warp]->arrive_and_wait();
}

// What build.rs generates for the kernels from src/element_instances.rs (the emulation has no
// build step); condense_bordered.cu checks that the slack covers its tiles.
#define BORDERED_SLACK 16
#include "condense.cu"
#include "recover.cu"
#include "postprocess.cu"
#include "condense_bordered.cu"
#include "assemble.cu"
#include "weighted.cu"

// The bordered condensation on `grid` blocks of `threads` threads, with the dynamic shared memory
// of its layout (the table's instantiations get theirs from build.rs, which condense_bordered
// checks against the same layout; these are the emulation's own); returns its bytes.
template <class C, typename T, int N, int NF, int NB, int RW, int TR, int G, bool GLOBAL_STAGE,
          bool LEFT, int CH = 0>
size_t launch_bordered(unsigned grid, unsigned threads, const Tables& tb, const Cells& c, T* k,
                       T* b, T* z, T* u0, int* info, T* pv, T* scratch) {
    constexpr u64 bytes = BorderedLayout<T, N, C::NFACES * NF, G, GLOBAL_STAGE, CH>::BYTES;
    launch(grid, threads, bytes, [&] {
        condense_bordered<C, T, N, NF, NB, RW, TR, G, GLOBAL_STAGE, LEFT, CH, bytes>(
            tb, c, k, b, z, u0, info, pv, scratch);
    });
    return bytes;
}

// Runs fn on `grid` blocks of `threads` threads, blocks one after the other.
void launch(unsigned grid, unsigned threads, size_t shared, const std::function<void()>& fn) {
    blockDim.x = threads;
    gridDim.x = grid;
    g_shared.assign(shared, 0xff);
    g_warp_fragments.assign(threads / 32, WarpFragments{});
    g_warp_barriers.clear();
    for (unsigned w = 0; w < threads / 32; ++w)
        g_warp_barriers.push_back(std::make_unique<std::barrier<>>(32));
    for (unsigned b = 0; b < grid; ++b) {
        std::barrier<> bar(threads);
        g_barrier = &bar;
        std::vector<std::thread> team;
        for (unsigned t = 0; t < threads; ++t)
            team.emplace_back([&, t, b] {
                threadIdx.x = t;
                blockIdx.x = b;
                fn();
            });
        for (auto& th : team) th.join();
    }
}

std::mt19937_64 rng(42);
double uni(double a, double b) { return std::uniform_real_distribution<double>(a, b)(rng); }

// Random row-major matrices.
std::vector<double> random_matrix(int r, int c) {
    std::vector<double> m(r * c);
    for (auto& v : m) v = uni(-1, 1);
    return m;
}
// A B^T (r x c times r2 x c -> r x r2).
std::vector<double> abt(const std::vector<double>& a, const std::vector<double>& b, int r, int r2,
                        int c) {
    std::vector<double> out(r * r2, 0.0);
    for (int i = 0; i < r; ++i)
        for (int j = 0; j < r2; ++j) {
            double s = 0;
            for (int k = 0; k < c; ++k) s += a[i * c + k] * b[j * c + k];
            out[i * r2 + j] = s;
        }
    return out;
}
// A^T B (A r x c, B r x c2 -> c x c2).
std::vector<double> atb(const std::vector<double>& a, const std::vector<double>& b, int r, int c,
                        int c2) {
    std::vector<double> out(c * c2, 0.0);
    for (int i = 0; i < c; ++i)
        for (int j = 0; j < c2; ++j) {
            double s = 0;
            for (int k = 0; k < r; ++k) s += a[k * c + i] * b[k * c2 + j];
            out[i * c2 + j] = s;
        }
    return out;
}
std::vector<double> ab(const std::vector<double>& a, const std::vector<double>& b, int r, int c,
                       int c2) {
    std::vector<double> out(r * c2, 0.0);
    for (int i = 0; i < r; ++i)
        for (int j = 0; j < c2; ++j) {
            double s = 0;
            for (int k = 0; k < c; ++k) s += a[i * c + k] * b[k * c2 + j];
            out[i * c2 + j] = s;
        }
    return out;
}
void append(std::vector<double>& to, const std::vector<double>& m) {
    to.insert(to.end(), m.begin(), m.end());
}

// Cells whose K_e (planes a nl + b of the sector-blocked outputs) is not exactly symmetric;
// prints the first offending entry of each.
template <typename T>
int asymmetric_cells(const std::vector<T>& k, int nl, int nc, const char* what) {
    int bad = 0;
    for (int e = 0; e < nc; ++e)
        for (int a = 0, found = 0; a < nl && !found; ++a)
            for (int b = 0; b < a && !found; ++b)
                if (k[condensed_at<T>(nl * nl, a * nl + b, e)] !=
                    k[condensed_at<T>(nl * nl, b * nl + a, e)]) {
                    printf("  %s K not symmetric at %d %d %d\n", what, e, a, b);
                    found = 1;
                    ++bad;
                }
    return bad;
}

// Largest difference of a from b relative to b's largest value; a value of a left unwritten
// (NaN, the poison of the outputs) where b has one counts as 1e300 (std::max drops a NaN).
double rel(const std::vector<double>& a, const std::vector<double>& b) {
    double e = 0, s = 0;
    for (size_t i = 0; i < a.size(); ++i) {
        if (a[i] != a[i] && b[i] == b[i]) return 1e300;
        e = std::max(e, std::fabs(a[i] - b[i]));
        s = std::max(s, std::fabs(b[i]));
    }
    return s > 0 ? e / s : e;
}

template <class C, int K>
int run(int nc) {
    constexpr int D = C::DIM, F = C::NFACES, NO = C::NORIENT;
    constexpr int N = C::n(K), NF = C::nf(K), NL = F * NF, NP = C::n(K + 1);
    printf("cell %s k %d: n %d nf %d nl %d n' %d, %d cells\n", D == 2 ? "tri" : "tet", K, N, NF,
           NL, NP, nc);
    // Tables, as ElementTables forms them (products of random reference matrices).
    std::vector<std::vector<double>> dmat(D), gt(F * NO), em(F);
    for (int s = 0; s < D; ++s) dmat[s] = random_matrix(N, N);
    for (int f = 0; f < F; ++f) {
        auto r = random_matrix(N, N);
        em[f] = abt(r, r, N, N, N);
        for (int o = 0; o < NO; ++o) gt[f * NO + o] = random_matrix(N, NF);
    }
    std::vector<double> t_deriv, t_dprod, t_fmass, t_ftrace, t_dtrace, t_tprod, t_pstiff, t_pderiv;
    for (int s = 0; s < D; ++s) {
        append(t_deriv, dmat[s]);
        for (int t = 0; t < D; ++t) append(t_dprod, abt(dmat[s], dmat[t], N, N, N));
    }
    for (int f = 0; f < F; ++f) {
        append(t_fmass, em[f]);
        for (int o = 0; o < NO; ++o) append(t_ftrace, gt[f * NO + o]);
    }
    for (int s = 0; s < D; ++s)
        for (int f = 0; f < F; ++f)
            for (int o = 0; o < NO; ++o) append(t_dtrace, ab(dmat[s], gt[f * NO + o], N, N, NF));
    for (int f = 0; f < F; ++f)
        for (int o = 0; o < NO; ++o)
            for (int g = 0; g < F; ++g)
                for (int p = 0; p < NO; ++p)
                    append(t_tprod, atb(gt[f * NO + o], gt[g * NO + p], N, NF, NF));
    std::vector<std::vector<double>> qs(D);
    for (int s = 0; s < D; ++s) qs[s] = random_matrix(NP, NP);
    for (int s = 0; s < D; ++s)
        for (int t = 0; t < D; ++t) append(t_pstiff, abt(qs[s], qs[t], NP, NP, NP));
    for (int s = 0; s < D; ++s) append(t_pderiv, random_matrix(N, NP));
    Tables tb{(u64)t_deriv.data(),  (u64)t_dprod.data(),  (u64)t_fmass.data(),
              (u64)t_ftrace.data(), (u64)t_dtrace.data(), (u64)t_tprod.data(),
              (u64)t_pstiff.data(), (u64)t_pderiv.data()};
    // Cells (element-fastest).
    std::vector<double> geo(C::GEO_SIZE * nc), kappa(nc), reaction(nc), tau(F * nc), load(N * nc);
    std::vector<unsigned char> orient(F * nc);
    std::vector<unsigned> faces(F * nc);
    for (int e = 0; e < nc; ++e) {
        geo[C::GEO_DET * nc + e] = uni(0.5, 2);
        for (int v = 0; v < D * D; ++v) geo[(C::GEO_JINV + v) * nc + e] = uni(-1, 1) + (v % (D + 1) == 0 ? 2 : 0);
        for (int v = 0; v < F; ++v) geo[(C::GEO_FJ + v) * nc + e] = uni(0.5, 2);
        for (int v = 0; v < F * D; ++v) geo[(C::GEO_NRM + v) * nc + e] = uni(-1, 1);
        kappa[e] = uni(0.2, 5);
        reaction[e] = uni(0.1, 3);
        for (int f = 0; f < F; ++f) {
            tau[f * nc + e] = uni(0.3, 5);
            orient[f * nc + e] = (unsigned char)(rng() % NO);
            faces[f * nc + e] = (unsigned)(e * F + f);
        }
        for (int i = 0; i < N; ++i) load[i * nc + e] = uni(-1, 1);
    }
    Cells c{(u64)nc,          (u64)geo.data(),  (u64)orient.data(), (u64)faces.data(),
            (u64)kappa.data(), (u64)reaction.data(), (u64)tau.data(), (u64)load.data()};
    int fails = 0;
    const int ncb = (nc + 3) / 4 * 4;  // the outputs' whole blocks of 4 cells (f64)
    const int bad_cell = nc > 2 ? 2 : -1;  // made indefinite: must be flagged, others fine
    if (getenv("EMU_BAD") && bad_cell >= 0) reaction[bad_cell] = -1e6;
    // Condensation: thread vs block (shared) vs block (global).
    std::vector<double> k[3], b[3], z[3], u0[3];
    for (int d = 0; d < 3; ++d) {
        k[d].assign((size_t)NL * NL * ncb, NAN);
        b[d].assign((size_t)NL * ncb, NAN);
        z[d].assign((size_t)N * NL * ncb, NAN);
        u0[d].assign((size_t)N * ncb, NAN);
    }
    std::vector<int> info(nc, 7);
    std::vector<double> pv(nc);
    launch((nc + 31) / 32, 32, 0, [&] {
        condense_thread<C, double, N, NF>(tb, c, k[0].data(), b[0].data(), z[0].data(),
                                          u0[0].data(), info.data(), pv.data());
    });
    std::vector<int> thread_info = info;
    if (getenv("EMU_BAD")) {
        for (int e = 0; e < nc; ++e) printf("  thread info[%d] = %d (pivot value %g)\n", e, info[e], info[e] ? pv[e] : 0.0);
    } else
    for (int e = 0; e < nc; ++e)
        if (info[e]) printf("  thread condense: info[%d] = %d\n", e, info[e]), ++fails;
    auto threads_for = [](int w) { if (getenv("EMU_NT")) return atoi(getenv("EMU_NT")); int t = (w + 31) / 32 * 32; return t < 32 ? 32 : (t > 256 ? 256 : t); };
    const int nt = threads_for(NL + 1);
    const unsigned grid = 3;  // fewer blocks than cells: the grid-stride loop
    std::vector<double> scratch((size_t)grid * N * (NL + 1), NAN);
    for (int d = 1; d < 3; ++d) {
        std::fill(info.begin(), info.end(), 7);
        bool shared_w = d == 1;
        size_t bytes = sizeof(double) * (N * (N + 1) / 2 + N + (shared_w ? N * (NL + 1) : 0));
        launch(grid, nt, bytes, [&] {
            if (shared_w)
                condense_block<C, double, N, NF, true>(tb, c, k[d].data(), b[d].data(), z[d].data(),
                                                       u0[d].data(), info.data(), pv.data(),
                                                       scratch.data());
            else
                condense_block<C, double, N, NF, false>(tb, c, k[d].data(), b[d].data(),
                                                        z[d].data(), u0[d].data(), info.data(),
                                                        pv.data(), scratch.data());
        });
        if (getenv("EMU_BAD")) {
            for (int e = 0; e < nc; ++e) printf("  block(%d) info[%d] = %d (pivot value %g)\n", d, e, info[e], info[e] ? pv[e] : 0.0);
            continue;
        }
        for (int e = 0; e < nc; ++e)
            if (info[e]) printf("  block condense (%d): info[%d] = %d\n", d, e, info[e]), ++fails;
        double ek = rel(k[d], k[0]), eb = rel(b[d], b[0]), ez = rel(z[d], z[0]), eu = rel(u0[d], u0[0]);
        printf("  condense %s (%d threads, %zu B): K %.2e b %.2e Z %.2e u0 %.2e\n",
               shared_w ? "block       " : "block-global", nt, bytes, ek, eb, ez, eu);
        if (!(ek < 1e-10 && eb < 1e-10 && ez < 1e-10 && eu < 1e-10)) ++fails;
    }
    // The weighted condensation (weighted.cu) with kappa^-1 = 1 / kappa and c at every point,
    // as a scalar and as a tensor (1 / kappa) I, and a basis orthonormal on its rule (random
    // columns made orthonormal, weights 1): M_k = det / kappa I, so the thread design's answers.
    const int wpoints = N + 3;
    std::vector<double> wbasis = random_matrix(wpoints, N), wweights(wpoints, 1.0);
    for (int i = 0; i < N; ++i) {
        for (int j = 0; j < i; ++j) {
            double s = 0;
            for (int q = 0; q < wpoints; ++q) s += wbasis[q * N + i] * wbasis[q * N + j];
            for (int q = 0; q < wpoints; ++q) wbasis[q * N + i] -= s * wbasis[q * N + j];
        }
        double s = 0;
        for (int q = 0; q < wpoints; ++q) s += wbasis[q * N + i] * wbasis[q * N + i];
        for (int q = 0; q < wpoints; ++q) wbasis[q * N + i] /= std::sqrt(s);
    }
    const u64 wvalues = std::max<u64>(condense_weighted_values<D, N, NL>(),
                                      (u64)(D * N) * (D * N) + (u64)(D * N) * (N + NL) + D * N +
                                          std::max(N + NL, D * wpoints));
    std::vector<double> wkinv[2], wreaction((size_t)nc * wpoints);
    for (int tensor = 0; tensor < 2; ++tensor) {
        const int comps = tensor ? D * D : 1;
        wkinv[tensor].assign((size_t)nc * wpoints * comps, 0.0);
        for (int e = 0; e < nc; ++e)
            for (int q = 0; q < wpoints; ++q) {
                for (int r = 0; r < D; ++r)
                    wkinv[tensor][((size_t)e * wpoints + q) * comps + (tensor ? r * D + r : 0)] =
                        1.0 / kappa[e];
                wreaction[(size_t)e * wpoints + q] = reaction[e];
            }
    }
    auto weighted_of = [&](int tensor) {
        return Weighted{(u64)wbasis.data(),       (u64)wweights.data(), (u64)wkinv[tensor].data(),
                        (u64)wreaction.data(),    wpoints,              tensor ? D * D : 1,
                        wvalues};
    };
    if (!getenv("EMU_BAD"))
        for (int tensor = 0; tensor < 2; ++tensor) {
            std::vector<double> kw((size_t)NL * NL * ncb, NAN), bw((size_t)NL * ncb, NAN),
                zw((size_t)N * NL * ncb, NAN), uw((size_t)N * ncb, NAN),
                ws((size_t)grid * wvalues, NAN);
            std::fill(info.begin(), info.end(), 7);
            const Weighted wt = weighted_of(tensor);
            launch(grid, nt, 0, [&] {
                condense_weighted<C, double, N, NF>(tb, c, wt, kw.data(), bw.data(), zw.data(),
                                                    uw.data(), info.data(), pv.data(), ws.data());
            });
            for (int e = 0; e < nc; ++e)
                if (info[e]) printf("  weighted condense: info[%d] = %d\n", e, info[e]), ++fails;
            double ek = rel(kw, k[0]), eb = rel(bw, b[0]), ez = rel(zw, z[0]), eu = rel(uw, u0[0]);
            printf("  condense weighted %s (%d threads): K %.2e b %.2e Z %.2e u0 %.2e\n",
                   tensor ? "tensor" : "scalar", nt, ek, eb, ez, eu);
            if (!(ek < 1e-10 && eb < 1e-10 && ez < 1e-10 && eu < 1e-10)) ++fails;
            fails += asymmetric_cells(kw, NL, nc, "weighted");
        }
    // The bordered condensation (whole warps; 32 and 64 threads: one warp, and warps that
    // split the columns).
    // Four instantiations (NB = 4 and NB = 8, both with two warp groups; NB = 4 with the
    // outputs staged in groups of G = 4 elements, in shared memory and in the global scratch,
    // the last group partial when the cell count is not a multiple of 4), 1, 2, 3 and 4 warps
    // (1 and 3: the groups fall back to one).
    // Then the left-looking factorisation (f64 on the tensor cores) in the configurations that
    // use it: NB = 8 with direct stores, NB = 4 staged in the global scratch. Last, the panel
    // in passes of PW = (nl + 1) / 3 + 1 columns (three passes, the last one partial),
    // left-looking and right-looking (NB = 8), its earlier passes' Y in the global scratch.
    constexpr int PW = (NL + 1) / 3 + 1;
    for (int cfg = 0; cfg < 32; ++cfg) {
        const int ntb = 32 * (1 + cfg % 4);
        const bool passes = cfg >= 24;
        const bool left = cfg >= 16 && cfg < 28;
        const bool wide = (cfg >= 4 && cfg < 8) || (cfg >= 16 && cfg < 20) || passes;
        const int g = (cfg >= 8 && cfg < 16) || (cfg >= 20 && cfg < 24) ? 4 : 1;
        const bool global_stage = cfg >= 12 && cfg < 24 && !(cfg >= 16 && cfg < 20);
        std::vector<double> kb((size_t)NL * NL * ncb, NAN), bb((size_t)NL * ncb, NAN),
            zb((size_t)N * NL * ncb, NAN), ub((size_t)N * ncb, NAN);
        const size_t scratch_values = global_stage ? (size_t)grid * 4 * bordered_outputs<N, NL>()
                                      : passes     ? (size_t)grid * ((NL + PW) / PW - 1) * PW * N
                                                   : 1;
        std::vector<double> stage_scratch(scratch_values, NAN);
        std::fill(info.begin(), info.end(), 7);
        double *kd = kb.data(), *bd = bb.data(), *zd = zb.data(), *ud = ub.data();
        double* sd = stage_scratch.data();
        size_t bytes;
        if (passes && left)
            bytes = launch_bordered<C, double, N, NF, 8, 2, 4, 1, false, true, PW>(
                grid, ntb, tb, c, kd, bd, zd, ud, info.data(), pv.data(), sd);
        else if (passes)
            bytes = launch_bordered<C, double, N, NF, 8, 2, 4, 1, false, false, PW>(
                grid, ntb, tb, c, kd, bd, zd, ud, info.data(), pv.data(), sd);
        else if (left && global_stage)
            bytes = launch_bordered<C, double, N, NF, 4, 2, 2, 4, true, true>(
                grid, ntb, tb, c, kd, bd, zd, ud, info.data(), pv.data(), sd);
        else if (left)
            bytes = launch_bordered<C, double, N, NF, 8, 2, 4, 1, false, true>(
                grid, ntb, tb, c, kd, bd, zd, ud, info.data(), pv.data(), nullptr);
        else if (global_stage)
            bytes = launch_bordered<C, double, N, NF, 4, 2, 4, 4, true, false>(
                grid, ntb, tb, c, kd, bd, zd, ud, info.data(), pv.data(), sd);
        else if (g == 4)
            bytes = launch_bordered<C, double, N, NF, 4, 2, 4, 4, false, false>(
                grid, ntb, tb, c, kd, bd, zd, ud, info.data(), pv.data(), nullptr);
        else if (wide)
            bytes = launch_bordered<C, double, N, NF, 8, 2, 8, 1, false, false>(
                grid, ntb, tb, c, kd, bd, zd, ud, info.data(), pv.data(), nullptr);
        else
            bytes = launch_bordered<C, double, N, NF, 4, 2, 4, 1, false, false>(
                grid, ntb, tb, c, kd, bd, zd, ud, info.data(), pv.data(), nullptr);
        if (getenv("EMU_BAD")) {
            for (int e = 0; e < nc; ++e) printf("  bordered(%d, %d, %d%s%s) info[%d] = %d (pivot value %g)\n", wide ? 8 : 4, g, ntb, left ? " left" : "", passes ? " passes" : "", e, info[e], info[e] ? pv[e] : 0.0);
            continue;
        }
        for (int e = 0; e < nc; ++e)
            if (info[e]) printf("  bordered condense: info[%d] = %d\n", e, info[e]), ++fails;
        double ek = rel(kb, k[0]), eb = rel(bb, b[0]), ez = rel(zb, z[0]), eu = rel(ub, u0[0]);
        printf("  condense bordered NB %d G %d%s%s%s (%d threads, %zu B): K %.2e b %.2e Z %.2e u0 %.2e\n",
               wide ? 8 : 4, g, global_stage ? " global" : "", left ? " left" : "",
               passes ? " passes" : "", ntb, bytes, ek, eb, ez, eu);
        if (!(ek < 1e-10 && eb < 1e-10 && ez < 1e-10 && eu < 1e-10)) ++fails;
        fails += asymmetric_cells(kb, NL, nc, "bordered");
    }
    if (getenv("EMU_BAD")) return 0;
    // The bordered condensation in f32 on the same data, right-looking on the CUDA cores and
    // left-looking (with the Gram product) on the tensor cores as 3xTF32 (or, with
    // -DHDG_NO_MMA, the CUDA-core path again), against the f64 thread design: both within f32
    // rounding of it, the tensor-core one within a few times the CUDA-core one's error.
    {
        auto to_f32 = [](const std::vector<double>& v) { return std::vector<float>(v.begin(), v.end()); };
        std::vector<float> f_deriv = to_f32(t_deriv), f_dprod = to_f32(t_dprod),
                           f_fmass = to_f32(t_fmass), f_ftrace = to_f32(t_ftrace),
                           f_dtrace = to_f32(t_dtrace), f_tprod = to_f32(t_tprod),
                           f_pstiff = to_f32(t_pstiff), f_pderiv = to_f32(t_pderiv);
        Tables tf{(u64)f_deriv.data(),  (u64)f_dprod.data(),  (u64)f_fmass.data(),
                  (u64)f_ftrace.data(), (u64)f_dtrace.data(), (u64)f_tprod.data(),
                  (u64)f_pstiff.data(), (u64)f_pderiv.data()};
        std::vector<float> f_geo = to_f32(geo), f_kappa = to_f32(kappa),
                           f_reaction = to_f32(reaction), f_tau = to_f32(tau), f_load = to_f32(load);
        Cells cf32{(u64)nc, (u64)f_geo.data(), (u64)orient.data(), (u64)faces.data(),
                   (u64)f_kappa.data(), (u64)f_reaction.data(), (u64)f_tau.data(), (u64)f_load.data()};
        const int ncf = (nc + 7) / 8 * 8;  // the outputs' whole blocks of 8 cells (f32)
        // Largest difference from the f64 thread design over all outputs, relative to each
        // output's largest value.
        auto f32_error = [&](const std::vector<float>& kf, const std::vector<float>& bf,
                             const std::vector<float>& zf, const std::vector<float>& uf) {
            double worst = 0;
            auto one = [&](const std::vector<float>& f, const std::vector<double>& d, int planes) {
                double e = 0, s = 0;
                for (int c2 = 0; c2 < nc; ++c2)
                    for (int v = 0; v < planes; ++v) {
                        const double x = f[condensed_at<float>(planes, v, c2)];
                        const double y = d[condensed_at<double>(planes, v, c2)];
                        e = std::max(e, std::fabs(x - y));
                        s = std::max(s, std::fabs(y));
                        if (!(x == x)) e = 1e300;
                    }
                worst = std::max(worst, e / s);
            };
            one(kf, k[0], NL * NL);
            one(bf, b[0], NL);
            one(zf, z[0], N * NL);
            one(uf, u0[0], N);
            return worst;
        };
        double err[2];
        for (int left = 0; left < 2; ++left) {
            std::vector<float> kf((size_t)NL * NL * ncf, NAN), bf((size_t)NL * ncf, NAN),
                zf((size_t)N * NL * ncf, NAN), uf((size_t)N * ncf, NAN), pvf(nc);
            std::fill(info.begin(), info.end(), 7);
            const int ntb = left ? 96 : 64;
            if (left)
                launch_bordered<C, float, N, NF, 8, 1, 4, 1, false, true>(
                    grid, ntb, tf, cf32, kf.data(), bf.data(), zf.data(), uf.data(), info.data(),
                    pvf.data(), nullptr);
            else
                launch_bordered<C, float, N, NF, 8, 2, 4, 1, false, false>(
                    grid, ntb, tf, cf32, kf.data(), bf.data(), zf.data(), uf.data(), info.data(),
                    pvf.data(), nullptr);
            for (int e = 0; e < nc; ++e)
                if (info[e]) printf("  bordered f32 condense: info[%d] = %d\n", e, info[e]), ++fails;
            err[left] = f32_error(kf, bf, zf, uf);
            fails += asymmetric_cells(kf, NL, nc, "bordered f32");
        }
        printf("  condense bordered f32 against f64: right-looking %.2e, left-looking%s %.2e\n",
               err[0], HDG_HAS_MMA ? " (3xTF32)" : "", err[1]);
        if (!(err[0] < 1e-3 && err[1] < 1e-3 && err[1] < 8 * err[0] + 1e-6)) ++fails;
    }
    // Symmetry of K from the block design.
    fails += asymmetric_cells(k[1], NL, nc, "block");
    // Recovery: thread vs block.
    const int n_faces = F * nc;
    std::vector<unsigned> free_index(n_faces);
    std::vector<double> trace(n_faces * NF), dirichlet(n_faces * NF);
    for (int f = 0; f < n_faces; ++f) {
        free_index[f] = (f % 3 == 0) ? NONE_INDEX : (unsigned)f;
        for (int m = 0; m < NF; ++m) {
            trace[f * NF + m] = uni(-1, 1);
            dirichlet[f * NF + m] = uni(-1, 1);
        }
    }
    std::vector<double> u[2], q[2];
    for (int d = 0; d < 2; ++d) {
        u[d].assign((size_t)N * nc, NAN);
        q[d].assign((size_t)D * N * nc, NAN);
    }
    std::vector<int> rinfo(1, 0);
    launch((nc + 31) / 32, 32, 0, [&] {
        recover_thread<C, double, N, NF>(tb, c, free_index.data(), trace.data(), dirichlet.data(),
                                         z[0].data(), u0[0].data(), u[0].data(), q[0].data());
    });
    {
        int ntr = threads_for(D * N);
        size_t bytes = sizeof(double) * (NL + N);
        launch(grid, ntr, bytes, [&] {
            recover_block<C, double, N, NF>(tb, c, free_index.data(), trace.data(),
                                            dirichlet.data(), z[0].data(), u0[0].data(),
                                            u[1].data(), q[1].data(), rinfo.data());
        });
        double eu = rel(u[1], u[0]), eq = rel(q[1], q[0]);
        printf("  recover block (%d threads): u %.2e q %.2e info %d\n", ntr, eu, eq, rinfo[0]);
        if (!(eu < 1e-10 && eq < 1e-10) || rinfo[0]) ++fails;
    }
    // The weighted flux: Q of the thread recovery, and kappa^-1 q_h projected = Q / kappa.
    for (int tensor = 0; tensor < 2; ++tensor) {
        std::vector<double> qw((size_t)D * N * nc, NAN), pw((size_t)D * N * nc, NAN),
            ws((size_t)grid * wvalues, NAN), expected((size_t)D * N * nc);
        for (int v = 0; v < D * N; ++v)
            for (int e = 0; e < nc; ++e)
                expected[(size_t)v * nc + e] = q[0][(size_t)v * nc + e] / kappa[e];
        std::vector<int> winfo(1, 0);
        const Weighted wt = weighted_of(tensor);
        launch(grid, threads_for(D * N), 0, [&] {
            weighted_flux<C, double, N, NF>(tb, c, wt, free_index.data(), trace.data(),
                                            dirichlet.data(), u[0].data(), qw.data(), pw.data(),
                                            winfo.data(), ws.data());
        });
        double eq = rel(qw, q[0]), ep = rel(pw, expected);
        printf("  weighted flux %s: q %.2e projected %.2e info %d\n", tensor ? "tensor" : "scalar",
               eq, ep, winfo[0]);
        if (!(eq < 1e-10 && ep < 1e-10) || winfo[0]) ++fails;
    }
    // Postprocessing: thread vs block.
    std::vector<double> us[2];
    for (int d = 0; d < 2; ++d) us[d].assign((size_t)NP * nc, NAN);
    std::fill(info.begin(), info.end(), 7);
    launch((nc + 31) / 32, 32, 0, [&] {
        postprocess_thread<C, double, N, NP>(tb, c, u[0].data(), q[0].data(), us[0].data(),
                                             info.data(), pv.data());
    });
    for (int e = 0; e < nc; ++e)
        if (info[e]) printf("  thread postprocess: info[%d] = %d\n", e, info[e]), ++fails;
    {
        std::fill(info.begin(), info.end(), 7);
        int ntp = threads_for(NP);
        size_t bytes = sizeof(double) * (NP * (NP + 1) / 2 + NP - 1 + D * N);
        launch(grid, ntp, bytes, [&] {
            postprocess_block<C, double, N, NP>(tb, c, u[0].data(), q[0].data(), us[1].data(),
                                                info.data(), pv.data());
        });
        for (int e = 0; e < nc; ++e)
            if (info[e]) printf("  block postprocess: info[%d] = %d\n", e, info[e]), ++fails;
        double e = rel(us[1], us[0]);
        printf("  postprocess block (%d threads, %zu B): u* %.2e\n", ntp, bytes, e);
        if (!(e < 1e-9)) ++fails;
    }
    // Gather.
    {
        std::vector<double> out(NL * 2, NAN);
        launch((NL * 2 + 63) / 64, 64, 0, [&] { gather_elements<double>(b[0].data(), NL, 1, 2, out.data()); });
        for (int bb = 0; bb < 2; ++bb)
            for (int v = 0; v < NL; ++v)
                // Cell 1 + bb of the sector-blocked b_e, written out: block (1 + bb) / 4,
                // slot (1 + bb) % 4.
                if (out[bb * NL + v] != b[0][(((1 + bb) / 4) * NL + v) * 4 + (1 + bb) % 4]) {
                    printf("  gather wrong\n");
                    ++fails;
                    bb = 2;
                    break;
                }
    }
    printf("  %s\n", fails ? "FAILED" : "ok");
    return fails;
}

// The assembly against a transcription of dbf::assemble, on random topology.
template <class C, int K>
int run_assembly() {
    constexpr int F = C::NFACES, NF = C::nf(K), NL = F * NF, SL = 2 * F - 1, BSZ = NF * NF;
    const int nc = 7, n_rows = 9, pitch = 32, n_faces = 20;
    const int ncb = (nc + 3) / 4 * 4;  // whole blocks of the sector-blocked layout (f64: 4)
    std::vector<double> k(NL * NL * ncb), b(NL * ncb), dir(n_faces * NF);
    for (auto* v : {&k, &b, &dir})
        for (auto& x : *v) x = uni(-1, 1);
    std::vector<unsigned> row_cell(2 * n_rows), slot_cell(SL * n_rows), nbr(SL * n_rows),
        sface(SL * n_rows);
    std::vector<unsigned char> row_local(2 * n_rows), srow(SL * n_rows), scol(SL * n_rows);
    for (int r = 0; r < n_rows; ++r) {
        for (int s = 0; s < 2; ++s) {
            row_cell[s * n_rows + r] = (s == 1 && r % 3 == 0) ? NONE_INDEX : rng() % nc;
            row_local[s * n_rows + r] = rng() % F;
        }
        for (int a = 0; a < SL; ++a) {
            const int t = rng() % 4;  // 0: padding, 1: Dirichlet column, else a free column
            slot_cell[a * n_rows + r] = (a == 0 || t == 0) ? NONE_INDEX : rng() % nc;
            nbr[a * n_rows + r] = (t == 1) ? NONE_INDEX : rng() % n_rows;
            sface[a * n_rows + r] = rng() % n_faces;
            srow[a * n_rows + r] = rng() % F;
            scol[a * n_rows + r] = rng() % F;
        }
    }
    AssemblyTopology t{(u64)row_cell.data(), (u64)row_local.data(), (u64)slot_cell.data(),
                       (u64)srow.data(),     (u64)scol.data(),      (u64)nbr.data(),
                       (u64)sface.data()};
    std::vector<double> values(SL * BSZ * pitch, NAN), rhs(n_rows * NF, NAN);
    std::vector<unsigned> cols(SL * pitch, 12345);
    // 3 blocks of 4 threads, one thread per block row (threads beyond n_rows return).
    launch(3, 4, 0, [&] {
        assemble<C, double, NF>(n_rows, pitch, SL, nc, t, k.data(), b.data(), dir.data(),
                                values.data(), cols.data(), rhs.data());
    });
    // Reference: hdg-backend-cpu dbf::assemble, on the element-fastest K_e and b_e.
    auto el = [&](unsigned cell, int i, int j, int m, int l) {
        return k[condensed_at<double>(NL * NL, (i * NF + m) * NL + j * NF + l, cell)];
    };
    int bad = 0;
    for (int row = 0; row < n_rows; ++row) {
        std::vector<double> blocks(SL * BSZ, 0.0), rr(NF, 0.0);
        for (int side = 0; side < 2; ++side) {
            const unsigned cell = row_cell[side * n_rows + row];
            if (cell == NONE_INDEX) continue;
            const int i = row_local[side * n_rows + row];
            for (int m = 0; m < NF; ++m) {
                rr[m] += b[condensed_at<double>(NL, i * NF + m, cell)];
                for (int l = 0; l < NF; ++l) blocks[m * NF + l] += el(cell, i, i, m, l);
            }
        }
        for (int a = 1; a < SL; ++a) {
            const int s = a * n_rows + row;
            const unsigned cell = slot_cell[s];
            if (cell == NONE_INDEX) continue;
            const int i = srow[s], j = scol[s];
            for (int m = 0; m < NF; ++m)
                for (int l = 0; l < NF; ++l) {
                    if (nbr[s] == NONE_INDEX)
                        rr[m] -= el(cell, i, j, m, l) * dir[sface[s] * NF + l];
                    else
                        blocks[a * BSZ + m * NF + l] = el(cell, i, j, m, l);
                }
        }
        for (int a = 0; a < SL; ++a) {
            for (int v = 0; v < BSZ; ++v)
                if (values[(a * BSZ + v) * pitch + row] != blocks[a * BSZ + v]) ++bad;
            const unsigned n = nbr[a * n_rows + row];
            const unsigned c = (a == 0 || n == NONE_INDEX) ? (unsigned)row : n;
            if (cols[a * pitch + row] != c) ++bad;
        }
        for (int m = 0; m < NF; ++m)
            if (rhs[row * NF + m] != rr[m]) ++bad;
    }
    printf("assembly %s k %d: %d mismatches with dbf::assemble\n", F == 3 ? "tri" : "tet", K, bad);
    return bad;
}

int main(int argc, char** argv) {
    int fails = 0;
    // The sector-blocked outputs (condensed_layout.cuh): a bijection of (value, cell) onto
    // [0, planes x whole blocks), the 4 (f64) or 8 (f32) cells of a block side by side in one
    // 32-byte sector.
    {
        int bad = 0;
        for (int planes : {1, 7, 100}) {
            for (int cells : {1, 5, 8, 13}) {
                std::vector<int> seen64((size_t)planes * ((cells + 3) / 4 * 4), 0);
                std::vector<int> seen32((size_t)planes * ((cells + 7) / 8 * 8), 0);
                for (int v = 0; v < planes; ++v)
                    for (int e = 0; e < cells; ++e) {
                        const unsigned long long d = condensed_at<double>(planes, v, e);
                        const unsigned long long f = condensed_at<float>(planes, v, e);
                        if (d >= seen64.size() || seen64[d]++ || d * 8 / 32 != condensed_at<double>(planes, v, e / 4 * 4) * 8 / 32) ++bad;
                        if (f >= seen32.size() || seen32[f]++ || f * 4 / 32 != condensed_at<float>(planes, v, e / 8 * 8) * 4 / 32) ++bad;
                    }
            }
        }
        printf("condensed layout: %s\n", bad ? "FAILED" : "ok");
        fails += bad;
    }
    int nc = argc > 1 ? atoi(argv[1]) : 5;
    fails += run<Tri, 1>(nc);
    fails += run<Tri, 2>(nc);
    fails += run<Tri, 3>(nc);
    fails += run<Tri, 5>(nc);
    fails += run<Tri, 8>(nc);
    fails += run<Tet, 1>(nc);
    fails += run<Tet, 2>(nc);
    fails += run<Tet, 3>(nc);
#ifdef BIG
    fails += run<Tet, 5>(nc);
    fails += run<Tet, 8>(nc);
#endif
    fails += run_assembly<Tri, 1>() + run_assembly<Tri, 4>() + run_assembly<Tri, 8>() +
             run_assembly<Tet, 1>() + run_assembly<Tet, 3>() + run_assembly<Tet, 8>();
    printf("%s\n", fails ? "SOME FAILED" : "ALL OK");
    return fails != 0;
}
