package dataset

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// cifarSet is a small set of CIFAR records: HWC pixels and labels (coarse,
// fine for CIFAR-100).
type cifarSet struct {
	pixels []uint8
	labels [][]uint8
}

func randomCIFAR(r *rand.Rand, n, classes, labelBytes int) cifarSet {
	s := cifarSet{pixels: make([]uint8, n*3072)}
	for i := range s.pixels {
		s.pixels[i] = uint8(r.UintN(256))
	}
	for range n {
		l := make([]uint8, labelBytes)
		for j := range l {
			l[j] = uint8(r.IntN(classes))
		}
		s.labels = append(s.labels, l)
	}
	return s
}

// records encodes s as the binary version does: labels, then the red,
// green and blue planes.
func (s cifarSet) records() []byte {
	var b bytes.Buffer
	for i, l := range s.labels {
		b.Write(l)
		px := s.pixels[i*3072 : (i+1)*3072]
		for c := range 3 {
			for p := range 1024 {
				b.WriteByte(px[3*p+c])
			}
		}
	}
	return b.Bytes()
}

// cifarFiles returns the files of k's binary version for train (split over
// k's training files) and test.
func cifarFiles(k *cifarKind, train, test cifarSet) map[string][]byte {
	files := map[string][]byte{k.test: test.records()}
	per := len(train.labels) / len(k.train)
	for i, name := range k.train {
		part := cifarSet{pixels: train.pixels[i*per*3072 : (i+1)*per*3072], labels: train.labels[i*per : (i+1)*per]}
		files[name] = part.records()
	}
	var meta strings.Builder
	n := 10
	if k.labelBytes == 2 {
		n = 100
	}
	for c := range n {
		meta.WriteString("class" + string(rune('A'+c%26)) + string(rune('a'+c/26)) + "\n")
	}
	files[k.meta] = []byte(meta.String())
	return files
}

// cifarArchive packs files as the published .tar.gz does, under k.dir.
func cifarArchive(t *testing.T, k *cifarKind, files map[string][]byte) []byte {
	t.Helper()
	var b bytes.Buffer
	zw := gzip.NewWriter(&b)
	tw := tar.NewWriter(zw)
	tw.WriteHeader(&tar.Header{Name: k.dir + "/", Typeflag: tar.TypeDir, Mode: 0o755})
	names := slices.Sorted(func(yield func(string) bool) {
		for n := range files {
			if !yield(n) {
				return
			}
		}
	})
	for _, n := range names {
		if err := tw.WriteHeader(&tar.Header{Name: k.dir + "/" + n, Typeflag: tar.TypeReg, Mode: 0o644, Size: int64(len(files[n]))}); err != nil {
			t.Fatal(err)
		}
		tw.Write(files[n])
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	zw.Close()
	return b.Bytes()
}

// checkCIFAR compares loaded images with the set they were written from.
func checkCIFAR(t *testing.T, what string, m *Images, s cifarSet, classes int) {
	t.Helper()
	if m.N != len(s.labels) || m.H != 32 || m.W != 32 || m.C != 3 || len(m.Classes) != classes {
		t.Fatalf("%s: %d images of %d×%d×%d in %d classes, want %d of 32×32×3 in %d", what, m.N, m.H, m.W, m.C, len(m.Classes), len(s.labels), classes)
	}
	if !bytes.Equal(m.Pixels, s.pixels) {
		t.Errorf("%s: pixels differ", what)
	}
	for i, l := range s.labels {
		if m.Labels[i] != int32(l[len(l)-1]) {
			t.Fatalf("%s: image %d: label %d, want %d", what, i, m.Labels[i], l[len(l)-1])
		}
	}
}

// TestLoadCIFAR reads CIFAR-10 and CIFAR-100 binary versions made in the
// test, from their archives and extracted, and downloads an archive from a
// local server, checking its SHA-256.
func TestLoadCIFAR(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	for _, classes := range []int{10, 100} {
		k := cifarKinds[classes]
		train, test := randomCIFAR(r, 50, classes, k.labelBytes), randomCIFAR(r, 20, classes, k.labelBytes)
		files := cifarFiles(k, train, test)
		archive := cifarArchive(t, k, files)

		check := func(what string, opts CIFAROptions) {
			t.Helper()
			opts.Classes = classes
			tr, te, err := LoadCIFAR(context.Background(), opts)
			if err != nil {
				t.Fatalf("%s: %v", what, err)
			}
			checkCIFAR(t, what+" training set", tr, train, classes)
			checkCIFAR(t, what+" test set", te, test, classes)
		}
		dir := t.TempDir()
		if err := os.WriteFile(filepath.Join(dir, k.archive.name+".gz"), archive, 0o644); err != nil {
			t.Fatal(err)
		}
		check(k.name+" archive", CIFAROptions{Dir: dir})

		extracted := t.TempDir()
		os.Mkdir(filepath.Join(extracted, k.dir), 0o755)
		for n, b := range files {
			if err := os.WriteFile(filepath.Join(extracted, k.dir, n), b, 0o644); err != nil {
				t.Fatal(err)
			}
		}
		check(k.name+" extracted", CIFAROptions{Dir: extracted})

		// Downloads: the archive, then a corrupt one.
		served := archive
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
			if req.URL.Path != "/"+k.archive.name+".gz" {
				http.NotFound(w, req)
				return
			}
			w.Write(served)
		}))
		saved := k.archive
		sum := sha256.Sum256(archive)
		k.archive.gzSize, k.archive.gzSHA256 = int64(len(archive)), hex.EncodeToString(sum[:])
		into := t.TempDir()
		check(k.name+" download", CIFAROptions{Dir: into, Download: true, BaseURL: srv.URL})
		if _, err := os.Stat(filepath.Join(into, k.archive.name+".gz")); err != nil {
			t.Errorf("%s download: archive not kept: %v", k.name, err)
		}

		served = slices.Clone(archive)
		served[len(served)/2] ^= 1
		into = t.TempDir()
		_, _, err := LoadCIFAR(context.Background(), CIFAROptions{Classes: classes, Dir: into, Download: true, BaseURL: srv.URL})
		if err == nil || !strings.Contains(err.Error(), "corrupt: SHA-256") {
			t.Errorf("%s corrupt download: error %v, want a SHA-256 mismatch", k.name, err)
		}
		if left, _ := os.ReadDir(into); len(left) != 0 {
			t.Errorf("%s corrupt download: left %v in the directory", k.name, left)
		}
		k.archive = saved
		srv.Close()
	}
}

// TestLoadCIFARErrors checks the errors of missing and malformed data.
func TestLoadCIFARErrors(t *testing.T) {
	t.Parallel()
	empty := t.TempDir()
	withPython := t.TempDir()
	os.WriteFile(filepath.Join(withPython, "cifar-10-python.tar.gz"), []byte("x"), 0o644)
	truncated := t.TempDir()
	k := cifarKinds[10]
	files := cifarFiles(k, randomCIFAR(rand.New(rand.NewPCG(3, 4)), 5, 10, 1), randomCIFAR(rand.New(rand.NewPCG(5, 6)), 2, 10, 1))
	files[k.test] = files[k.test][:100]
	for n, b := range files {
		os.WriteFile(filepath.Join(truncated, n), b, 0o644)
	}
	badLabel := t.TempDir()
	files = cifarFiles(k, randomCIFAR(rand.New(rand.NewPCG(3, 4)), 5, 10, 1), randomCIFAR(rand.New(rand.NewPCG(5, 6)), 2, 10, 1))
	files[k.test][3073] = 10
	for n, b := range files {
		os.WriteFile(filepath.Join(badLabel, n), b, 0o644)
	}
	for _, c := range []struct {
		name string
		opts CIFAROptions
		want string
	}{
		{"classes", CIFAROptions{Classes: 20, Dir: empty}, "CIFAR with 20 classes: want 10 or 100"},
		{"no dir", CIFAROptions{Classes: 10}, "no directory given"},
		{"missing", CIFAROptions{Classes: 100, Dir: empty}, "neither cifar-100-binary.tar.gz, cifar-100-python.tar.gz nor the files of cifar-100-binary or cifar-100-python in " + empty},
		{"python archive", CIFAROptions{Classes: 10, Dir: withPython}, "cifar-10-python.tar.gz: unexpected EOF"},
		{"truncated", CIFAROptions{Classes: 10, Dir: truncated}, "test_batch.bin: 100 bytes, want records of 3073 bytes"},
		{"label", CIFAROptions{Classes: 10, Dir: badLabel}, "record 1: label 10 of 10 classes"},
	} {
		_, _, err := LoadCIFAR(context.Background(), c.opts)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: error %v, want one containing %q", c.name, err, c.want)
		}
	}
}
