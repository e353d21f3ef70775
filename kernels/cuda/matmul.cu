// Matrix products dst (n, rows) = x (n, cols) · wᵀ for every weight type,
// dequantizing in registers, and Embed (a row of w per token id).
//
// One warp computes R weight rows for a tile of TOK tokens. Lane l takes the
// 32-element chunks l, l+32, l+64, … of its rows; it reads a chunk's scales
// once, decodes it 8 elements at a time and accumulates each piece into
// every (row, token) of the tile with fmaf in element order, so a piece of x
// is loaded once for R rows. The 32 lane sums are then added by a butterfly.
// That sequence depends only on cols, never on n, TOK, R or the place in the
// tile, so a row's bits are the same in a batch of one and a batch of many.
// Rows whose length is not a whole number of chunks (F32, F16, BF16 only)
// take a scalar path, chosen by cols alone, in the same order.
#include "common.cuh"

#define WARPS 4 // warps per block

template <int T, int TOK, int R>
__device__ __forceinline__ void matmul_chunks(float (&acc)[R][TOK], const float *__restrict__ x,
                                              const uint8_t *const (&row)[R], int n, int t0, int cols,
                                              int lane) {
	int chunks = cols >> 5;
	for (int c = lane; c < chunks; c += 32) {
		Chunk<T> k[R];
#pragma unroll
		for (int i = 0; i < R; i++) k[i] = chunk<T>(row[i], c);
#pragma unroll
		for (int p = 0; p < 4; p++) {
			float w[R][8];
#pragma unroll
			for (int i = 0; i < R; i++) deq8<T>(k[i], p, w[i]);
#pragma unroll
			for (int t = 0; t < TOK; t++) {
				// Tokens past n repeat the last one; their sums are not stored.
				const float4 *xp = (const float4 *)(x + (size_t)min(t0 + t, n - 1) * cols + 32 * c + 8 * p);
				float4 a = __ldg(xp), b = __ldg(xp + 1);
				float xv[8] = {a.x, a.y, a.z, a.w, b.x, b.y, b.z, b.w};
#pragma unroll
				for (int i = 0; i < R; i++) {
					float s = acc[i][t];
#pragma unroll
					for (int j = 0; j < 8; j++) s = fmaf(w[i][j], xv[j], s);
					acc[i][t] = s;
				}
			}
		}
	}
}

template <int T, int TOK, int R>
__device__ __forceinline__ void matmul_body(float *__restrict__ dst, const float *__restrict__ x,
                                            const uint8_t *__restrict__ w, int n, int rows, int cols,
                                            int rowBytes) {
	int lane = threadIdx.x & 31;
	int r0 = (blockIdx.x * WARPS + (threadIdx.x >> 5)) * R;
	int t0 = blockIdx.y * TOK;
	if (r0 >= rows) return;
	// Rows past the matrix repeat its last; their sums are not stored.
	const uint8_t *row[R];
#pragma unroll
	for (int i = 0; i < R; i++) row[i] = w + (size_t)rowBytes * min(r0 + i, rows - 1);
	float acc[R][TOK];
#pragma unroll
	for (int i = 0; i < R; i++)
#pragma unroll
		for (int t = 0; t < TOK; t++) acc[i][t] = 0.f;
	if (cols & 31) {
		if constexpr (T == T_F32 || T == T_F16 || T == T_BF16) {
			for (int c = lane; 32 * c < cols; c += 32) {
				int end = min(32 * c + 32, cols);
#pragma unroll
				for (int t = 0; t < TOK; t++) {
					const float *xp = x + (size_t)min(t0 + t, n - 1) * cols;
#pragma unroll
					for (int i = 0; i < R; i++) {
						float a = acc[i][t];
						for (int j = 32 * c; j < end; j++) a = fmaf(wat<T>(row[i], j), xp[j], a);
						acc[i][t] = a;
					}
				}
			}
		}
	} else {
		matmul_chunks<T, TOK, R>(acc, x, row, n, t0, cols, lane);
	}
#pragma unroll
	for (int i = 0; i < R; i++)
#pragma unroll
		for (int t = 0; t < TOK; t++) {
			float s = warp_sum(acc[i][t]);
			if (lane == ((i * TOK + t) & 31) && r0 + i < rows && t0 + t < n)
				dst[(size_t)(t0 + t) * rows + r0 + i] = s;
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

// Entry points: matmul_<type>_1 (one token, 4 rows a warp) with grid
// (ceil(rows/16), n); matmul_<type>_8 (8 tokens, 2 rows a warp) with grid
// (ceil(rows/8), ceil(n/8)); block 32*WARPS. embed_<type>: grid
// ceil(n/WARPS), a warp a token.
#define MATMUL(name, T)                                                                              \
	extern "C" __global__ void __launch_bounds__(32 * WARPS)                                       \
	    matmul_##name##_1(float *dst, const float *x, const uint8_t *w, int n, int rows, int cols, \
	                      int rowBytes) {                                                          \
		matmul_body<T, 1, 4>(dst, x, w, n, rows, cols, rowBytes);                              \
	}                                                                                              \
	extern "C" __global__ void __launch_bounds__(32 * WARPS)                                       \
	    matmul_##name##_8(float *dst, const float *x, const uint8_t *w, int n, int rows, int cols, \
	                      int rowBytes) {                                                          \
		matmul_body<T, 8, 2>(dst, x, w, n, rows, cols, rowBytes);                              \
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
MATMUL(q4_1, T_Q4_1)
MATMUL(q5_0, T_Q5_0)
MATMUL(q5_1, T_Q5_1)
MATMUL(iq4_nl, T_IQ4_NL)
MATMUL(mxfp4, T_MXFP4)
MATMUL(q2_k, T_Q2_K)
MATMUL(q3_k, T_Q3_K)
MATMUL(q5_k, T_Q5_K)
MATMUL(iq4_xs, T_IQ4_XS)
