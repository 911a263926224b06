package beton

import (
	"bytes"
	"context"
	"encoding/binary"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// memFile is an in-memory file.
type memFile struct{ *bytes.Reader }

func (memFile) Close() error { return nil }

// openBytes opens b as if it were a file, from a "mapping" of b or through
// the process cache.
func openBytes(b []byte, mode CacheMode) (*Reader, error) {
	var mapped []byte
	if mode == MMap {
		mapped = b
	}
	return open(memFile{bytes.NewReader(b)}, int64(len(b)), mapped, nil, "f", ReadOptions{Cache: mode, CacheBytes: 1, PrefetchWorkers: 1})
}

func TestOpenRejectsCorruptFiles(t *testing.T) {
	t.Parallel()
	raw, err := os.ReadFile(filepath.Join(testdata, "raw_all_fields.beton"))
	if err != nil {
		t.Fatal(err)
	}
	jpg, err := os.ReadFile(filepath.Join(testdata, "jpeg_q90_max256.beton"))
	if err != nil {
		t.Fatal(err)
	}
	// Two samples of 3000 bytes in two 4 KiB pages.
	path := filepath.Join(t.TempDir(), "two.beton")
	src := FuncSource(2, func(i int, out []any) error { out[0] = make([]byte, 3000); return nil })
	if err := write(context.Background(), path, []NamedField{{"b", BytesField{}}}, src, WriterOptions{PageSize: 4096}, 4096); err != nil {
		t.Fatal(err)
	}
	twoPages, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	le := binary.LittleEndian
	const (
		metaStart = HeaderSize + 6*DescriptorSize // of raw_all_fields
		rowSize   = 72
		allocPtr  = 4 << 20
	)
	edit := func(b []byte, f func(b []byte)) []byte {
		c := bytes.Clone(b)
		f(c)
		return c
	}
	desc := func(i int) int { return HeaderSize + i*DescriptorSize }
	for _, c := range []struct {
		name string
		b    []byte
		want string
	}{
		{"empty", nil, "file of 0 bytes is shorter than the 24-byte header"},
		{"short header", raw[:10], "file of 10 bytes is shorter than the 24-byte header"},
		{"version", edit(raw, func(b []byte) { b[0] = 1 }), "format version 1, want 2"},
		{"no fields", edit(raw, func(b []byte) { le.PutUint16(b[2:], 0) }), "no fields"},
		{"page size", edit(raw, func(b []byte) { le.PutUint32(b[4:], 3<<20) }), "page size 3145728 is not a power of two"},
		{"descriptors", raw[:HeaderSize+100], "6 field descriptors end at 6270 beyond file size 124"},
		{"many fields", edit(raw, func(b []byte) { le.PutUint16(b[2:], 60000) }), "60000 field descriptors end at"},
		{"samples", edit(raw, func(b []byte) { le.PutUint64(b[8:], 1<<40) }), "1099511627776 samples of 72-byte metadata exceed file size"},
		{"table beyond", edit(raw, func(b []byte) { le.PutUint64(b[16:], 1<<30) }), "allocation table at 1073741824 beyond file size 4200448"},
		{"table in metadata", edit(raw, func(b []byte) { le.PutUint64(b[16:], 7000) }), "allocation table at 7000 inside the metadata table [6270, 10878)"},
		{"table entries", raw[:len(raw)-1], "allocation table of 6143 bytes is not a whole number of 24-byte entries"},
		{"truncated data", raw[:allocPtr-1], "allocation table at 4194304 beyond file size 4194303"},
		{"type id", edit(raw, func(b []byte) { b[desc(2)] = 7 }), `field 2 "weight": unknown type id 7`},
		{"custom", edit(raw, func(b []byte) { b[desc(2)] = 255 }), `field 2 "weight": custom fields have no known metadata layout`},
		{"dtype length", edit(raw, func(b []byte) { le.PutUint64(b[desc(3)+17+256:], 0) }), `field 3 "vec": dtype description length 0`},
		{"dtype json", edit(raw, func(b []byte) { b[desc(3)+17+264] = '{' }), `field 3 "vec": dtype description`},
		{"dtype", edit(raw, func(b []byte) { copy(b[desc(3)+17+264:], `[["", "<q4"]]`) }), `dtype "<q4": not a numpy type string`},
		{"shape", edit(raw, func(b []byte) { le.PutUint64(b[desc(3)+17:], 1<<39) }), `field 3 "vec": shape [549755813888 4]: more than`},
		{"array too big", edit(raw, func(b []byte) { le.PutUint64(b[desc(3)+17:], 1<<20) }), "exceed the page size 2097152"},
		{"image args", edit(raw, func(b []byte) { copy(b[desc(0)+17:], `{"channels":2}`) }), "2 channels, want 1 or 3"},
		{"image mode", edit(raw, func(b []byte) { b[metaStart+3*rowSize] = 5 }), `sample 3 field "image": image mode 5, want 0 (JPEG) or 1 (raw)`},
		{"image size", edit(raw, func(b []byte) { le.PutUint16(b[metaStart+rowSize+1:], 30000) }), `sample 1 field "image": data [2100303, 4980303) outside the data region [2097152, 4194304)`},
		{"page crossing", edit(twoPages, func(b []byte) { le.PutUint64(b[HeaderSize+DescriptorSize+8:], 5000) }), `sample 0 field "b": data [4096, 9096) crosses a page boundary (page size 4096)`},
		{"bytes pointer", edit(raw, func(b []byte) { le.PutUint64(b[metaStart+40:], 100) }), `sample 0 field "blob": data [100, 101) outside the data region [2097152, 4194304)`},
		{"bytes size", edit(raw, func(b []byte) { le.PutUint64(b[metaStart+48:], 1<<63) }), `sample 0 field "blob": data size 9223372036854775808 out of range`},
		{"array pointer", edit(raw, func(b []byte) { le.PutUint64(b[metaStart+32:], allocPtr-8) }), `sample 0 field "vec": data [4194296, 4194344) outside the data region`},
		{"alloc sample", edit(raw, func(b []byte) { le.PutUint64(b[allocPtr:], 999) }), "allocation 0: sample 999, but the file has 64 samples"},
		{"alloc range", edit(raw, func(b []byte) { le.PutUint64(b[allocPtr+16:], 1<<62) }), "allocation 0 (sample 0): data [2097152, 4611686018429485056) outside the data region"},
		{"jpeg pointer", edit(jpg, func(b []byte) { le.PutUint64(b[HeaderSize+2*DescriptorSize+5:], 8<<20+1) }), `sample 0 field "image": JPEG image at 8388609 has no allocation table entry`},
	} {
		for _, mode := range []CacheMode{MMap, Process} {
			r, err := openBytes(c.b, mode)
			if err == nil {
				r.Close()
			}
			if err == nil || !strings.Contains(err.Error(), c.want) || !strings.HasPrefix(err.Error(), "beton: open f: ") {
				t.Errorf("%s (%v): err = %v, want %q", c.name, mode, err, c.want)
			}
		}
	}
}

// smallFiles writes files with 4 KiB pages holding every field type.
func smallFiles(t testing.TB) [][]byte {
	fields, src := roundTripSource(6)
	jpg := []NamedField{{"im", RGBImageField{Mode: WriteJPEG}}, {"l", IntField{}}}
	jsrc := FuncSource(3, func(i int, out []any) error {
		out[0], out[1] = testImage(8+i, 8, 3, i), i
		return nil
	})
	var files [][]byte
	for _, w := range []struct {
		fields []NamedField
		src    Source
	}{{fields, src}, {jpg, jsrc}} {
		path := filepath.Join(t.TempDir(), "s.beton")
		if err := write(context.Background(), path, w.fields, w.src, WriterOptions{PageSize: 4096}, 4096); err != nil {
			t.Fatal(err)
		}
		b, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		files = append(files, b)
	}
	return files
}

// readAll reads every field of up to 200 samples of r, checking what it
// can about each value.
func readAll(t *testing.T, r *Reader) {
	fields := r.Fields()
	n := min(r.NumSamples(), 200)
	var pages []int64
	for i := range n {
		for f, fi := range fields {
			switch fi.Type {
			case FloatType:
				r.Float(f, i)
			case IntType:
				r.Int(f, i)
			case RGBImageType:
				img, err := r.Image(f, i)
				if err != nil {
					t.Fatalf("sample %d field %d: %v", i, f, err)
				}
				if !img.JPEG && len(img.Data) != img.Width*img.Height*img.Channels {
					t.Fatalf("sample %d field %d: %d bytes for %dx%dx%d", i, f, len(img.Data), img.Width, img.Height, img.Channels)
				}
			case BytesType:
				if _, err := r.Bytes(f, i); err != nil {
					t.Fatalf("sample %d field %d: %v", i, f, err)
				}
			case JSONType:
				if _, err := r.JSON(f, i); err != nil {
					t.Fatalf("sample %d field %d: %v", i, f, err)
				}
			case NDArrayType, TorchTensorType:
				a, err := r.NDArray(f, i)
				if err != nil || len(a) != fi.ArrayBytes() {
					t.Fatalf("sample %d field %d: %d bytes (%v)", i, f, len(a), err)
				}
			}
		}
		p := r.Page(i)
		if p < -1 || p >= r.NumPages() {
			t.Fatalf("sample %d: page %d of %d", i, p, r.NumPages())
		}
		pages = append(pages, p)
	}
	r.Prefetch(pages)
}

func FuzzOpen(f *testing.F) {
	for _, b := range smallFiles(f) {
		f.Add(b)
		f.Add(b[:len(b)-AllocEntrySize])
	}
	raw, err := os.ReadFile(filepath.Join(testdata, "raw_all_fields.beton"))
	if err != nil {
		f.Fatal(err)
	}
	// FFCV's file, whole and truncated. Minimizing inputs of this size
	// takes long: fuzz with a short -fuzzminimizetime (say 2s).
	for _, n := range []int{3, HeaderSize, HeaderSize + 6*DescriptorSize, 10000, 10878} {
		f.Add(raw[:n])
	}
	f.Add(raw)
	f.Add(raw[:len(raw)-1])
	f.Fuzz(func(t *testing.T, b []byte) {
		for _, mode := range []CacheMode{MMap, Process} {
			r, err := openBytes(b, mode)
			if err != nil {
				if !strings.HasPrefix(err.Error(), "beton: open f: ") {
					t.Fatalf("error %q does not name the file", err)
				}
				continue
			}
			readAll(t, r)
			if err := r.Close(); err != nil {
				t.Fatal(err)
			}
		}
	})
}

func TestSmallFilesReadBack(t *testing.T) {
	t.Parallel()
	for _, b := range smallFiles(t) {
		for _, mode := range []CacheMode{MMap, Process} {
			r, err := openBytes(b, mode)
			if err != nil {
				t.Fatal(err)
			}
			if r.PageSize() != 4096 || r.NumPages() < 2 {
				t.Errorf("page size %d, %d pages", r.PageSize(), r.NumPages())
			}
			readAll(t, r)
			r.Close()
		}
	}
}
