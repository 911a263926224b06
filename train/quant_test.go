package train

import (
	"context"
	"math"
	"math/rand/v2"
	"slices"
	"sync"
	"testing"

	"github.com/flockml/flock/dist"
)

// quantBound returns, for each value of x, half the step of its block:
// what Encode may change it by.
func quantBound(q Quantization, x []float32) []float64 {
	b := q.block()
	out := make([]float64, len(x))
	for k := 0; k < len(x); k += b {
		blk := x[k:min(len(x), k+b)]
		m := 0.0
		for _, v := range blk {
			m = max(m, math.Abs(float64(v)))
		}
		for i := range blk {
			out[k+i] = m / float64(q.qmax()) / 2 * (1 + 1e-6)
		}
	}
	return out
}

func randomValues(rng *rand.Rand, n int, scale float64) []float32 {
	x := make([]float32, n)
	for i := range x {
		x[i] = float32(scale * rng.NormFloat64() * math.Exp(rng.NormFloat64()))
	}
	return x
}

// TestQuantizationCodec: every value comes back within half its block's
// step, Encode's own view of the decoded values is Decode's, the message
// has EncodedSize bytes, values on the grid come back exactly and a block
// with a NaN decodes to NaN without touching the others.
func TestQuantizationCodec(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for _, q := range []Quantization{{Bits: 8}, {Bits: 4}, {Bits: 8, Block: 7}, {Bits: 4, Block: 1}} {
		for _, n := range []int{0, 1, 63, 64, 65, 1000} {
			x := randomValues(rng, n, 0.1)
			x = append(x, 0) // an odd count for 4 bits
			x = x[:n]
			enc := make([]float32, n)
			msg := q.Encode([]byte{9}, x, enc)
			if msg[0] != 9 || len(msg)-1 != q.EncodedSize(n) {
				t.Fatalf("%+v n=%d: %d bytes after the prefix, want %d", q, n, len(msg)-1, q.EncodedSize(n))
			}
			dec := make([]float32, n)
			if err := q.Decode(msg[1:], dec); err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(dec, enc) {
				t.Fatalf("%+v n=%d: Decode differs from Encode's decoded values", q, n)
			}
			for i, bd := range quantBound(q, x) {
				if d := math.Abs(float64(dec[i] - x[i])); d > bd {
					t.Fatalf("%+v n=%d: value %d: %v decoded as %v, off by %g > %g", q, n, i, x[i], dec[i], d, bd)
				}
			}
		}
	}
	// The grid itself: integers up to the largest code, in one block.
	q := Quantization{Bits: 8, Block: 255}
	grid := make([]float32, 255)
	for i := range grid {
		grid[i] = float32(i - 127)
	}
	dec := make([]float32, len(grid))
	if err := q.Decode(q.Encode(nil, grid, nil), dec); err != nil || !slices.Equal(dec, grid) {
		t.Errorf("grid values: decoded %v, %v", dec[:5], err)
	}
	q = Quantization{Bits: 4, Block: 4}
	x := []float32{1, float32(math.NaN()), 2, 3, 0.5, -0.25, 0, 7}
	dec = make([]float32, len(x))
	if err := q.Decode(q.Encode(nil, x, nil), dec); err != nil {
		t.Fatal(err)
	}
	for i, v := range dec {
		if nan := v != v; nan != (i < 4) {
			t.Errorf("NaN in the first block: value %d decoded as %v", i, v)
		}
	}
	if err := q.Decode(make([]byte, 3), dec); err == nil {
		t.Error("a short message decoded")
	}
	for _, bad := range []Quantization{{Bits: 2}, {Bits: 16}, {Bits: 8, Block: -1}} {
		if bad.Validate() == nil {
			t.Errorf("%+v validated", bad)
		}
	}
}

// runQuantizedMean runs QuantizedMean on K in-process workers, worker k
// averaging xs[k] (replaced by the result), and returns what each sent.
func runQuantizedMean(t *testing.T, xs [][]float32, residuals [][]float32, q Quantization) []int64 {
	t.Helper()
	comms := dist.NewLocal(len(xs))
	sent := make([]int64, len(xs))
	var wg sync.WaitGroup
	errs := make([]error, len(xs))
	for k, c := range comms {
		wg.Go(func() {
			m := dist.NewMeter(c)
			var res []float32
			if residuals != nil {
				res = residuals[k]
			}
			errs[k] = QuantizedMean(context.Background(), m, xs[k], res, q)
			sent[k] = m.Traffic().Sent
		})
	}
	wg.Wait()
	for k, err := range errs {
		if err != nil {
			t.Fatalf("worker %d: %v", k, err)
		}
	}
	return sent
}

// TestQuantizedMean: every worker ends with the same bits, within the
// quantization's bound of the true mean, having sent 2·(K−1)/K of the
// encoded size (up to the padding of the chunks).
func TestQuantizedMean(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	for _, q := range []Quantization{{Bits: 8}, {Bits: 4}} {
		for _, k := range []int{1, 2, 3, 5} {
			for _, n := range []int{1, 100, 4099} {
				xs := make([][]float32, k)
				mean := make([]float64, n)
				maxIn := 0.0
				for w := range xs {
					xs[w] = randomValues(rng, n, 0.01)
					for i, v := range xs[w] {
						mean[i] += float64(v) / float64(k)
						maxIn = max(maxIn, math.Abs(float64(v)))
					}
				}
				sent := runQuantizedMean(t, xs, nil, q)
				maxMean := 0.0
				for _, v := range mean {
					maxMean = max(maxMean, math.Abs(v))
				}
				bound := (maxIn+maxMean)/float64(q.qmax())/2*(1+1e-5) + 1e-12
				for w := 1; w < k; w++ {
					if !slices.Equal(xs[w], xs[0]) {
						t.Fatalf("%d bits, K=%d, n=%d: worker %d's mean differs from worker 0's", q.Bits, k, n, w)
					}
				}
				for i, v := range xs[0] {
					if d := math.Abs(float64(v) - mean[i]); d > bound {
						t.Fatalf("%d bits, K=%d, n=%d: value %d is %v, the mean %v: off by %g > %g", q.Bits, k, n, i, v, mean[i], d, bound)
					}
				}
				if k > 1 && n > 1000 {
					want := 2 * float64(k-1) / float64(k) * float64(q.EncodedSize(n))
					if s := float64(sent[0]); s < want || s > want*1.05+float64(8*q.block()) {
						t.Errorf("%d bits, K=%d, n=%d: sent %v bytes, want about %v (float32 ring: %v)", q.Bits, k, n, s, want, 2*float64(k-1)/float64(k)*4*float64(n))
					}
				}
			}
		}
	}
}

// TestQuantizedMeanErrorFeedback: averaging the same values round after
// round, the outputs' sum stays within a step of the true sum with error
// feedback, and drifts away without it.
func TestQuantizedMeanErrorFeedback(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	x := randomValues(rng, 256, 1)
	q := Quantization{Bits: 4, Block: 64}
	const rounds = 50
	drift := func(feedback bool) float64 {
		var res [][]float32
		if feedback {
			res = [][]float32{make([]float32, len(x))}
		}
		sum := make([]float64, len(x))
		for range rounds {
			y := slices.Clone(x)
			runQuantizedMean(t, [][]float32{y}, res, q)
			for i, v := range y {
				sum[i] += float64(v)
			}
		}
		worst := 0.0
		for i, v := range x {
			worst = max(worst, math.Abs(sum[i]-rounds*float64(v)))
		}
		return worst
	}
	step := 0.0
	for _, b := range quantBound(q, x) {
		step = max(step, 2*b)
	}
	with, without := drift(true), drift(false)
	if with > 2*step {
		t.Errorf("with error feedback the sum of %d rounds is off by %g, more than two steps (%g)", rounds, with, 2*step)
	}
	if without < 10*step {
		t.Errorf("without error feedback the sum of %d rounds is off by only %g (step %g): the test shows nothing", rounds, without, step)
	}
}
