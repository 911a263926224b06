package cuda

import (
	"encoding/binary"
	"math"
	"testing"
)

func TestArgsLayout(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name  string
		pack  func(a *Args)
		want  []Param
		size  int
		check func(t *testing.T, b []byte)
	}{
		{"ptr int double", func(a *Args) { a.Ptr(0x1234).I32(-7).F64(2.5) },
			[]Param{{0, 8, 8}, {8, 4, 4}, {16, 8, 8}}, 24,
			func(t *testing.T, b []byte) {
				if binary.LittleEndian.Uint64(b) != 0x1234 || int32(binary.LittleEndian.Uint32(b[8:])) != -7 ||
					math.Float64frombits(binary.LittleEndian.Uint64(b[16:])) != 2.5 {
					t.Errorf("bytes %x", b)
				}
			}},
		{"ints pack tightly", func(a *Args) { a.I32(1).I32(2).F32(3) }, []Param{{0, 4, 4}, {4, 4, 4}, {8, 4, 4}}, 12, nil},
		{"int then long long", func(a *Args) { a.I32(1).I64(2) }, []Param{{0, 4, 4}, {8, 8, 8}}, 16, nil},
		// The driver takes the parameter space without tail padding (a padded
		// size fails the launch with CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES).
		{"trailing int is not padded", func(a *Args) { a.Ptr(1).I32(1) }, []Param{{0, 8, 8}, {8, 4, 4}}, 12, nil},
		{"softmax_rows", func(a *Args) { a.Ptr(1).Ptr(2).I64(3).Int(1) }, []Param{{0, 8, 8}, {8, 8, 8}, {16, 8, 8}, {24, 4, 4}}, 28, nil},
		{"array after int", func(a *Args) { a.I32(3).I64s([]int64{4, 5}, 8) }, []Param{{0, 4, 4}, {8, 64, 8}}, 72,
			func(t *testing.T, b []byte) {
				if binary.LittleEndian.Uint64(b[8:]) != 4 || binary.LittleEndian.Uint64(b[16:]) != 5 || binary.LittleEndian.Uint64(b[24:]) != 0 {
					t.Errorf("array bytes %x", b[8:32])
				}
			}},
		{"empty", func(a *Args) {}, nil, 0, nil},
		{"unsigned", func(a *Args) { a.U64(math.MaxUint64).Int(-1) }, []Param{{0, 8, 8}, {8, 4, 4}}, 12,
			func(t *testing.T, b []byte) {
				if binary.LittleEndian.Uint64(b) != math.MaxUint64 || binary.LittleEndian.Uint32(b[8:]) != math.MaxUint32 {
					t.Errorf("bytes %x", b)
				}
			}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			a := new(Args)
			c.pack(a)
			if got := a.Params(); len(got) != len(c.want) {
				t.Fatalf("params %v, want %v", got, c.want)
			} else {
				for i := range got {
					if got[i] != c.want[i] {
						t.Errorf("param %d = %+v, want %+v", i, got[i], c.want[i])
					}
				}
			}
			if a.Size() != c.size || len(a.Bytes()) != c.size {
				t.Errorf("size %d (%d bytes), want %d", a.Size(), len(a.Bytes()), c.size)
			}
			if c.check != nil {
				c.check(t, a.Bytes())
			}
			a.Reset()
			if a.Size() != 0 || len(a.Params()) != 0 {
				t.Errorf("after Reset: size %d, %d params", a.Size(), len(a.Params()))
			}
		})
	}
}

func TestArgsPanics(t *testing.T) {
	t.Parallel()
	for name, f := range map[string]func(){
		"int overflow": func() { new(Args).Int(1 << 40) },
		"long array":   func() { new(Args).I64s(make([]int64, 9), 8) },
	} {
		func() {
			defer func() {
				if recover() == nil {
					t.Errorf("%s: no panic", name)
				}
			}()
			f()
		}()
	}
}
