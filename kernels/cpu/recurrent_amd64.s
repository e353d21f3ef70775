// The AVX-512 inner loops of the gated delta rule (recurrent.go), written
// by hand. Columns come in blocks of 64 (four registers), then of 16; the
// caller passes a multiple of 16.

#include "textflag.h"

// func vecmat512(acc *float32, x *float32, m *float32, rows int, cols int, stride int, a float32)
// acc[j] = a·acc[j] + Σ_i x[i]·m[i·stride+j] for j < cols, i in order
// (the product a·acc rounded, then each fused multiply-add).
TEXT ·vecmat512(SB), NOSPLIT, $0-52
	MOVQ acc+0(FP), DI
	MOVQ x+8(FP), SI
	MOVQ m+16(FP), DX
	MOVQ rows+24(FP), CX
	MOVQ cols+32(FP), R9
	SHLQ $2, R9 // the row's bytes in use
	MOVQ stride+40(FP), R8
	SHLQ $2, R8 // a row's bytes
	VBROADCASTSS a+48(FP), Z8
	XORQ R10, R10 // the block's byte offset in a row

vm64:
	MOVQ R9, R11
	SUBQ R10, R11
	CMPQ R11, $256
	JLT  vm16
	VMULPS (DI)(R10*1), Z8, Z0
	VMULPS 64(DI)(R10*1), Z8, Z1
	VMULPS 128(DI)(R10*1), Z8, Z2
	VMULPS 192(DI)(R10*1), Z8, Z3
	LEAQ (DX)(R10*1), R12
	XORQ R13, R13

vm64row:
	CMPQ R13, CX
	JGE  vm64done
	VBROADCASTSS (SI)(R13*4), Z4
	VFMADD231PS (R12), Z4, Z0
	VFMADD231PS 64(R12), Z4, Z1
	VFMADD231PS 128(R12), Z4, Z2
	VFMADD231PS 192(R12), Z4, Z3
	ADDQ R8, R12
	INCQ R13
	JMP  vm64row

vm64done:
	VMOVUPS Z0, (DI)(R10*1)
	VMOVUPS Z1, 64(DI)(R10*1)
	VMOVUPS Z2, 128(DI)(R10*1)
	VMOVUPS Z3, 192(DI)(R10*1)
	ADDQ    $256, R10
	JMP     vm64

vm16:
	CMPQ R10, R9
	JGE  vmend
	VMULPS (DI)(R10*1), Z8, Z0
	LEAQ (DX)(R10*1), R12
	XORQ R13, R13

vm16row:
	CMPQ R13, CX
	JGE  vm16done
	VBROADCASTSS (SI)(R13*4), Z4
	VFMADD231PS (R12), Z4, Z0
	ADDQ R8, R12
	INCQ R13
	JMP  vm16row

vm16done:
	VMOVUPS Z0, (DI)(R10*1)
	ADDQ    $64, R10
	JMP     vm16

vmend:
	VZEROUPPER
	RET

// func update512(s *float32, k *float32, q *float32, u *float32, o *float32, a float32, rows int, cols int)
// For each row i in order: s[i] = a·s[i] + k[i]·u (the product rounded,
// then the fused add); o = Σ_i q[i]·s[i], the new rows.
TEXT ·update512(SB), NOSPLIT, $0-64
	MOVQ s+0(FP), DI
	MOVQ k+8(FP), SI
	MOVQ q+16(FP), DX
	MOVQ u+24(FP), R9
	MOVQ o+32(FP), BX
	VBROADCASTSS a+40(FP), Z8
	MOVQ rows+48(FP), CX
	MOVQ cols+56(FP), R8
	SHLQ $2, R8
	XORQ R10, R10

up64:
	MOVQ R8, R11
	SUBQ R10, R11
	CMPQ R11, $256
	JLT  up16
	VMOVUPS (R9)(R10*1), Z0
	VMOVUPS 64(R9)(R10*1), Z1
	VMOVUPS 128(R9)(R10*1), Z2
	VMOVUPS 192(R9)(R10*1), Z3
	VXORPS  Z4, Z4, Z4
	VXORPS  Z5, Z5, Z5
	VXORPS  Z6, Z6, Z6
	VXORPS  Z7, Z7, Z7
	LEAQ (DI)(R10*1), R12
	XORQ R13, R13

up64row:
	CMPQ R13, CX
	JGE  up64done
	VBROADCASTSS (SI)(R13*4), Z9
	VBROADCASTSS (DX)(R13*4), Z10
	VMULPS      (R12), Z8, Z11
	VFMADD231PS Z0, Z9, Z11
	VMOVUPS     Z11, (R12)
	VFMADD231PS Z11, Z10, Z4
	VMULPS      64(R12), Z8, Z12
	VFMADD231PS Z1, Z9, Z12
	VMOVUPS     Z12, 64(R12)
	VFMADD231PS Z12, Z10, Z5
	VMULPS      128(R12), Z8, Z13
	VFMADD231PS Z2, Z9, Z13
	VMOVUPS     Z13, 128(R12)
	VFMADD231PS Z13, Z10, Z6
	VMULPS      192(R12), Z8, Z14
	VFMADD231PS Z3, Z9, Z14
	VMOVUPS     Z14, 192(R12)
	VFMADD231PS Z14, Z10, Z7
	ADDQ R8, R12
	INCQ R13
	JMP  up64row

up64done:
	VMOVUPS Z4, (BX)(R10*1)
	VMOVUPS Z5, 64(BX)(R10*1)
	VMOVUPS Z6, 128(BX)(R10*1)
	VMOVUPS Z7, 192(BX)(R10*1)
	ADDQ    $256, R10
	JMP     up64

up16:
	CMPQ R10, R8
	JGE  upend
	VMOVUPS (R9)(R10*1), Z0
	VXORPS  Z4, Z4, Z4
	LEAQ (DI)(R10*1), R12
	XORQ R13, R13

up16row:
	CMPQ R13, CX
	JGE  up16done
	VBROADCASTSS (SI)(R13*4), Z9
	VBROADCASTSS (DX)(R13*4), Z10
	VMULPS      (R12), Z8, Z11
	VFMADD231PS Z0, Z9, Z11
	VMOVUPS     Z11, (R12)
	VFMADD231PS Z11, Z10, Z4
	ADDQ R8, R12
	INCQ R13
	JMP  up16row

up16done:
	VMOVUPS Z4, (BX)(R10*1)
	ADDQ    $64, R10
	JMP     up16

upend:
	VZEROUPPER
	RET

// func dot512(x *float32, y *float32, n int) float32
// Σ x[i]·y[i]: four running sums of 16 lanes over blocks of 64, then one
// over blocks of 16, added in a fixed order.
TEXT ·dot512(SB), NOSPLIT, $0-28
	MOVQ x+0(FP), SI
	MOVQ y+8(FP), DI
	MOVQ n+16(FP), CX
	SHLQ $2, CX
	XORQ R10, R10
	VXORPS Z0, Z0, Z0
	VXORPS Z1, Z1, Z1
	VXORPS Z2, Z2, Z2
	VXORPS Z3, Z3, Z3

dt64:
	MOVQ CX, R11
	SUBQ R10, R11
	CMPQ R11, $256
	JLT  dt16
	VMOVUPS (SI)(R10*1), Z4
	VFMADD231PS (DI)(R10*1), Z4, Z0
	VMOVUPS 64(SI)(R10*1), Z5
	VFMADD231PS 64(DI)(R10*1), Z5, Z1
	VMOVUPS 128(SI)(R10*1), Z6
	VFMADD231PS 128(DI)(R10*1), Z6, Z2
	VMOVUPS 192(SI)(R10*1), Z7
	VFMADD231PS 192(DI)(R10*1), Z7, Z3
	ADDQ $256, R10
	JMP  dt64

dt16:
	CMPQ R10, CX
	JGE  dtsum
	VMOVUPS (SI)(R10*1), Z4
	VFMADD231PS (DI)(R10*1), Z4, Z0
	ADDQ $64, R10
	JMP  dt16

dtsum:
	VADDPS Z1, Z0, Z0
	VADDPS Z3, Z2, Z2
	VADDPS Z2, Z0, Z0
	VEXTRACTF32X8 $1, Z0, Y1
	VADDPS Y1, Y0, Y0
	VEXTRACTF128 $1, Y0, X1
	VADDPS X1, X0, X0
	VMOVHLPS X0, X1, X1
	VADDPS X1, X0, X0
	VMOVSHDUP X0, X1
	VADDSS X1, X0, X0
	MOVSS X0, ret+24(FP)
	VZEROUPPER
	RET
