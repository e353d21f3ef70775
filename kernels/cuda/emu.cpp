//go:build cudaemu && !cuda

// emu.cpp: the host emulator behind the cudaemu build (emu.go): the .cu
// files compiled as C++ over emu.h, a fiber scheduler, and a table of
// kernels by name that unpacks 64-bit argument slots as the driver does.
#define JSPARK_EMU 1
#include "emu.h"

#include <setjmp.h>
#include <ucontext.h>

#include <cstdlib>
#include <map>
#include <string>
#include <tuple>
#include <type_traits>
#include <utility>
#include <vector>

#include "attention.cu"
#include "elementwise.cu"
#include "matmul.cu"
#include "moe.cu"
#include "recurrent.cu"

dim3 threadIdx, blockIdx, blockDim, gridDim;

namespace {

const size_t kStack = 256 << 10;
const int kMaxThreads = 1024;

struct Fiber {
	ucontext_t uc;
	jmp_buf jb;
	bool started, done;
	char *stack;
};

Fiber fibers[kMaxThreads];
jmp_buf sched;
ucontext_t schedUC;
int cur;        // the running fiber
int nthreads;   // threads of the block
void (*body)(); // the block's kernel call

struct Group {
	int arrived, live;
	unsigned gen;
};
Group warps[kMaxThreads / 32], block;
uint64_t slots[kMaxThreads];

void yield() {
	if (!_setjmp(fibers[cur].jb)) _longjmp(sched, 1);
}

void trampoline() {
	body();
	Fiber &f = fibers[cur];
	f.done = true;
	Group *gs[2] = {&warps[cur / 32], &block};
	for (Group *g : gs) {
		g->live--;
		if (g->arrived > 0 && g->arrived == g->live) g->arrived = 0, g->gen++;
	}
	_longjmp(sched, 1);
}

void arrive(Group &g) {
	if (++g.arrived == g.live) {
		g.arrived = 0, g.gen++;
		return;
	}
	unsigned gen = g.gen;
	while (g.gen == gen) yield();
}

// runBlock runs every thread of the current block to its end, switching at
// each barrier.
void runBlock() {
	for (int w = 0; w < (nthreads + 31) / 32; w++) warps[w] = Group{0, std::min(32, nthreads - 32 * w), 0};
	block = Group{0, nthreads, 0};
	for (int i = 0; i < nthreads; i++) {
		Fiber &f = fibers[i];
		if (!f.stack) f.stack = (char *)malloc(kStack);
		f.started = f.done = false;
		getcontext(&f.uc);
		f.uc.uc_stack.ss_sp = f.stack;
		f.uc.uc_stack.ss_size = kStack;
		f.uc.uc_link = nullptr;
		makecontext(&f.uc, trampoline, 0);
	}
	for (int left = nthreads; left > 0;) {
		left = 0;
		for (int i = 0; i < nthreads; i++) {
			Fiber &f = fibers[i];
			if (f.done) continue;
			cur = i;
			threadIdx = dim3{(unsigned)i, 0, 0};
			if (!_setjmp(sched)) {
				if (!f.started) {
					f.started = true;
					swapcontext(&schedUC, &f.uc);
				} else {
					_longjmp(f.jb, 1);
				}
			}
			if (!f.done) left++;
		}
	}
}

template <typename T> T arg(uint64_t v) {
	if constexpr (std::is_pointer_v<T>) return reinterpret_cast<T>(v);
	else if constexpr (std::is_same_v<T, float>) return __uint_as_float((uint32_t)v);
	else if constexpr (sizeof(T) == 8) return (T)v;
	else return (T)(int32_t)(uint32_t)v;
}

struct Kernel {
	int nargs;
	void (*launch)(void *f, const uint64_t *args);
	void *f;
};

const uint64_t *curArgs;
void *curFn;

template <typename... A, size_t... I> void callWith(void (*f)(A...), const uint64_t *a, std::index_sequence<I...>) {
	f(arg<A>(a[I])...);
}

template <typename... A> Kernel kernel(void (*f)(A...)) {
	return Kernel{(int)sizeof...(A),
	              [](void *fp, const uint64_t *a) {
		              callWith((void (*)(A...))fp, a, std::index_sequence_for<A...>{});
	              },
	              (void *)f};
}

#define W(s) {"matmul_" #s "_1", kernel(matmul_##s##_1)}, {"matmul_" #s "_8", kernel(matmul_##s##_8)}, {"embed_" #s, kernel(embed_##s)}

const std::map<std::string, Kernel> &table() {
	static const std::map<std::string, Kernel> t = {
	    W(f32), W(f16), W(bf16), W(q8_0), W(q4_0), W(q4_k), W(q6_k),
	    W(q4_1), W(q5_0), W(q5_1), W(iq4_nl), W(mxfp4), W(q2_k), W(q3_k), W(q5_k), W(iq4_xs),
	    {"rmsnorm", kernel(rmsnorm)}, {"rope", kernel(rope)}, {"silu_mul", kernel(silu_mul)},
	    {"add", kernel(add)}, {"add_bias", kernel(add_bias)}, {"gather", kernel(gather)},
	    {"scatter_f32", kernel(scatter_f32)}, {"scatter_f16", kernel(scatter_f16)},
	    {"attend_f32", kernel(attend_f32)}, {"attend_f16", kernel(attend_f16)}, {"attend_merge", kernel(attend_merge)},
	    {"argmax", kernel(argmax)}, {"softmax", kernel(softmax)},
	    {"swiglu_oai", kernel(swiglu_oai)}, {"weighted_sum", kernel(weighted_sum)},
	    {"gelu_mul", kernel(gelu_mul)}, {"sigmoid_mul", kernel(sigmoid_mul)}, {"scale", kernel(scale)},
	    {"conv", kernel(conv)}, {"delta_net", kernel(delta_net)},
	};
	return t;
}

const Kernel *curKernel;

void runKernel() { curKernel->launch(curKernel->f, curArgs); }

} // namespace

void emu_sync_warp() { arrive(warps[cur / 32]); }
void emu_sync_block() { arrive(block); }

uint64_t emu_exchange(uint64_t v, int srcLane) {
	int base = cur & ~31;
	slots[cur] = v;
	emu_sync_warp();
	uint64_t r = slots[base + srcLane];
	emu_sync_warp();
	return r;
}

extern "C" {

// emu_launch runs kernel name over a gx×gy grid of blocks of block threads;
// it returns 0, or -1 for an unknown kernel, -2 for a wrong argument count,
// -3 for a block the emulator cannot hold.
int emu_launch(const char *name, int gx, int gy, int block, const uint64_t *args, int nargs) {
	auto it = table().find(name);
	if (it == table().end()) return -1;
	if (it->second.nargs != nargs) return -2;
	if (block <= 0 || block > kMaxThreads) return -3;
	curKernel = &it->second;
	curArgs = args;
	body = runKernel;
	nthreads = block;
	blockDim = dim3{(unsigned)block, 1, 1};
	gridDim = dim3{(unsigned)gx, (unsigned)gy, 1};
	for (int y = 0; y < gy; y++) {
		for (int x = 0; x < gx; x++) {
			blockIdx = dim3{(unsigned)x, (unsigned)y, 0};
			runBlock();
		}
	}
	return 0;
}

} // extern "C"
