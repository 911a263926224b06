package main

import (
	"bytes"
	"context"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/flockml/flock/dataset"
	"github.com/flockml/flock/ffcv"
)

// TestConvertCIFAR converts a CIFAR-10 binary version made in the test
// (extracted files of random records) and checks that the .beton file holds
// the images and labels dataset.LoadCIFAR reads.
func TestConvertCIFAR(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	bin := filepath.Join(dir, "cifar-10-batches-bin")
	os.Mkdir(bin, 0o755)
	r := rand.New(rand.NewPCG(7, 8))
	records := func(n int) []byte {
		b := make([]byte, n*3073)
		for i := range b {
			b[i] = uint8(r.UintN(256))
		}
		for i := range n {
			b[i*3073] %= 10
		}
		return b
	}
	files := map[string][]byte{"test_batch.bin": records(30), "batches.meta.txt": []byte(strings.Repeat("class\n", 10))}
	for i := 1; i <= 5; i++ {
		files["data_batch_"+string(rune('0'+i))+".bin"] = records(4)
	}
	for n, b := range files {
		if err := os.WriteFile(filepath.Join(bin, n), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	_, want, err := dataset.LoadCIFAR(context.Background(), dataset.CIFAROptions{Classes: 10, Dir: dir})
	if err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(t.TempDir(), "test.beton")
	var stdout, stderr bytes.Buffer
	if code := run([]string{"convert", "cifar10", dir, out, "--split", "test"}, &stdout, &stderr); code != exitOK {
		t.Fatalf("exit status %d: %s", code, stderr.String())
	}
	if !strings.Contains(stdout.String(), "30 samples of CIFAR-10 test set") {
		t.Errorf("output %q", stdout.String())
	}
	got, err := ffcv.ReadImages(context.Background(), out, ffcv.ReadImagesOptions{NumClasses: 10})
	if err != nil {
		t.Fatal(err)
	}
	if got.N != 30 || got.C != 3 || got.H != 32 || !bytes.Equal(got.Pixels, want.Pixels) {
		t.Fatalf("converted: %d images of %d×%d×%d, pixels equal %v", got.N, got.H, got.W, got.C, bytes.Equal(got.Pixels, want.Pixels))
	}
	for i, y := range want.Labels {
		if got.Labels[i] != y {
			t.Fatalf("image %d: label %d, want %d", i, got.Labels[i], y)
		}
	}

	runCLICases(t, []cliCase{
		{"split", []string{"convert", "cifar100", dir, out, "--split", "val"}, exitUsage, nil, []string{`split "val": want train or test`}, false},
		{"missing", []string{"convert", "cifar100", dir, out}, exitFailure, nil, []string{"neither cifar-100-binary.tar.gz, cifar-100-python.tar.gz nor the files of cifar-100-binary or cifar-100-python", "--download"}, false},
		{"arguments", []string{"convert", "cifar10", dir}, exitUsage, nil, []string{"cifar10: want DIR and OUT.beton"}, false},
	})
}

// TestConvertCIFARPython converts dataset's committed CIFAR-100 python
// version (pickles) and checks that the .beton file holds its images.
func TestConvertCIFARPython(t *testing.T) {
	t.Parallel()
	dir := filepath.Join("..", "..", "dataset", "testdata", "cifar-python", "p5-str")
	want, _, err := dataset.LoadCIFAR(context.Background(), dataset.CIFAROptions{Classes: 100, Dir: dir})
	if err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(t.TempDir(), "train.beton")
	var stdout, stderr bytes.Buffer
	if code := run([]string{"convert", "cifar100", dir, out}, &stdout, &stderr); code != exitOK {
		t.Fatalf("exit status %d: %s", code, stderr.String())
	}
	if !strings.Contains(stdout.String(), "3 samples of CIFAR-100") {
		t.Errorf("output %q", stdout.String())
	}
	got, err := ffcv.ReadImages(context.Background(), out, ffcv.ReadImagesOptions{NumClasses: 100})
	if err != nil {
		t.Fatal(err)
	}
	if got.N != 3 || !bytes.Equal(got.Pixels, want.Pixels) || !slices.Equal(got.Labels, want.Labels) {
		t.Fatalf("converted: %d images, pixels equal %v, labels %v, want %v", got.N, bytes.Equal(got.Pixels, want.Pixels), got.Labels, want.Labels)
	}
}
