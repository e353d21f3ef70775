// emu.h: just enough of CUDA to run jspark's kernels on the host, for the
// cudaemu build's tests (emu.cpp). Every CUDA thread of a block is a fiber
// on one OS thread; blocks run one after another. Shuffles and barriers
// yield until every live thread of the warp (or block) has arrived, so the
// kernels' own code, indexing and reductions run unchanged; only speed and
// the math library differ from a GPU.
#pragma once
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>

#define __global__
#define __device__
#define __host__
#define __forceinline__ inline
#define __restrict__ __restrict
#define __launch_bounds__(...)
#define __shared__ static

struct dim3 {
	unsigned x, y, z;
};
extern dim3 threadIdx, blockIdx, blockDim, gridDim;

struct float4 {
	float x, y, z, w;
};
struct uint4 {
	unsigned x, y, z, w;
};
template <typename T> inline T __ldg(const T *p) { return *p; }

using std::max;
using std::min;

inline float __uint_as_float(uint32_t u) {
	float f;
	memcpy(&f, &u, 4);
	return f;
}
inline uint32_t __float_as_uint(float f) {
	uint32_t u;
	memcpy(&u, &f, 4);
	return u;
}

// __half as its bits; conversions as the hardware does them (round to
// nearest even, subnormals kept).
struct __half {
	uint16_t bits;
};
inline __half __ushort_as_half(uint16_t h) { return __half{h}; }
inline float __half2float(__half h) {
	uint32_t s = (uint32_t)(h.bits >> 15) << 31, e = (h.bits >> 10) & 31, m = h.bits & 0x3ff;
	if (e == 31) return __uint_as_float(s | 0x7f800000u | m << 13);
	if (e == 0) {
		float v = ldexpf((float)m, -24);
		return s ? -v : v;
	}
	return __uint_as_float(s | (e + 112) << 23 | m << 13);
}
inline __half __float2half_rn(float f) {
	uint32_t u = __float_as_uint(f), s = (u >> 16) & 0x8000;
	float a = fabsf(f);
	if (std::isnan(f)) return __half{(uint16_t)(s | 0x7e00)};
	if (a >= 65520.0f) return __half{(uint16_t)(s | 0x7c00)};
	if (a < 6.103515625e-05f) { // subnormal half: a multiple of 2^-24
		float q = nearbyintf(a * 16777216.0f); // exact scaling; rint rounds half to even
		return __half{(uint16_t)(s | (uint16_t)q)};
	}
	uint32_t e = ((u >> 23) & 0xff) - 112, m = u & 0x7fffff;
	uint32_t h = e << 10 | m >> 13, rest = m & 0x1fff;
	if (rest > 0x1000 || (rest == 0x1000 && (h & 1))) h++;
	return __half{(uint16_t)(s | h)};
}

void emu_sync_warp();
void emu_sync_block();
uint64_t emu_exchange(uint64_t v, int srcLane);

inline void __syncwarp(unsigned = 0xffffffffu) { emu_sync_warp(); }
inline void __syncthreads() { emu_sync_block(); }

template <typename T> inline T emu_shfl(T v, int srcLane) {
	static_assert(sizeof(T) <= 8, "shuffle of a wide type");
	uint64_t u = 0;
	memcpy(&u, &v, sizeof(T));
	u = emu_exchange(u, srcLane);
	T r;
	memcpy(&r, &u, sizeof(T));
	return r;
}
template <typename T> inline T __shfl_sync(unsigned, T v, int src) { return emu_shfl(v, src & 31); }
template <typename T> inline T __shfl_xor_sync(unsigned, T v, int mask) {
	return emu_shfl(v, (int)(threadIdx.x & 31) ^ mask);
}
