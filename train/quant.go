package train

import (
	"context"
	"encoding/binary"
	"fmt"
	"math"
	"sync"

	"github.com/flockml/flock/dist"
	"github.com/flockml/flock/tensor"
)

// Quantization says how a synchronization sends the values it averages:
// Bits per value (8 or 4; 0 sends float32s) with one float32 scale per
// Block values, the block's largest magnitude over the largest code
// (127 for 8 bits, 7 for 4), each value rounded to the nearest code (ties
// to even). A value comes back within half its block's step of what was
// sent. With ErrorFeedback each worker adds what quantization took from
// its last contribution to the next one (Seide et al., 2014; Karimireddy
// et al., 2019), so that nothing is lost for good, only delayed.
type Quantization struct {
	Bits          int
	Block         int
	ErrorFeedback bool
}

// DefaultQuantBlock is the block of a Quantization that names none: 64
// values per scale, 1.0625 bytes per value at 8 bits and 0.5625 at 4.
const DefaultQuantBlock = 64

// On reports whether q quantizes.
func (q Quantization) On() bool { return q.Bits != 0 }

// Validate reports a Quantization that cannot be used.
func (q Quantization) Validate() error {
	switch {
	case q.Bits != 0 && q.Bits != 4 && q.Bits != 8:
		return fmt.Errorf("quantization: %d bits: want 8 or 4 (0: none)", q.Bits)
	case q.Block < 0 || q.Block > 1<<16:
		return fmt.Errorf("quantization: block of %d values: want 1 to 65536 (0: %d)", q.Block, DefaultQuantBlock)
	}
	return nil
}

func (q Quantization) block() int {
	if q.Block == 0 {
		return DefaultQuantBlock
	}
	return q.Block
}

// qmax is the largest code's magnitude.
func (q Quantization) qmax() float32 { return float32(int(1)<<(q.Bits-1) - 1) }

// EncodedSize returns the bytes that encode n values.
func (q Quantization) EncodedSize(n int) int {
	blocks := (n + q.block() - 1) / q.block()
	return 4*blocks + (n*q.Bits+7)/8
}

// Encode appends to dst the encoding of x: the scales of its blocks
// (float32, little-endian), then the codes (8 bits: one signed byte each;
// 4 bits: two per byte, the first in the low nibble, offset by 8). out,
// when not nil, receives the values as they will be decoded. A block
// holding a NaN or an infinity gets a NaN scale, which decodes to NaN.
func (q Quantization) Encode(dst []byte, x, out []float32) []byte {
	b, qm := q.block(), q.qmax()
	nb := (len(x) + b - 1) / b
	base := len(dst)
	dst = append(dst, make([]byte, q.EncodedSize(len(x)))...)
	scales, codes := dst[base:base+4*nb], dst[base+4*nb:]
	for k := range nb {
		blk := x[k*b : min(len(x), (k+1)*b)]
		var m float32
		for _, v := range blk {
			m = max(m, float32(math.Abs(float64(v))))
		}
		if m != m || m > math.MaxFloat32 {
			m = float32(math.NaN())
		}
		scale := m / qm
		binary.LittleEndian.PutUint32(scales[4*k:], math.Float32bits(scale))
		inv := float32(0)
		if scale > 0 {
			inv = 1 / scale
		}
		for i, v := range blk {
			c := float32(math.RoundToEven(float64(v * inv)))
			c = min(max(c, -qm), qm)
			if c != c {
				c = 0
			}
			j := k*b + i
			if q.Bits == 8 {
				codes[j] = byte(int8(c))
			} else {
				codes[j/2] |= byte(int(c)+8) << (4 * (j % 2))
			}
			if out != nil {
				out[j] = c * scale
			}
		}
	}
	return dst
}

// Decode writes into out the len(out) values that msg, made by Encode,
// holds.
func (q Quantization) Decode(msg []byte, out []float32) error {
	if len(msg) < q.EncodedSize(len(out)) {
		return fmt.Errorf("quantization: %d bytes for %d values, want %d", len(msg), len(out), q.EncodedSize(len(out)))
	}
	b := q.block()
	nb := (len(out) + b - 1) / b
	scales, codes := msg[:4*nb], msg[4*nb:]
	for j := range out {
		scale := math.Float32frombits(binary.LittleEndian.Uint32(scales[4*(j/b):]))
		var c float32
		if q.Bits == 8 {
			c = float32(int8(codes[j]))
		} else {
			c = float32(int(codes[j/2]>>(4*(j%2))&15) - 8)
		}
		out[j] = c * scale
	}
	return nil
}

// quantTag is the tag of the point-to-point messages of QuantizedMean.
const quantTag = 0x5154

// QuantizedMean replaces x, the same length on every rank of c, by the
// mean of the workers' x sent at q's precision, bit-identical on every
// rank. It moves 2·(K−1)/K of x's encoded size through each of the K
// workers, as a ring all-reduce of the float32s moves 2·(K−1)/K of their
// size: x is cut into K chunks of whole blocks; each worker sends chunk j,
// quantized, to worker j, which averages the K quantized chunks (its own
// too, in rank order), and the averaged chunks, quantized again, are
// all-gathered and decoded everywhere. residual, when not nil (error
// feedback), is added to x before it is quantized and receives what the
// quantization took from it.
func QuantizedMean(ctx context.Context, c dist.Comm, x, residual []float32, q Quantization) error {
	if err := q.Validate(); err != nil {
		return err
	}
	if !q.On() {
		return fmt.Errorf("quantization: QuantizedMean with Bits 0")
	}
	k, r := c.Size(), c.Rank()
	if residual != nil {
		if len(residual) != len(x) {
			return fmt.Errorf("quantization: residual of %d values for %d", len(residual), len(x))
		}
		for i := range x {
			x[i] += residual[i]
		}
	}
	b := q.block()
	nb := (len(x) + b - 1) / b
	// Chunk j is blocks [j·nb/k, (j+1)·nb/k): values [lo(j), lo(j+1)).
	lo := func(j int) int { return min(j*nb/k*b, len(x)) }
	chunk := func(j int) []float32 { return x[lo(j):lo(j+1)] }
	words := (q.EncodedSize(((nb+k-1)/k)*b) + 3) / 4
	dev := dist.DeviceOf(c)
	wordsOf := func(msg []byte) *tensor.Tensor {
		w := make([]int32, words)
		for i := range w {
			var u [4]byte
			copy(u[:], msg[min(4*i, len(msg)):min(4*i+4, len(msg))])
			w[i] = int32(binary.LittleEndian.Uint32(u[:]))
		}
		return tensor.FromSlice(w, nil, tensor.On(dev))
	}
	bytesOf := func(t *tensor.Tensor) []byte {
		w := tensor.ToSlice[int32](t)
		msg := make([]byte, 4*len(w))
		for i, v := range w {
			binary.LittleEndian.PutUint32(msg[4*i:], uint32(v))
		}
		return msg
	}

	// Each worker's chunk j, quantized, goes to worker j; the receives run
	// beside the sends so that no pair waits on the other's.
	mine := make([]float32, len(chunk(r)))
	sum := make([]float32, len(mine))
	got := make([][]float32, k)
	errs := make([]error, k)
	var wg sync.WaitGroup
	for p := range k {
		if p == r {
			continue
		}
		wg.Go(func() {
			t := tensor.Zeros(tensor.Shape{words}, tensor.Of(tensor.Int32), tensor.On(dev))
			defer t.Release()
			if errs[p] = c.Recv(ctx, t, p, quantTag); errs[p] == nil {
				got[p] = make([]float32, len(mine))
				errs[p] = q.Decode(bytesOf(t), got[p])
			}
		})
	}
	var sendErr error
	for i := 1; i <= k; i++ {
		p := (r + i) % k
		ch := chunk(p)
		dec := make([]float32, len(ch))
		msg := q.Encode(nil, ch, dec)
		if residual != nil {
			for i, v := range ch {
				residual[lo(p)+i] = v - dec[i]
			}
		}
		if p == r {
			copy(mine, dec)
			continue
		}
		if sendErr != nil {
			continue
		}
		t := wordsOf(msg)
		sendErr = c.Send(ctx, t, p, quantTag)
		t.Release()
	}
	wg.Wait()
	if sendErr != nil {
		return sendErr
	}
	for p := range k {
		if errs[p] != nil {
			return errs[p]
		}
	}
	got[r] = mine
	inv := 1 / float32(k)
	for p := range k {
		for i, v := range got[p] {
			sum[i] += v
		}
	}
	for i := range sum {
		sum[i] *= inv
	}

	// The averaged chunks, quantized once more, go to everyone.
	src := wordsOf(q.Encode(nil, sum, nil))
	defer src.Release()
	all := tensor.Zeros(tensor.Shape{k * words}, tensor.Of(tensor.Int32), tensor.On(dev))
	defer all.Release()
	if err := c.AllGather(ctx, all, src); err != nil {
		return err
	}
	msg := bytesOf(all)
	for j := range k {
		if err := q.Decode(msg[4*j*words:4*(j+1)*words], chunk(j)); err != nil {
			return err
		}
	}
	return nil
}
