// Matrix products dst (n, rows) = x (n, cols) · wᵀ for every weight type,
// dequantizing in registers, and Embed (a row of w per token id).
//
// One warp computes one weight row for a tile of TOK tokens. Lane l takes
// the 32-element chunks l, l+32, l+64, … of the row, decodes each once and
// accumulates it into every token of the tile with fmaf, in chunk order;
// the 32 lane sums are then added by a butterfly. Rows whose length is not a
// whole number of chunks (F32, F16, BF16 only) take a scalar path, chosen by
// cols alone. That sequence depends only
// on cols, never on n, TOK or the token's place in the tile, so a row's bits
// are the same in a batch of one and a batch of many.
#include "common.cuh"

#define WARPS 4 // warps (rows) per block

template <int T, int TOK>
__device__ __forceinline__ void matmul_chunks(float acc[TOK], const float *__restrict__ x,
                                              const uint8_t *__restrict__ row, int n, int t0, int cols,
                                              int lane) {
	int chunks = cols >> 5;
	for (int c = lane; c < chunks; c += 32) {
		float wv[32];
		deq32<T>(row, c, wv);
#pragma unroll
		for (int t = 0; t < TOK; t++) {
			// Tokens past n repeat the last one; their sums are not stored.
			const float4 *xp = (const float4 *)(x + (size_t)min(t0 + t, n - 1) * cols + 32 * c);
			float a = acc[t];
#pragma unroll
			for (int i = 0; i < 8; i++) {
				float4 v = __ldg(xp + i);
				a = fmaf(wv[4 * i], v.x, a);
				a = fmaf(wv[4 * i + 1], v.y, a);
				a = fmaf(wv[4 * i + 2], v.z, a);
				a = fmaf(wv[4 * i + 3], v.w, a);
			}
			acc[t] = a;
		}
	}
}

template <int T, int TOK>
__device__ __forceinline__ void matmul_body(float *__restrict__ dst, const float *__restrict__ x,
                                            const uint8_t *__restrict__ w, int n, int rows, int cols,
                                            int rowBytes) {
	int lane = threadIdx.x & 31;
	int r = blockIdx.x * WARPS + (threadIdx.x >> 5);
	int t0 = blockIdx.y * TOK;
	if (r >= rows) return;
	const uint8_t *row = w + (size_t)rowBytes * r;
	float acc[TOK];
#pragma unroll
	for (int t = 0; t < TOK; t++) acc[t] = 0.f;
	if (cols & 31) {
		if constexpr (T == T_F32 || T == T_F16 || T == T_BF16) {
			for (int c = lane; 32 * c < cols; c += 32) {
				int end = min(32 * c + 32, cols);
#pragma unroll
				for (int t = 0; t < TOK; t++) {
					const float *xp = x + (size_t)min(t0 + t, n - 1) * cols;
					float a = acc[t];
					for (int j = 32 * c; j < end; j++) a = fmaf(wat<T>(row, j), xp[j], a);
					acc[t] = a;
				}
			}
		}
	} else {
		matmul_chunks<T, TOK>(acc, x, row, n, t0, cols, lane);
	}
#pragma unroll
	for (int t = 0; t < TOK; t++) {
		float s = warp_sum(acc[t]);
		if (lane == t && t0 + t < n) dst[(size_t)(t0 + t) * rows + r] = s;
	}
}

template <int T>
__device__ __forceinline__ void embed_body(float *__restrict__ dst, const uint8_t *__restrict__ w,
                                           const int *__restrict__ ids, int n, int cols, int rowBytes) {
	int lane = threadIdx.x & 31;
	int i = blockIdx.x * WARPS + (threadIdx.x >> 5);
	if (i >= n) return;
	const uint8_t *row = w + (size_t)rowBytes * ids[i];
	float *out = dst + (size_t)i * cols;
	if (cols & 31) {
		if constexpr (T == T_F32 || T == T_F16 || T == T_BF16) {
			for (int j = lane; j < cols; j += 32) out[j] = wat<T>(row, j);
		}
		return;
	}
	for (int c = lane; c < (cols >> 5); c += 32) {
		float wv[32];
		deq32<T>(row, c, wv);
#pragma unroll
		for (int j = 0; j < 32; j++) out[32 * c + j] = wv[j];
	}
}

// Entry points: matmul_<type>_<tile> with grid (ceil(rows/WARPS), ceil(n/tile)),
// block 32*WARPS; embed_<type> with grid ceil(n/WARPS).
#define MATMUL(name, T)                                                                              \
	extern "C" __global__ void __launch_bounds__(32 * WARPS)                                       \
	    matmul_##name##_1(float *dst, const float *x, const uint8_t *w, int n, int rows, int cols, \
	                      int rowBytes) {                                                          \
		matmul_body<T, 1>(dst, x, w, n, rows, cols, rowBytes);                                 \
	}                                                                                              \
	extern "C" __global__ void __launch_bounds__(32 * WARPS)                                       \
	    matmul_##name##_8(float *dst, const float *x, const uint8_t *w, int n, int rows, int cols, \
	                      int rowBytes) {                                                          \
		matmul_body<T, 8>(dst, x, w, n, rows, cols, rowBytes);                                 \
	}                                                                                              \
	extern "C" __global__ void __launch_bounds__(32 * WARPS)                                       \
	    embed_##name(float *dst, const uint8_t *w, const int *ids, int n, int cols, int rowBytes) { \
		embed_body<T>(dst, w, ids, n, cols, rowBytes);                                         \
	}

MATMUL(f32, T_F32)
MATMUL(f16, T_F16)
MATMUL(bf16, T_BF16)
MATMUL(q8_0, T_Q8_0)
MATMUL(q4_0, T_Q4_0)
MATMUL(q4_k, T_Q4_K)
MATMUL(q6_k, T_Q6_K)
