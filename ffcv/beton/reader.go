package beton

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math"
	"math/bits"
	"os"
	"slices"
	"sync/atomic"
)

// CacheMode selects how a Reader gets at the data pages.
type CacheMode int

const (
	// MMap maps the file into memory and leaves caching to the operating
	// system's page cache.
	MMap CacheMode = iota
	// Process reads whole pages with pread into a bounded cache owned by
	// the Reader, and loads pages named by Prefetch in the background. It
	// suits files larger than memory and file systems where mmap is slow.
	Process
)

func (m CacheMode) String() string {
	switch m {
	case MMap:
		return "mmap"
	case Process:
		return "process"
	}
	return fmt.Sprintf("CacheMode(%d)", int(m))
}

// ReadOptions configures Open. The zero value maps the file.
type ReadOptions struct {
	Cache CacheMode
	// CacheBytes bounds the pages the Process cache keeps (default 1 GiB;
	// at least two pages are kept). Slices handed out stay valid after
	// their page leaves the cache.
	CacheBytes int64
	// PrefetchWorkers is the number of goroutines loading prefetched pages
	// in Process mode (default 4).
	PrefetchWorkers int
}

// Reader reads a .beton file. Its methods are safe for concurrent use.
// Accessors panic, as for an index out of range, when given a field index,
// sample index or field type that does not fit the file; the file's own
// consistency is checked by Open, so they fail only on I/O errors.
type Reader struct {
	path     string
	h        header
	fields   []FieldInfo
	rowSize  int
	meta     []byte // the metadata table, numSamples·rowSize bytes
	dataBase int64  // start of the data region (page-aligned)
	dataEnd  int64  // start of the allocation table
	pageSize int64

	// The allocation table sorted by pointer.
	allocPtr, allocSize []int64
	allocSample         []int64

	samplePage []uint32 // 1 + page of each sample's first non-empty allocation, 0 if none

	src    pageSource
	closed atomic.Bool
}

// pageSource gives access to byte ranges of the data region; a range never
// crosses a page boundary.
type pageSource interface {
	slice(off, n int64) ([]byte, error)
	prefetch(pages []int64)
	close() error
}

// Open opens the .beton file at path and checks the consistency of its
// header, field descriptors, metadata and allocation table.
func Open(path string, opt ReadOptions) (*Reader, error) {
	if opt.Cache != MMap && opt.Cache != Process {
		return nil, fmt.Errorf("beton: open %s: unknown cache mode %d", path, int(opt.Cache))
	}
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("beton: open %s: %w", path, err)
	}
	st, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("beton: open %s: %w", path, err)
	}
	var mapped []byte
	if opt.Cache == MMap {
		if mapped, err = mmapFile(f, st.Size()); err != nil {
			f.Close()
			return nil, fmt.Errorf("beton: open %s: mmap: %w", path, err)
		}
	}
	var release func() error
	if mapped != nil {
		release = func() error { return munmap(mapped) }
	}
	r, err := open(f, st.Size(), mapped, release, path, opt)
	if err != nil {
		if release != nil {
			release()
		}
		f.Close()
		return nil, err
	}
	return r, nil
}

// file is what a Reader needs of an open file.
type file interface {
	io.ReaderAt
	io.Closer
}

// open reads and checks the file's tables. With mapped (the whole file in
// memory; release, if not nil, unmaps it) the data is served from the
// mapping, otherwise from a process cache reading f.
func open(f file, size int64, mapped []byte, release func() error, path string, opt ReadOptions) (*Reader, error) {
	fail := func(format string, args ...any) error {
		return fmt.Errorf("beton: open %s: %s", path, fmt.Sprintf(format, args...))
	}
	r := &Reader{path: path}
	// ReadAt over the mapping, or over the file where there is none.
	var ra io.ReaderAt = f
	if mapped != nil {
		ra = bytes.NewReader(mapped)
	}
	readAt := func(what string, off, n int64) ([]byte, error) {
		b := make([]byte, n)
		if n == 0 {
			return b, nil
		}
		if _, err := ra.ReadAt(b, off); err != nil {
			return nil, fmt.Errorf("beton: open %s: read %s: %w", path, what, err)
		}
		return b, nil
	}

	if size < HeaderSize {
		return nil, fail("file of %d bytes is shorter than the %d-byte header", size, HeaderSize)
	}
	hb, err := readAt("header", 0, HeaderSize)
	if err != nil {
		return nil, err
	}
	h := parseHeader(hb)
	r.h = h
	switch {
	case h.version != Version:
		return nil, fail("format version %d, want %d", h.version, Version)
	case h.numFields == 0:
		return nil, fail("header: %v", errNoFields)
	case h.pageSize < 4096 || bits.OnesCount32(h.pageSize) != 1:
		return nil, fail("page size %d is not a power of two ≥ 4096", h.pageSize)
	}
	r.pageSize = int64(h.pageSize)
	descEnd := int64(HeaderSize) + int64(h.numFields)*DescriptorSize
	if descEnd > size {
		return nil, fail("%d field descriptors end at %d beyond file size %d", h.numFields, descEnd, size)
	}
	db, err := readAt("field descriptors", HeaderSize, descEnd-HeaderSize)
	if err != nil {
		return nil, err
	}
	r.fields = make([]FieldInfo, h.numFields)
	for i := range r.fields {
		d := db[i*DescriptorSize : (i+1)*DescriptorSize]
		fi := &r.fields[i]
		fi.Type = FieldType(d[0])
		name := d[1 : 1+NameSize]
		if j := bytes.IndexByte(name, 0); j >= 0 {
			name = name[:j]
		}
		fi.Name = string(name)
		args := d[1+NameSize:]
		switch fi.Type {
		case FloatType, IntType, BytesType, JSONType:
		case RGBImageType:
			if fi.Channels, err = parseImageArgs(args); err != nil {
				return nil, fail("field %d %q: %v", i, fi.Name, err)
			}
		case NDArrayType, TorchTensorType:
			fi.DType, fi.Shape, _, fi.arrayLen, err = parseNDArrayArgs(args)
			if err != nil {
				return nil, fail("field %d %q: %v", i, fi.Name, err)
			}
			if int64(fi.arrayLen) > r.pageSize {
				return nil, fail("field %d %q: %s%v arrays of %d bytes exceed the page size %d", i, fi.Name, fi.DType, fi.Shape, fi.arrayLen, r.pageSize)
			}
		case CustomType:
			return nil, fail("field %d %q: custom fields have no known metadata layout", i, fi.Name)
		default:
			return nil, fail("field %d %q: unknown type id %d", i, fi.Name, d[0])
		}
	}
	r.rowSize = layoutRow(r.fields)

	if h.numSamples > uint64(size)/uint64(r.rowSize) {
		return nil, fail("%d samples of %d-byte metadata exceed file size %d", h.numSamples, r.rowSize, size)
	}
	metaEnd := descEnd + int64(h.numSamples)*int64(r.rowSize)
	switch {
	case h.allocPtr > uint64(size):
		return nil, fail("allocation table at %d beyond file size %d", h.allocPtr, size)
	case h.allocPtr < uint64(metaEnd):
		return nil, fail("allocation table at %d inside the metadata table [%d, %d)", h.allocPtr, descEnd, metaEnd)
	case (uint64(size)-h.allocPtr)%AllocEntrySize != 0:
		return nil, fail("allocation table of %d bytes is not a whole number of %d-byte entries", uint64(size)-h.allocPtr, AllocEntrySize)
	}
	r.dataEnd = int64(h.allocPtr)
	r.dataBase = (metaEnd + r.pageSize - 1) / r.pageSize * r.pageSize
	if r.dataEnd/r.pageSize >= math.MaxUint32 {
		return nil, fail("%d pages of %d bytes: too many", r.dataEnd/r.pageSize, r.pageSize)
	}
	if r.meta, err = readAt("metadata table", descEnd, metaEnd-descEnd); err != nil {
		return nil, err
	}
	at, err := readAt("allocation table", r.dataEnd, size-r.dataEnd)
	if err != nil {
		return nil, err
	}
	if err := r.loadAllocTable(at); err != nil {
		return nil, fail("%v", err)
	}
	if err := r.checkSamples(); err != nil {
		return nil, fail("%v", err)
	}

	if mapped != nil {
		r.src = &mmapSource{f: f, data: mapped, pageSize: r.pageSize, release: release}
	} else {
		r.src = newProcessCache(f, r.pageSize, r.dataEnd, opt)
	}
	return r, nil
}

// loadAllocTable parses and checks the allocation table and sorts it by
// pointer.
func (r *Reader) loadAllocTable(b []byte) error {
	n := len(b) / AllocEntrySize
	type entry struct{ sample, ptr, size int64 }
	entries := make([]entry, n)
	le := binary.LittleEndian
	for i := range entries {
		e := b[i*AllocEntrySize:]
		s, p, z := le.Uint64(e), le.Uint64(e[8:]), le.Uint64(e[16:])
		if s >= r.h.numSamples {
			return fmt.Errorf("allocation %d: sample %d, but the file has %d samples", i, s, r.h.numSamples)
		}
		if err := r.checkRange(int64(p), z); err != nil {
			return fmt.Errorf("allocation %d (sample %d): %v", i, s, err)
		}
		entries[i] = entry{int64(s), int64(p), int64(z)}
	}
	slices.SortStableFunc(entries, func(a, b entry) int {
		switch {
		case a.ptr < b.ptr:
			return -1
		case a.ptr > b.ptr:
			return 1
		}
		return 0
	})
	r.allocPtr = make([]int64, n)
	r.allocSize = make([]int64, n)
	r.allocSample = make([]int64, n)
	for i, e := range entries {
		r.allocPtr[i], r.allocSize[i], r.allocSample[i] = e.ptr, e.size, e.sample
	}
	return nil
}

// checkRange checks that n bytes at ptr lie in the data region within one
// page. Empty ranges are not checked: FFCV gives them arbitrary pointers.
func (r *Reader) checkRange(ptr int64, n uint64) error {
	if n == 0 {
		return nil
	}
	if ptr < r.dataBase || ptr > r.dataEnd || n > uint64(r.dataEnd-ptr) {
		return fmt.Errorf("data [%d, %d) outside the data region [%d, %d)", uint64(ptr), uint64(ptr)+n, r.dataBase, r.dataEnd)
	}
	if ptr/r.pageSize != (ptr+int64(n)-1)/r.pageSize {
		return fmt.Errorf("data [%d, %d) crosses a page boundary (page size %d)", ptr, ptr+int64(n), r.pageSize)
	}
	return nil
}

// allocSizeAt returns the size of the allocation at ptr, preferring one
// made for sample, as FFCV finds JPEG sizes.
func (r *Reader) allocSizeAt(ptr, sample int64) (int64, bool) {
	i, found := slices.BinarySearch(r.allocPtr, ptr)
	if !found {
		return 0, false
	}
	for j := i; j < len(r.allocPtr) && r.allocPtr[j] == ptr; j++ {
		if r.allocSample[j] == sample {
			return r.allocSize[j], true
		}
	}
	return r.allocSize[i], true
}

// checkSamples checks every sample's data references and records the page
// of each sample.
func (r *Reader) checkSamples() error {
	var vars []int
	for f := range r.fields {
		if r.fields[f].Type.variable() {
			vars = append(vars, f)
		}
	}
	if len(vars) == 0 {
		return nil
	}
	r.samplePage = make([]uint32, r.h.numSamples)
	for i := range int(r.h.numSamples) {
		for _, f := range vars {
			ptr, n, err := r.locate(f, i)
			if err == nil {
				err = r.checkRange(ptr, uint64(n))
			}
			if err != nil {
				return fmt.Errorf("sample %d field %q: %v", i, r.fields[f].Name, err)
			}
			if n > 0 && r.samplePage[i] == 0 {
				r.samplePage[i] = uint32(ptr/r.pageSize) + 1
			}
		}
	}
	return nil
}

func (t FieldType) variable() bool {
	switch t {
	case RGBImageType, BytesType, JSONType, NDArrayType, TorchTensorType:
		return true
	}
	return false
}

// row returns field f's part of sample i's metadata row.
func (r *Reader) row(f, i int) []byte {
	if uint(i) >= uint(r.h.numSamples) {
		panic(fmt.Sprintf("beton: sample %d out of range [0, %d)", i, r.h.numSamples))
	}
	off := i*r.rowSize + r.fields[f].offset
	return r.meta[off : off+r.fields[f].Type.metaSize()]
}

// locate returns the pointer and size of sample i's data for field f.
func (r *Reader) locate(f, i int) (ptr, n int64, err error) {
	m := r.row(f, i)
	le := binary.LittleEndian
	fi := &r.fields[f]
	switch fi.Type {
	case RGBImageType:
		ptr = int64(le.Uint64(m[5:]))
		w, h := int64(le.Uint16(m[1:])), int64(le.Uint16(m[3:]))
		switch m[0] {
		case 1:
			return ptr, w * h * int64(fi.Channels), nil
		case 0:
			n, ok := r.allocSizeAt(ptr, int64(i))
			if !ok {
				return 0, 0, fmt.Errorf("JPEG image at %d has no allocation table entry", ptr)
			}
			return ptr, n, nil
		}
		return 0, 0, fmt.Errorf("image mode %d, want 0 (JPEG) or 1 (raw)", m[0])
	case BytesType, JSONType:
		p, z := le.Uint64(m), le.Uint64(m[8:])
		if z > math.MaxInt64 {
			return 0, 0, fmt.Errorf("data size %d out of range", z)
		}
		return int64(p), int64(z), nil
	case NDArrayType, TorchTensorType:
		return int64(le.Uint64(m)), int64(fi.arrayLen), nil
	}
	panic(fmt.Sprintf("beton: field %q of type %v has no data", fi.Name, fi.Type))
}

// NumSamples returns the number of samples.
func (r *Reader) NumSamples() int { return int(r.h.numSamples) }

// Fields returns the fields in file order.
func (r *Reader) Fields() []FieldInfo {
	out := slices.Clone(r.fields)
	for i := range out {
		out[i].Shape = slices.Clone(out[i].Shape)
	}
	return out
}

// FieldIndex returns the index of the field called name.
func (r *Reader) FieldIndex(name string) (int, bool) {
	for i := range r.fields {
		if r.fields[i].Name == name {
			return i, true
		}
	}
	return -1, false
}

// PageSize returns the page size in bytes.
func (r *Reader) PageSize() int { return int(r.pageSize) }

// NumPages returns one more than the highest page index holding data:
// Page returns values in [0, NumPages()).
func (r *Reader) NumPages() int64 { return (r.dataEnd + r.pageSize - 1) / r.pageSize }

// Path returns the path the Reader was opened with.
func (r *Reader) Path() string { return r.path }

func (r *Reader) field(f int, want ...FieldType) *FieldInfo {
	if uint(f) >= uint(len(r.fields)) {
		panic(fmt.Sprintf("beton: field %d out of range [0, %d)", f, len(r.fields)))
	}
	fi := &r.fields[f]
	if !slices.Contains(want, fi.Type) {
		panic(fmt.Sprintf("beton: field %q is %v, not %v", fi.Name, fi.Type, want[0]))
	}
	return fi
}

// Float returns the value of float field f for sample i.
func (r *Reader) Float(f, i int) float64 {
	r.field(f, FloatType)
	return math.Float64frombits(binary.LittleEndian.Uint64(r.row(f, i)))
}

// Int returns the value of int field f for sample i.
func (r *Reader) Int(f, i int) int64 {
	r.field(f, IntType)
	return int64(binary.LittleEndian.Uint64(r.row(f, i)))
}

// ImageRef is one stored image. Data holds the JPEG file or the raw pixels
// (Height rows of Width·Channels bytes); it aliases the file mapping or a
// cached page: read-only, valid until the Reader is closed.
type ImageRef struct {
	JPEG                    bool
	Width, Height, Channels int
	Data                    []byte
}

// ImageInfo returns image field f of sample i without its data. It does no
// I/O.
func (r *Reader) ImageInfo(f, i int) ImageRef {
	fi := r.field(f, RGBImageType)
	m := r.row(f, i)
	le := binary.LittleEndian
	return ImageRef{JPEG: m[0] == 0, Width: int(le.Uint16(m[1:])), Height: int(le.Uint16(m[3:])), Channels: fi.Channels}
}

// Image returns image field f of sample i.
func (r *Reader) Image(f, i int) (ImageRef, error) {
	ref := r.ImageInfo(f, i)
	data, err := r.data(f, i)
	ref.Data = data
	return ref, err
}

// Bytes returns bytes field f of sample i (aliasing the file like
// ImageRef.Data).
func (r *Reader) Bytes(f, i int) ([]byte, error) {
	r.field(f, BytesType)
	return r.data(f, i)
}

// NDArray returns the raw little-endian elements of ndarray (or torch
// tensor) field f of sample i in C order (aliasing the file like
// ImageRef.Data).
func (r *Reader) NDArray(f, i int) ([]byte, error) {
	r.field(f, NDArrayType, TorchTensorType)
	return r.data(f, i)
}

// JSON returns the JSON text of JSON field f of sample i, without the NUL
// byte that ends it in the file (aliasing the file like ImageRef.Data).
func (r *Reader) JSON(f, i int) ([]byte, error) {
	r.field(f, JSONType)
	b, err := r.data(f, i)
	if j := bytes.IndexByte(b, 0); j >= 0 {
		b = b[:j]
	}
	return b, err
}

// DataSize returns the size in bytes of the stored data of variable-size
// field f (image, bytes, JSON with its NUL, ndarray) for sample i. It does
// no I/O.
func (r *Reader) DataSize(f, i int) int {
	r.field(f, RGBImageType, BytesType, JSONType, NDArrayType, TorchTensorType)
	_, n, _ := r.locate(f, i)
	return int(n)
}

func (r *Reader) data(f, i int) ([]byte, error) {
	if r.closed.Load() {
		return nil, fmt.Errorf("beton: %s: read after Close", r.path)
	}
	ptr, n, err := r.locate(f, i)
	if err == nil {
		err = r.checkRange(ptr, uint64(n))
	}
	if err != nil {
		return nil, fmt.Errorf("beton: %s: sample %d field %q: %v", r.path, i, r.fields[f].Name, err)
	}
	if n == 0 {
		return []byte{}, nil
	}
	b, err := r.src.slice(ptr, n)
	if err != nil {
		return nil, fmt.Errorf("beton: %s: sample %d field %q: %w", r.path, i, r.fields[f].Name, err)
	}
	return b, nil
}

// Page returns the index of the page holding sample i's data (pages are
// counted from the start of the file, in units of PageSize), or -1 if the
// sample has none.
func (r *Reader) Page(i int) int64 {
	if uint(i) >= uint(r.h.numSamples) {
		panic(fmt.Sprintf("beton: sample %d out of range [0, %d)", i, r.h.numSamples))
	}
	if r.samplePage == nil {
		return -1
	}
	return int64(r.samplePage[i]) - 1
}

// Prefetch asks for pages to be loaded ahead of use: in Process mode
// background goroutines read them into the cache; with MMap the operating
// system is advised to read them ahead. It never blocks on I/O, and it is a
// hint: requests beyond what the workers can queue are dropped.
func (r *Reader) Prefetch(pages []int64) {
	if r.closed.Load() {
		return
	}
	r.src.prefetch(pages)
}

// Close releases the file. Slices returned by the Reader must not be used
// afterwards.
func (r *Reader) Close() error {
	if r.closed.Swap(true) {
		return errors.New("beton: " + r.path + ": already closed")
	}
	return r.src.close()
}
