package transform

import (
	"encoding/binary"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"testing"
)

// goldenFile is a safetensors file of uint8 tensors (the format of
// testdata/golden/safetensors_io.py), read here without the safetensors
// package to keep this package's tests free of the tensor stack.
type goldenFile struct {
	tensors map[string]Image
	meta    map[string]string
}

func readGolden(t *testing.T, name string) *goldenFile {
	t.Helper()
	data, err := os.ReadFile(filepath.Join("..", "..", "testdata", "ffcv", "golden", name))
	if err != nil {
		t.Fatal(err)
	}
	n := binary.LittleEndian.Uint64(data)
	var hdr map[string]json.RawMessage
	if err := json.Unmarshal(data[8:8+n], &hdr); err != nil {
		t.Fatal(err)
	}
	g := &goldenFile{tensors: map[string]Image{}}
	body := data[8+n:]
	for k, raw := range hdr {
		if k == "__metadata__" {
			if err := json.Unmarshal(raw, &g.meta); err != nil {
				t.Fatal(err)
			}
			continue
		}
		var e struct {
			DType   string `json:"dtype"`
			Shape   []int  `json:"shape"`
			Offsets [2]int `json:"data_offsets"`
		}
		if err := json.Unmarshal(raw, &e); err != nil {
			t.Fatal(err)
		}
		if e.DType != "U8" || len(e.Shape) != 3 {
			t.Fatalf("%s: %s %v, want a U8 H×W×C image", k, e.DType, e.Shape)
		}
		g.tensors[k] = ImageOf(body[e.Offsets[0]:e.Offsets[1]], e.Shape[1], e.Shape[0], e.Shape[2])
	}
	return g
}

// Resize tolerances against the references for Bilinear and
// BilinearAntialias: fixed-point weights and intermediate rounding change a
// result by at most one level, and only rarely. Area is exact.
const (
	resizeMaxDiff  = 1
	resizeMeanDiff = 0.05
)

func TestResizeGolden(t *testing.T) {
	g := readGolden(t, "transform_resize.safetensors")
	var cases []string
	for k := range g.meta {
		if c, ok := strings.CutPrefix(k, "case."); ok {
			cases = append(cases, c)
		}
	}
	slices.Sort(cases)
	if len(cases) < 30 {
		t.Fatalf("only %d cases", len(cases))
	}
	filters := map[string]Filter{"area": Area, "bilinear": Bilinear, "bilinear-antialias": BilinearAntialias}
	for _, c := range cases {
		t.Run(c, func(t *testing.T) {
			var p struct {
				Filter, Shape string
				Window        [4]int
				Size          [2]int
			}
			if err := json.Unmarshal([]byte(g.meta["case."+c]), &p); err != nil {
				t.Fatal(err)
			}
			src, want := g.tensors["src."+p.Shape], g.tensors["want."+c]
			f, ok := filters[p.Filter]
			if !ok {
				t.Fatalf("unknown filter %q", p.Filter)
			}
			dst := NewImage(p.Size[0], p.Size[1], src.Channels)
			Resize(dst, src, Rect{p.Window[0], p.Window[1], p.Window[2], p.Window[3]}, f)
			maxd, mean := diff(dst, want)
			// Area reproduces OpenCV's arithmetic.
			limit := resizeMaxDiff
			if f == Area {
				limit = 0
			}
			if maxd > limit || mean > resizeMeanDiff {
				t.Errorf("max |diff| %d (limit %d), mean %.4f (limit %v)", maxd, limit, mean, resizeMeanDiff)
			}
			if testing.Verbose() {
				t.Logf("max |diff| %d, mean %.4f", maxd, mean)
			}
		})
	}
}

func diff(a, b Image) (maxd int, mean float64) {
	if a.Width != b.Width || a.Height != b.Height || a.Channels != b.Channels {
		panic(fmt.Sprintf("diff: %dx%dx%d vs %dx%dx%d", a.Width, a.Height, a.Channels, b.Width, b.Height, b.Channels))
	}
	var sum int
	for y := 0; y < a.Height; y++ {
		ra, rb := a.Row(y), b.Row(y)
		for i := range ra {
			d := int(ra[i]) - int(rb[i])
			if d < 0 {
				d = -d
			}
			sum += d
			maxd = max(maxd, d)
		}
	}
	return maxd, float64(sum) / float64(len(a.Row(0))*a.Height)
}

func TestResizeIdentityAndWindow(t *testing.T) {
	src := NewImage(9, 7, 3)
	for i := range src.Pix {
		src.Pix[i] = uint8(i*37 + 11)
	}
	for _, f := range []Filter{Area, Bilinear, BilinearAntialias} {
		dst := NewImage(9, 7, 3)
		Resize(dst, src, Rect{}, f)
		if !slices.Equal(dst.Pix, src.Pix) {
			t.Errorf("%v: same-size resize changed pixels", f)
		}
		// A window resized to its own size is a crop.
		win := NewImage(4, 3, 3)
		Resize(win, src, Rect{2, 3, 4, 3}, f)
		sub := src.Sub(Rect{2, 3, 4, 3})
		for y := 0; y < 3; y++ {
			if !slices.Equal(win.Row(y), sub.Row(y)) {
				t.Errorf("%v: window row %d = %v, want %v", f, y, win.Row(y), sub.Row(y))
			}
		}
		// A constant image stays constant under any resize.
		flat := NewImage(13, 11, 1)
		for i := range flat.Pix {
			flat.Pix[i] = 200
		}
		for _, sz := range [][2]int{{5, 4}, {13, 3}, {30, 22}, {7, 20}} {
			out := NewImage(sz[0], sz[1], 1)
			Resize(out, flat, Rect{}, f)
			for _, v := range out.Pix {
				if v != 200 {
					t.Fatalf("%v: constant 200 resized to %v gives %d", f, sz, v)
				}
			}
		}
	}
}

func TestResizeAllocs(t *testing.T) {
	if raceEnabled {
		t.Skip("sync.Pool drops items under the race detector")
	}
	src := NewImage(256, 192, 3)
	dst := NewImage(224, 224, 3)
	for _, f := range []Filter{Area, Bilinear, BilinearAntialias} {
		Resize(dst, src, Rect{10, 20, 150, 130}, f)
		if n := testing.AllocsPerRun(20, func() { Resize(dst, src, Rect{10, 20, 150, 130}, f) }); n != 0 {
			t.Errorf("%v: %v allocations per Resize", f, n)
		}
	}
}

// cpuTime reports the thread's CPU time per operation (steadier than wall
// time on a shared machine). Call it before the loop, the result after.
func cpuTime(b *testing.B) func() {
	runtime.LockOSThread()
	start := threadCPU()
	return func() {
		cpu := threadCPU() - start
		runtime.UnlockOSThread()
		if cpu > 0 {
			b.ReportMetric(float64(cpu.Nanoseconds())/float64(b.N), "cpu-ns/op")
		}
	}
}

func BenchmarkResize(b *testing.B) {
	src := NewImage(256, 256, 3)
	for i := range src.Pix {
		src.Pix[i] = uint8(i * 7)
	}
	dst := NewImage(224, 224, 3)
	for _, f := range []Filter{Area, Bilinear, BilinearAntialias} {
		for _, win := range []Rect{{0, 0, 256, 256}, {30, 40, 150, 170}} {
			b.Run(fmt.Sprintf("%v/%dx%d", f, win.W, win.H), func(b *testing.B) {
				report := cpuTime(b)
				for b.Loop() {
					Resize(dst, src, win, f)
				}
				report()
			})
		}
	}
}

// TestVerticalCV2Vector checks the vector kernel of verticalCV2 against the
// Go loop, byte for byte, on rows of every length up to 100 with random
// sums and weights, small (as the resize makes them) and arbitrary (whose
// products overflow int32 alike), and that nothing past the row is written.
func TestVerticalCV2Vector(t *testing.T) {
	if !resizeVector {
		t.Skip("no vector kernel on this CPU")
	}
	r := rand.New(rand.NewPCG(9, 10))
	for n := 0; n <= 100; n++ {
		for _, wide := range []bool{false, true} {
			r0, r1 := make([]int32, n), make([]int32, n)
			for i := range n {
				r0[i], r1[i] = int32(r.IntN(1<<20)), int32(r.IntN(1<<20))
				if wide {
					r0[i], r1[i] = int32(r.Uint32()), int32(r.Uint32())
				}
			}
			w0 := int32(r.IntN(1 << 16))
			w1 := int32(1<<16) - w0
			if wide {
				w0, w1 = int32(r.Uint32()), int32(r.Uint32())
			}
			want, got := make([]uint8, n+8), make([]uint8, n+8)
			for i := range want {
				want[i], got[i] = 0x3C, 0x3C
			}
			verticalCV2Go(want[:n], r0, r1, w0, w1)
			verticalCV2(got[:n], r0, r1, w0, w1)
			if !slices.Equal(got, want) {
				t.Fatalf("n %d (wide %v): vector %v, Go %v", n, wide, got, want)
			}
		}
	}
}

// pattern is gen_transform.py's pattern: a w×h×c image from integer
// arithmetic alone, (3x + 2y + 85ch + (hash(x, y, ch) >> 26)) mod 256.
func pattern(w, h, c int) Image {
	img := NewImage(w, h, c)
	for y := range h {
		row := img.Row(y)
		for x := range w {
			for ch := range c {
				v := uint32(x)*0x9E3779B1 ^ uint32(y)*0x85EBCA77 ^ uint32(ch)*0xC2B2AE3D
				v ^= v >> 15
				v *= 0x2C1B3C6D
				v ^= v >> 12
				row[x*c+ch] = uint8(uint32(3*x+2*y+85*ch) + v>>26)
			}
		}
	}
	return img
}

// TestResizeAreaExact checks Area against cv2.resize with INTER_AREA value
// for value (testdata/ffcv/golden/transform_area.safetensors): integer and
// fractional factors on one or both axes, 1 to 4 channels, and FFCV's
// centre crops of non-square images, whose windows CenterCropRect must
// reproduce.
func TestResizeAreaExact(t *testing.T) {
	t.Parallel()
	g := readGolden(t, "transform_area.safetensors")
	var cases []string
	for k := range g.meta {
		if c, ok := strings.CutPrefix(k, "case."); ok {
			cases = append(cases, c)
		}
	}
	slices.Sort(cases)
	if len(cases) < 20 {
		t.Fatalf("only %d cases", len(cases))
	}
	for _, c := range cases {
		t.Run(c, func(t *testing.T) {
			t.Parallel()
			var p struct {
				Source [3]int
				Window [4]int
				Size   [2]int
				Ratio  float64
			}
			if err := json.Unmarshal([]byte(g.meta["case."+c]), &p); err != nil {
				t.Fatal(err)
			}
			src := pattern(p.Source[0], p.Source[1], p.Source[2])
			r := Rect{p.Window[0], p.Window[1], p.Window[2], p.Window[3]}
			if p.Ratio != 0 {
				if got := CenterCropRect(src.Width, src.Height, p.Ratio); got != r {
					t.Errorf("CenterCropRect(%d, %d, %v) = %v, FFCV's is %v", src.Width, src.Height, p.Ratio, got, r)
				}
			}
			want := g.tensors["want."+c]
			dst := NewImage(p.Size[0], p.Size[1], src.Channels)
			Resize(dst, src, r, Area)
			n, first := 0, -1
			for i := range dst.Pix {
				if dst.Pix[i] != want.Pix[i] {
					if first < 0 {
						first = i
					}
					n++
				}
			}
			if n > 0 {
				t.Errorf("%d of %d values differ from OpenCV's; the first at offset %d: %d, want %d",
					n, len(dst.Pix), first, dst.Pix[first], want.Pix[first])
			}
		})
	}
}
