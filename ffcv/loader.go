package ffcv

import (
	"context"
	"errors"
	"fmt"
	"io"
	"iter"
	"runtime"
	"slices"
	"sync"
	"sync/atomic"

	"github.com/flockml/flock/ffcv/beton"
)

// ErrClosed is returned by the methods of a closed Loader.
var ErrClosed = errors.New("ffcv: loader closed")

// Cache selects how a Loader reads the file's pages.
type Cache int

const (
	// PageCache maps the file into memory and leaves caching to the
	// operating system's page cache (FFCV's os_cache=True, the default).
	PageCache Cache = iota
	// ProcessCache reads pages into the process's own memory, prefetching
	// the pages of the batches ahead (FFCV's os_cache=False).
	ProcessCache
)

// Decoding selects how a Loader's image decoders (SimpleImageDecoder,
// RandomResizedCrop, CenterCrop) decode JPEGs: for speed, or exactly as
// FFCV does.
type Decoding int

const (
	// Scaled (the default) decodes a JPEG at the smallest scale 1/d, d ∈
	// {1, 2, 4, 8}, that keeps the crop window at least as large as the
	// output (ScaleDenom), with libjpeg's accurate integer IDCT
	// (jidctint.c, as PIL). Decoding at 1/d computes 1/d² of the pixels
	// through libjpeg's reduced IDCTs, so shrinking crops cost a fraction
	// of a full decode; the result is a faithful image but not FFCV's
	// bytes. On the committed FFCV test file, centre crops to 224×224,
	// decoded at 1/1, differ from FFCV's own output by 1.0 levels of 255
	// on average and 5 at most (the IDCT alone); centre crops to 64×64,
	// decoded at 1/2 or 1/4, differ from MatchFFCV's by 1.4 on average and
	// 18 at most.
	Scaled Decoding = iota
	// MatchFFCV decodes every JPEG at full size with libjpeg's fast
	// integer IDCT (jidctfst.c, TJFLAG_FASTDCT) and fancy chroma
	// upsampling, then crops and resizes with Area, which is what FFCV's
	// decoders do: given the same crop window the pixels equal FFCV's
	// exactly (the tests check CenterCrop against FFCV's output, and the
	// area resize against cv2.resize value for value, on fractional
	// factors and FFCV's centre crops of non-square images too). It costs
	// a full decode per image whatever the output size. With MatchFFCV a
	// decoder's Filter must be Area (its zero value).
	MatchFFCV
)

// DefaultBatchesAhead is the number of batches a Loader prepares ahead of
// the one handed out (FFCV's batches_ahead).
const DefaultBatchesAhead = 3

// Options configures a Loader. The zero value of every field is its FFCV
// default, except BatchSize, which is required.
type Options struct {
	// BatchSize is the number of samples per batch (> 0).
	BatchSize int
	// Workers is the number of decoding goroutines (GOMAXPROCS when 0).
	Workers int
	// Order is the order of the samples within an epoch (Sequential when
	// zero).
	Order Order
	// QuasiRandomWindow is the number of pages QuasiRandom draws from at a
	// time (DefaultQuasiRandomWindow when 0).
	QuasiRandomWindow int
	// Cache selects the operating system's page cache (PageCache, the
	// default) or a process cache with prefetching (ProcessCache). With
	// NewLoader the Reader keeps the mode it was opened with, and
	// ProcessCache turns on the prefetching of the pages of the batches
	// ahead.
	Cache Cache
	// Rank and World shard each epoch over World processes (World 0
	// means 1). Every rank must use the same Seed, Order and Indices.
	Rank, World int
	// Seed selects the random orders and the augmentations.
	Seed uint64
	// Indices restricts the loader to these samples of the file, in this
	// order for Sequential (all samples when nil).
	Indices []int
	// KeepLast keeps an epoch's last, smaller batch (FFCV's
	// drop_last=False) and DropLast drops it (drop_last=True); they
	// exclude each other. With neither, an evaluation loader keeps it and
	// a training loader drops it (FFCV's default): a loader evaluates when
	// its Order is Sequential and no pipeline draws at random (no
	// RandomResizedCrop, Flip, Translate, Cutout, Mixup or LabelMixup), so
	// that a test set is seen whole.
	KeepLast, DropLast bool
	// BatchesAhead is the number of batches prepared ahead of the one
	// handed out (DefaultBatchesAhead when 0). The ring holds
	// BatchesAhead + 2 batches.
	BatchesAhead int
	// Pipelines maps field names to their pipelines. A field not in the
	// map gets its default pipeline (DefaultPipeline); a field mapped to
	// nil is not loaded.
	Pipelines map[string]Pipeline
	// Decode selects fast scaled JPEG decoding (Scaled, the default) or
	// FFCV's exact output (MatchFFCV) for every image field.
	Decode Decoding
}

// Position is where a Loader stands: the next batch it hands out is batch
// Batch of epoch Epoch. Seeking to a saved Position resumes exactly.
type Position struct {
	Epoch int `json:"epoch"`
	Batch int `json:"batch"`
}

// Batch is one batch of a Loader: views into one slot of the Loader's ring,
// valid until Release.
type Batch struct {
	// Pos is the batch's position.
	Pos Position
	// Indices are the file's sample indices of the batch's rows.
	Indices []int
	// Columns are the loaded fields, in the file's field order.
	Columns []*Column

	s   *slot
	gen uint64
}

// Len returns the number of samples in the batch.
func (b Batch) Len() int { return len(b.Indices) }

// Column returns the column of the field name, or nil when it is not loaded.
func (b Batch) Column(name string) *Column {
	for _, c := range b.Columns {
		if c.Name == name {
			return c
		}
	}
	return nil
}

// Release hands the batch's slot back to the Loader. Releasing a batch
// twice, or after the Loader's Close, does nothing; a released batch's
// memory is reused by later batches.
func (b Batch) Release() {
	if b.s == nil {
		return
	}
	l := b.s.l
	l.mu.Lock()
	if b.s.state == slotHeld && b.s.gen == b.gen {
		b.s.state = slotFree
		l.cond.Broadcast()
	}
	l.mu.Unlock()
}

type slotState uint8

const (
	slotFree slotState = iota
	slotFilling
	slotReady
	slotHeld
)

// slot is one batch of the ring with its buffers, allocated once.
type slot struct {
	l         *Loader
	state     slotState
	run       *run
	batch     int // batch index within the run's epoch
	remaining int // chunks still being filled
	gen       uint64
	n         int // rows of this batch
	ids       []int
	cols      []*Column
}

// run is the production of one epoch's batches [first, end) by the
// workers.
type run struct {
	epoch      int
	first, end int
	chunk      int // rows per job
	cpb        int // jobs per batch
	next       atomic.Int64
	claimNext  int
	stopped    bool
	err        error
	wg         sync.WaitGroup
	prefetched int // last batch whose pages were prefetched
}

// Loader reads batches from a .beton file: a Reader, an epoch order, decode
// and augmentation pipelines per field, and Workers goroutines filling a
// ring of preallocated batches.
//
// # Order
//
// The samples of epoch e for rank r of w are a pure function of (Seed, e,
// r, w, Order, Indices) and nothing else, so a run resumes exactly from a
// Position. Let L be Indices (or 0…N−1) and n = len(L).
//
//   - Sequential: G = L.
//   - Random: G is L permuted by the Fisher–Yates shuffle (for i = n−1 down
//     to 1: j = U(i+1), swap G[i], G[j]) whose draws U(m) (Lemire's
//     multiply-and-reject on 64-bit words) come from math/rand/v2's
//     PCG(Seed, e): the permutation dataset.Loader uses.
//   - QuasiRandom: FFCV's QUASI_RANDOM order. The samples of L are grouped
//     by the page holding their data (samples without variable-size data
//     in groups of 1024 consecutive indices), then with the same PCG(Seed,
//     e): each group is shuffled, the groups are shuffled, and each
//     position of G draws uniformly one of at most QuasiRandomWindow open
//     groups and takes its next sample; an exhausted group is replaced by
//     the next in the shuffled group order.
//
// Sharding follows PyTorch's DistributedSampler (drop_last=False): G is
// padded to T = w·⌈n/w⌉ entries by repeating it cyclically
// (G[n+i] = G[i mod n]) and rank r takes G[r], G[r+w], G[r+2w], …, so every
// rank visits ⌈n/w⌉ samples and every sample is visited at least once per
// epoch. QuasiRandom works in distributed mode: the global order is
// quasi-random, then sharded. The rank's samples are cut into batches of
// BatchSize in order; the last, smaller batch is kept with KeepLast and for
// evaluation (see Options.KeepLast), dropped otherwise.
//
// # Randomness of augmentations
//
// Every random choice of a pipeline (crop window, flip, translation,
// cutout, mixup weight) draws from transform.NewRand(Seed, epoch, sample,
// op), where sample is the file's sample index and op identifies the
// transform and its place in the pipeline, so batches do not depend on the
// number of workers or on their scheduling.
//
// # Batches and memory
//
// The ring holds BatchesAhead + 2 slots, each with one buffer per loaded
// field for BatchSize samples, allocated when the Loader is made. A batch
// is split into jobs of a few samples that the workers take in order; the
// worker that completes a batch applies the batch-level transforms (mixup)
// and hands it over. Next returns views into a slot; Release hands the slot
// back. Each worker keeps its decoding scratch, grown to the largest image
// it has decoded. At steady state a batch allocates nothing.
//
// Next, Seek, Position and Close are to be called from one goroutine at a
// time; Release from any.
type Loader struct {
	r        *beton.Reader
	ownsFile bool
	opt      Options
	pipes    []*fieldPipe
	smp      *sampler
	perRank  int
	batches  int
	pos      Position

	mu       sync.Mutex
	cond     sync.Cond
	slots    []*slot
	cur      *run
	stopping *run
	closed   bool
	workers  []*worker
	ids      []int // the rank's samples of epoch idsFor
	idsFor   int
	pages    []int64 // prefetch scratch
	watched  context.Context
	unwatch  func() bool
}

// Open opens the .beton file at path and returns a Loader over it; Close
// closes both.
func Open(path string, opt Options) (*Loader, error) {
	ro := beton.ReadOptions{}
	if opt.Cache == ProcessCache {
		ro.Cache = beton.Process
	}
	r, err := beton.Open(path, ro)
	if err != nil {
		return nil, err
	}
	l, err := NewLoader(r, opt)
	if err != nil {
		r.Close()
		return nil, err
	}
	l.ownsFile = true
	return l, nil
}

// NewLoader returns a Loader over r at Position{0, 0}. The Loader does not
// close r.
func NewLoader(r *beton.Reader, opt Options) (*Loader, error) {
	if opt.BatchSize <= 0 {
		return nil, fmt.Errorf("ffcv: loader: batch size %d: want > 0", opt.BatchSize)
	}
	if opt.Workers < 0 || opt.BatchesAhead < 0 || opt.QuasiRandomWindow < 0 {
		return nil, fmt.Errorf("ffcv: loader: workers %d, batches ahead %d, quasi-random window %d: want ≥ 0", opt.Workers, opt.BatchesAhead, opt.QuasiRandomWindow)
	}
	if opt.Workers == 0 {
		opt.Workers = runtime.GOMAXPROCS(0)
	}
	if opt.BatchesAhead == 0 {
		opt.BatchesAhead = DefaultBatchesAhead
	}
	if opt.QuasiRandomWindow == 0 {
		opt.QuasiRandomWindow = DefaultQuasiRandomWindow
	}
	if opt.World == 0 {
		opt.World = 1
	}
	if opt.World < 0 || opt.Rank < 0 || opt.Rank >= opt.World {
		return nil, fmt.Errorf("ffcv: loader: rank %d of world %d: want 0 ≤ rank < world", opt.Rank, opt.World)
	}
	if opt.Order < Sequential || opt.Order > QuasiRandom {
		return nil, fmt.Errorf("ffcv: loader: unknown order %d", opt.Order)
	}
	if opt.Decode != Scaled && opt.Decode != MatchFFCV {
		return nil, fmt.Errorf("ffcv: loader: unknown decoding %d: want Scaled or MatchFFCV", opt.Decode)
	}
	n := r.NumSamples()
	base := opt.Indices
	if base == nil {
		base = make([]int, n)
		for i := range base {
			base[i] = i
		}
	} else {
		base = slices.Clone(base)
		for _, i := range base {
			if i < 0 || i >= n {
				return nil, fmt.Errorf("ffcv: loader: index %d outside the file's %d samples", i, n)
			}
		}
	}
	opt.Indices = base
	pipes, err := compilePipelines(r, opt)
	if err != nil {
		return nil, err
	}
	if opt.KeepLast && opt.DropLast {
		return nil, fmt.Errorf("ffcv: loader: both KeepLast and DropLast: want at most one")
	}
	if !opt.DropLast && opt.Order == Sequential && !slices.ContainsFunc(pipes, (*fieldPipe).random) {
		opt.KeepLast = true
	}
	l := &Loader{r: r, opt: opt, pipes: pipes, idsFor: -1}
	l.cond.L = &l.mu
	l.smp = newSampler(opt.Order, opt.Seed, opt.Rank, opt.World, base, r.Page, opt.QuasiRandomWindow)
	l.perRank = l.smp.perRank()
	l.batches = l.perRank / opt.BatchSize
	if opt.KeepLast && l.perRank%opt.BatchSize != 0 {
		l.batches++
	}
	bs := max(1, min(opt.BatchSize, l.perRank))
	l.slots = make([]*slot, opt.BatchesAhead+2)
	for i := range l.slots {
		s := &slot{l: l, ids: make([]int, bs)}
		for _, p := range pipes {
			s.cols = append(s.cols, p.newColumn(bs))
		}
		l.slots[i] = s
	}
	l.workers = make([]*worker, opt.Workers)
	for i := range l.workers {
		l.workers[i] = newWorker(len(pipes))
	}
	return l, nil
}

// Reader returns the Loader's file.
func (l *Loader) Reader() *beton.Reader { return l.r }

// Len returns the number of samples the Loader's rank visits per epoch,
// padding included.
func (l *Loader) Len() int { return l.perRank }

// BatchesPerEpoch returns the number of batches per epoch.
func (l *Loader) BatchesPerEpoch() int { return l.batches }

// KeepsLast reports whether an epoch ends with its last, smaller batch
// (KeepLast, or an evaluation loader) rather than dropping it.
func (l *Loader) KeepsLast() bool { return l.opt.KeepLast }

// BatchSize returns the number of samples of a full batch.
func (l *Loader) BatchSize() int { return l.opt.BatchSize }

// Workers returns the number of decoding goroutines.
func (l *Loader) Workers() int { return l.opt.Workers }

// Position returns the position of the next batch.
func (l *Loader) Position() Position {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.pos
}

// Indices returns the file's sample indices the Loader's rank visits in
// epoch, in order.
func (l *Loader) Indices(epoch int) []int {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.waitStopping()
	if l.cur == nil {
		return slices.Clone(l.smp.epoch(epoch, nil))
	}
	// The running epoch's order is in use by the workers; compute apart.
	s := newSampler(l.opt.Order, l.opt.Seed, l.opt.Rank, l.opt.World, l.opt.Indices, l.r.Page, l.opt.QuasiRandomWindow)
	return s.epoch(epoch, nil)
}

// Seek moves to p: the next batch handed out is batch p.Batch of epoch
// p.Epoch, 0 ≤ p.Batch ≤ BatchesPerEpoch(). Batches being prepared are
// dropped.
func (l *Loader) Seek(p Position) error {
	if p.Epoch < 0 || p.Batch < 0 || p.Batch > l.batches {
		return fmt.Errorf("ffcv: loader: seek to epoch %d batch %d: want epoch ≥ 0 and batch in [0, %d]", p.Epoch, p.Batch, l.batches)
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed {
		return ErrClosed
	}
	l.stopRunLocked()
	l.pos = p
	return nil
}

// Close stops the workers and, for a Loader made by Open, closes the file;
// batches still held must not be used afterwards. Close is safe to call
// more than once.
func (l *Loader) Close() error {
	l.mu.Lock()
	if l.closed {
		l.mu.Unlock()
		return nil
	}
	l.closed = true
	if l.unwatch != nil {
		l.unwatch()
		l.unwatch, l.watched = nil, nil
	}
	l.stopRunLocked()
	l.cond.Broadcast()
	l.mu.Unlock()
	for _, w := range l.workers {
		w.close()
	}
	if l.ownsFile {
		return l.r.Close()
	}
	return nil
}

// Next returns the batch at Position() and moves past it; the caller
// releases it. At the end of an epoch it returns io.EOF instead and moves
// to the start of the next epoch. When ctx ends, or decoding fails, it
// stops the workers and returns the error; the position stays at the batch
// not handed out, so a later call resumes there. Next fails rather than
// block when every slot of the ring is held.
func (l *Loader) Next(ctx context.Context) (Batch, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.waitStopping()
	if l.closed {
		return Batch{}, ErrClosed
	}
	if l.pos.Batch >= l.batches {
		l.stopRunLocked()
		l.pos = Position{Epoch: l.pos.Epoch + 1}
		return Batch{}, io.EOF
	}
	if err := ctx.Err(); err != nil {
		return Batch{}, err
	}
	if l.cur == nil {
		l.startRunLocked()
	}
	r, k := l.cur, l.pos.Batch
	l.watch(ctx)
	for {
		if l.closed {
			return Batch{}, ErrClosed
		}
		held := 0
		for _, s := range l.slots {
			if s.run == r && s.batch == k && s.state == slotReady {
				s.state = slotHeld
				s.gen++
				l.pos.Batch++
				return Batch{Pos: Position{r.epoch, k}, Indices: s.ids[:s.n], Columns: s.cols, s: s, gen: s.gen}, nil
			}
			if s.state == slotHeld {
				held++
			}
		}
		if r.err != nil {
			err := r.err
			l.stopRunLocked()
			return Batch{}, err
		}
		if err := ctx.Err(); err != nil {
			l.stopRunLocked()
			return Batch{}, err
		}
		if held == len(l.slots) {
			return Batch{}, fmt.Errorf("ffcv: loader: all %d batches of the ring are held: release batches before asking for more", held)
		}
		l.cond.Wait()
	}
}

// Epoch yields the batches from Position() to the end of its epoch, each
// released when the loop asks for the next one (or stops), and then moves
// to the next epoch. Breaking out of the loop stops the workers and leaves
// the Loader at the batch after the last one yielded. An error (ctx ended,
// a sample failed to decode) is yielded once, with a zero Batch, and ends
// the sequence.
func (l *Loader) Epoch(ctx context.Context) iter.Seq2[Batch, error] {
	return func(yield func(Batch, error) bool) {
		var prev Batch
		defer func() {
			prev.Release()
			l.mu.Lock()
			if !l.closed {
				l.stopRunLocked()
			}
			l.mu.Unlock()
		}()
		for {
			b, err := l.Next(ctx)
			prev.Release()
			prev = b
			if err == io.EOF {
				return
			}
			if !yield(b, err) || err != nil {
				return
			}
		}
	}
}

// watch makes the end of ctx wake Next, registering once per context so
// that a loop over one context allocates nothing per batch.
func (l *Loader) watch(ctx context.Context) {
	if ctx.Done() == nil || ctx == l.watched {
		return
	}
	if l.unwatch != nil {
		l.unwatch()
	}
	l.watched = ctx
	l.unwatch = context.AfterFunc(ctx, l.wake)
}

func (l *Loader) wake() {
	l.mu.Lock()
	l.cond.Broadcast()
	l.mu.Unlock()
}

// waitStopping waits, with l.mu held, until no run is being stopped.
func (l *Loader) waitStopping() {
	for l.stopping != nil {
		l.cond.Wait()
	}
}

// startRunLocked starts the workers on the epoch at l.pos.
func (l *Loader) startRunLocked() {
	e := l.pos.Epoch
	if l.idsFor != e {
		l.ids = l.smp.epoch(e, l.ids)
		l.idsFor = e
	}
	b := l.opt.BatchSize
	nw := len(l.workers)
	chunk := max(1, (b+4*nw-1)/(4*nw))
	r := &run{epoch: e, first: l.pos.Batch, end: l.batches, chunk: chunk, cpb: (b + chunk - 1) / chunk}
	r.claimNext = r.first
	r.prefetched = r.first - 1
	l.cur = r
	jobs := (r.end - r.first) * r.cpb
	for _, w := range l.workers[:min(nw, jobs)] {
		r.wg.Add(1)
		go l.work(r, w)
	}
}

// stopRunLocked stops the running epoch, if any, and waits for its
// workers; l.mu is held on entry and on return but released meanwhile.
// Batches being prepared are dropped; held ones stay held.
func (l *Loader) stopRunLocked() {
	l.waitStopping()
	r := l.cur
	if r == nil {
		return
	}
	l.cur, l.stopping = nil, r
	r.stopped = true
	l.cond.Broadcast()
	l.mu.Unlock()
	r.wg.Wait()
	l.mu.Lock()
	for _, s := range l.slots {
		if s.run == r && s.state != slotHeld {
			s.state, s.run = slotFree, nil
		}
	}
	l.stopping = nil
	l.cond.Broadcast()
}

// work is one worker's loop: take the next job, fill its rows, and hand the
// batch over when its last job is done.
func (l *Loader) work(r *run, w *worker) {
	defer r.wg.Done()
	for {
		j := int(r.next.Add(1) - 1)
		k := r.first + j/r.cpb
		if k >= r.end {
			return
		}
		s := l.acquire(r, k)
		if s == nil {
			return
		}
		lo := (j % r.cpb) * r.chunk
		hi := min(lo+r.chunk, s.n)
		var err error
		for row := lo; row < hi && err == nil; row++ {
			err = l.fillRow(w, s, r.epoch, row)
		}
		l.mu.Lock()
		if err != nil {
			if r.err == nil {
				r.err = err
			}
			r.stopped = true
			l.cond.Broadcast()
			l.mu.Unlock()
			return
		}
		s.remaining--
		last := s.remaining == 0
		l.mu.Unlock()
		if !last {
			continue
		}
		for i, p := range l.pipes {
			p.finishBatch(s.cols[i], s.ids[:s.n], l.opt.Seed, r.epoch, w.scratch(i))
		}
		l.mu.Lock()
		s.state = slotReady
		l.cond.Broadcast()
		l.mu.Unlock()
	}
}

// acquire returns the slot being filled with batch k of r, claiming a free
// slot when k is the next batch to start; nil when r is stopped.
func (l *Loader) acquire(r *run, k int) *slot {
	l.mu.Lock()
	defer l.mu.Unlock()
	for {
		if r.stopped {
			return nil
		}
		var free *slot
		for _, s := range l.slots {
			if s.run == r && s.batch == k && s.state == slotFilling {
				return s
			}
			if s.state == slotFree && free == nil {
				free = s
			}
		}
		if r.claimNext == k && free != nil {
			r.claimNext++
			s := free
			s.state, s.run, s.batch, s.remaining = slotFilling, r, k, r.cpb
			lo := k * l.opt.BatchSize
			hi := min(lo+l.opt.BatchSize, len(l.ids))
			s.n = hi - lo
			copy(s.ids, l.ids[lo:hi])
			for _, c := range s.cols {
				c.setRows(s.n)
			}
			l.prefetchLocked(r, k)
			return s
		}
		l.cond.Wait()
	}
}

// prefetchLocked asks a process cache to load the pages of the batches up
// to BatchesAhead after k.
func (l *Loader) prefetchLocked(r *run, k int) {
	if l.opt.Cache != ProcessCache {
		return
	}
	last := min(k+l.opt.BatchesAhead, r.end-1)
	if last <= r.prefetched {
		return
	}
	l.pages = l.pages[:0]
	lo := max(k, r.prefetched+1) * l.opt.BatchSize
	hi := min((last+1)*l.opt.BatchSize, len(l.ids))
	for _, id := range l.ids[lo:hi] {
		if p := l.r.Page(id); p >= 0 {
			l.pages = append(l.pages, p)
		}
	}
	slices.Sort(l.pages)
	l.pages = slices.Compact(l.pages)
	r.prefetched = last
	if len(l.pages) > 0 {
		l.r.Prefetch(l.pages)
	}
}

// fillRow decodes sample s.ids[row] into row row of every column.
func (l *Loader) fillRow(w *worker, s *slot, epoch, row int) error {
	id := s.ids[row]
	for i, p := range l.pipes {
		if err := p.decode(w, i, s.cols[i], row, id, l.opt.Seed, epoch); err != nil {
			return fmt.Errorf("ffcv: sample %d, field %q: %w", id, p.name, err)
		}
	}
	return nil
}
