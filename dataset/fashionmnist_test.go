package dataset

import (
	"bytes"
	"context"
	"crypto/md5"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"log/slog"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

func needDebian(t *testing.T) {
	t.Helper()
	if _, hidden := os.LookupEnv(SystemDataEnv); hidden {
		t.Skipf("the system's Fashion-MNIST is hidden (%s is set)", SystemDataEnv)
	}
	if _, all := findFashionMNIST(DebianFashionMNISTDir); !all {
		t.Skipf("Fashion-MNIST not installed in %s (apt-get install dataset-fashion-mnist)", DebianFashionMNISTDir)
	}
}

func TestFashionMNISTDebian(t *testing.T) {
	t.Parallel()
	needDebian(t)
	train, test, err := LoadFashionMNIST(context.Background(), FashionMNISTOptions{Dir: DebianFashionMNISTDir, Verify: true})
	if err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct {
		name     string
		m        *Images
		n        int
		perClass int
	}{
		{"train", train, 60000, 6000},
		{"test", test, 10000, 1000},
	} {
		m := tt.m
		if m.N != tt.n || m.H != 28 || m.W != 28 || m.C != 1 || len(m.Pixels) != tt.n*784 || len(m.Labels) != tt.n {
			t.Fatalf("%s: N=%d H=%d W=%d C=%d, %d pixels, %d labels", tt.name, m.N, m.H, m.W, m.C, len(m.Pixels), len(m.Labels))
		}
		if len(m.Classes) != 10 || m.Classes[9] != "Ankle boot" {
			t.Errorf("%s: classes %q", tt.name, m.Classes)
		}
		counts := make([]int, 10)
		for _, l := range m.Labels {
			counts[l]++
		}
		for c, k := range counts {
			if k != tt.perClass {
				t.Errorf("%s: class %d has %d images, want %d (Fashion-MNIST is balanced)", tt.name, c, k, tt.perClass)
			}
		}
	}
	var sum, sq float64
	for _, p := range train.Pixels {
		v := float64(p) / 255
		sum += v
		sq += v * v
	}
	n := float64(len(train.Pixels))
	mean := sum / n
	std := math.Sqrt(sq/n - mean*mean)
	if math.Abs(mean-FashionMNISTMean) > 5e-5 || math.Abs(std-FashionMNISTStd) > 5e-5 {
		t.Errorf("training pixels: mean %.5f std %.5f, constants %.4f %.4f", mean, std, FashionMNISTMean, FashionMNISTStd)
	}
}

func TestFashionMNISTVerifyRejectsOtherData(t *testing.T) {
	t.Parallel()
	needDebian(t)
	if raceEnabled {
		t.Skip("full-dataset load; TestVerifyIDX covers the check under -race")
	}
	dir := t.TempDir()
	linkDebian(t, dir, 0, 1, 2, 3)
	x, err := readIDXFile(filepath.Join(dir, "t10k-labels-idx1-ubyte.gz"))
	if err != nil {
		t.Fatal(err)
	}
	x.Data[0] = (x.Data[0] + 1) % 10
	os.Remove(filepath.Join(dir, "t10k-labels-idx1-ubyte.gz"))
	writeIDXFile(t, filepath.Join(dir, "t10k-labels-idx1-ubyte"), x)
	ctx := context.Background()
	if _, _, err := LoadFashionMNIST(ctx, FashionMNISTOptions{Dir: dir}); err != nil {
		t.Fatalf("without Verify: %v", err)
	}
	_, _, err = LoadFashionMNIST(ctx, FashionMNISTOptions{Dir: dir, Verify: true})
	if err == nil || !strings.Contains(err.Error(), "t10k-labels-idx1-ubyte") || !strings.Contains(err.Error(), fashionMNISTFiles[3].idxSHA256) {
		t.Fatalf("with Verify: error %v, want a SHA-256 mismatch naming the file", err)
	}
}

func TestVerifyIDX(t *testing.T) {
	t.Parallel()
	x := &IDX{Type: IDXUint8, Dims: []int{3}, Data: []byte{1, 2, 3}}
	enc := idxBytes(0x08, []uint32{3}, []byte{1, 2, 3})
	if err := verifyIDX("f", x, hexSHA256(enc)); err != nil {
		t.Fatal(err)
	}
	err := verifyIDX("some/file", x, fashionMNISTFiles[3].idxSHA256)
	if err == nil || !strings.Contains(err.Error(), "some/file") || !strings.Contains(err.Error(), hexSHA256(enc)) || !strings.Contains(err.Error(), fashionMNISTFiles[3].idxSHA256) {
		t.Fatalf("error %v, want one naming the file and both digests", err)
	}
}

// linkDebian links the Debian-packaged files with the given indices into dir.
func linkDebian(t *testing.T, dir string, files ...int) {
	t.Helper()
	for _, i := range files {
		name := fashionMNISTFiles[i].name + ".gz"
		if err := os.Symlink(filepath.Join(DebianFashionMNISTDir, name), filepath.Join(dir, name)); err != nil {
			t.Fatal(err)
		}
	}
}

func writeIDXFile(t *testing.T, path string, x *IDX) {
	t.Helper()
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := WriteIDX(f, x); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
}

func touch(t *testing.T, dir string, names ...string) {
	t.Helper()
	for _, n := range names {
		if err := os.WriteFile(filepath.Join(dir, n), nil, 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

var allGz = []string{"train-images-idx3-ubyte.gz", "train-labels-idx1-ubyte.gz", "t10k-images-idx3-ubyte.gz", "t10k-labels-idx1-ubyte.gz"}

// TestFashionMNISTLookupOrder sets environment variables, so it does not run
// in parallel.
func TestFashionMNISTLookupOrder(t *testing.T) {
	tests := []struct {
		name      string
		flockData bool
		data      []string // files in $FLOCK_DATA/fashion-mnist
		cache     []string // files in the cache directory
		wantDir   string   // "data", "cache", "debian" or "" for none
		wantRaw   []int    // files expected without ".gz"
		warnData  bool     // a warning names the incomplete $FLOCK_DATA directory
	}{
		{name: "FLOCK_DATA first", flockData: true, data: allGz, cache: allGz, wantDir: "data"},
		{name: "incomplete FLOCK_DATA skipped", flockData: true, data: allGz[:3], cache: allGz, wantDir: "cache", warnData: true},
		{name: "cache when FLOCK_DATA unset", data: allGz, cache: allGz, wantDir: "cache"},
		{name: "raw preferred, mixed", flockData: true,
			data:    append(slices.Clone(allGz), "t10k-images-idx3-ubyte", "train-labels-idx1-ubyte"),
			wantDir: "data", wantRaw: []int{1, 2}},
		{name: "directory is not a file", flockData: true, data: append(slices.Clone(allGz[1:]), "train-images-idx3-ubyte.gz/"), cache: allGz[1:], wantDir: "debian", warnData: true},
		{name: "Debian last", flockData: true, data: allGz[:1], cache: allGz[1:], wantDir: "debian", warnData: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			root := t.TempDir()
			data := filepath.Join(root, "data", "fashion-mnist")
			xdg := filepath.Join(root, "xdg")
			cache := filepath.Join(xdg, "flock", "fashion-mnist")
			for _, d := range []string{data, cache} {
				if err := os.MkdirAll(d, 0o755); err != nil {
					t.Fatal(err)
				}
			}
			t.Setenv("XDG_CACHE_HOME", xdg)
			unsetEnv(t, SystemDataEnv)
			want := []string{data, cache, DebianFashionMNISTDir}
			if tt.flockData {
				t.Setenv("FLOCK_DATA", filepath.Dir(data))
			} else {
				t.Setenv("FLOCK_DATA", "")
				want = want[1:]
			}
			dirs := FashionMNISTDirs()
			if !slices.Equal(dirs, want) {
				t.Fatalf("FashionMNISTDirs() = %q, want %q", dirs, want)
			}
			for _, n := range tt.data {
				if d, ok := strings.CutSuffix(n, "/"); ok {
					if err := os.Mkdir(filepath.Join(data, d), 0o755); err != nil {
						t.Fatal(err)
					}
					continue
				}
				touch(t, data, n)
			}
			touch(t, cache, tt.cache...)
			var log bytes.Buffer
			paths, found := locateFashionMNIST(dirs, slog.New(slog.NewTextHandler(&log, nil)))
			if warned := strings.Contains(log.String(), "dir="+data+" "); warned != tt.warnData {
				t.Errorf("warning about %s: %v, want %v; log %q", data, warned, tt.warnData, log.String())
			}
			if tt.name == "incomplete FLOCK_DATA skipped" && !strings.Contains(log.String(), "t10k-labels-idx1-ubyte") {
				t.Errorf("warning %q does not name the missing file", log.String())
			}
			wantDir := map[string]string{"data": data, "cache": cache, "debian": DebianFashionMNISTDir}[tt.wantDir]
			if tt.wantDir == "debian" {
				if _, all := findFashionMNIST(DebianFashionMNISTDir); !all {
					wantDir = ""
				}
			}
			if wantDir == "" {
				if found {
					t.Fatalf("found %q, want nothing", paths)
				}
				return
			}
			if !found {
				t.Fatalf("nothing found, want the files in %s", wantDir)
			}
			for i, p := range paths {
				name := fashionMNISTFiles[i].name
				if !slices.Contains(tt.wantRaw, i) && filepath.Base(p) != name {
					name += ".gz"
				}
				if p != filepath.Join(wantDir, name) {
					t.Errorf("file %d: %s, want %s", i, p, filepath.Join(wantDir, name))
				}
			}
		})
	}
}

// unsetEnv unsets the environment variable key for the test's duration.
func unsetEnv(t *testing.T, key string) {
	t.Setenv(key, "")
	os.Unsetenv(key)
}

// TestSystemDataOverride: FLOCK_SYSTEM_DATA replaces the system directory,
// and set but empty removes it.
func TestSystemDataOverride(t *testing.T) {
	t.Setenv("FLOCK_DATA", "")
	t.Setenv("XDG_CACHE_HOME", "/xdg")
	cache := filepath.Join("/xdg", "flock", "fashion-mnist")
	t.Setenv(SystemDataEnv, "/srv/data")
	if got, want := FashionMNISTDirs(), []string{cache, "/srv/data/fashion-mnist"}; !slices.Equal(got, want) {
		t.Errorf("%s=/srv/data: FashionMNISTDirs() = %q, want %q", SystemDataEnv, got, want)
	}
	t.Setenv(SystemDataEnv, "")
	if got, want := FashionMNISTDirs(), []string{cache}; !slices.Equal(got, want) {
		t.Errorf("%s empty: FashionMNISTDirs() = %q, want %q", SystemDataEnv, got, want)
	}
	unsetEnv(t, SystemDataEnv)
	if got, want := FashionMNISTDirs(), []string{cache, DebianFashionMNISTDir}; !slices.Equal(got, want) {
		t.Errorf("%s unset: FashionMNISTDirs() = %q, want %q", SystemDataEnv, got, want)
	}
}

// TestFashionMNISTDefaultLookup loads through the default search path with
// FLOCK_DATA and the cache empty, so from the Debian package.
func TestFashionMNISTDefaultLookup(t *testing.T) {
	needDebian(t)
	if raceEnabled {
		t.Skip("full-dataset load; TestFashionMNISTDebian covers it under -race")
	}
	t.Setenv("FLOCK_DATA", t.TempDir())
	t.Setenv("XDG_CACHE_HOME", t.TempDir())
	train, test, err := LoadFashionMNIST(context.Background(), FashionMNISTOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if train.N != 60000 || test.N != 10000 {
		t.Fatalf("loaded %d and %d images", train.N, test.N)
	}
}

func TestFashionMNISTNotFound(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	linkDebianIfPresent(t, dir)
	_, _, err := LoadFashionMNIST(context.Background(), FashionMNISTOptions{Dir: dir})
	if !errors.Is(err, ErrNotFound) {
		t.Fatalf("error %v, want ErrNotFound", err)
	}
	for _, s := range []string{dir, "apt-get install dataset-fashion-mnist", "FLOCK_DATA", "--download", DefaultFashionMNISTURL} {
		if !strings.Contains(err.Error(), s) {
			t.Errorf("error %q does not mention %q", err, s)
		}
	}
}

// linkDebianIfPresent puts three of the four files in dir, which is
// therefore still incomplete.
func linkDebianIfPresent(t *testing.T, dir string) {
	if _, all := findFashionMNIST(DebianFashionMNISTDir); all {
		linkDebian(t, dir, 0, 1, 2)
	}
}

func TestFashionMNISTBadContents(t *testing.T) {
	t.Parallel()
	labels := func(n int, v byte) *IDX {
		d := make([]byte, n)
		for i := range d {
			d[i] = v
		}
		return &IDX{Type: IDXUint8, Dims: []int{n}, Data: d}
	}
	images := func(n, h, w int) *IDX {
		return &IDX{Type: IDXUint8, Dims: []int{n, h, w}, Data: make([]byte, n*h*w)}
	}
	tests := []struct {
		name    string
		files   [4]*IDX
		wantErr string
	}{
		{"count mismatch", [4]*IDX{images(60000, 28, 28), labels(59999, 0), images(10000, 28, 28), labels(10000, 0)}, "60000 images but 59999 labels"},
		{"label out of range", [4]*IDX{images(60000, 28, 28), labels(60000, 0), images(10000, 28, 28), labels(10000, 10)}, "label 10 of image 0 outside [0, 10)"},
		{"wrong size", [4]*IDX{images(60000, 28, 28), labels(60000, 0), images(10000, 14, 56), labels(10000, 0)}, "10000 images of 14×56"},
		{"wrong count", [4]*IDX{images(100, 28, 28), labels(100, 0), images(10000, 28, 28), labels(10000, 0)}, "Fashion-MNIST has 60000"},
		{"images as labels", [4]*IDX{labels(60000, 0), labels(60000, 0), images(10000, 28, 28), labels(10000, 0)}, "want uint8 [N, H, W]"},
		{"float labels", [4]*IDX{images(60000, 28, 28), {Type: IDXFloat32, Dims: []int{60000}, Data: make([]byte, 240000)}, images(10000, 28, 28), labels(10000, 0)}, "want uint8 [N]"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			dir := t.TempDir()
			for i, x := range tt.files {
				writeIDXFile(t, filepath.Join(dir, fashionMNISTFiles[i].name), x)
			}
			_, _, err := LoadFashionMNIST(context.Background(), FashionMNISTOptions{Dir: dir})
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Fatalf("error %v, want one containing %q", err, tt.wantErr)
			}
		})
	}
}

// readmeMD5 lists the MD5 checksums of the distribution's files given in the
// Fashion-MNIST README (/usr/share/doc/dataset-fashion-mnist/README.md.gz).
var readmeMD5 = map[string]string{
	"train-images-idx3-ubyte.gz": "8d4fb7e6c68d591d4c3dfef9ec88bf0d",
	"train-labels-idx1-ubyte.gz": "25c81989df183df01b3e8a0aad5dffbe",
	"t10k-images-idx3-ubyte.gz":  "bef4ecab320f06d8554ea6380940ec79",
	"t10k-labels-idx1-ubyte.gz":  "bb300cfdad3c16e7a12a480ee83cd310",
}

// originalGzip rebuilds a distribution file from its Debian copy. Debian's
// packaging removed the gzip header's file name and replaced its
// modification time but kept the deflate stream, so restoring the FNAME
// field and the original time (found by searching for the README's MD5)
// gives back the mirror's bytes.
func originalGzip(t *testing.T, name string) []byte {
	t.Helper()
	deb, err := os.ReadFile(filepath.Join(DebianFashionMNISTDir, name+".gz"))
	if err != nil {
		t.Fatal(err)
	}
	if len(deb) < 10 || deb[3] != 0 {
		t.Fatalf("%s: unexpected gzip header % x", name, deb[:min(len(deb), 10)])
	}
	mtime := uint32(1504176627) // 2017-08-31 10:50:27 UTC
	if strings.HasPrefix(name, "train") {
		mtime = 1504176606
	}
	out := []byte{0x1f, 0x8b, 8, 0x08}
	out = binary.LittleEndian.AppendUint32(out, mtime)
	out = append(out, deb[8], deb[9])
	out = append(out, name...)
	out = append(out, 0)
	out = append(out, deb[10:]...)
	sum := md5.Sum(out)
	if got := hex.EncodeToString(sum[:]); got != readmeMD5[name+".gz"] {
		t.Fatalf("%s: rebuilt file has MD5 %s, README says %s", name, got, readmeMD5[name+".gz"])
	}
	return out
}
