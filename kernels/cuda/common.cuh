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
enum {
	T_F32 = 0,
	T_F16 = 1,
	T_Q4_0 = 2,
	T_Q4_1 = 3,
	T_Q5_0 = 6,
	T_Q5_1 = 7,
	T_Q8_0 = 8,
	T_Q2_K = 10,
	T_Q3_K = 11,
	T_Q4_K = 12,
	T_Q5_K = 13,
	T_Q6_K = 14,
	T_IQ4_NL = 20,
	T_IQ4_XS = 23,
	T_BF16 = 30,
	T_MXFP4 = 39,
};

// A row is decoded in chunks of 32 elements (chunk c: elements 32c..32c+31),
// each in four pieces of 8. Chunk<T> is what a chunk's pieces share (its
// address and scales), read once; deq8 decodes piece p into w with the same
// float32 arithmetic as kernels/quant.Dequantize, so a value here has the
// bits of the host's.
template <int T> struct Chunk;
template <int T> __device__ __forceinline__ Chunk<T> chunk(const uint8_t *row, int c);
template <int T> __device__ __forceinline__ void deq8(const Chunk<T> &k, int p, float w[8]);

template <> struct Chunk<T_F32> {
	const float4 *p;
};
template <> __device__ __forceinline__ Chunk<T_F32> chunk<T_F32>(const uint8_t *row, int c) {
	return {(const float4 *)(row + 128 * c)};
}
template <> __device__ __forceinline__ void deq8<T_F32>(const Chunk<T_F32> &k, int p, float w[8]) {
	float4 a = __ldg(k.p + 2 * p), b = __ldg(k.p + 2 * p + 1);
	w[0] = a.x, w[1] = a.y, w[2] = a.z, w[3] = a.w, w[4] = b.x, w[5] = b.y, w[6] = b.z, w[7] = b.w;
}

// F16 and BF16: 8 elements are one 16-byte load.
template <> struct Chunk<T_F16> {
	const uint4 *p;
};
template <> struct Chunk<T_BF16> {
	const uint4 *p;
};
template <> __device__ __forceinline__ Chunk<T_F16> chunk<T_F16>(const uint8_t *row, int c) {
	return {(const uint4 *)(row + 64 * c)};
}
template <> __device__ __forceinline__ Chunk<T_BF16> chunk<T_BF16>(const uint8_t *row, int c) {
	return {(const uint4 *)(row + 64 * c)};
}
template <> __device__ __forceinline__ void deq8<T_F16>(const Chunk<T_F16> &k, int p, float w[8]) {
	uint4 v = __ldg(k.p + p);
	uint32_t u[4] = {v.x, v.y, v.z, v.w};
#pragma unroll
	for (int j = 0; j < 4; j++) w[2 * j] = f16(u[j] & 0xffff), w[2 * j + 1] = f16(u[j] >> 16);
}
template <> __device__ __forceinline__ void deq8<T_BF16>(const Chunk<T_BF16> &k, int p, float w[8]) {
	uint4 v = __ldg(k.p + p);
	uint32_t u[4] = {v.x, v.y, v.z, v.w};
#pragma unroll
	for (int j = 0; j < 4; j++) w[2 * j] = bf16(u[j] & 0xffff), w[2 * j + 1] = bf16(u[j] >> 16);
}

// Q8_0 block: d f16, qs[32] int8 (34 bytes, 2-aligned).
template <> struct Chunk<T_Q8_0> {
	const uint16_t *q;
	float d;
};
template <> __device__ __forceinline__ Chunk<T_Q8_0> chunk<T_Q8_0>(const uint8_t *row, int c) {
	const uint8_t *b = row + 34 * c;
	return {(const uint16_t *)(b + 2), f16(ld16(b))};
}
template <> __device__ __forceinline__ void deq8<T_Q8_0>(const Chunk<T_Q8_0> &k, int p, float w[8]) {
#pragma unroll
	for (int i = 0; i < 4; i++) {
		uint16_t v = k.q[4 * p + i];
		w[2 * i] = k.d * (float)(int8_t)(v & 0xff);
		w[2 * i + 1] = k.d * (float)(int8_t)(v >> 8);
	}
}

// Q4_0 block: d f16, qs[16]: element j is qs[j]&15, j+16 is qs[j]>>4, less 8.
// Piece p is the low (p < 2) or high nibbles of qs[8(p%2):8(p%2)+8].
template <> struct Chunk<T_Q4_0> {
	const uint16_t *q;
	float d;
};
template <> __device__ __forceinline__ Chunk<T_Q4_0> chunk<T_Q4_0>(const uint8_t *row, int c) {
	const uint8_t *b = row + 18 * c;
	return {(const uint16_t *)(b + 2), f16(ld16(b))};
}
template <> __device__ __forceinline__ void deq8<T_Q4_0>(const Chunk<T_Q4_0> &k, int p, float w[8]) {
	int shift = p >= 2 ? 4 : 0;
#pragma unroll
	for (int i = 0; i < 4; i++) {
		uint16_t v = k.q[4 * (p & 1) + i];
		w[2 * i] = k.d * (float)((int)((v >> shift) & 0xf) - 8);
		w[2 * i + 1] = k.d * (float)((int)((v >> (8 + shift)) & 0xf) - 8);
	}
}

// Q4_K super-block (256 elements, 144 bytes, 4-aligned): d f16, dmin f16,
// scales[12] (eight 6-bit scale/min pairs), qs[128]. Chunk s of a block is
// the low (s even) or high nibbles of qs[32(s/2):32(s/2)+32], scale pair s.
template <> struct Chunk<T_Q4_K> {
	const uint32_t *q;
	float d1, m1;
	int shift;
};
template <> __device__ __forceinline__ Chunk<T_Q4_K> chunk<T_Q4_K>(const uint8_t *row, int c) {
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
	return {(const uint32_t *)(b + 16 + 32 * (s >> 1)), d * (float)scale, dmin * (float)mn, 4 * (s & 1)};
}
template <> __device__ __forceinline__ void deq8<T_Q4_K>(const Chunk<T_Q4_K> &k, int p, float w[8]) {
#pragma unroll
	for (int i = 0; i < 2; i++) {
		uint32_t v = __ldg(k.q + 2 * p + i) >> k.shift;
#pragma unroll
		for (int j = 0; j < 4; j++) w[4 * i + j] = k.d1 * (float)((v >> (8 * j)) & 0xf) - k.m1;
	}
}

// Q6_K super-block (256 elements, 210 bytes, 2-aligned): ql[128], qh[64],
// scales[16] int8, d f16. Chunk s covers elements 128(s/4) + 32(s%4) + l;
// its first 16 elements have one scale, the last 16 the next.
template <> struct Chunk<T_Q6_K> {
	const uint8_t *ql, *qh;
	float d0, d1;
	int lshift, hshift;
};
template <> __device__ __forceinline__ Chunk<T_Q6_K> chunk<T_Q6_K>(const uint8_t *row, int c) {
	const uint8_t *b = row + 210 * (c >> 3);
	int s = c & 7, h = s >> 2, k = s & 3;
	const int8_t *sc = (const int8_t *)(b + 192 + 8 * h + 2 * k);
	float d = f16(ld16(b + 208));
	return {b + 64 * h + 32 * (k & 1), b + 128 + 32 * h, d * (float)sc[0], d * (float)sc[1], 4 * (k >> 1), 2 * k};
}
template <> __device__ __forceinline__ void deq8<T_Q6_K>(const Chunk<T_Q6_K> &k, int p, float w[8]) {
	float d = p < 2 ? k.d0 : k.d1;
#pragma unroll
	for (int j = 0; j < 8; j++) {
		int l = 8 * p + j;
		int q = (int)(((k.ql[l] >> k.lshift) & 0xf) | (((k.qh[l] >> k.hshift) & 3) << 4)) - 32;
		w[j] = d * (float)q;
	}
}

#include "quants.cuh" // the types K-quant mixes add

// deq32 decodes all of chunk c of a row.
template <int T> __device__ __forceinline__ void deq32(const uint8_t *row, int c, float w[32]) {
	Chunk<T> k = chunk<T>(row, c);
#pragma unroll
	for (int p = 0; p < 4; p++) deq8<T>(k, p, w + 8 * p);
}

// wat is element j of a row of a one-element-block type (F32, F16, BF16).
template <int T> __device__ __forceinline__ float wat(const uint8_t *row, int j) {
	if constexpr (T == T_F32) return __ldg((const float *)row + j);
	else if constexpr (T == T_F16) return f16(__ldg((const unsigned short *)row + j));
	else return bf16(__ldg((const unsigned short *)row + j));
}
