package dataset

import (
	"bytes"
	"compress/gzip"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"flag"
	"os"
	"path/filepath"
	"slices"
	"testing"
)

var updateSubset = flag.Bool("update-subset", false, "rewrite the embedded Fashion-MNIST subset from the full data set")

// TestFashionMNISTSubset checks the embedded subset: its sizes and balance,
// its digests, and, where the full data set is installed, that it is the
// first images of each class of the full files.
func TestFashionMNISTSubset(t *testing.T) {
	if *updateSubset {
		writeSubset(t)
	}
	train, test, err := FashionMNISTSubset()
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name string
		m    *Images
		per  int
	}{{"train", train, FashionMNISTSubsetTrainPerClass}, {"test", test, FashionMNISTSubsetTestPerClass}} {
		if err := c.m.Validate(); err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		if c.m.N != 10*c.per || c.m.H != 28 || c.m.W != 28 || c.m.C != 1 {
			t.Errorf("%s: %d images of %d×%d×%d, want %d of 28×28×1", c.name, c.m.N, c.m.H, c.m.W, c.m.C, 10*c.per)
		}
		counts := make([]int, 10)
		for _, l := range c.m.Labels {
			counts[l]++
		}
		for l, n := range counts {
			if n != c.per {
				t.Errorf("%s: class %d has %d images, want %d", c.name, l, n, c.per)
			}
		}
	}
	needDebian(t)
	fullTrain, fullTest, err := LoadFashionMNIST(context.Background(), FashionMNISTOptions{Dir: DebianFashionMNISTDir})
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name       string
		full, part *Images
		per        int
	}{{"train", fullTrain, train, FashionMNISTSubsetTrainPerClass}, {"test", fullTest, test, FashionMNISTSubsetTestPerClass}} {
		want := c.full.FirstPerClass(c.per)
		if want.N != c.part.N || !bytes.Equal(want.Pixels, c.part.Pixels) || !slices.Equal(want.Labels, c.part.Labels) {
			t.Errorf("%s: the embedded subset is not the first %d images of each class of the full set", c.name, c.per)
		}
	}
}

// writeSubset rewrites the embedded files from the Debian package's copy
// and logs their digests, which fashionMNISTSubsetFiles must list.
func writeSubset(t *testing.T) {
	train, test, err := LoadFashionMNIST(context.Background(), FashionMNISTOptions{Dir: DebianFashionMNISTDir, Verify: true})
	if err != nil {
		t.Fatal(err)
	}
	for s, m := range []*Images{train.FirstPerClass(FashionMNISTSubsetTrainPerClass), test.FirstPerClass(FashionMNISTSubsetTestPerClass)} {
		labels := make([]byte, m.N)
		for i, l := range m.Labels {
			labels[i] = byte(l)
		}
		for k, x := range []*IDX{
			{Type: IDXUint8, Dims: []int{m.N, m.H, m.W}, Data: m.Pixels},
			{Type: IDXUint8, Dims: []int{m.N}, Data: labels},
		} {
			name := fashionMNISTSubsetFiles[2*s+k].name
			var raw, gz bytes.Buffer
			if err := WriteIDX(&raw, x); err != nil {
				t.Fatal(err)
			}
			zw, err := gzip.NewWriterLevel(&gz, gzip.BestCompression)
			if err != nil {
				t.Fatal(err)
			}
			zw.Write(raw.Bytes())
			if err := zw.Close(); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(filepath.Join("fashionmnist", name+".gz"), gz.Bytes(), 0o644); err != nil {
				t.Fatal(err)
			}
			sum := sha256.Sum256(raw.Bytes())
			t.Logf("%s: %d bytes, IDX SHA-256 %s", name, gz.Len(), hex.EncodeToString(sum[:]))
		}
	}
}
