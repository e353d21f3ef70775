// Paged causal attention for decode and chunked prefill alike. Each token's
// positions 0..pos are cut into segments of SEG positions; one warp per
// (token, head, segment) walks its segment in tiles of 32 with an online
// softmax and writes its running max, sum and weighted values; a second
// kernel merges a (token, head)'s segments in segment order.
//
// Lane j of a tile scores position p0+j (a float32 dot over the head, in
// dimension order); the tile's max and sum are butterflies; each lane then
// owns output dimensions lane, lane+32, … and adds the 32 weighted values in
// position order. Segments are cut at fixed positions, so a token's output
// depends on its own query and positions only, never on the other tokens of
// the call or on how the host groups them.
//
// A sliding window (window > 0) starts a token at position pos-window+1:
// segments before it are not run, and the first tile is the one holding
// it, its earlier lanes masked. Sinks (one logit a head, or none) join the
// merge's denominator.
#include "common.cuh"

#define AW 4     // warps per block
#define MAXD 256 // largest head dimension
#define PER (MAXD / 32)
#define SEG 256 // positions a segment

template <typename KV> __device__ __forceinline__ float kv(const KV *p, size_t i);
template <> __device__ __forceinline__ float kv<float>(const float *p, size_t i) { return p[i]; }
template <> __device__ __forceinline__ float kv<__half>(const __half *p, size_t i) { return __half2float(p[i]); }

// kv8 reads the 8 elements of a key from d on in one or two 16-byte loads
// (d a multiple of 8, rows 16-byte aligned when the head dimension is).
template <typename KV> __device__ __forceinline__ void kv8(const KV *p, int d, float k[8]);
template <> __device__ __forceinline__ void kv8<float>(const float *p, int d, float k[8]) {
	float4 a = *(const float4 *)(p + d), b = *(const float4 *)(p + d + 4);
	k[0] = a.x, k[1] = a.y, k[2] = a.z, k[3] = a.w, k[4] = b.x, k[5] = b.y, k[6] = b.z, k[7] = b.w;
}
template <> __device__ __forceinline__ void kv8<__half>(const __half *p, int d, float k[8]) {
	uint4 v = *(const uint4 *)(p + d);
	uint32_t u[4] = {v.x, v.y, v.z, v.w};
#pragma unroll
	for (int j = 0; j < 4; j++) k[2 * j] = f16(u[j] & 0xffff), k[2 * j + 1] = f16(u[j] >> 16);
}

// score is q·k over the head in dimension order, whichever loads it uses.
template <typename KV> __device__ __forceinline__ float score(const float *q, const KV *k, int headDim) {
	float a = 0.f;
	if (headDim % 8 == 0) {
		for (int d = 0; d < headDim; d += 8) {
			float kk[8];
			kv8(k, d, kk);
#pragma unroll
			for (int j = 0; j < 8; j++) a = fmaf(q[d + j], kk[j], a);
		}
	} else {
		for (int d = 0; d < headDim; d++) a = fmaf(q[d], kv(k, d), a);
	}
	return a;
}

// part holds, for pair k (of this launch) and segment s, at
// part[(k*segs + s)*(headDim+2)]: the max score, the sum of exp(score-max)
// and headDim weighted sums of values.
template <typename KV>
__device__ __forceinline__ void attend_body(float *__restrict__ part, const float *__restrict__ q,
                                            const KV *__restrict__ K, const KV *__restrict__ V,
                                            const int *__restrict__ pos, const int *__restrict__ seq,
                                            const int *__restrict__ table, int tableStride, int blockSize,
                                            int heads, int kvHeads, int headDim, float scale, int pair0,
                                            int pairs, int segs, int window) {
	__shared__ float qs[AW][MAXD];
	int lane = threadIdx.x & 31, w = threadIdx.x >> 5;
	int k = blockIdx.x * AW + w, s = blockIdx.y;
	if (k >= pairs) return;
	int pair = pair0 + k;
	int i = pair / heads, h = pair % heads;
	int np = pos[i] + 1, begin = s * SEG;
	int lo = window > 0 ? max(0, np - window) : 0; // the first position the token sees
	int end = min(np, begin + SEG);
	if (max(begin, lo) >= end) return;
	int first = begin + (max(begin, lo) - begin) / 32 * 32; // the tile holding it
	int dim = heads * headDim, kvDim = kvHeads * headDim;
	int kvOff = (h / (heads / kvHeads)) * headDim;
	const float *qh = q + (size_t)i * dim + h * headDim;
	for (int d = lane; d < headDim; d += 32) qs[w][d] = qh[d];
	__syncwarp();
	const int *tab = table + (size_t)seq[i] * tableStride;

	float m = -INFINITY, l = 0.f;
	float acc[PER];
#pragma unroll
	for (int e = 0; e < PER; e++) acc[e] = 0.f;
	for (int p0 = first; p0 < end; p0 += 32) {
		int p = p0 + lane;
		bool in = p >= lo && p < end;
		size_t slot = 0;
		float sc = -INFINITY;
		if (in) {
			slot = (size_t)tab[p / blockSize] * blockSize + p % blockSize;
			sc = score(qs[w], K + slot * kvDim + kvOff, headDim) * scale;
		}
		float mNew = fmaxf(m, warp_max(sc));
		float alpha = expf(m - mNew); // 0 on the first tile, m being -inf
		float e = in ? expf(sc - mNew) : 0.f;
		l = l * alpha + warp_sum(e);
#pragma unroll
		for (int j = 0; j < PER; j++) acc[j] *= alpha;
		int tile = min(32, end - p0);
		for (int j = 0; j < tile; j++) {
			float ej = __shfl_sync(FULL, e, j);
			size_t sj = __shfl_sync(FULL, slot, j);
			const KV *v = V + sj * kvDim + kvOff;
#pragma unroll
			for (int c = 0; c < PER; c++) {
				int d = lane + 32 * c;
				if (d < headDim) acc[c] = fmaf(ej, kv(v, d), acc[c]);
			}
		}
		m = mNew;
	}
	float *o = part + ((size_t)k * segs + s) * (headDim + 2);
	if (lane == 0) o[0] = m, o[1] = l;
#pragma unroll
	for (int c = 0; c < PER; c++) {
		int d = lane + 32 * c;
		if (d < headDim) o[2 + d] = acc[c];
	}
}

// attend_<kv>: grid (ceil(pairs/AW), segs), block 32*AW, for the pairs
// pair0..pair0+pairs-1 (pair = token*heads + head).
#define ATTEND(name, KV)                                                                               \
	extern "C" __global__ void __launch_bounds__(32 * AW)                                            \
	    attend_##name(float *part, const float *q, const KV *K, const KV *V, const int *pos,         \
	                  const int *seq, const int *table, int tableStride, int blockSize, int heads,   \
	                  int kvHeads, int headDim, float scale, int pair0, int pairs, int segs,         \
	                  int window) {                                                                  \
		attend_body<KV>(part, q, K, V, pos, seq, table, tableStride, blockSize, heads, kvHeads,  \
		                headDim, scale, pair0, pairs, segs, window);                             \
	}

ATTEND(f32, float)
ATTEND(f16, __half)

// attend_merge: one warp a pair merges its segments in order into out
// (n, heads*headDim): max M of the segment maxima (and the head's sink),
// then Σ exp(m-M)·acc over Σ exp(m-M)·l (+ exp(sink-M)). One segment and
// no sink gives acc/l exactly. Grid ceil(pairs/AW), block 32*AW.
extern "C" __global__ void __launch_bounds__(32 * AW)
    attend_merge(float *out, const float *part, const int *pos, int heads, int headDim, int pair0, int pairs,
                 int segs, int window, const float *sinks) {
	int lane = threadIdx.x & 31;
	int k = blockIdx.x * AW + (threadIdx.x >> 5);
	if (k >= pairs) return;
	int pair = pair0 + k;
	int i = pair / heads, h = pair % heads;
	int ns = (pos[i] + SEG) / SEG; // segments holding positions 0..pos
	int s0 = window > 0 ? max(0, pos[i] + 1 - window) / SEG : 0; // the first the window reaches
	const float *pk = part + (size_t)k * segs * (headDim + 2);
	float M = -INFINITY;
	for (int s = s0; s < ns; s++) M = fmaxf(M, pk[s * (headDim + 2)]);
	if (sinks) M = fmaxf(M, sinks[h]);
	float L = 0.f;
	float acc[PER];
#pragma unroll
	for (int c = 0; c < PER; c++) acc[c] = 0.f;
	for (int s = s0; s < ns; s++) {
		const float *ps = pk + s * (headDim + 2);
		float f = expf(ps[0] - M);
		L = fmaf(f, ps[1], L);
#pragma unroll
		for (int c = 0; c < PER; c++) {
			int d = lane + 32 * c;
			if (d < headDim) acc[c] = fmaf(f, ps[2 + d], acc[c]);
		}
	}
	if (sinks) L += expf(sinks[h] - M);
	float *o = out + (size_t)i * heads * headDim + h * headDim;
#pragma unroll
	for (int c = 0; c < PER; c++) {
		int d = lane + 32 * c;
		if (d < headDim) o[d] = acc[c] / L;
	}
}
