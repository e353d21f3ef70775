// Decoders of the types K-quant mixes add (Q4_1, Q5_0, Q5_1, IQ4_NL,
// MXFP4, Q2_K, Q3_K, Q5_K, IQ4_XS), in common.cuh's Chunk/deq8 shape: a
// chunk is 32 consecutive elements of a row, piece p its elements
// 8p…8p+7, and each value comes out with the float32 arithmetic of
// kernels/quant's dequantCodes (scale products formed once a chunk, as the
// host forms them per element with the same operands), so the bits agree.
// Included by common.cuh; reads bytes where a block is not 4-aligned.
#pragma once

__device__ __forceinline__ uint32_t ld32b(const uint8_t *p) { // any alignment
	return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

__device__ __forceinline__ int kv_iq4nl(int c) {
	const int8_t v[16] = {-127, -104, -83, -65, -49, -35, -22, -10, 1, 13, 25, 38, 53, 69, 89, 113};
	return v[c & 15];
}

__device__ __forceinline__ int kv_mxfp4(int c) {
	const int8_t v[16] = {0, 1, 2, 3, 4, 6, 8, 12, 0, -1, -2, -3, -4, -6, -8, -12};
	return v[c & 15];
}

// nib32 is element j (0…31) of a 32-block's 16 bytes of nibbles.
__device__ __forceinline__ int nib32(const uint8_t *qs, int j) {
	return j < 16 ? qs[j] & 15 : qs[j - 16] >> 4;
}

// Q4_1 (20 bytes: d, m, nibbles) and Q5_1 (24: d, m, qh, nibbles):
// w = float(u)·d + m.
template <> struct Chunk<T_Q4_1> {
	const uint8_t *qs;
	float d, m;
};
template <> __device__ __forceinline__ Chunk<T_Q4_1> chunk<T_Q4_1>(const uint8_t *row, int c) {
	const uint8_t *b = row + 20 * c;
	return {b + 4, f16(ld16(b)), f16(ld16(b + 2))};
}
template <> __device__ __forceinline__ void deq8<T_Q4_1>(const Chunk<T_Q4_1> &k, int p, float w[8]) {
#pragma unroll
	for (int i = 0; i < 8; i++) w[i] = (float)nib32(k.qs, 8 * p + i) * k.d + k.m;
}

template <> struct Chunk<T_Q5_1> {
	const uint8_t *qs;
	uint32_t qh;
	float d, m;
};
template <> __device__ __forceinline__ Chunk<T_Q5_1> chunk<T_Q5_1>(const uint8_t *row, int c) {
	const uint8_t *b = row + 24 * c;
	return {b + 8, ld32b(b + 4), f16(ld16(b)), f16(ld16(b + 2))};
}
template <> __device__ __forceinline__ void deq8<T_Q5_1>(const Chunk<T_Q5_1> &k, int p, float w[8]) {
#pragma unroll
	for (int i = 0; i < 8; i++) {
		int j = 8 * p + i;
		w[i] = (float)(nib32(k.qs, j) | (int)((k.qh >> j) & 1) << 4) * k.d + k.m;
	}
}

// Q5_0 (22 bytes: d, qh, nibbles): w = float(u − 16)·d.
template <> struct Chunk<T_Q5_0> {
	const uint8_t *qs;
	uint32_t qh;
	float d;
};
template <> __device__ __forceinline__ Chunk<T_Q5_0> chunk<T_Q5_0>(const uint8_t *row, int c) {
	const uint8_t *b = row + 22 * c;
	return {b + 6, ld32b(b + 2), f16(ld16(b))};
}
template <> __device__ __forceinline__ void deq8<T_Q5_0>(const Chunk<T_Q5_0> &k, int p, float w[8]) {
#pragma unroll
	for (int i = 0; i < 8; i++) {
		int j = 8 * p + i;
		w[i] = (float)((nib32(k.qs, j) | (int)((k.qh >> j) & 1) << 4) - 16) * k.d;
	}
}

// IQ4_NL (18 bytes: d, nibbles of the grid): w = float(grid)·d.
template <> struct Chunk<T_IQ4_NL> {
	const uint8_t *qs;
	float d;
};
template <> __device__ __forceinline__ Chunk<T_IQ4_NL> chunk<T_IQ4_NL>(const uint8_t *row, int c) {
	const uint8_t *b = row + 18 * c;
	return {b + 2, f16(ld16(b))};
}
template <> __device__ __forceinline__ void deq8<T_IQ4_NL>(const Chunk<T_IQ4_NL> &k, int p, float w[8]) {
#pragma unroll
	for (int i = 0; i < 8; i++) w[i] = (float)kv_iq4nl(nib32(k.qs, 8 * p + i)) * k.d;
}

// MXFP4 (17 bytes: exponent e, nibbles of the doubled FP4 grid):
// w = 2^(e−128)·float(grid).
template <> struct Chunk<T_MXFP4> {
	const uint8_t *qs;
	float d;
};
template <> __device__ __forceinline__ Chunk<T_MXFP4> chunk<T_MXFP4>(const uint8_t *row, int c) {
	const uint8_t *b = row + 17 * c;
	uint32_t e = b[0];
	uint32_t bits = e < 2 ? 0x00200000u << e : (e - 1) << 23;
	return {b + 1, __uint_as_float(bits)};
}
template <> __device__ __forceinline__ void deq8<T_MXFP4>(const Chunk<T_MXFP4> &k, int p, float w[8]) {
#pragma unroll
	for (int i = 0; i < 8; i++) w[i] = k.d * (float)kv_mxfp4(nib32(k.qs, 8 * p + i));
}

// Q2_K (84-byte super-blocks: 16 bytes sc | m<<4, qs[64], d, dmin). Chunk
// s = 4n+j takes bits 2j of qs[32n…32n+31]; its halves are sub-blocks 2s
// and 2s+1: w = (d·sc)·float(q) − dmin·m.
template <> struct Chunk<T_Q2_K> {
	const uint8_t *q;
	float d0, m0, d1, m1;
	int shift;
};
template <> __device__ __forceinline__ Chunk<T_Q2_K> chunk<T_Q2_K>(const uint8_t *row, int c) {
	const uint8_t *b = row + 84 * (c >> 3);
	int s = c & 7;
	float d = f16(ld16(b + 80)), dmin = f16(ld16(b + 82));
	uint8_t a = b[2 * s], z = b[2 * s + 1];
	return {b + 16 + 32 * (s >> 2), d * (float)(a & 15), dmin * (float)(a >> 4), d * (float)(z & 15),
	        dmin * (float)(z >> 4), 2 * (s & 3)};
}
template <> __device__ __forceinline__ void deq8<T_Q2_K>(const Chunk<T_Q2_K> &k, int p, float w[8]) {
	float d = p < 2 ? k.d0 : k.d1, m = p < 2 ? k.m0 : k.m1;
#pragma unroll
	for (int i = 0; i < 8; i++) w[i] = d * (float)((k.q[8 * p + i] >> k.shift) & 3) - m;
}

// Q3_K (110-byte super-blocks: hmask[32], qs[64], 12 bytes of six-bit
// scales, d). Chunk s = 4n+j: q = bits 2j of qs[32n+l] | bit s of
// hmask[l] << 2, less 4; w = (d·(sc−32))·float(q).
template <> struct Chunk<T_Q3_K> {
	const uint8_t *q, *hm;
	float d0, d1;
	int shift, s;
};
__device__ __forceinline__ int q3k_scale(const uint8_t *sc, int j) {
	int lo = (sc[j & 7] >> (4 * (j >> 3))) & 15, hi = (sc[8 + (j & 3)] >> (2 * (j >> 2))) & 3;
	return (lo | hi << 4) - 32;
}
template <> __device__ __forceinline__ Chunk<T_Q3_K> chunk<T_Q3_K>(const uint8_t *row, int c) {
	const uint8_t *b = row + 110 * (c >> 3);
	int s = c & 7;
	float d = f16(ld16(b + 108));
	return {b + 32 + 32 * (s >> 2), b, d * (float)q3k_scale(b + 96, 2 * s), d * (float)q3k_scale(b + 96, 2 * s + 1),
	        2 * (s & 3), s};
}
template <> __device__ __forceinline__ void deq8<T_Q3_K>(const Chunk<T_Q3_K> &k, int p, float w[8]) {
	float d = p < 2 ? k.d0 : k.d1;
#pragma unroll
	for (int i = 0; i < 8; i++) {
		int l = 8 * p + i;
		int q = (int)((k.q[l] >> k.shift) & 3 | ((k.hm[l] >> k.s) & 1) << 2) - 4;
		w[i] = d * (float)q;
	}
}

// Q5_K (176-byte super-blocks: d, dmin, scales as Q4_K, qh[32], qs[128]):
// chunk s takes the low (s even) or high nibbles of qs[32(s/2)…] and bit s
// of qh[l]: w = (d·sc)·float(u) − dmin·m.
template <> struct Chunk<T_Q5_K> {
	const uint8_t *q, *qh;
	float d1, m1;
	int shift, s;
};
template <> __device__ __forceinline__ Chunk<T_Q5_K> chunk<T_Q5_K>(const uint8_t *row, int c) {
	const uint8_t *b = row + 176 * (c >> 3);
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
	return {b + 48 + 32 * (s >> 1), b + 16, d * (float)scale, dmin * (float)mn, 4 * (s & 1), s};
}
template <> __device__ __forceinline__ void deq8<T_Q5_K>(const Chunk<T_Q5_K> &k, int p, float w[8]) {
#pragma unroll
	for (int i = 0; i < 8; i++) {
		int l = 8 * p + i;
		int u = (k.q[l] >> k.shift) & 15 | ((k.qh[l] >> k.s) & 1) << 4;
		w[i] = k.d1 * (float)u - k.m1;
	}
}

// IQ4_XS (136-byte super-blocks: d, scales_h, scales_l[4], 8 chunks of 16
// bytes of grid nibbles): w = (d·(ls−32))·float(grid).
template <> struct Chunk<T_IQ4_XS> {
	const uint8_t *qs;
	float dl;
};
template <> __device__ __forceinline__ Chunk<T_IQ4_XS> chunk<T_IQ4_XS>(const uint8_t *row, int c) {
	const uint8_t *b = row + 136 * (c >> 3);
	int s = c & 7;
	int ls = ((b[4 + s / 2] >> (4 * (s & 1))) & 15) | ((ld16(b + 2) >> (2 * s)) & 3) << 4;
	return {b + 8 + 16 * s, f16(ld16(b)) * (float)(ls - 32)};
}
template <> __device__ __forceinline__ void deq8<T_IQ4_XS>(const Chunk<T_IQ4_XS> &k, int p, float w[8]) {
#pragma unroll
	for (int i = 0; i < 8; i++) w[i] = k.dl * (float)kv_iq4nl(nib32(k.qs, 8 * p + i));
}
