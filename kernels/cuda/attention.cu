// Paged causal attention for decode and chunked prefill alike: one warp per
// (token, head) walks that token's positions 0..pos in tiles of 32 with an
// online softmax.
//
// Lane j of a tile scores position p0+j (a float32 dot over the head, in
// dimension order); the tile's max and sum are butterflies; each lane then
// owns output dimensions lane, lane+32, … and adds the 32 weighted values in
// position order. Tiles run in position order. So a token's output depends
// on its own query and its positions only, never on the other tokens of the
// call.
#include "common.cuh"

#define AW 4       // warps per block
#define MAXD 256   // largest head dimension
#define PER (MAXD / 32)

template <typename KV> __device__ __forceinline__ float kv(const KV *p, size_t i);
template <> __device__ __forceinline__ float kv<float>(const float *p, size_t i) { return p[i]; }
template <> __device__ __forceinline__ float kv<__half>(const __half *p, size_t i) { return __half2float(p[i]); }

template <typename KV>
__device__ __forceinline__ void attend_body(float *__restrict__ out, const float *__restrict__ q,
                                            const KV *__restrict__ K, const KV *__restrict__ V,
                                            const int *__restrict__ pos, const int *__restrict__ seq,
                                            const int *__restrict__ table, int tableStride, int blockSize,
                                            int heads, int kvHeads, int headDim, float scale, int n) {
	__shared__ float qs[AW][MAXD];
	int lane = threadIdx.x & 31, w = threadIdx.x >> 5;
	int pair = blockIdx.x * AW + w;
	if (pair >= n * heads) return;
	int i = pair / heads, h = pair % heads;
	int dim = heads * headDim, kvDim = kvHeads * headDim;
	int kvOff = (h / (heads / kvHeads)) * headDim;
	const float *qh = q + (size_t)i * dim + h * headDim;
	for (int d = lane; d < headDim; d += 32) qs[w][d] = qh[d];
	__syncwarp();
	const int *tab = table + (size_t)seq[i] * tableStride;
	int np = pos[i] + 1;

	float m = -INFINITY, l = 0.f;
	float acc[PER];
#pragma unroll
	for (int e = 0; e < PER; e++) acc[e] = 0.f;
	for (int p0 = 0; p0 < np; p0 += 32) {
		int p = p0 + lane;
		size_t slot = 0;
		float s = -INFINITY;
		if (p < np) {
			slot = (size_t)tab[p / blockSize] * blockSize + p % blockSize;
			const KV *k = K + slot * kvDim + kvOff;
			float a = 0.f;
			for (int d = 0; d < headDim; d++) a = fmaf(qs[w][d], kv(k, d), a);
			s = a * scale;
		}
		float mNew = fmaxf(m, warp_max(s));
		float alpha = expf(m - mNew); // 0 on the first tile, m being -inf
		float e = p < np ? expf(s - mNew) : 0.f;
		l = l * alpha + warp_sum(e);
#pragma unroll
		for (int k = 0; k < PER; k++) acc[k] *= alpha;
		int tile = min(32, np - p0);
		for (int j = 0; j < tile; j++) {
			float ej = __shfl_sync(FULL, e, j);
			size_t sj = __shfl_sync(FULL, slot, j);
			const KV *v = V + sj * kvDim + kvOff;
#pragma unroll
			for (int k = 0; k < PER; k++) {
				int d = lane + 32 * k;
				if (d < headDim) acc[k] = fmaf(ej, kv(v, d), acc[k]);
			}
		}
		m = mNew;
	}
	float *o = out + (size_t)i * dim + h * headDim;
#pragma unroll
	for (int k = 0; k < PER; k++) {
		int d = lane + 32 * k;
		if (d < headDim) o[d] = acc[k] / l;
	}
}

// attend_<kv>: grid ceil(n*heads/AW), block 32*AW.
#define ATTEND(name, KV)                                                                               \
	extern "C" __global__ void __launch_bounds__(32 * AW)                                            \
	    attend_##name(float *out, const float *q, const KV *K, const KV *V, const int *pos,          \
	                  const int *seq, const int *table, int tableStride, int blockSize, int heads,   \
	                  int kvHeads, int headDim, float scale, int n) {                                \
		attend_body<KV>(out, q, K, V, pos, seq, table, tableStride, blockSize, heads, kvHeads,   \
		                headDim, scale, n);                                                      \
	}

ATTEND(f32, float)
ATTEND(f16, __half)
