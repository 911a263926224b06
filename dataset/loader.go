package dataset

import (
	"fmt"
	"iter"
	"math/bits"
	"math/rand/v2"

	"github.com/flockml/flock/tensor"
)

// LoaderOptions configures a Loader.
type LoaderOptions struct {
	// BatchSize is the number of samples in a batch (> 0).
	BatchSize int
	// Shuffle draws a new permutation of the samples every epoch; without
	// it every epoch visits them in index order.
	Shuffle bool
	// Seed selects the permutations. Every rank must use the same seed.
	Seed uint64
	// DropLast drops a rank's last batch of an epoch when it is smaller
	// than BatchSize.
	DropLast bool
	// Rank and World shard each epoch over World ranks (World 0 means 1).
	Rank, World int
	// Mean and Std normalise pixels: x = (p/255 − Mean[c]) / Std[c], with
	// one value per channel or one for all. Nil means FashionMNISTMean and
	// FashionMNISTStd.
	Mean, Std []float64
	// Device holds the batch tensors (tensor.DefaultDevice() when nil).
	Device tensor.Device
}

// Position is where a Loader stands: the next batch it returns is batch
// Batch of epoch Epoch. Saving it and passing it to Seek resumes exactly.
type Position struct {
	Epoch int `json:"epoch"`
	Batch int `json:"batch"`
}

// Batch is one batch of a Loader.
type Batch struct {
	// Pos is the position this batch was read at.
	Pos Position
	// X holds the normalised images, float32 [B, C, H, W].
	X *tensor.Tensor
	// Y holds the labels, int64 [B].
	Y *tensor.Tensor
	// Indices are the B sample indices in the Images; the slice belongs to
	// the Loader and is valid until its next call.
	Indices []int
}

// Release releases the batch's tensors.
func (b Batch) Release() {
	b.X.Release()
	b.Y.Release()
}

// Loader cuts an in-memory Images into batches of normalised tensors,
// epoch after epoch.
//
// Order. Epoch e visits the samples in the order p_e, a permutation of
// [0, N): the identity without Shuffle, otherwise the Fisher–Yates shuffle
//
//	p = [0, 1, …, N−1]
//	for i = N−1 down to 1: j = U(i+1); swap p[i], p[j]
//
// where U(m) draws uniformly from [0, m) by Lemire's multiply-and-reject
// method (hi, lo = 64×64→128-bit product of m and a draw; redraw while
// lo < 2⁶⁴ mod m; return hi) and the draws are successive Uint64 values of
// math/rand/v2's PCG (PCG-DXSM) seeded with NewPCG(Seed, e). p_e is thus a
// pure function of (Seed, e), independent of how the Loader got there.
//
// Sharding. With World = w ranks each epoch keeps the first
// M = w·⌊N/w⌋ entries of p_e and rank r takes p_e[r], p_e[r+w], p_e[r+2w], …:
// ⌊N/w⌋ samples per rank, disjoint across ranks. This is PyTorch's
// DistributedSampler with drop_last=True: the N mod w samples at the end of
// each permutation are skipped that epoch (different ones each epoch when
// shuffling) rather than padded with repeats.
//
// Batches. A rank's samples are cut in order into batches of BatchSize; the
// last, smaller batch is kept unless DropLast. Pixels (NHWC uint8) become
// float32 NCHW tensors (p/255 − mean)/std and labels int64 tensors. The host
// staging buffers are reused from batch to batch.
//
// A Loader is not safe for concurrent use.
type Loader struct {
	ds       *Images
	opt      LoaderOptions
	perRank  int
	batches  int
	pos      Position
	orderFor int   // epoch that order holds, or -1
	order    []int // this rank's sample indices for epoch orderFor
	perm     []int
	lut      []float32 // lut[c·256 + p] = (p/255 − mean[c]) / std[c]
	x        []float32
	y        []int64
}

// NewLoader returns a Loader over ds at Position{0, 0}.
func NewLoader(ds *Images, opt LoaderOptions) (*Loader, error) {
	if err := ds.Validate(); err != nil {
		return nil, err
	}
	if opt.BatchSize <= 0 {
		return nil, fmt.Errorf("dataset: loader: batch size %d: want > 0", opt.BatchSize)
	}
	if opt.World == 0 {
		opt.World = 1
	}
	if opt.World < 0 || opt.Rank < 0 || opt.Rank >= opt.World {
		return nil, fmt.Errorf("dataset: loader: rank %d of world %d: want 0 ≤ rank < world", opt.Rank, opt.World)
	}
	if opt.Mean == nil {
		opt.Mean = []float64{FashionMNISTMean}
	}
	if opt.Std == nil {
		opt.Std = []float64{FashionMNISTStd}
	}
	lut, err := normalisationTable(opt.Mean, opt.Std, ds.C)
	if err != nil {
		return nil, err
	}
	l := &Loader{ds: ds, opt: opt, lut: lut, orderFor: -1}
	l.perRank = ds.N / opt.World
	l.batches = l.perRank / opt.BatchSize
	if !opt.DropLast && l.perRank%opt.BatchSize != 0 {
		l.batches++
	}
	b := min(opt.BatchSize, l.perRank)
	l.x = make([]float32, b*ds.C*ds.H*ds.W)
	l.y = make([]int64, b)
	return l, nil
}

func normalisationTable(mean, std []float64, c int) ([]float32, error) {
	if (len(mean) != 1 && len(mean) != c) || (len(std) != 1 && len(std) != c) {
		return nil, fmt.Errorf("dataset: loader: %d means and %d stds for %d channels: want 1 or %d each", len(mean), len(std), c, c)
	}
	lut := make([]float32, 256*c)
	for ch := range c {
		m, s := mean[min(ch, len(mean)-1)], std[min(ch, len(std)-1)]
		if !(s > 0) {
			return nil, fmt.Errorf("dataset: loader: std %v of channel %d: want > 0", s, ch)
		}
		for p := range 256 {
			lut[ch*256+p] = float32((float64(p)/255 - m) / s)
		}
	}
	return lut, nil
}

// Len returns the number of samples the Loader's rank sees per epoch.
func (l *Loader) Len() int { return l.perRank }

// BatchesPerEpoch returns the number of batches per epoch.
func (l *Loader) BatchesPerEpoch() int { return l.batches }

// Position returns the position of the next batch.
func (l *Loader) Position() Position { return l.pos }

// Seek moves to p: the next batch returned is batch p.Batch of epoch
// p.Epoch, where 0 ≤ p.Batch ≤ BatchesPerEpoch().
func (l *Loader) Seek(p Position) error {
	if p.Epoch < 0 || p.Batch < 0 || p.Batch > l.batches {
		return fmt.Errorf("dataset: loader: seek to epoch %d batch %d: want epoch ≥ 0 and batch in [0, %d]", p.Epoch, p.Batch, l.batches)
	}
	l.pos = p
	return nil
}

// Next returns the batch at Position() and moves past it. At the end of an
// epoch it returns false instead and moves to the start of the next epoch.
// The caller releases the batch.
func (l *Loader) Next() (Batch, bool) {
	if l.pos.Batch >= l.batches {
		l.pos = Position{Epoch: l.pos.Epoch + 1}
		return Batch{}, false
	}
	if l.orderFor != l.pos.Epoch {
		l.order = l.shard(l.pos.Epoch, l.order)
		l.orderFor = l.pos.Epoch
	}
	lo := l.pos.Batch * l.opt.BatchSize
	idx := l.order[lo:min(lo+l.opt.BatchSize, len(l.order))]
	ds := l.ds
	hw, c := ds.H*ds.W, ds.C
	x, y := l.x[:len(idx)*c*hw], l.y[:len(idx)]
	for b, i := range idx {
		y[b] = int64(ds.Labels[i])
		src, dst := ds.Image(i), x[b*c*hw:(b+1)*c*hw]
		if c == 1 {
			for p, v := range src {
				dst[p] = l.lut[v]
			}
			continue
		}
		for ch := range c {
			lut, d := l.lut[ch*256:(ch+1)*256], dst[ch*hw:(ch+1)*hw]
			for p := range d {
				d[p] = lut[src[p*c+ch]]
			}
		}
	}
	dev := tensor.On(l.opt.Device)
	batch := Batch{
		Pos:     l.pos,
		X:       tensor.FromSlice(x, tensor.Shape{len(idx), c, ds.H, ds.W}, dev),
		Y:       tensor.FromSlice(y, tensor.Shape{len(idx)}, dev),
		Indices: idx,
	}
	l.pos.Batch++
	return batch, true
}

// Epoch yields the batches from Position() to the end of its epoch and then
// moves to the start of the next one; stopping early leaves the Loader at the
// batch after the last one yielded. The caller releases each batch.
func (l *Loader) Epoch() iter.Seq[Batch] {
	return func(yield func(Batch) bool) {
		for {
			b, ok := l.Next()
			if !ok || !yield(b) {
				return
			}
		}
	}
}

// Indices returns the sample indices the Loader's rank visits in epoch, in
// order.
func (l *Loader) Indices(epoch int) []int { return l.shard(epoch, nil) }

// shard returns this rank's strided share of Permutation(N, Seed, epoch),
// reusing dst.
func (l *Loader) shard(epoch int, dst []int) []int {
	n, w := l.ds.N, l.opt.World
	if l.opt.Shuffle {
		l.perm = permutation(l.perm, n, l.opt.Seed, uint64(epoch))
	} else {
		l.perm = identity(l.perm, n)
	}
	dst = dst[:0]
	for k := l.opt.Rank; k < l.perRank*w; k += w {
		dst = append(dst, l.perm[k])
	}
	return dst
}

// Permutation returns the permutation of [0, n) a shuffling Loader with this
// seed visits in epoch (before sharding).
func Permutation(n int, seed uint64, epoch int) []int {
	return permutation(nil, n, seed, uint64(epoch))
}

func identity(p []int, n int) []int {
	p = p[:0]
	for i := range n {
		p = append(p, i)
	}
	return p
}

func permutation(p []int, n int, seed, epoch uint64) []int {
	p = identity(p, n)
	src := rand.NewPCG(seed, epoch)
	for i := n - 1; i > 0; i-- {
		j := uniform(src, uint64(i+1))
		p[i], p[j] = p[j], p[i]
	}
	return p
}

// uniform returns a uniform draw from [0, m), m > 0, by Lemire's method
// ("Fast random integer generation in an interval", 2019).
func uniform(src *rand.PCG, m uint64) uint64 {
	hi, lo := bits.Mul64(src.Uint64(), m)
	if lo < m {
		thresh := -m % m
		for lo < thresh {
			hi, lo = bits.Mul64(src.Uint64(), m)
		}
	}
	return hi
}
