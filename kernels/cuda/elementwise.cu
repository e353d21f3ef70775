// Row and element-wise kernels: RMSNorm, RoPE, SiLU·up, Add, AddBias,
// Gather, Scatter into the KV pool, and the sampling helpers (Softmax,
// Argmax). Each follows kernels/ref's arithmetic: float64 where ref sums
// or calls a float64 math function, float32 rounding where ref rounds.
#include "common.cuh"

// rmsnorm: one warp a row, grid ceil(rows/4), block 128. The mean square is
// summed in float64 as ref sums it (lane-strided, then a butterfly).
extern "C" __global__ void __launch_bounds__(128)
    rmsnorm(float *dst, const float *x, const float *weight, int rows, int dim, float eps) {
	int lane = threadIdx.x & 31;
	int r = blockIdx.x * 4 + (threadIdx.x >> 5);
	if (r >= rows) return;
	const float *xr = x + (size_t)r * dim;
	float *dr = dst + (size_t)r * dim;
	double sum = 0;
	for (int i = lane; i < dim; i += 32) {
		double v = xr[i];
		sum += v * v;
	}
	sum = warp_sum_d(sum);
	float scale = (float)(1.0 / sqrt(sum / (double)dim + (double)eps));
	for (int i = lane; i < dim; i += 32) dr[i] = xr[i] * scale * weight[i];
}

// rope: one thread a (token, head, pair). theta is carried in float32 and
// multiplied by scale once per pair, as ref carries it, so thread i repeats
// the i products rather than calling pow; then scaled as ref.RopeAngles
// scales it (linear or YaRN: freqScale, the ramp between corr0 and corr1
// mixed by extFactor, cos and sin times mscale).
extern "C" __global__ void rope(float *x, const int *pos, int n, int heads, int headDim, int ropeDim,
                                float scale, int neox, float freqScale, float extFactor, float mscale,
                                float corr0, float corr1) {
	int half = ropeDim / 2;
	long long k = (long long)blockIdx.x * blockDim.x + threadIdx.x;
	if (k >= (long long)n * heads * half) return;
	int i = (int)(k % half);
	long long th = k / half; // token*heads + head
	int t = (int)(th / heads);
	float theta = (float)pos[t];
	for (int j = 0; j < i; j++) theta *= scale;
	float a = freqScale * theta;
	if (extFactor != 0.f) {
		float y = ((float)i - corr0) / fmaxf(0.001f, corr1 - corr0);
		float mix = (1.f - fminf(1.f, fmaxf(0.f, y))) * extFactor;
		a = a * (1.f - mix) + theta * mix;
	}
	float c = (float)cos((double)a) * mscale, s = (float)sin((double)a) * mscale;
	float *h = x + th * headDim;
	int p = neox ? i : 2 * i, q = neox ? i + half : 2 * i + 1;
	float x0 = h[p], x1 = h[q];
	h[p] = x0 * c - x1 * s;
	h[q] = x0 * s + x1 * c;
}

// silu_mul: gate = gate/(1+exp(-gate))·up over n elements.
extern "C" __global__ void silu_mul(float *gate, const float *up, long long n) {
	long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;
	if (i >= n) return;
	float g = gate[i];
	gate[i] = g / (1.0f + (float)exp(-(double)g)) * up[i];
}

extern "C" __global__ void add(float *dst, const float *src, long long n) {
	long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;
	if (i < n) dst[i] += src[i];
}

extern "C" __global__ void add_bias(float *x, const float *bias, long long n, int dim) {
	long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;
	if (i < n) x[i] += bias[i % dim];
}

// gather: row i of dst = row rows[i] of src; one thread an element.
extern "C" __global__ void gather(float *dst, const float *src, const int *rows, int n, int width) {
	long long k = (long long)blockIdx.x * blockDim.x + threadIdx.x;
	if (k >= (long long)n * width) return;
	int i = (int)(k / width), j = (int)(k % width);
	dst[k] = src[(size_t)rows[i] * width + j];
}

// scatter_*: row slots[i] of dst = row i of src, as F32 or rounded to F16.
extern "C" __global__ void scatter_f32(float *dst, const float *src, const int *slots, int n, int width) {
	long long k = (long long)blockIdx.x * blockDim.x + threadIdx.x;
	if (k >= (long long)n * width) return;
	int i = (int)(k / width), j = (int)(k % width);
	dst[(size_t)slots[i] * width + j] = src[k];
}

extern "C" __global__ void scatter_f16(__half *dst, const float *src, const int *slots, int n, int width) {
	long long k = (long long)blockIdx.x * blockDim.x + threadIdx.x;
	if (k >= (long long)n * width) return;
	int i = (int)(k / width), j = (int)(k % width);
	dst[(size_t)slots[i] * width + j] = __float2half_rn(src[k]);
}

// Block reductions for one row a block of RB threads: a fixed tree over
// shared memory after each thread's strided pass.
#define RB 256

// argmax: ids[r] = the index of the largest of row r's width logits; the
// lowest index wins a tie, NaN never wins. Grid rows, block RB.
extern "C" __global__ void __launch_bounds__(RB) argmax(int *ids, const float *logits, int width) {
	__shared__ float sv[RB];
	__shared__ int si[RB];
	const float *row = logits + (size_t)blockIdx.x * width;
	float best = -INFINITY;
	int bi = -1;
	for (int j = threadIdx.x; j < width; j += RB) {
		float v = row[j];
		if (v > best || bi < 0 && v == best) best = v, bi = j;
	}
	sv[threadIdx.x] = best, si[threadIdx.x] = bi;
	__syncthreads();
	for (int s = RB / 2; s > 0; s >>= 1) {
		if (threadIdx.x < s) {
			float v = sv[threadIdx.x + s];
			int i = si[threadIdx.x + s];
			int mi = si[threadIdx.x];
			if (i >= 0 && (mi < 0 || v > sv[threadIdx.x] || v == sv[threadIdx.x] && i < mi))
				sv[threadIdx.x] = v, si[threadIdx.x] = i;
		}
		__syncthreads();
	}
	if (threadIdx.x == 0) ids[blockIdx.x] = si[0] < 0 ? 0 : si[0];
}

// softmax: row r of x (width) becomes exp(x-max)/Σexp(x-max) in place, the
// sum taken in float64. Grid rows, block RB.
extern "C" __global__ void __launch_bounds__(RB) softmax(float *x, int width) {
	__shared__ float sm[RB];
	__shared__ double ss[RB];
	float *row = x + (size_t)blockIdx.x * width;
	float m = -INFINITY;
	for (int j = threadIdx.x; j < width; j += RB) m = fmaxf(m, row[j]);
	sm[threadIdx.x] = m;
	__syncthreads();
	for (int s = RB / 2; s > 0; s >>= 1) {
		if (threadIdx.x < s) sm[threadIdx.x] = fmaxf(sm[threadIdx.x], sm[threadIdx.x + s]);
		__syncthreads();
	}
	m = sm[0];
	double sum = 0;
	for (int j = threadIdx.x; j < width; j += RB) sum += exp((double)row[j] - (double)m);
	ss[threadIdx.x] = sum;
	__syncthreads();
	for (int s = RB / 2; s > 0; s >>= 1) {
		if (threadIdx.x < s) ss[threadIdx.x] += ss[threadIdx.x + s];
		__syncthreads();
	}
	sum = ss[0];
	for (int j = threadIdx.x; j < width; j += RB) row[j] = (float)(exp((double)row[j] - (double)m) / sum);
}
