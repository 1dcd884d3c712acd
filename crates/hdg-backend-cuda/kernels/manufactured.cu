// The built-in manufactured problems (hdg_core::Manufactured) evaluated on the device, so that
// the element loads F_K and the L2 error norms need no host closure and no host round trip.
//
// Every function here is the device twin of a closure of crates/hdg-core/src/problem.rs (same
// formulas, same order of products); the host checks the twins against the closures at sample
// points before it uses them (src/manufactured.rs), and uses the closures when they disagree.
//
// Per-cell layouts are those of element_common.cuh (element-fastest): cell vertex indices
// [i * n_cells + e] (u32), geometry plane 0 = det, kappa [e], u [i * n_cells + e],
// q [(r * N + i) * n_cells + e], u* [j * n_cells + e], load [i * n_cells + e], element error
// sums [c * n_cells + e] (c = 0: u, 1: q, 2: u*). Mesh vertices: [v * DIM + r] (f64).
// Quadrature: points [q * DIM + r] and weights in f64, basis values [q * n + i] in T, exactly
// hdg_core::ElementTables' load_rule / load_basis and error_rule / error_basis(_post).
#include "element_common.cuh"

// What the source and the exact solution were built from (hdg_core::ManufacturedSpec).
struct Spec {
    int kind;    // 0: Sine, 1: ExpSin, 2: Polynomial(degree)
    int degree;  // the polynomial degree (kind 2)
    f64 kappa;   // the kappa of the source
    f64 reaction;
};

#define PI_F64 3.14159265358979323846

// base^e for e >= 0 (repeated multiplication), 0 for e < 0, as problem.rs's `pow`.
__device__ __forceinline__ f64 power(f64 base, int e) {
    if (e < 0) return 0.0;
    f64 r = 1.0;
    for (int i = 0; i < e; ++i) r *= base;
    return r;
}

// The oblique linear forms of the polynomial solution (problem.rs: A and B).
__constant__ f64 POLY_A[4] = {0.2, 0.5, 0.3, 0.2};
__constant__ f64 POLY_B[4] = {0.6, -0.5, 0.4, -0.3};

template <int DIM>
__device__ __forceinline__ f64 linear_form(const f64* c, const f64* x) {
    f64 v = c[0] + c[1] * x[0] + c[2] * x[1];
    if (DIM == 3) v += c[3] * x[2];
    return v;
}

// u, grad u and the Laplacian of u at x.
template <int DIM>
__device__ void solution_fields(const Spec& s, const f64* x, f64& u, f64* grad, f64& lap) {
    if (s.kind == 0) {
        f64 sn[DIM], cs[DIM];
#pragma unroll
        for (int d = 0; d < DIM; ++d) {
            sn[d] = sin(PI_F64 * x[d]);
            cs[d] = cos(PI_F64 * x[d]);
        }
        f64 prod = 1.0;
#pragma unroll
        for (int d = 0; d < DIM; ++d) prod *= sn[d];
        u = prod;
#pragma unroll
        for (int d = 0; d < DIM; ++d) {
            f64 g = 1.0;
#pragma unroll
            for (int e = 0; e < DIM; ++e) g *= (e == d) ? PI_F64 * cs[e] : sn[e];
            grad[d] = g;
        }
        lap = -(f64)DIM * PI_F64 * PI_F64 * prod;
    } else if (s.kind == 1) {
        const f64 ex = exp(x[0]);
        const f64 z = DIM == 3 ? cosh(x[DIM - 1]) : 1.0;
        const f64 s2 = sin(2.0 * x[1]);
        u = ex * s2 * z;
        grad[0] = ex * s2 * z;
        grad[1] = 2.0 * ex * cos(2.0 * x[1]) * z;
        if (DIM == 3) grad[DIM - 1] = ex * s2 * sinh(x[DIM - 1]);
        lap = (DIM == 3 ? -2.0 : -3.0) * ex * s2 * z;
    } else {
        const int k = s.degree;
        const f64 kf = (f64)k;
        const f64 la = linear_form<DIM>(POLY_A, x), lb = linear_form<DIM>(POLY_B, x);
        u = power(la, k) + power(lb, k) + x[0] * power(x[1], k - 1);
        if (DIM == 3) u += x[1] * power(x[DIM - 1], k - 1);
        const f64 da = kf * power(la, k - 1), db = kf * power(lb, k - 1);
        grad[0] = da * POLY_A[1] + db * POLY_B[1] + power(x[1], k - 1);
        grad[1] = da * POLY_A[2] + db * POLY_B[2] + x[0] * (kf - 1.0) * power(x[1], k - 2);
        if (DIM == 3) {
            grad[1] += power(x[DIM - 1], k - 1);
            grad[DIM - 1] =
                da * POLY_A[3] + db * POLY_B[3] + x[1] * (kf - 1.0) * power(x[DIM - 1], k - 2);
        }
        f64 ga = 0.0, gb = 0.0;
#pragma unroll
        for (int d = 1; d <= DIM; ++d) {
            ga += POLY_A[d] * POLY_A[d];
            gb += POLY_B[d] * POLY_B[d];
        }
        const f64 c2 = kf * (kf - 1.0);
        lap = c2 * ga * power(la, k - 2) + c2 * gb * power(lb, k - 2) +
              x[0] * (kf - 1.0) * (kf - 2.0) * power(x[1], k - 3);
        if (DIM == 3) lap += x[1] * (kf - 1.0) * (kf - 2.0) * power(x[DIM - 1], k - 3);
    }
}

// f = -kappa lap(u) + c u (Problem::manufactured).
template <int DIM>
__device__ __forceinline__ f64 source(const Spec& s, const f64* x) {
    f64 u, grad[DIM], lap;
    solution_fields<DIM>(s, x, u, grad, lap);
    return -s.kappa * lap + s.reaction * u;
}

// x = v0 + sum_s (v_{s+1} - v0) (xi_s + 1) / 2, unfused as the CPU's map_point.
template <int DIM>
__device__ __forceinline__ void map_point(const f64* v, const f64* xi, f64* x) {
#pragma unroll
    for (int r = 0; r < DIM; ++r) {
        f64 xr = v[r];
#pragma unroll
        for (int s = 0; s < DIM; ++s)
            xr = add(xr, mul(mul(0.5, sub(v[(s + 1) * DIM + r], v[r])), add(xi[s], 1.0)));
        x[r] = xr;
    }
}

// f, u and grad u at n points (out[p * (DIM + 2) + c]: c = 0 f, 1 u, 2.. grad u): what the host
// compares with the problem's closures.
template <int DIM>
__device__ void fields_at(u64 n, Spec s, const f64* __restrict__ points, f64* __restrict__ out) {
    for (u64 p = blockIdx.x * (u64)blockDim.x + threadIdx.x; p < n;
         p += (u64)gridDim.x * blockDim.x) {
        f64 u, grad[DIM], lap;
        solution_fields<DIM>(s, points + p * DIM, u, grad, lap);
        out[p * (DIM + 2)] = -s.kappa * lap + s.reaction * u;
        out[p * (DIM + 2) + 1] = u;
#pragma unroll
        for (int r = 0; r < DIM; ++r) out[p * (DIM + 2) + 2 + r] = grad[r];
    }
}

// Basis functions accumulated at once per pass over the quadrature points (registers); more
// functions take more passes, each evaluating f again.
#define LOAD_CHUNK 16

// F_K[i] = sum_q (T)(w_q f(x_q)) det phi_i(q), summed over q in order as condense::element_load.
template <int DIM, typename T>
__device__ void element_loads(u64 nc, Spec s, const f64* __restrict__ vertices,
                              const unsigned* __restrict__ cell_vertices,
                              const T* __restrict__ geometry, unsigned nq,
                              const f64* __restrict__ points, const f64* __restrict__ weights,
                              unsigned n, const T* __restrict__ basis, T* __restrict__ load) {
    for (u64 e = blockIdx.x * (u64)blockDim.x + threadIdx.x; e < nc;
         e += (u64)gridDim.x * blockDim.x) {
        f64 v[(DIM + 1) * DIM];
        cell_coordinates<DIM>(nc, e, vertices, cell_vertices, v);
        const T det = geometry[e];  // plane GEO_DET = 0
        for (unsigned i0 = 0; i0 < n; i0 += LOAD_CHUNK) {
            T acc[LOAD_CHUNK];
#pragma unroll
            for (int c = 0; c < LOAD_CHUNK; ++c) acc[c] = T(0);
            for (unsigned q = 0; q < nq; ++q) {
                f64 x[DIM];
                map_point<DIM>(v, points + q * DIM, x);
                const T fq = mul((T)(weights[q] * source<DIM>(s, x)), det);
                const T* phi = basis + (u64)q * n;
#pragma unroll
                for (int c = 0; c < LOAD_CHUNK; ++c)
                    if (i0 + c < n) acc[c] = madd(acc[c], fq, phi[i0 + c]);
            }
#pragma unroll
            for (int c = 0; c < LOAD_CHUNK; ++c)
                if (i0 + c < n) load[(i0 + c) * nc + e] = acc[c];
        }
    }
}

// sum_i (f64)(phi_i c_i) over i < n, coefficients at stride nc (local::element_errors).
template <typename T>
__device__ __forceinline__ f64 evaluate(unsigned n, const T* __restrict__ phi,
                                        const T* __restrict__ coefficients, u64 nc, u64 e) {
    f64 sum = 0.0;
    for (unsigned i = 0; i < n; ++i) sum += (f64)mul(phi[i], coefficients[i * nc + e]);
    return sum;
}

// Per cell: the squared L2 errors of u_h, q_h = -kappa grad u and u* (local::element_errors).
template <int DIM, typename T>
__device__ void element_errors(u64 nc, Spec s, const f64* __restrict__ vertices,
                               const unsigned* __restrict__ cell_vertices,
                               const T* __restrict__ geometry, const T* __restrict__ kappa,
                               const T* __restrict__ u, const T* __restrict__ q,
                               const T* __restrict__ u_star, unsigned nq,
                               const f64* __restrict__ points, const f64* __restrict__ weights,
                               unsigned n, unsigned np, const T* __restrict__ basis,
                               const T* __restrict__ basis_post, f64* __restrict__ errors) {
    for (u64 e = blockIdx.x * (u64)blockDim.x + threadIdx.x; e < nc;
         e += (u64)gridDim.x * blockDim.x) {
        f64 v[(DIM + 1) * DIM];
        cell_coordinates<DIM>(nc, e, vertices, cell_vertices, v);
        const f64 det = (f64)geometry[e];
        const f64 kap = (f64)kappa[e];
        f64 err_u = 0.0, err_q = 0.0, err_star = 0.0;
        for (unsigned qp = 0; qp < nq; ++qp) {
            f64 x[DIM], ue, grad[DIM], lap;
            map_point<DIM>(v, points + qp * DIM, x);
            solution_fields<DIM>(s, x, ue, grad, lap);
            const T* phi = basis + (u64)qp * n;
            const f64 w = weights[qp] * det;
            const f64 du = ue - evaluate(n, phi, u, nc, e);
            err_u += w * (du * du);
#pragma unroll
            for (int r = 0; r < DIM; ++r) {
                const f64 dq = -kap * grad[r] - evaluate(n, phi, q + (u64)r * n * nc, nc, e);
                err_q += w * (dq * dq);
            }
            const f64 ds = ue - evaluate(np, basis_post + (u64)qp * np, u_star, nc, e);
            err_star += w * (ds * ds);
        }
        errors[e] = err_u;
        errors[nc + e] = err_q;
        errors[2 * nc + e] = err_star;
    }
}

// Block partial sums of the three error planes: partials[c * gridDim.x + block]. The host adds
// the partials in block order, so the total does not depend on scheduling. Needs blockDim.x =
// 256 (the tree below).
__device__ void error_partials(u64 nc, const f64* __restrict__ errors, f64* __restrict__ partials) {
    __shared__ f64 sums[3][256];
    f64 acc[3] = {0.0, 0.0, 0.0};
    for (u64 e = blockIdx.x * (u64)blockDim.x + threadIdx.x; e < nc;
         e += (u64)gridDim.x * blockDim.x)
#pragma unroll
        for (int c = 0; c < 3; ++c) acc[c] += errors[c * nc + e];
#pragma unroll
    for (int c = 0; c < 3; ++c) sums[c][threadIdx.x] = acc[c];
    __syncthreads();
    for (unsigned width = 128; width > 0; width >>= 1) {
        if (threadIdx.x < width)
#pragma unroll
            for (int c = 0; c < 3; ++c) sums[c][threadIdx.x] += sums[c][threadIdx.x + width];
        __syncthreads();
    }
    if (threadIdx.x < 3) partials[threadIdx.x * gridDim.x + blockIdx.x] = sums[threadIdx.x][0];
}

#define FIELDS_AT(D)                                                                          \
    extern "C" __global__ void manufactured_fields_d##D(u64 n, Spec s, const f64* points,     \
                                                        f64* out) {                           \
        fields_at<D>(n, s, points, out);                                                      \
    }
FIELDS_AT(2)
FIELDS_AT(3)

#define LOADS_AND_ERRORS(D, T)                                                                \
    extern "C" __global__ void manufactured_loads_d##D##_##T(                                 \
        u64 nc, Spec s, const f64* vertices, const unsigned* cell_vertices, const T* geometry, \
        unsigned nq, const f64* points, const f64* weights, unsigned n, const T* basis,       \
        T* load) {                                                                            \
        element_loads<D, T>(nc, s, vertices, cell_vertices, geometry, nq, points, weights, n, \
                            basis, load);                                                     \
    }                                                                                         \
    extern "C" __global__ void manufactured_errors_d##D##_##T(                                \
        u64 nc, Spec s, const f64* vertices, const unsigned* cell_vertices, const T* geometry, \
        const T* kappa, const T* u, const T* q, const T* u_star, unsigned nq,                 \
        const f64* points, const f64* weights, unsigned n, unsigned np, const T* basis,       \
        const T* basis_post, f64* errors) {                                                   \
        element_errors<D, T>(nc, s, vertices, cell_vertices, geometry, kappa, u, q, u_star,   \
                             nq, points, weights, n, np, basis, basis_post, errors);          \
    }
LOADS_AND_ERRORS(2, f32)
LOADS_AND_ERRORS(2, f64)
LOADS_AND_ERRORS(3, f32)
LOADS_AND_ERRORS(3, f64)

extern "C" __global__ void manufactured_error_partials(u64 nc, const f64* errors,
                                                       f64* partials) {
    error_partials(nc, errors, partials);
}
