// The mixture of experts' element-wise kernels: gpt-oss's clamped SwiGLU
// and the weighted sum that brings a token's experts back to its row. Each
// follows kernels/ref's arithmetic (float32, exp in float64).
#include "common.cuh"

// swiglu_oai: gate = x/(1+exp(-alpha·x))·(y+1), x = min(gate, limit),
// y = up clamped to ±limit; one thread an element.
extern "C" __global__ void swiglu_oai(float *gate, const float *up, long long n, float alpha, float limit) {
	long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;
	if (i >= n) return;
	float x = fminf(gate[i], limit);
	float y = fmaxf(fminf(up[i], limit), -limit);
	gate[i] = x / (1.0f + (float)exp((double)(-alpha * x))) * (y + 1.0f);
}

// weighted_sum: dst[t] += Σ_j w[t*k+j] · src[rows[t*k+j]], the sum taken in
// j order before it is added; one thread a (token, column).
extern "C" __global__ void weighted_sum(float *dst, const float *src, const int *rows, const float *w, int n,
                                        int k, int width) {
	long long idx = (long long)blockIdx.x * blockDim.x + threadIdx.x;
	if (idx >= (long long)n * width) return;
	int t = (int)(idx / width), c = (int)(idx % width);
	float acc = 0.f;
	for (int j = 0; j < k; j++) acc += w[t * k + j] * src[(size_t)rows[t * k + j] * width + c];
	dst[idx] += acc;
}
