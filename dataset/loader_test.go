package dataset

import (
	"encoding/json"
	"fmt"
	"math"
	"math/big"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"github.com/flockml/flock/tensor"
)

// synthetic returns n images of h×w×c pseudo-random pixels with labels in
// [0, classes).
func synthetic(n, h, w, c, classes int, seed uint64) *Images {
	r := rand.New(rand.NewPCG(seed, 1))
	m := &Images{N: n, H: h, W: w, C: c, Pixels: make([]uint8, n*h*w*c), Labels: make([]int32, n)}
	for i := range m.Pixels {
		m.Pixels[i] = uint8(r.IntN(256))
	}
	for i := range m.Labels {
		m.Labels[i] = int32(r.IntN(classes))
	}
	for k := range classes {
		m.Classes = append(m.Classes, fmt.Sprint("class", k))
	}
	return m
}

// refPermutation is the documented shuffle with the bounded draw computed
// in arbitrary precision: ⌊x·m / 2⁶⁴⌋, rejected while x·m mod 2⁶⁴ < 2⁶⁴ mod m.
func refPermutation(n int, seed uint64, epoch int) []int {
	src := rand.NewPCG(seed, uint64(epoch))
	two64 := new(big.Int).Lsh(big.NewInt(1), 64)
	p := make([]int, n)
	for i := range p {
		p[i] = i
	}
	for i := n - 1; i > 0; i-- {
		m := big.NewInt(int64(i + 1))
		thresh := new(big.Int).Mod(two64, m)
		var j int
		for {
			prod := new(big.Int).Mul(new(big.Int).SetUint64(src.Uint64()), m)
			lo := new(big.Int).Mod(prod, two64)
			if lo.Cmp(thresh) >= 0 {
				j = int(new(big.Int).Div(prod, two64).Int64())
				break
			}
		}
		p[i], p[j] = p[j], p[i]
	}
	return p
}

func TestPermutation(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		n     int
		seed  uint64
		epoch int
	}{{0, 1, 0}, {1, 1, 0}, {2, 5, 3}, {7, 0, 0}, {100, 42, 0}, {100, 42, 1}, {1000, 1 << 63, 17}} {
		got := Permutation(tt.n, tt.seed, tt.epoch)
		if want := refPermutation(tt.n, tt.seed, tt.epoch); !slices.Equal(got, want) {
			t.Errorf("Permutation(%d, %d, %d) = %v, want %v", tt.n, tt.seed, tt.epoch, got, want)
		}
		sorted := slices.Sorted(slices.Values(got))
		for i, v := range sorted {
			if v != i {
				t.Fatalf("Permutation(%d, %d, %d) is not a permutation: %v", tt.n, tt.seed, tt.epoch, got)
			}
		}
	}
	a, b, c := Permutation(1000, 7, 0), Permutation(1000, 7, 1), Permutation(1000, 8, 0)
	if slices.Equal(a, b) || slices.Equal(a, c) {
		t.Error("permutations do not change with epoch or seed")
	}
}

// TestPermutationUniform checks that the 24 orders of 4 elements are equally
// likely over epochs.
func TestPermutationUniform(t *testing.T) {
	t.Parallel()
	const trials = 24000
	counts := map[string]int{}
	for e := range trials {
		counts[fmt.Sprint(Permutation(4, 3, e))]++
	}
	if len(counts) != 24 {
		t.Fatalf("%d distinct orders, want 24", len(counts))
	}
	const want, sigma = trials / 24, 31.2 // √(1000·23/24)
	for k, c := range counts {
		if math.Abs(float64(c-want)) > 5*sigma {
			t.Errorf("order %s: %d times, want %d ± %.0f", k, c, want, 5*sigma)
		}
	}
}

func TestLoaderSharding(t *testing.T) {
	t.Parallel()
	tests := []struct {
		n, world, batch int
		dropLast        bool
		shuffle         bool
	}{
		{n: 10, world: 1, batch: 3},
		{n: 10, world: 1, batch: 3, dropLast: true},
		{n: 10, world: 1, batch: 5, shuffle: true},
		{n: 10, world: 3, batch: 2, shuffle: true},
		{n: 10, world: 3, batch: 2, shuffle: true, dropLast: true},
		{n: 101, world: 4, batch: 7, shuffle: true},
		{n: 101, world: 4, batch: 7},
		{n: 3, world: 4, batch: 1, shuffle: true},
		{n: 5, world: 1, batch: 8},
		{n: 5, world: 1, batch: 8, dropLast: true},
	}
	for _, tt := range tests {
		name := fmt.Sprintf("n%d_w%d_b%d_drop%v_shuf%v", tt.n, tt.world, tt.batch, tt.dropLast, tt.shuffle)
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			ds := synthetic(tt.n, 2, 3, 1, 4, 9)
			per := tt.n / tt.world
			wantBatches := per / tt.batch
			if !tt.dropLast && per%tt.batch != 0 {
				wantBatches++
			}
			for epoch := range 3 {
				perm := identity(nil, tt.n)
				if tt.shuffle {
					perm = refPermutation(tt.n, 11, epoch)
				}
				seen := map[int]int{}
				for rank := range tt.world {
					l, err := NewLoader(ds, LoaderOptions{BatchSize: tt.batch, Shuffle: tt.shuffle, Seed: 11, DropLast: tt.dropLast, Rank: rank, World: tt.world})
					if err != nil {
						t.Fatal(err)
					}
					if l.Len() != per || l.BatchesPerEpoch() != wantBatches {
						t.Fatalf("rank %d: Len %d BatchesPerEpoch %d, want %d %d", rank, l.Len(), l.BatchesPerEpoch(), per, wantBatches)
					}
					var want []int
					for k := rank; len(want) < per; k += tt.world {
						want = append(want, perm[k])
					}
					if got := l.Indices(epoch); !slices.Equal(got, want) {
						t.Fatalf("epoch %d rank %d: Indices %v, want %v", epoch, rank, got, want)
					}
					if err := l.Seek(Position{Epoch: epoch}); err != nil {
						t.Fatal(err)
					}
					var got []int
					nb := 0
					for b := range l.Epoch() {
						size := b.Y.Shape()[0]
						if b.Pos != (Position{epoch, nb}) {
							t.Errorf("batch %d has position %+v", nb, b.Pos)
						}
						if size != len(b.Indices) || (size != tt.batch && nb != wantBatches-1) || size > tt.batch {
							t.Errorf("batch %d: %d samples, %d indices", nb, size, len(b.Indices))
						}
						got = append(got, b.Indices...)
						b.Release()
						nb++
					}
					if nb != wantBatches {
						t.Errorf("epoch %d rank %d: %d batches, want %d", epoch, rank, nb, wantBatches)
					}
					if keep := wantBatches * tt.batch; tt.dropLast && keep < len(want) {
						want = want[:keep]
					}
					if !slices.Equal(got, want) {
						t.Errorf("epoch %d rank %d: batches visit %v, want %v", epoch, rank, got, want)
					}
					if p := l.Position(); p != (Position{epoch + 1, 0}) {
						t.Errorf("after epoch %d: position %+v", epoch, p)
					}
					for _, i := range l.Indices(epoch) {
						seen[i]++
					}
				}
				for i, c := range seen {
					if c != 1 {
						t.Errorf("epoch %d: sample %d seen by %d ranks", epoch, i, c)
					}
				}
				if len(seen) != per*tt.world {
					t.Errorf("epoch %d: %d samples over all ranks, want %d", epoch, len(seen), per*tt.world)
				}
			}
		})
	}
}

func TestLoaderBatchContents(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name      string
		c         int
		mean, std []float64
	}{
		{name: "default normalisation", c: 1},
		{name: "one channel", c: 1, mean: []float64{0.5}, std: []float64{0.25}},
		{name: "rgb per channel", c: 3, mean: []float64{0.485, 0.456, 0.406}, std: []float64{0.229, 0.224, 0.225}},
		{name: "rgb shared", c: 3, mean: []float64{0.1}, std: []float64{2}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			const n, h, w, batch = 23, 4, 5, 6
			ds := synthetic(n, h, w, tt.c, 10, 3)
			l, err := NewLoader(ds, LoaderOptions{BatchSize: batch, Shuffle: true, Seed: 5, Mean: tt.mean, Std: tt.std})
			if err != nil {
				t.Fatal(err)
			}
			mean, std := tt.mean, tt.std
			if mean == nil {
				mean, std = []float64{0.2860}, []float64{0.3530}
			}
			for b := range l.Epoch() {
				k := len(b.Indices)
				if got := b.X.Shape(); !got.Equal(tensor.Shape{k, tt.c, h, w}) || b.X.DType() != tensor.Float32 {
					t.Fatalf("X: %v %v, want float32 [%d %d %d %d]", b.X.DType(), got, k, tt.c, h, w)
				}
				if got := b.Y.Shape(); !got.Equal(tensor.Shape{k}) || b.Y.DType() != tensor.Int64 {
					t.Fatalf("Y: %v %v, want int64 [%d]", b.Y.DType(), got, k)
				}
				x, y := b.X.Float32s(), b.Y.Int64s()
				for s, i := range b.Indices {
					if y[s] != int64(ds.Labels[i]) {
						t.Errorf("label %d: %d, want %d", s, y[s], ds.Labels[i])
					}
					for ch := range tt.c {
						m, sd := mean[min(ch, len(mean)-1)], std[min(ch, len(std)-1)]
						for yy := range h {
							for xx := range w {
								p := ds.Pixels[((i*h+yy)*w+xx)*tt.c+ch]
								want := (float64(p)/255 - m) / sd
								got := float64(x[((s*tt.c+ch)*h+yy)*w+xx])
								if math.Abs(got-want) > 1e-6*math.Max(1, math.Abs(want)) {
									t.Fatalf("sample %d c%d (%d,%d): %v, want %v", s, ch, yy, xx, got, want)
								}
							}
						}
					}
				}
				b.Release()
			}
		})
	}
}

func TestLoaderResume(t *testing.T) {
	t.Parallel()
	ds := synthetic(50, 2, 2, 1, 3, 4)
	opt := LoaderOptions{BatchSize: 8, Shuffle: true, Seed: 99, Rank: 1, World: 2}
	type rec struct {
		pos Position
		idx []int
		x   []float32
	}
	run := func(l *Loader, until int) []rec {
		var out []rec
		for l.Position().Epoch < until {
			b, ok := l.Next()
			if !ok {
				continue
			}
			out = append(out, rec{b.Pos, slices.Clone(b.Indices), b.X.Float32s()})
			b.Release()
		}
		return out
	}
	l, err := NewLoader(ds, opt)
	if err != nil {
		t.Fatal(err)
	}
	all := run(l, 3)
	if len(all) != 3*l.BatchesPerEpoch() {
		t.Fatalf("%d batches in 3 epochs, want %d", len(all), 3*l.BatchesPerEpoch())
	}
	for k, r := range all {
		saved, err := json.Marshal(r.pos)
		if err != nil {
			t.Fatal(err)
		}
		var p Position
		if err := json.Unmarshal(saved, &p); err != nil {
			t.Fatal(err)
		}
		l2, err := NewLoader(ds, opt)
		if err != nil {
			t.Fatal(err)
		}
		if err := l2.Seek(p); err != nil {
			t.Fatal(err)
		}
		rest := run(l2, 3)
		if len(rest) != len(all)-k {
			t.Fatalf("resume at %s: %d batches, want %d", saved, len(rest), len(all)-k)
		}
		for j, r2 := range rest {
			r1 := all[k+j]
			if r1.pos != r2.pos || !slices.Equal(r1.idx, r2.idx) || !slices.Equal(r1.x, r2.x) {
				t.Fatalf("resume at %s: batch %+v differs from %+v", saved, r2.pos, r1.pos)
			}
		}
	}
	if want := `{"epoch":2,"batch":1}`; !strings.Contains(mustJSON(t, Position{2, 1}), want) {
		t.Errorf("Position JSON %s, want %s", mustJSON(t, Position{2, 1}), want)
	}
}

func mustJSON(t *testing.T, v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func TestLoaderEpochStopEarly(t *testing.T) {
	t.Parallel()
	l, err := NewLoader(synthetic(10, 1, 1, 1, 2, 1), LoaderOptions{BatchSize: 2})
	if err != nil {
		t.Fatal(err)
	}
	for b := range l.Epoch() {
		b.Release()
		if b.Pos.Batch == 1 {
			break
		}
	}
	if p := l.Position(); p != (Position{0, 2}) {
		t.Fatalf("position %+v after stopping at batch 1, want {0 2}", p)
	}
	n := 0
	for b := range l.Epoch() {
		b.Release()
		n++
	}
	if n != 3 || l.Position() != (Position{1, 0}) {
		t.Fatalf("%d more batches, position %+v; want 3 and {1 0}", n, l.Position())
	}
}

func TestLoaderErrors(t *testing.T) {
	t.Parallel()
	good := synthetic(10, 2, 2, 3, 4, 1)
	bad := synthetic(10, 2, 2, 1, 4, 1)
	bad.Labels[3] = 4
	short := synthetic(10, 2, 2, 1, 4, 1)
	short.Pixels = short.Pixels[:39]
	tests := []struct {
		name    string
		ds      *Images
		opt     LoaderOptions
		wantErr string
	}{
		{"zero batch", good, LoaderOptions{}, "batch size 0"},
		{"rank outside world", good, LoaderOptions{BatchSize: 1, Rank: 2, World: 2}, "rank 2 of world 2"},
		{"negative world", good, LoaderOptions{BatchSize: 1, World: -1}, "world -1"},
		{"negative rank", good, LoaderOptions{BatchSize: 1, Rank: -1}, "rank -1"},
		{"mean per channel", good, LoaderOptions{BatchSize: 1, Mean: []float64{0, 0}, Std: []float64{1}}, "2 means"},
		{"zero std", good, LoaderOptions{BatchSize: 1, Mean: []float64{0}, Std: []float64{1, 0, 1}}, "std 0 of channel 1"},
		{"NaN std", good, LoaderOptions{BatchSize: 1, Std: []float64{math.NaN()}}, "std NaN"},
		{"label outside classes", bad, LoaderOptions{BatchSize: 1}, "label 4 of image 3"},
		{"short pixels", short, LoaderOptions{BatchSize: 1}, "39 pixel bytes"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			_, err := NewLoader(tt.ds, tt.opt)
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Fatalf("error %v, want one containing %q", err, tt.wantErr)
			}
		})
	}
	l, err := NewLoader(good, LoaderOptions{BatchSize: 3})
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range []Position{{-1, 0}, {0, -1}, {0, 5}} {
		if err := l.Seek(p); err == nil {
			t.Errorf("Seek(%+v) accepted", p)
		}
	}
	if err := l.Seek(Position{4, 4}); err != nil {
		t.Errorf("Seek to the end of an epoch: %v", err)
	}
	if _, ok := l.Next(); ok || l.Position() != (Position{5, 0}) {
		t.Errorf("Next at the end of epoch 4: ok=%v, position %+v", ok, l.Position())
	}
}

func TestLoaderReusesStaging(t *testing.T) {
	l, err := NewLoader(synthetic(64, 28, 28, 1, 10, 2), LoaderOptions{BatchSize: 16, Shuffle: true})
	if err != nil {
		t.Fatal(err)
	}
	x, y := &l.x[0], &l.y[0]
	allocs := testing.AllocsPerRun(20, func() {
		b, ok := l.Next()
		if ok {
			b.Release()
		}
	})
	if &l.x[0] != x || &l.y[0] != y {
		t.Error("staging buffers reallocated")
	}
	t.Logf("%.1f allocations per batch", allocs)
}

func BenchmarkLoaderFashionMNISTShape(b *testing.B) {
	l, err := NewLoader(synthetic(4096, 28, 28, 1, 10, 2), LoaderOptions{BatchSize: 256, Shuffle: true})
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	b.SetBytes(256 * 28 * 28)
	for b.Loop() {
		bt, ok := l.Next()
		if ok {
			bt.Release()
		}
	}
}
