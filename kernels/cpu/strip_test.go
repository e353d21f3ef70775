package cpu

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"jspark/kernels/quant"
)

// BenchmarkStrip: a prefill-sized batch product (2048 × 2048, the 1B
// shape's attention) of each type with a strip form, over strips and
// over the packed tiles alone, side by side in one process (the machine
// is shared: compare within a run). JSPARK_ISA picks the tiles.
func BenchmarkStrip(b *testing.B) {
	r := rand.New(rand.NewPCG(5, 5))
	k := New(0)
	set := k.pk()
	strips := set.strips
	defer func() { set.strips = strips }()
	for typ := range stripForms {
		if strips[typ] == nil {
			continue
		}
		w := matrix(r, typ, 2048, 2048)
		for _, n := range []int{64, 512} {
			x := randVec(r, n*w.Cols)
			dst := make([]float32, n*w.Rows)
			for _, on := range []bool{false, true} {
				b.Run(fmt.Sprintf("%v/n%d/strips=%v", typ, n, on), func(b *testing.B) {
					set.strips = nil
					if on {
						set.strips = strips
					}
					c0 := cpuTime()
					for b.Loop() {
						k.MatMul(f32(dst), f32(x), n, w)
					}
					flops := 2 * float64(n*w.Rows*w.Cols) * float64(b.N)
					b.ReportMetric(flops/(cpuTime()-c0).Seconds()/1e9*float64(k.Threads()), "GFLOP/cpu-s")
				})
			}
		}
	}
}

// BenchmarkStripTile: one thread, one group of K = 2048 in cache, the
// packed tile of 4 tokens against the strip tile of 6: ns per 8 rows ×
// 32 elements × token (the unit the tiles' counts are in).
func BenchmarkStripTile(b *testing.B) {
	r := rand.New(rand.NewPCG(6, 6))
	k := New(1)
	set := k.pk()
	for typ, f := range stripForms {
		if set.strips[typ] == nil {
			continue
		}
		const K, T = 2048, 12
		w := matrix(r, typ, groupRows, K)
		p, err := k.packedOf(w)
		if err != nil {
			b.Fatal(err)
		}
		nb := K / quant.Q8Block
		rec := make([]byte, T*nb*recBytes)
		x := randVec(r, T*K)
		o := recordOffsets[typ]
		for t := range T {
			set.records(&x[t*K], &rec[t*nb*recBytes], nb, o.c, o.halves)
		}
		strip := make([]byte, nb*f.blockBytes)
		f.unpack(strip, p.data, nb)
		dst := make([]float32, T*groupRows)
		run := func(name string, tile pkIntFn, tn int, w *byte) {
			b.Run(fmt.Sprintf("%v/%s", typ, name), func(b *testing.B) {
				for b.Loop() {
					for t := 0; t+tn <= T; t += tn {
						tile(w, &rec[t*nb*recBytes], nb*recBytes, nb, &dst[t*groupRows], groupRows, 0xffff, 1)
					}
				}
				units := float64(b.N) * float64(T/tn*tn) * 2 * float64(nb)
				b.ReportMetric(float64(b.Elapsed().Nanoseconds())/units, "ns/unit")
			})
		}
		run("packed4", set.ints[typ][4], 4, &p.data[0])
		run("strip3", set.strips[typ][3], 3, &strip[0])
		run("strip2", set.strips[typ][2], 2, &strip[0])
		b.Run(fmt.Sprintf("%v/unpack", typ), func(b *testing.B) {
			for b.Loop() {
				f.unpack(strip, p.data, nb)
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/float64(nb), "ns/block")
		})
	}
}

// unpackQ4KGo is unpackQ4K in Go: the strip asm/strip256.go states.
func unpackQ4KGo(dst, src []byte, nb int) {
	const lo = 0x0f0f0f0f0f0f0f0f
	for sb := 0; sb < nb/8; sb++ {
		in, out := src[2368*sb:2368*(sb+1)], dst[5120*sb:5120*(sb+1)]
		var d, dmin [groupRows]float32
		for r := range groupRows {
			d[r], dmin[r] = quant.HalfAt(in[2*r:]), quant.HalfAt(in[32+2*r:])
		}
		for j := 0; j < 8; j++ {
			q, o := in[320+256*j:], out[640*j:640*(j+1)]
			for c := 0; c < 4; c++ { // load c: steps c (low nibbles), c+4
				for k := 0; k < 64; k += 8 {
					v := binary.LittleEndian.Uint64(q[64*c+k:])
					binary.LittleEndian.PutUint64(o[64*c+k:], v&lo)
					binary.LittleEndian.PutUint64(o[64*(c+4)+k:], v>>4&lo)
				}
			}
			for r := range groupRows {
				binary.LittleEndian.PutUint32(o[512+4*r:], math.Float32bits(d[r]*float32(in[64+16*j+r])))
				binary.LittleEndian.PutUint32(o[576+4*r:], math.Float32bits(dmin[r]*float32(in[192+16*j+r])))
			}
		}
	}
}

// stripQ6KRef is the strip of a 16-row Q6_K matrix, from its rows as the
// file encodes them.
func stripQ6KRef(rows []byte, K int) []byte {
	nb := K / quant.Q8Block
	out := make([]byte, nb*832)
	rb := quant.Q6_K.RowBytes(K)
	for i := range groupRows {
		for sb := 0; sb < K/quant.QK_K; sb++ {
			blk := rows[i*rb+210*sb:]
			u := q6Values(blk)
			d := quant.HalfAt(blk[208:])
			for b := 0; b < 8; b++ {
				o := out[832*(8*sb+b):]
				for s := 0; s < 8; s++ {
					copy(o[64*s+4*i:][:4], u[32*b+4*s:][:4])
				}
				for k := range 2 {
					sc := int32(int8(blk[192+2*b+k]))
					binary.LittleEndian.PutUint32(o[512+64*k+4*i:], uint32(sc)&0xffff*0x10001)
					binary.LittleEndian.PutUint32(o[640+64*k+4*i:], uint32(sc))
				}
				binary.LittleEndian.PutUint32(o[768+4*i:], math.Float32bits(d))
			}
		}
	}
	return out
}

// TestStripUnpack: the assembly unpacking writes the references' bytes
// (Q4_K's from the packed group, Q6_K's from the file's rows), for rows
// of random weights and for scales at their extremes.
func TestStripUnpack(t *testing.T) {
	if bestISA < isaAVX2 {
		t.Skip("no AVX2 here")
	}
	r := rand.New(rand.NewPCG(13, 13))
	k := New(1)
	const K = 768
	nb := K / quant.Q8Block
	w := matrix(r, quant.Q4_K, groupRows, K)
	for sb := 0; sb < K/quant.QK_K; sb++ { // row 3: every scale and min 63
		copy(w.Data[3*quant.Q4_K.RowBytes(K)+144*sb+4:][:12], bytes.Repeat([]byte{0xff}, 12))
	}
	p, err := k.pack(w)
	if err != nil {
		t.Fatal(err)
	}
	want, got := make([]byte, nb*640), make([]byte, nb*640)
	unpackQ4KGo(want, p.data, nb)
	unpackQ4K(got, p.data, nb)
	for b := 0; b < nb; b++ {
		if w, g := want[640*b:640*(b+1)], got[640*b:640*(b+1)]; !bytes.Equal(w, g) {
			t.Fatalf("block %d:\n got %v\nwant %v", b, g, w)
		}
	}
	w = matrix(r, quant.Q6_K, groupRows, K)
	for sb := 0; sb < K/quant.QK_K; sb++ { // row 5: scales -128 and 127
		for s := 0; s < 16; s++ {
			w.Data[5*quant.Q6_K.RowBytes(K)+210*sb+192+s] = []byte{0x80, 0x7f}[s%2]
		}
	}
	if p, err = k.pack(w); err != nil {
		t.Fatal(err)
	}
	want, got = stripQ6KRef(w.Data, K), make([]byte, nb*832)
	unpackQ6K(got, p.data, nb)
	for b := 0; b < nb; b++ {
		if w, g := want[832*b:832*(b+1)], got[832*b:832*(b+1)]; !bytes.Equal(w, g) {
			t.Fatalf("Q6_K block %d:\n got %v\nwant %v", b, g, w)
		}
	}
}
