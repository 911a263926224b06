package safetensors_test

import (
	"bytes"
	"encoding/binary"
	"math/rand/v2"
	"testing"

	"github.com/flockml/flock/safetensors"
)

func FuzzRead(f *testing.F) {
	r := rand.New(rand.NewPCG(7, 8))
	seeds := []map[string]safetensors.Tensor{
		nil,
		{"w": randomTensor(r, safetensors.F32, 2, 3)},
		{"a.weight": randomTensor(r, safetensors.BF16, 3), "a.bias": randomTensor(r, safetensors.F16, 1), "n": randomTensor(r, safetensors.I64), "m": randomTensor(r, safetensors.BOOL, 2, 0)},
		{"x": randomTensor(r, safetensors.U8, 5), "y": randomTensor(r, safetensors.F64, 1, 1), "z": randomTensor(r, safetensors.I8, 2)},
	}
	for i, s := range seeds {
		var meta map[string]string
		if i%2 == 0 {
			meta = map[string]string{"format": "pt", "k": "v\n"}
		}
		b, err := safetensors.Marshal(s, meta)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
		for _, n := range []int{0, 7, 8, 9, 16, len(b) / 2, len(b) - 1} {
			if n < len(b) {
				f.Add(b[:n])
			}
		}
		if len(b) > 12 {
			c := append([]byte{}, b...)
			c[len(c)-1] ^= 0xff
			f.Add(c)
			c = append([]byte{}, b...)
			c[10]++
			f.Add(c)
		}
	}
	f.Add(build(`{"w":{"dtype":"U8","shape":[4294967296,4294967296],"data_offsets":[0,0]}}`, nil))
	f.Add(build(`{"a":{"dtype":"U8","shape":[4],"data_offsets":[0,4]},"b":{"dtype":"U8","shape":[4],"data_offsets":[2,6]}}`, make([]byte, 6)))
	f.Add(binary.LittleEndian.AppendUint64(nil, 1<<63))

	f.Fuzz(func(t *testing.T, data []byte) {
		pf, perr := safetensors.Parse(data)
		rf, rerr := safetensors.Read(bytes.NewReader(data), int64(len(data)))
		if (perr == nil) != (rerr == nil) {
			t.Fatalf("Parse error %v but Read error %v", perr, rerr)
		}
		if perr != nil {
			return
		}
		equalFiles(t, rf, pf.Tensors, pf.Metadata)
		// A file that parses re-encodes to one with the same contents, and
		// that encoding is a fixed point.
		enc, err := safetensors.Marshal(pf.Tensors, pf.Metadata)
		if err != nil {
			t.Fatalf("re-encoding a parsed file: %v", err)
		}
		back, err := safetensors.Parse(enc)
		if err != nil {
			t.Fatalf("parsing a re-encoded file: %v", err)
		}
		equalFiles(t, back, pf.Tensors, pf.Metadata)
		again, err := safetensors.Marshal(back.Tensors, back.Metadata)
		if err != nil || !bytes.Equal(enc, again) {
			t.Fatalf("encoding is not a fixed point (%v)", err)
		}
	})
}
