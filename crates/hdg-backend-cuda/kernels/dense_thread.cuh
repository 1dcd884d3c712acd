// The THREAD design's dense kernels (one thread per element, row-major matrices in local
// memory): hdg-backend-cpu's dense.rs operation for operation, with the non-fusing intrinsics
// of element_common.cuh, so that a thread-design kernel gives the CPU backend's numbers to the
// bit. Used by condense.cu and postprocess.cu.
#pragma once
#include "element_common.cuh"

// dense::cholesky; returns -1 on success, else the failing pivot (its value in *value).
template <typename T, int N>
__device__ int cholesky(T* a, T* value) {
#pragma unroll 1
    for (int j = 0; j < N; ++j) {
        T d = a[j * N + j];
#pragma unroll 4
        for (int k = 0; k < j; ++k) d = msub(d, a[j * N + k], a[j * N + k]);
        if (!(d > T(0))) {
            *value = d;
            return j;
        }
        d = root(d);
        a[j * N + j] = d;
        T inv = T(1) / d;
#pragma unroll 1
        for (int i = j + 1; i < N; ++i) {
            T s = a[i * N + j];
#pragma unroll 4
            for (int k = 0; k < j; ++k) s = msub(s, a[i * N + k], a[j * N + k]);
            a[i * N + j] = mul(s, inv);
        }
    }
    return -1;
}

// dense::forward_substitution: L Y = B for the N x M row-major b.
template <typename T, int N, int M>
__device__ void forward(const T* l, T* b) {
#pragma unroll 1
    for (int i = 0; i < N; ++i) {
#pragma unroll 1
        for (int k = 0; k < i; ++k) {
            T lik = l[i * N + k];
#pragma unroll 4
            for (int c = 0; c < M; ++c) b[i * M + c] = msub(b[i * M + c], lik, b[k * M + c]);
        }
        T inv = T(1) / l[i * N + i];
#pragma unroll 4
        for (int c = 0; c < M; ++c) b[i * M + c] = mul(b[i * M + c], inv);
    }
}

// dense::backward_substitution: L^T X = B for the N x M row-major b.
template <typename T, int N, int M>
__device__ void backward(const T* l, T* b) {
#pragma unroll 1
    for (int i = N - 1; i >= 0; --i) {
#pragma unroll 1
        for (int k = i + 1; k < N; ++k) {
            T lki = l[k * N + i];
#pragma unroll 4
            for (int c = 0; c < M; ++c) b[i * M + c] = msub(b[i * M + c], lki, b[k * M + c]);
        }
        T inv = T(1) / l[i * N + i];
#pragma unroll 4
        for (int c = 0; c < M; ++c) b[i * M + c] = mul(b[i * M + c], inv);
    }
}
