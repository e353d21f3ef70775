// The hybrid families' kernels: GeGLU, the sigmoid output gate, scaling,
// the short convolution and the gated delta rule over a step's runs
// (kernels.Conv, kernels.DeltaNet). The element-wise ones and the
// convolution follow kernels/ref's arithmetic bit for bit; the delta rule
// follows kernels/cpu's float32 one.
#include "common.cuh"

// gelu_mul: gate = gelu(gate)·up, gelu's tanh form (ref.GELU).
extern "C" __global__ void gelu_mul(float *gate, const float *up, long long n) {
	long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;
	if (i >= n) return;
	float x = gate[i];
	float inner = 0.79788456080286535587989211986876f * x * (1.0f + 0.044715f * x * x);
	gate[i] = 0.5f * x * (1.0f + (float)tanh((double)inner)) * up[i];
}

// sigmoid_mul: x[i] *= 1/(1+exp(-gate[i/per])).
extern "C" __global__ void sigmoid_mul(float *x, const float *gate, long long n, int per) {
	long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;
	if (i >= n) return;
	x[i] *= (float)(1.0 / (1.0 + exp(-(double)gate[i / per])));
}

extern "C" __global__ void scale(float *x, long long n, float s) {
	long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;
	if (i < n) x[i] *= s;
}

#define MAXK 64 // taps of the convolution at most

// conv: one thread a (run, channel), walking the run's tokens in order
// (ref.ConvRun): the window is the slot's last K-1 inputs (zeros when the
// run starts at position 0), each output a float32 sum in tap order, then
// SiLU; the run's last K-1 inputs go back to the slot. Grid (ceil(C/256),
// runs), block 256.
extern "C" __global__ void conv(float *out, const float *x, const float *w, float *state, int stride, int off,
                                const int *start, const int *slot, const int *pos, int channels, int width) {
	int ch = blockIdx.x * blockDim.x + threadIdx.x;
	int r = blockIdx.y;
	if (ch >= channels) return;
	int t0 = start[r], t1 = start[r + 1];
	float *st = state + (size_t)slot[r] * stride + off;
	bool fresh = pos[t0] == 0;
	float win[MAXK];
	for (int j = 0; j < width - 1; j++) win[j] = fresh ? 0.f : st[(size_t)j * channels + ch];
	const float *wc = w + (size_t)ch * width;
	for (int t = t0; t < t1; t++) {
		float in = x[(size_t)t * channels + ch];
		float sum = 0.f;
		for (int j = 0; j < width - 1; j++) sum += wc[j] * win[j];
		sum += wc[width - 1] * in;
		out[(size_t)t * channels + ch] = sum / (1.0f + (float)exp(-(double)sum));
		for (int j = 0; j + 1 < width - 1; j++) win[j] = win[j + 1];
		win[width - 2] = in;
	}
	for (int j = 0; j < width - 1; j++) st[(size_t)j * channels + ch] = win[j];
}

// The delta rule's shared memory: a chunk's normed queries and keys (MAXQK
// floats each, chunk × dim, so 16 × 256 or 32 × 128) and its decays and
// products between tokens (chunks of MAXC at most), 40 KiB in all.
#define MAXQK 4096
#define MAXC 32
#define MAXDW 8 // warps of a head (dim ≤ 256)

// block_sum is the sum of every thread's v over a block of whole warps, in
// a fixed order (a butterfly in each warp, then the warps in turn), in
// every thread. red holds a float a warp.
__device__ float block_sum(float v, float *red) {
	v = warp_sum(v);
	int warp = threadIdx.x >> 5, warps = blockDim.x >> 5;
	__syncthreads();
	if ((threadIdx.x & 31) == 0) red[warp] = v;
	__syncthreads();
	float s = 0.f;
	for (int i = 0; i < warps; i++) s += red[i];
	return s;
}

// delta_net: one block a (run, value head), a thread a value column j of
// the head's state S (dim × dim, by key dim), which only it reads and
// writes: S[i][j] for every key dim i. Tokens go in whole aligned chunks
// of chunk positions in the chunked form (kernels/cpu's deltaChunk) and
// otherwise one step at a time (its deltaStep), in float32; exp, the
// softplus and the sigmoid in float64 as ref calls them. Grid (vheads,
// runs), block dim.
extern "C" __global__ void __launch_bounds__(256)
    delta_net(float *out, const float *x, const float *alpha, const float *beta, const float *dt, const float *A,
              float *state, int stride, int off, const int *start, const int *slot, const int *pos, int kheads,
              int vheads, int dim, int tiled, int chunk, float eps) {
	__shared__ float sq[MAXQK], sk[MAXQK];
	__shared__ float sg[MAXC], sb[MAXC], sd[MAXC], kk[MAXC * MAXC], kq[MAXC * MAXC];
	__shared__ float red[MAXDW];
	int h = blockIdx.x, r = blockIdx.y, j = threadIdx.x;
	int D = dim;
	int kh = tiled ? h % kheads : h / (vheads / kheads);
	int t0 = start[r], t1 = start[r + 1];
	int width = (2 * kheads + vheads) * D;
	float *S = state + (size_t)slot[r] * stride + off + (size_t)h * D * D;
	if (pos[t0] == 0)
		for (int i = 0; i < D; i++) S[(size_t)i * D + j] = 0.f;
	float qscale = (float)(1.0 / sqrt((double)D));
	for (int t = t0; t < t1;) {
		int L = 1;
		if (chunk > 1 && pos[t] % chunk == 0 && t + chunk <= t1 && chunk * D <= MAXQK && chunk <= MAXC) L = chunk;
		// The chunk's inputs: q and k normed (the norm of sums of
		// squares over the block), v in a register, the decays and betas.
		float v[MAXC];
		for (int p = 0; p < L; p++) {
			const float *row = x + (size_t)(t + p) * width;
			float qv = row[kh * D + j], kv = row[(kheads + kh) * D + j];
			float qn = block_sum(qv * qv, red), kn = block_sum(kv * kv, red);
			sq[p * D + j] = qv * (qscale / (float)fmax(sqrt((double)qn), (double)eps));
			sk[p * D + j] = kv * (1.0f / (float)fmax(sqrt((double)kn), (double)eps));
			v[p] = row[(2 * kheads + h) * D + j];
			if (j == 0) {
				double a = (double)(alpha[(size_t)(t + p) * vheads + h] + dt[h]);
				sg[p] = A[h] * (float)(a > 20 ? a : log(1.0 + exp(a)));
				sb[p] = (float)(1.0 / (1.0 + exp(-(double)beta[(size_t)(t + p) * vheads + h])));
			}
		}
		__syncthreads();
		if (L == 1) {
			float a = (float)exp((double)sg[0]);
			float skj = 0.f;
			for (int i = 0; i < D; i++) skj = fmaf(sk[i], S[(size_t)i * D + j], skj);
			float u = sb[0] * (v[0] - a * skj);
			float o = 0.f;
			for (int i = 0; i < D; i++) {
				float s = fmaf(sk[i], u, a * S[(size_t)i * D + j]);
				S[(size_t)i * D + j] = s;
				o = fmaf(sq[i], s, o);
			}
			out[(size_t)t * vheads * D + (size_t)h * D + j] = o;
			__syncthreads();
			t++;
			continue;
		}
		// G: the cumulative log decays; kk and kq: the products between
		// the chunk's tokens (a thread a pair, dots in order).
		if (j == 0)
			for (int p = 1; p < L; p++) sg[p] += sg[p - 1];
		__syncthreads();
		for (int e = j; e < L * L; e += blockDim.x) {
			int a = e / L, p = e % L;
			if (p <= a) {
				float dk = 0.f, dq = 0.f;
				for (int i = 0; i < D; i++) {
					dk = fmaf(sk[a * D + i], sk[p * D + i], dk);
					dq = fmaf(sk[p * D + i], sq[a * D + i], dq);
				}
				float ex = (float)exp((double)(sg[a] - sg[p]));
				kk[e] = -sb[a] * ex * dk;
				kq[e] = ex * dq;
			}
		}
		__syncthreads();
		// Column j of S₀ᵀk_t and S₀ᵀq_t, then of u_t and o_t.
		float ks[MAXC], qs[MAXC], u[MAXC];
		for (int p = 0; p < L; p++) ks[p] = qs[p] = 0.f;
		for (int i = 0; i < D; i++) {
			float s = S[(size_t)i * D + j];
			for (int p = 0; p < L; p++) {
				ks[p] = fmaf(sk[p * D + i], s, ks[p]);
				qs[p] = fmaf(sq[p * D + i], s, qs[p]);
			}
		}
		for (int p = 0; p < L; p++) {
			float g = (float)exp((double)sg[p]);
			float up = sb[p] * (v[p] - g * ks[p]);
			for (int q = 0; q < p; q++) up = fmaf(kk[p * L + q], u[q], up);
			u[p] = up;
		}
		for (int p = 0; p < L; p++) {
			float o = qs[p] * (float)exp((double)sg[p]);
			for (int q = 0; q <= p; q++) o = fmaf(kq[p * L + q], u[q], o);
			out[(size_t)(t + p) * vheads * D + (size_t)h * D + j] = o;
		}
		// The state after the chunk, with sd the decay from each token
		// to the chunk's end.
		float last = sg[L - 1];
		float gl = (float)exp((double)last);
		if (j < L) sd[j] = (float)exp((double)(last - sg[j]));
		__syncthreads();
		for (int i = 0; i < D; i++) {
			float s = gl * S[(size_t)i * D + j];
			for (int p = 0; p < L; p++) s = fmaf(sd[p] * sk[p * D + i], u[p], s);
			S[(size_t)i * D + j] = s;
		}
		__syncthreads();
		t += L;
	}
}
