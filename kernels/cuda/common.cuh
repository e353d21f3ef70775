// Shared device helpers of the jspark CUDA kernels.
//
// NOTE: every kernel here is compiled with -fmad=false so that a*b+c is
// rounded as written (as Go rounds it); the dot products use fmaf()
// explicitly. Reductions are butterfly shuffles in a fixed order, never
// atomics, so a result depends only on its own inputs.
#pragma once
#ifdef JSPARK_EMU
#include "emu.h" // the host emulator of the cudaemu tests
#else
#include <cuda_fp16.h>
#endif
#include <stdint.h>

#define FULL 0xffffffffu

__device__ __forceinline__ float f16(uint16_t h) { return __half2float(__ushort_as_half(h)); }

__device__ __forceinline__ float bf16(uint16_t h) { return __uint_as_float((uint32_t)h << 16); }

__device__ __forceinline__ uint16_t ld16(const uint8_t *p) {
	return *(const uint16_t *)p; // every 16-bit field of a block is 2-aligned
}

// warp_sum and warp_max leave the same value in every lane; the order of the
// additions is fixed by the butterfly, whatever the data.
__device__ __forceinline__ float warp_sum(float v) {
	for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(FULL, v, o);
	return v;
}

__device__ __forceinline__ float warp_max(float v) {
	for (int o = 16; o > 0; o >>= 1) v = fmaxf(v, __shfl_xor_sync(FULL, v, o));
	return v;
}

__device__ __forceinline__ double warp_sum_d(double v) {
	for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(FULL, v, o);
	return v;
}

// Weight types, numbered as ggml numbers them (kernels/quant).
enum { T_F32 = 0, T_F16 = 1, T_Q4_0 = 2, T_Q8_0 = 8, T_Q4_K = 12, T_Q6_K = 14, T_BF16 = 30 };

// deq32 decodes chunk c (elements 32c..32c+31) of a row of type T into w,
// with the same float32 arithmetic as kernels/quant.Dequantize, so a value
// here has the bits of the host's.
template <int T> __device__ __forceinline__ void deq32(const uint8_t *row, int c, float w[32]);

template <> __device__ __forceinline__ void deq32<T_F32>(const uint8_t *row, int c, float w[32]) {
	const float4 *p = (const float4 *)(row + 128 * c);
#pragma unroll
	for (int i = 0; i < 8; i++) {
		float4 v = __ldg(p + i);
		w[4 * i] = v.x, w[4 * i + 1] = v.y, w[4 * i + 2] = v.z, w[4 * i + 3] = v.w;
	}
}

template <> __device__ __forceinline__ void deq32<T_F16>(const uint8_t *row, int c, float w[32]) {
	const uint4 *p = (const uint4 *)(row + 64 * c);
#pragma unroll
	for (int i = 0; i < 4; i++) {
		uint4 v = __ldg(p + i);
		uint32_t u[4] = {v.x, v.y, v.z, v.w};
#pragma unroll
		for (int j = 0; j < 4; j++) {
			w[8 * i + 2 * j] = f16(u[j] & 0xffff);
			w[8 * i + 2 * j + 1] = f16(u[j] >> 16);
		}
	}
}

template <> __device__ __forceinline__ void deq32<T_BF16>(const uint8_t *row, int c, float w[32]) {
	const uint4 *p = (const uint4 *)(row + 64 * c);
#pragma unroll
	for (int i = 0; i < 4; i++) {
		uint4 v = __ldg(p + i);
		uint32_t u[4] = {v.x, v.y, v.z, v.w};
#pragma unroll
		for (int j = 0; j < 4; j++) {
			w[8 * i + 2 * j] = bf16(u[j] & 0xffff);
			w[8 * i + 2 * j + 1] = bf16(u[j] >> 16);
		}
	}
}

// Q8_0 block: d f16, qs[32] int8 (34 bytes, 2-aligned).
template <> __device__ __forceinline__ void deq32<T_Q8_0>(const uint8_t *row, int c, float w[32]) {
	const uint8_t *b = row + 34 * c;
	float d = f16(ld16(b));
	const uint16_t *q = (const uint16_t *)(b + 2);
#pragma unroll
	for (int i = 0; i < 16; i++) {
		uint16_t v = q[i];
		w[2 * i] = d * (float)(int8_t)(v & 0xff);
		w[2 * i + 1] = d * (float)(int8_t)(v >> 8);
	}
}

// Q4_0 block: d f16, qs[16]: element j is qs[j]&15, j+16 is qs[j]>>4, less 8.
template <> __device__ __forceinline__ void deq32<T_Q4_0>(const uint8_t *row, int c, float w[32]) {
	const uint8_t *b = row + 18 * c;
	float d = f16(ld16(b));
	const uint16_t *q = (const uint16_t *)(b + 2);
#pragma unroll
	for (int i = 0; i < 8; i++) {
		uint16_t v = q[i];
		w[2 * i] = d * (float)((int)(v & 0xf) - 8);
		w[2 * i + 16] = d * (float)((int)((v >> 4) & 0xf) - 8);
		w[2 * i + 1] = d * (float)((int)((v >> 8) & 0xf) - 8);
		w[2 * i + 17] = d * (float)((int)(v >> 12) - 8);
	}
}

// Q4_K super-block (256 elements, 144 bytes, 4-aligned): d f16, dmin f16,
// scales[12] (eight 6-bit scale/min pairs), qs[128]. Chunk s of a block is
// the low (s even) or high nibbles of qs[32(s/2):32(s/2)+32], scale pair s.
template <> __device__ __forceinline__ void deq32<T_Q4_K>(const uint8_t *row, int c, float w[32]) {
	const uint8_t *b = row + 144 * (c >> 3);
	int s = c & 7;
	float d = f16(ld16(b)), dmin = f16(ld16(b + 2));
	const uint8_t *sc = b + 4;
	uint8_t scale, mn;
	if (s < 4) {
		scale = sc[s] & 63, mn = sc[s + 4] & 63;
	} else {
		scale = (sc[s + 4] & 0xf) | ((sc[s - 4] >> 6) << 4);
		mn = (sc[s + 4] >> 4) | ((sc[s] >> 6) << 4);
	}
	float d1 = d * (float)scale, m1 = dmin * (float)mn;
	const uint32_t *q = (const uint32_t *)(b + 16 + 32 * (s >> 1));
	int shift = 4 * (s & 1);
#pragma unroll
	for (int i = 0; i < 8; i++) {
		uint32_t v = __ldg(q + i) >> shift;
#pragma unroll
		for (int j = 0; j < 4; j++) w[4 * i + j] = d1 * (float)((v >> (8 * j)) & 0xf) - m1;
	}
}

// Q6_K super-block (256 elements, 210 bytes, 2-aligned): ql[128], qh[64],
// scales[16] int8, d f16. Chunk s covers elements 128(s/4) + 32(s%4) + l.
template <> __device__ __forceinline__ void deq32<T_Q6_K>(const uint8_t *row, int c, float w[32]) {
	const uint8_t *b = row + 210 * (c >> 3);
	int s = c & 7, h = s >> 2, k = s & 3;
	const uint8_t *ql = b + 64 * h + 32 * (k & 1);
	const uint8_t *qh = b + 128 + 32 * h;
	const int8_t *sc = (const int8_t *)(b + 192 + 8 * h + 2 * k);
	float d = f16(ld16(b + 208));
	float d0 = d * (float)sc[0], d1 = d * (float)sc[1];
	int lshift = 4 * (k >> 1), hshift = 2 * k;
#pragma unroll
	for (int l = 0; l < 32; l++) {
		int q = (int)(((ql[l] >> lshift) & 0xf) | (((qh[l] >> hshift) & 3) << 4)) - 32;
		w[l] = (l < 16 ? d0 : d1) * (float)q;
	}
}

// wat is element j of a row of a one-element-block type (F32, F16, BF16).
template <int T> __device__ __forceinline__ float wat(const uint8_t *row, int j) {
	if constexpr (T == T_F32) return __ldg((const float *)row + j);
	else if constexpr (T == T_F16) return f16(__ldg((const unsigned short *)row + j));
	else return bf16(__ldg((const unsigned short *)row + j));
}
