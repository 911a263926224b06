package beton

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math/bits"
	"os"
	"path/filepath"
	"runtime"
	"sync"
	"time"

	"github.com/flockml/flock/ffcv/jpeg"
	"github.com/flockml/flock/internal/atomicfile"
)

// Source is an indexed dataset to write. Sample fills out[j] with the value
// of field j of sample i (the value types each Field accepts are listed on
// it). Write calls Sample from several goroutines at once, with distinct i,
// and holds the values until the sample is stored: they must not change
// before Write returns.
type Source interface {
	Len() int
	Sample(i int, out []any) error
}

// FuncSource adapts a function to a Source of n samples.
func FuncSource(n int, sample func(i int, out []any) error) Source {
	return funcSource{n, sample}
}

type funcSource struct {
	n int
	f func(int, []any) error
}

func (s funcSource) Len() int                      { return s.n }
func (s funcSource) Sample(i int, out []any) error { return s.f(i, out) }

// WriterOptions configures Write. The zero value writes 8 MiB pages with
// one worker per CPU.
type WriterOptions struct {
	// PageSize is a power of two in [MinPageSize, MaxPageSize] (default
	// DefaultPageSize). All variable-size data of a sample must fit in one
	// page.
	PageSize int
	// Workers is the number of goroutines calling Source.Sample and
	// encoding (default runtime.GOMAXPROCS). The output does not depend on
	// it.
	Workers int
	// Progress, if set, receives a progress bar redrawn in place.
	Progress io.Writer
	// Seed keys the random choices of RGBImageField's WriteProportion mode.
	Seed uint64
}

// worker holds one encoding goroutine's state.
type worker struct {
	seed  uint64
	field int // index of the field being encoded
	dec   *jpeg.Decoder
}

func (w *worker) decoder() *jpeg.Decoder {
	if w.dec == nil {
		w.dec = jpeg.NewGoDecoder()
	}
	return w.dec
}

// encodedSample is one sample ready to be packed.
type encodedSample struct {
	i    int
	row  []byte   // metadata row without data pointers
	data [][]byte // per field: the data to store, nil for fields without
	err  error
}

// Write writes the samples of src to a .beton file at path, atomically: the
// file is built under a temporary name in the same directory, synced, and
// renamed over path; on any error (or cancellation of ctx) nothing is left
// behind. The bytes depend only on the fields, the samples and opt.PageSize
// and opt.Seed: pages are packed in sample order as FFCV's writer does with
// one worker, so files of raw images, numbers, bytes and arrays are
// identical to FFCV's.
func Write(ctx context.Context, path string, fields []NamedField, src Source, opt WriterOptions) error {
	if opt.PageSize == 0 {
		opt.PageSize = DefaultPageSize
	}
	return write(ctx, path, fields, src, opt, MinPageSize)
}

// write is Write with a smaller minimum page size allowed, for tests.
func write(ctx context.Context, path string, fields []NamedField, src Source, opt WriterOptions, minPage int) (err error) {
	fail := func(format string, args ...any) error {
		return fmt.Errorf("beton: write %s: %s", path, fmt.Sprintf(format, args...))
	}
	ps := opt.PageSize
	if ps < minPage || ps > MaxPageSize || bits.OnesCount(uint(ps)) != 1 {
		return fail("page size %d is not a power of two in [%d, %d]", ps, minPage, MaxPageSize)
	}
	if len(fields) == 0 {
		return fail("%v", errNoFields)
	}
	if len(fields) > 0xffff {
		return fail("%d fields, at most 65535", len(fields))
	}
	infos := make([]FieldInfo, len(fields))
	descs := make([]byte, 0, len(fields)*DescriptorSize)
	for i, nf := range fields {
		if err := checkName(nf.Name); err != nil {
			return fail("field %d: %v", i, err)
		}
		for _, prev := range fields[:i] {
			if prev.Name == nf.Name {
				return fail("field name %q used twice", nf.Name)
			}
		}
		if nf.Field == nil {
			return fail("field %q: nil Field", nf.Name)
		}
		args, err := nf.Field.args()
		if err != nil {
			return fail("field %q: %v", nf.Name, err)
		}
		if a, ok := nf.Field.(NDArrayField); ok {
			if _, _, total, _ := a.resolve(); total > ps {
				return fail("field %q: %s%v arrays of %d bytes exceed the page size %d", nf.Name, a.DType, a.Shape, total, ps)
			}
		}
		infos[i] = FieldInfo{Name: nf.Name, Type: nf.Field.Type()}
		descs = append(descs, byte(nf.Field.Type()))
		var name [NameSize]byte
		copy(name[:], nf.Name)
		descs = append(descs, name[:]...)
		descs = append(descs, args[:]...)
	}
	rowSize := layoutRow(infos)
	n := src.Len()
	if n < 0 {
		return fail("source has %d samples", n)
	}
	metaStart := int64(HeaderSize + len(descs))
	metaEnd := metaStart + int64(n)*int64(rowSize)
	p := &packer{
		pageSize: int64(ps),
		dataBase: (metaEnd + int64(ps) - 1) / int64(ps) * int64(ps),
		page:     make([]byte, ps),
		pageIdx:  -1,
		meta:     make([]byte, int64(n)*int64(rowSize)),
		rowSize:  rowSize,
		fields:   infos,
	}

	err = atomicfile.WriteFile(path, func(tmp *os.File) error {
		p.f = tmp
		var bar *progressBar
		if opt.Progress != nil {
			bar = newProgressBar(opt.Progress, filepath.Base(path), n)
		}
		if err := encodeAll(ctx, fields, src, n, rowSize, infos, opt, p, bar); err != nil {
			return err
		}
		if err := p.flush(); err != nil {
			return err
		}
		allocPtr := metaEnd
		if p.pageIdx >= 0 {
			allocPtr = p.dataBase + (p.pageIdx+1)*p.pageSize
		}
		if _, err := tmp.WriteAt(p.alloc, allocPtr); err != nil {
			return err
		}
		h := header{version: Version, numFields: uint16(len(fields)), pageSize: uint32(ps), numSamples: uint64(n), allocPtr: uint64(allocPtr)}
		head := append(h.appendTo(make([]byte, 0, int(metaEnd))), descs...)
		head = append(head, p.meta...)
		if _, err := tmp.WriteAt(head, 0); err != nil {
			return err
		}
		if p.pageIdx >= 0 && p.dataBase > metaEnd {
			// FFCV writes the padding before the first page; a hole would
			// read back as the same zeros but be sparse.
			if _, err := tmp.WriteAt(make([]byte, p.dataBase-metaEnd), metaEnd); err != nil {
				return err
			}
		}
		if bar != nil {
			bar.finish()
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("beton: write %s: %w", path, err)
	}
	return nil
}

func checkName(name string) error {
	if name == "" {
		return errors.New("empty name")
	}
	if len(name) > NameSize {
		return fmt.Errorf("name %q longer than %d bytes", name, NameSize)
	}
	for i := 0; i < len(name); i++ {
		if name[i] == 0 || name[i] >= 0x80 {
			return fmt.Errorf("name %q is not ASCII without NUL", name)
		}
	}
	return nil
}

// encodeAll runs the workers over all samples and packs their output in
// sample order. At most window samples are in flight, so memory stays
// bounded however slow one sample is.
func encodeAll(ctx context.Context, fields []NamedField, src Source, n, rowSize int, infos []FieldInfo, opt WriterOptions, p *packer, bar *progressBar) error {
	workers := opt.Workers
	if workers <= 0 {
		workers = runtime.GOMAXPROCS(0)
	}
	workers = max(1, min(workers, n))
	window := 2*workers + 2
	ctx, cancel := context.WithCancel(ctx)

	jobs := make(chan int)
	tokens := make(chan struct{}, window)
	results := make(chan *encodedSample, window)
	var wg sync.WaitGroup
	wg.Go(func() {
		defer close(jobs)
		for i := range n {
			select {
			case tokens <- struct{}{}:
			case <-ctx.Done():
				return
			}
			select {
			case jobs <- i:
			case <-ctx.Done():
				return
			}
		}
	})
	for range workers {
		wg.Go(func() {
			w := &worker{seed: opt.Seed}
			out := make([]any, len(fields))
			for i := range jobs {
				results <- encodeSample(w, fields, infos, src, i, rowSize, out)
			}
		})
	}
	defer func() {
		cancel()
		wg.Wait()
	}()

	pending := map[int]*encodedSample{}
	for next := 0; next < n; {
		var e *encodedSample
		select {
		case e = <-results:
		case <-ctx.Done():
			return ctx.Err()
		}
		pending[e.i] = e
		for pending[next] != nil {
			e := pending[next]
			delete(pending, next)
			if e.err != nil {
				return e.err
			}
			if err := p.pack(e); err != nil {
				return err
			}
			next++
			<-tokens
			if bar != nil {
				bar.set(next)
			}
		}
	}
	return nil
}

// encodeSample reads sample i from src and encodes its fields.
func encodeSample(w *worker, fields []NamedField, infos []FieldInfo, src Source, i, rowSize int, out []any) *encodedSample {
	e := &encodedSample{i: i, row: make([]byte, rowSize), data: make([][]byte, len(fields))}
	clear(out)
	if err := src.Sample(i, out); err != nil {
		e.err = fmt.Errorf("sample %d: %w", i, err)
		return e
	}
	for j, nf := range fields {
		w.field = j
		off := infos[j].offset
		meta := e.row[off : off+nf.Field.Type().metaSize()]
		d, err := nf.Field.encode(w, i, out[j], meta)
		if err != nil {
			e.err = fmt.Errorf("sample %d field %q: %w", i, nf.Name, err)
			return e
		}
		if nf.Field.Type().variable() {
			if d == nil {
				d = []byte{}
			}
			e.data[j] = d
		}
	}
	clear(out)
	return e
}

// packer places samples' data in pages as FFCV's MemoryAllocator does with
// one worker: each sample's allocations go, in field order, into the
// current page; when one does not fit, the page is written out (keeping
// whatever the sample had already put in it) and the sample starts again at
// the beginning of a fresh page.
type packer struct {
	f        *os.File
	pageSize int64
	dataBase int64
	page     []byte
	pageIdx  int64 // current page, counted from dataBase; -1 before the first
	off      int64 // bytes used in the current page
	meta     []byte
	rowSize  int
	fields   []FieldInfo
	alloc    []byte // the allocation table
	sample   []byte // allocation entries of the sample being packed
}

func (p *packer) pack(e *encodedSample) error {
	total := 0
	for _, d := range e.data {
		total += len(d)
	}
	for attempt := 0; ; attempt++ {
		p.sample = p.sample[:0]
		restart := false
		for j, d := range e.data {
			if d == nil {
				continue
			}
			size := int64(len(d))
			if size > p.pageSize {
				return fmt.Errorf("sample %d field %q: %d bytes do not fit in a page of %d bytes", e.i, p.fields[j].Name, size, p.pageSize)
			}
			if p.pageIdx < 0 || size > p.pageSize-p.off {
				placed := len(p.sample) > 0
				if err := p.newPage(); err != nil {
					return err
				}
				if placed {
					restart = true
					break
				}
			}
			copy(p.page[p.off:], d)
			ptr := p.dataBase + p.pageIdx*p.pageSize + p.off
			p.off += size
			p.sample = binary.LittleEndian.AppendUint64(p.sample, uint64(e.i))
			p.sample = binary.LittleEndian.AppendUint64(p.sample, uint64(ptr))
			p.sample = binary.LittleEndian.AppendUint64(p.sample, uint64(size))
			ptrAt := p.fields[j].offset
			if p.fields[j].Type == RGBImageType {
				ptrAt += 5
			}
			binary.LittleEndian.PutUint64(e.row[ptrAt:], uint64(ptr))
		}
		if !restart {
			break
		}
		if attempt == 1 {
			return fmt.Errorf("sample %d: its data of %d bytes does not fit in a page of %d bytes", e.i, total, p.pageSize)
		}
	}
	p.alloc = append(p.alloc, p.sample...)
	copy(p.meta[e.i*p.rowSize:], e.row)
	return nil
}

// newPage writes out the current page, if any, and starts the next one.
func (p *packer) newPage() error {
	if err := p.flush(); err != nil {
		return err
	}
	clear(p.page)
	p.pageIdx++
	p.off = 0
	return nil
}

// flush writes the current page, whole, as FFCV does.
func (p *packer) flush() error {
	if p.pageIdx < 0 {
		return nil
	}
	_, err := p.f.WriteAt(p.page, p.dataBase+p.pageIdx*p.pageSize)
	return err
}

// progressBar draws "name  42% |████▌     | 420/1000 [00:03<00:04, 140.0/s]".
type progressBar struct {
	w     io.Writer
	name  string
	total int
	start time.Time
	last  time.Time
	done  int
}

func newProgressBar(w io.Writer, name string, total int) *progressBar {
	b := &progressBar{w: w, name: name, total: total, start: time.Now()}
	b.draw()
	return b
}

func (b *progressBar) set(done int) {
	b.done = done
	if now := time.Now(); now.Sub(b.last) >= 100*time.Millisecond || done == b.total {
		b.last = now
		b.draw()
	}
}

func (b *progressBar) finish() {
	b.draw()
	fmt.Fprintln(b.w)
}

func (b *progressBar) draw() {
	const width = 30
	frac := 1.0
	if b.total > 0 {
		frac = float64(b.done) / float64(b.total)
	}
	filled := int(frac * width)
	bar := make([]rune, width)
	for i := range bar {
		bar[i] = ' '
		if i < filled {
			bar[i] = '█'
		}
	}
	elapsed := time.Since(b.start)
	rate := float64(b.done) / max(elapsed.Seconds(), 1e-9)
	eta := "?"
	if rate > 0 {
		eta = clock(time.Duration(float64(b.total-b.done) / rate * float64(time.Second)))
	}
	fmt.Fprintf(b.w, "\r%s %3.0f%% |%s| %d/%d [%s<%s, %.1f samples/s]", b.name, 100*frac, string(bar), b.done, b.total, clock(elapsed), eta, rate)
}

func clock(d time.Duration) string {
	s := int(d.Round(time.Second).Seconds())
	if s >= 3600 {
		return fmt.Sprintf("%d:%02d:%02d", s/3600, s/60%60, s%60)
	}
	return fmt.Sprintf("%02d:%02d", s/60, s%60)
}
