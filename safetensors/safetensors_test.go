package safetensors_test

import (
	"bytes"
	"encoding/binary"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/flockml/flock/safetensors"
)

var allDTypes = []safetensors.DType{
	safetensors.BOOL, safetensors.U8, safetensors.I8, safetensors.F8E5M2, safetensors.F8E4M3,
	safetensors.I16, safetensors.U16, safetensors.F16, safetensors.BF16, safetensors.I32,
	safetensors.U32, safetensors.F32, safetensors.F64, safetensors.I64, safetensors.U64,
}

// randomTensor returns a tensor of dt and shape filled with random bytes
// (0 or 1 for BOOL).
func randomTensor(r *rand.Rand, dt safetensors.DType, shape ...int) safetensors.Tensor {
	n := dt.Size()
	for _, d := range shape {
		n *= d
	}
	data := make([]byte, n)
	for i := range data {
		data[i] = byte(r.UintN(256))
		if dt == safetensors.BOOL {
			data[i] &= 1
		}
	}
	return safetensors.Tensor{DType: dt, Shape: shape, Data: data}
}

// build assembles a file from a header text and a data region.
func build(header string, data []byte) []byte {
	b := binary.LittleEndian.AppendUint64(nil, uint64(len(header)))
	b = append(b, header...)
	return append(b, data...)
}

func equalFiles(t *testing.T, got *safetensors.File, tensors map[string]safetensors.Tensor, meta map[string]string) {
	t.Helper()
	if len(got.Tensors) != len(tensors) {
		t.Fatalf("got %d tensors, want %d", len(got.Tensors), len(tensors))
	}
	for name, want := range tensors {
		g, ok := got.Tensors[name]
		if !ok {
			t.Fatalf("tensor %q missing", name)
		}
		if g.DType != want.DType || !reflect.DeepEqual(append([]int{}, g.Shape...), append([]int{}, want.Shape...)) || !bytes.Equal(g.Data, want.Data) {
			t.Fatalf("tensor %q: got %s%v %d bytes, want %s%v %d bytes", name, g.DType, g.Shape, len(g.Data), want.DType, want.Shape, len(want.Data))
		}
	}
	if len(got.Metadata) != len(meta) || (len(meta) > 0 && !reflect.DeepEqual(got.Metadata, meta)) {
		t.Fatalf("metadata %v, want %v", got.Metadata, meta)
	}
}

func TestRoundTripEveryDType(t *testing.T) {
	t.Parallel()
	r := rand.New(rand.NewPCG(1, 2))
	shapes := [][]int{{}, {0}, {1}, {7}, {2, 3}, {3, 0, 2}, {2, 1, 3, 2}}
	for _, dt := range allDTypes {
		t.Run(string(dt), func(t *testing.T) {
			tensors := map[string]safetensors.Tensor{}
			for i, s := range shapes {
				tensors[string(rune('a'+i))+".w"] = randomTensor(r, dt, s...)
			}
			meta := map[string]string{"format": "pt", "dtype": string(dt), "quote\"\n": "\x01\\é"}
			b, err := safetensors.Marshal(tensors, meta)
			if err != nil {
				t.Fatal(err)
			}
			if n := binary.LittleEndian.Uint64(b); n%8 != 0 {
				t.Errorf("header length %d is not a multiple of 8", n)
			}
			f, err := safetensors.Parse(b)
			if err != nil {
				t.Fatal(err)
			}
			equalFiles(t, f, tensors, meta)
			g, err := safetensors.Read(bytes.NewReader(b), int64(len(b)))
			if err != nil {
				t.Fatal(err)
			}
			equalFiles(t, g, tensors, meta)
		})
	}
}

func TestReferenceEncoding(t *testing.T) {
	t.Parallel()
	f32 := func(vs ...float32) []byte {
		var b []byte
		for _, v := range vs {
			b = binary.LittleEndian.AppendUint32(b, math.Float32bits(v))
		}
		return b
	}
	tests := []struct {
		name    string
		tensors map[string]safetensors.Tensor
		meta    map[string]string
		want    []byte
	}{
		{
			name: "empty",
			want: build("{}      ", nil),
		},
		{
			name: "metadata only",
			meta: map[string]string{"framework": "pt"},
			want: build(`{"__metadata__":{"framework":"pt"}}     `, nil),
		},
		{
			name:    "one tensor, no padding",
			tensors: map[string]safetensors.Tensor{"attn.0": {DType: safetensors.F32, Shape: []int{1, 2, 3}, Data: f32(0, 1, 2, 3, 4, 5)}},
			want:    build(`{"attn.0":{"dtype":"F32","shape":[1,2,3],"data_offsets":[0,24]}}`, f32(0, 1, 2, 3, 4, 5)),
		},
		{
			name:    "one tensor, padded",
			tensors: map[string]safetensors.Tensor{"attn0": {DType: safetensors.F32, Shape: []int{1, 1, 2, 3}, Data: f32(0, 1, 2, 3, 4, 5)}},
			want:    build(`{"attn0":{"dtype":"F32","shape":[1,1,2,3],"data_offsets":[0,24]}}       `, f32(0, 1, 2, 3, 4, 5)),
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := safetensors.Marshal(tc.tensors, tc.meta)
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(got, tc.want) {
				t.Errorf("got\n%q\nwant\n%q", got, tc.want)
			}
		})
	}
}

func TestWriteOrderAndDeterminism(t *testing.T) {
	t.Parallel()
	r := rand.New(rand.NewPCG(3, 4))
	tensors := map[string]safetensors.Tensor{
		"d":    randomTensor(r, safetensors.BOOL, 3),
		"c":    randomTensor(r, safetensors.U8, 5),
		"a":    randomTensor(r, safetensors.F32, 2, 2),
		"z":    randomTensor(r, safetensors.F64, 1),
		"b":    randomTensor(r, safetensors.I64, 2),
		"aa":   randomTensor(r, safetensors.F32, 3),
		"h":    randomTensor(r, safetensors.BF16, 3),
		"g":    randomTensor(r, safetensors.F16, 1),
		"<&>":  randomTensor(r, safetensors.I32, 1),
		"\x7f": randomTensor(r, safetensors.U64, 0),
	}
	meta := map[string]string{"b": "2", "a": "1", "c": "3"}
	first, err := safetensors.Marshal(tensors, meta)
	if err != nil {
		t.Fatal(err)
	}
	for range 20 {
		again, err := safetensors.Marshal(tensors, meta)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(first, again) {
			t.Fatal("two encodings of the same tensors differ")
		}
	}
	order := []string{"\x7f", "b", "z", "a", "aa", "<&>", "h", "g", "c", "d"}
	var want []byte
	for _, n := range order {
		want = append(want, tensors[n].Data...)
	}
	if !bytes.HasSuffix(first, want) || len(first)-len(want) != 8+int(binary.LittleEndian.Uint64(first)) {
		t.Errorf("data region is not in the order %q", order)
	}
	hdr := string(first[8 : 8+binary.LittleEndian.Uint64(first)])
	if !strings.HasPrefix(hdr, "{\"__metadata__\":{\"a\":\"1\",\"b\":\"2\",\"c\":\"3\"},\"\x7f\":{\"dtype\":\"U64\",\"shape\":[0],\"data_offsets\":[0,0]},\"b\":{\"dtype\":\"I64\"") {
		t.Errorf("header starts %q", hdr[:min(60, len(hdr))])
	}
	if !strings.Contains(hdr, `"<&>":{"dtype":"I32"`) {
		t.Errorf("header escapes names differently from the reference: %s", hdr)
	}
}

func TestParseErrors(t *testing.T) {
	t.Parallel()
	valid := `{"w":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}}`
	eight := make([]byte, 8)
	tests := []struct {
		name string
		file []byte
		want string
	}{
		{"empty file", nil, "shorter than the 8-byte header length"},
		{"short file", []byte{1, 2, 3}, "shorter than the 8-byte header length"},
		{"header too large", binary.LittleEndian.AppendUint64(nil, safetensors.MaxHeaderSize+1), "exceeds the limit"},
		{"header length overflow", binary.LittleEndian.AppendUint64(nil, 1<<63), "exceeds the limit"},
		{"header past end", build(valid, eight)[:20], "exceeds the 12 bytes that follow it"},
		{"empty header", build("", nil), "does not start with '{'"},
		{"not an object", build(`["w"]`, nil), "does not start with '{'"},
		{"leading space", build(` {}`, nil), "does not start with '{'"},
		{"invalid utf-8", build("{\"\xff\":1}", nil), "not valid UTF-8"},
		{"syntax error", build(`{"w":}`, nil), "invalid JSON"},
		{"unterminated", build(`{"w":{"dtype":"F32"`, nil), "invalid JSON"},
		{"trailing object", build(`{}{}`, nil), "invalid JSON"},
		{"trailing garbage", build(`{} x`, nil), "invalid JSON"},
		{"duplicate tensor", build(`{"w":{"dtype":"U8","shape":[1],"data_offsets":[0,1]},"w":{"dtype":"U8","shape":[1],"data_offsets":[1,2]}}`, []byte{1, 2}), `key "w" appears twice`},
		{"duplicate metadata", build(`{"__metadata__":{},"__metadata__":{}}`, nil), "appears twice"},
		{"metadata not strings", build(`{"__metadata__":{"a":1}}`, nil), "must map strings to strings"},
		{"metadata not object", build(`{"__metadata__":"a"}`, nil), "must map strings to strings"},
		{"info not object", build(`{"w":[1,2]}`, nil), `tensor "w": json`},
		{"missing dtype", build(`{"w":{"shape":[2],"data_offsets":[0,8]}}`, eight), `tensor "w": missing dtype`},
		{"null dtype", build(`{"w":{"dtype":null,"shape":[2],"data_offsets":[0,8]}}`, eight), `tensor "w": missing dtype`},
		{"missing shape", build(`{"w":{"dtype":"F32","data_offsets":[0,8]}}`, eight), `tensor "w": missing shape`},
		{"missing offsets", build(`{"w":{"dtype":"F32","shape":[2]}}`, eight), `tensor "w": missing data_offsets`},
		{"unknown dtype", build(`{"w":{"dtype":"F33","shape":[2],"data_offsets":[0,8]}}`, eight), `unknown dtype "F33"`},
		{"lower-case dtype", build(`{"w":{"dtype":"f32","shape":[2],"data_offsets":[0,8]}}`, eight), `unknown dtype "f32"`},
		{"dtype not string", build(`{"w":{"dtype":4,"shape":[2],"data_offsets":[0,8]}}`, eight), `tensor "w": json`},
		{"negative extent", build(`{"w":{"dtype":"F32","shape":[-2],"data_offsets":[0,8]}}`, eight), "negative extent -2"},
		{"fractional extent", build(`{"w":{"dtype":"F32","shape":[2.5],"data_offsets":[0,8]}}`, eight), `tensor "w": json`},
		{"huge extent", build(`{"w":{"dtype":"F32","shape":[99999999999999999999],"data_offsets":[0,8]}}`, eight), `tensor "w": json`},
		{"element overflow", build(`{"w":{"dtype":"U8","shape":[4294967296,4294967296],"data_offsets":[0,0]}}`, nil), "too many elements"},
		{"byte overflow", build(`{"w":{"dtype":"F64","shape":[2305843009213693952],"data_offsets":[0,0]}}`, nil), "too many bytes"},
		{"one offset", build(`{"w":{"dtype":"F32","shape":[2],"data_offsets":[8]}}`, eight), "must be [begin, end]"},
		{"three offsets", build(`{"w":{"dtype":"F32","shape":[2],"data_offsets":[0,8,8]}}`, eight), "must be [begin, end]"},
		{"reversed offsets", build(`{"w":{"dtype":"F32","shape":[0],"data_offsets":[8,0]}}`, eight), "not an ordered pair"},
		{"negative offset", build(`{"w":{"dtype":"F32","shape":[2],"data_offsets":[-8,0]}}`, eight), "not an ordered pair"},
		{"size mismatch", build(`{"w":{"dtype":"F32","shape":[3],"data_offsets":[0,8]}}`, eight), "span 8 bytes but F32[3] needs 12"},
		{"gap at start", build(`{"w":{"dtype":"F32","shape":[1],"data_offsets":[4,8]}}`, eight), "leave bytes [0, 4) unused"},
		{"gap between", build(`{"a":{"dtype":"U8","shape":[2],"data_offsets":[0,2]},"b":{"dtype":"U8","shape":[2],"data_offsets":[4,6]}}`, eight[:6]), `tensor "b": data_offsets [4, 6] leave bytes [2, 4) unused`},
		{"overlap", build(`{"a":{"dtype":"U8","shape":[4],"data_offsets":[0,4]},"b":{"dtype":"U8","shape":[4],"data_offsets":[2,6]}}`, eight[:6]), `tensor "b": data_offsets [2, 6] overlap tensor "a"`},
		{"same range", build(`{"a":{"dtype":"U8","shape":[4],"data_offsets":[0,4]},"b":{"dtype":"U8","shape":[4],"data_offsets":[0,4]}}`, eight[:4]), `tensor "b": data_offsets [0, 4] overlap tensor "a"`},
		{"data too short", build(valid, eight[:7]), "tensors cover 8 bytes but the data region has 7"},
		{"trailing data", build(valid, append(eight, 0)), "tensors cover 8 bytes but the data region has 9"},
		{"data without tensors", build(`{}`, eight), "tensors cover 0 bytes but the data region has 8"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := safetensors.Parse(tc.file)
			if err == nil || !strings.Contains(err.Error(), tc.want) || !strings.HasPrefix(err.Error(), "safetensors: ") {
				t.Errorf("Parse: error %v, want one containing %q", err, tc.want)
			}
			_, rerr := safetensors.Read(bytes.NewReader(tc.file), int64(len(tc.file)))
			if rerr == nil || rerr.Error() != err.Error() {
				t.Errorf("Read: error %v, want Parse's %v", rerr, err)
			}
		})
	}
}

func TestParseAccepts(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name   string
		file   []byte
		tensor string
		shape  []int
	}{
		{"whitespace and newlines", build("{\n \"w\" : {\"shape\": [ 2 ], \"dtype\":\"U8\",\n\"data_offsets\":[0, 2]} }\t\r\n  ", []byte{1, 2}), "w", []int{2}},
		{"unknown field", build(`{"w":{"dtype":"U8","shape":[1],"data_offsets":[0,1],"x":{}}}`, []byte{7}), "w", []int{1}},
		{"offsets out of name order", build(`{"a":{"dtype":"U8","shape":[1],"data_offsets":[1,2]},"b":{"dtype":"U8","shape":[1],"data_offsets":[0,1]}}`, []byte{1, 2}), "a", []int{1}},
		{"empty tensors share an offset", build(`{"a":{"dtype":"F32","shape":[0],"data_offsets":[0,0]},"b":{"dtype":"U8","shape":[1],"data_offsets":[0,1]},"c":{"dtype":"F64","shape":[2,0],"data_offsets":[1,1]}}`, []byte{9}), "c", []int{2, 0}},
		{"null metadata", build(`{"__metadata__":null}`, nil), "", nil},
		{"escaped name", build(`{"\u0077\n":{"dtype":"U8","shape":[],"data_offsets":[0,1]}}`, []byte{3}), "w\n", []int{}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			f, err := safetensors.Parse(tc.file)
			if err != nil {
				t.Fatal(err)
			}
			if tc.tensor == "" {
				return
			}
			got, ok := f.Tensors[tc.tensor]
			if !ok || !reflect.DeepEqual(got.Shape, tc.shape) {
				t.Errorf("tensor %q: %+v, want shape %v (names %q)", tc.tensor, got, tc.shape, f.Names())
			}
		})
	}
}

func TestDataIsSliced(t *testing.T) {
	t.Parallel()
	f, err := safetensors.Parse(build(`{"a":{"dtype":"U8","shape":[2],"data_offsets":[0,2]},"b":{"dtype":"U8","shape":[1],"data_offsets":[2,3]}}`, []byte{1, 2, 3}))
	if err != nil {
		t.Fatal(err)
	}
	if a := f.Tensors["a"].Data; !bytes.Equal(a, []byte{1, 2}) || cap(a) != 2 {
		t.Errorf("a: data %v cap %d; want [1 2] with no room to grow into b", a, cap(a))
	}
	if got := f.Names(); !reflect.DeepEqual(got, []string{"a", "b"}) {
		t.Errorf("Names() = %q", got)
	}
}

func TestWriteErrors(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		key  string
		t    safetensors.Tensor
		meta map[string]string
		want string
	}{
		{"reserved name", "__metadata__", safetensors.Tensor{DType: safetensors.U8, Shape: []int{1}, Data: []byte{1}}, nil, "reserved for metadata"},
		{"unknown dtype", "w", safetensors.Tensor{DType: "F128", Shape: []int{1}, Data: make([]byte, 16)}, nil, `unknown dtype "F128"`},
		{"short data", "w", safetensors.Tensor{DType: safetensors.F32, Shape: []int{2}, Data: make([]byte, 7)}, nil, "7 bytes of data for F32[2], which needs 8"},
		{"negative extent", "w", safetensors.Tensor{DType: safetensors.F32, Shape: []int{-1}}, nil, "negative extent"},
		{"bad name", "\xff", safetensors.Tensor{DType: safetensors.U8, Data: []byte{1}}, nil, "not valid UTF-8"},
		{"bad metadata", "w", safetensors.Tensor{DType: safetensors.U8, Data: []byte{1}}, map[string]string{"k": "\xfe"}, "not valid UTF-8"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := safetensors.Marshal(map[string]safetensors.Tensor{tc.key: tc.t}, tc.meta)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error %v, want one containing %q", err, tc.want)
			}
		})
	}
}

func TestWriteFile(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	path := filepath.Join(dir, "model.safetensors")
	r := rand.New(rand.NewPCG(5, 6))
	for i, n := range []int{3, 1000} {
		tensors := map[string]safetensors.Tensor{"w": randomTensor(r, safetensors.F32, n), "step": randomTensor(r, safetensors.I64)}
		meta := map[string]string{"round": string(rune('0' + i))}
		if err := safetensors.WriteFile(path, tensors, meta); err != nil {
			t.Fatal(err)
		}
		f, err := safetensors.Open(path)
		if err != nil {
			t.Fatal(err)
		}
		equalFiles(t, f, tensors, meta)
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(entries) != 1 {
		t.Errorf("directory holds %d entries after writing, want 1 (no temporary files)", len(entries))
	}

	bad := map[string]safetensors.Tensor{"w": {DType: safetensors.F32, Shape: []int{2}, Data: make([]byte, 3)}}
	if err := safetensors.WriteFile(path, bad, nil); err == nil {
		t.Error("WriteFile of a malformed tensor succeeded")
	}
	if f, err := safetensors.Open(path); err != nil || f.Metadata["round"] != "1" {
		t.Errorf("a failed WriteFile damaged the previous file: %v", err)
	}
	if entries, _ := os.ReadDir(dir); len(entries) != 1 {
		t.Errorf("a failed WriteFile left %d entries", len(entries))
	}
	if err := safetensors.WriteFile(filepath.Join(dir, "missing", "x.safetensors"), nil, nil); err == nil {
		t.Error("WriteFile into a missing directory succeeded")
	}
	if _, err := safetensors.Open(filepath.Join(dir, "absent.safetensors")); err == nil {
		t.Error("Open of a missing file succeeded")
	}
}

// shortReader serves only the first n bytes of b, as a file truncated after
// its size was taken.
type shortReader struct {
	b []byte
	n int
}

func (s shortReader) ReadAt(p []byte, off int64) (int, error) {
	return bytes.NewReader(s.b[:s.n]).ReadAt(p, off)
}

func TestReadShortReader(t *testing.T) {
	t.Parallel()
	b, err := safetensors.Marshal(map[string]safetensors.Tensor{"w": {DType: safetensors.U8, Shape: []int{4}, Data: []byte{1, 2, 3, 4}}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range []int{0, 4, 8, 20, len(b) - 1} {
		if _, err := safetensors.Read(shortReader{b, n}, int64(len(b))); err == nil || !strings.Contains(err.Error(), "unexpected EOF") {
			t.Errorf("reader of %d bytes: error %v, want unexpected EOF", n, err)
		}
	}
}
