package main

import (
	"bytes"
	"context"
	"errors"
	"image"
	"image/color"
	"image/png"
	"os"
	"path/filepath"
	"testing"

	"github.com/flockml/flock/dataset"
	"github.com/flockml/flock/ffcv"
	"github.com/flockml/flock/ffcv/beton"
)

// TestConvertUsage checks the help and the mistakes of flock convert.
func TestConvertUsage(t *testing.T) {
	dir := t.TempDir()
	out := filepath.Join(dir, "x.beton")
	runCLICases(t, []cliCase{
		{"help", []string{"convert", "--help"}, exitOK, []string{"Usage:", "flock convert imagefolder DIR OUT.beton", "--max-res N", "--write-mode MODE"}, nil, false},
		{"help command", []string{"help", "convert"}, exitOK, []string{"flock convert fashion-mnist OUT.beton"}, nil, false},
		{"listed", []string{"--help"}, exitOK, []string{"convert"}, nil, false},
		{"no source", []string{"convert"}, exitUsage, nil, []string{"missing source"}, false},
		{"unknown source", []string{"convert", "mnist", out}, exitUsage, nil, []string{`unknown source "mnist"`}, false},
		{"no output", []string{"convert", "imagefolder", dir}, exitUsage, nil, []string{"imagefolder: want DIR and OUT.beton"}, false},
		{"extra argument", []string{"convert", "synthetic", out, "more"}, exitUsage, nil, []string{`unexpected argument "more"`}, false},
		{"suffix", []string{"convert", "synthetic", filepath.Join(dir, "x.bin")}, exitUsage, nil, []string{"want a path ending in .beton"}, false},
		{"page size", []string{"convert", "synthetic", out, "--page-size", "3MiB"}, exitUsage, nil, []string{"page size 3MiB: want a power of two"}, false},
		{"write mode", []string{"convert", "synthetic", out, "--write-mode", "png"}, exitUsage, nil, []string{`write mode "png"`}, false},
		{"quality", []string{"convert", "synthetic", out, "--jpeg-quality", "0"}, exitUsage, nil, []string{"jpeg quality 0"}, false},
		{"size", []string{"convert", "synthetic", out, "--size", "big"}, exitUsage, nil, []string{`size "big"`}, false},
		{"split", []string{"convert", "fashion-mnist", out, "--split", "val"}, exitUsage, nil, []string{`split "val"`}, false},
		{"unknown flag", []string{"convert", "synthetic", out, "--quality", "90"}, exitUsage, nil, []string{"flag provided but not defined: -quality"}, false},
		{"missing folder", []string{"convert", "imagefolder", filepath.Join(dir, "none"), out}, exitFailure, nil, []string{"ffcv: image folder", "none"}, false},
		{"empty folder", []string{"convert", "imagefolder", dir, out}, exitFailure, nil, []string{"no class directories"}, false},
		{"max pixels", []string{"convert", "imagefolder", dir, out, "--max-pixels", "-1"}, exitUsage, nil, []string{"max pixels -1: want ≥ 0"}, false},
		{"missing output dir", []string{"convert", "synthetic", filepath.Join(dir, "no", "x.beton"), "--n", "2"}, exitFailure, nil, []string{"output directory", "does not exist"}, false},
	})
	if _, err := os.Stat(out); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("a failed conversion left %s: %v", out, err)
	}
}

// TestConvertSynthetic writes synthetic JPEGs, flags after the positional
// arguments, and reads the file back.
func TestConvertSynthetic(t *testing.T) {
	out := filepath.Join(t.TempDir(), "syn.beton")
	var stdout, stderr bytes.Buffer
	args := []string{"convert", "synthetic", out, "--n", "30", "--size", "80x60", "--max-res", "64", "--page-size", "2MiB", "--workers", "2"}
	if code := run(args, &stdout, &stderr); code != exitOK {
		t.Fatalf("exit status %d: %s", code, stderr.String())
	}
	if !bytes.Contains(stdout.Bytes(), []byte("wrote "+out+": 30 samples of synthetic 80x60 images, fields image, label")) {
		t.Errorf("stdout %q", stdout.String())
	}
	r, err := beton.Open(out, beton.ReadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	if r.NumSamples() != 30 || r.PageSize() != 1<<21 {
		t.Fatalf("%d samples, page size %d", r.NumSamples(), r.PageSize())
	}
	for i := range 30 {
		ref, err := r.Image(0, i)
		if err != nil {
			t.Fatal(err)
		}
		if !ref.JPEG || ref.Width != 64 || ref.Height != 48 || r.Int(1, i) != int64(i%10) {
			t.Fatalf("sample %d: JPEG %v %dx%d label %d, want a 64x48 JPEG with label %d", i, ref.JPEG, ref.Width, ref.Height, r.Int(1, i), i%10)
		}
	}
	// Same settings, same bytes.
	again := filepath.Join(t.TempDir(), "syn.beton")
	args[2] = again
	args[len(args)-1] = "1"
	if code := run(args, &bytes.Buffer{}, &stderr); code != exitOK {
		t.Fatalf("exit status %d: %s", code, stderr.String())
	}
	a, _ := os.ReadFile(out)
	b, _ := os.ReadFile(again)
	if !bytes.Equal(a, b) {
		t.Error("two conversions with 2 and 1 workers differ")
	}
}

// TestConvertImageFolder converts a small class-per-directory tree of PNG
// files as raw images and checks classes, labels and pixels.
func TestConvertImageFolder(t *testing.T) {
	root := t.TempDir()
	for k, rel := range []string{"cat/1.png", "cat/2.png", "dog/1.png"} {
		m := image.NewNRGBA(image.Rect(0, 0, 8+k, 6))
		for i := range m.Pix {
			m.Pix[i] = uint8(i*(k+3)) | 0x80*uint8(i%4/3) // opaque-ish alpha
		}
		var buf bytes.Buffer
		png.Encode(&buf, m)
		os.MkdirAll(filepath.Dir(filepath.Join(root, rel)), 0o755)
		os.WriteFile(filepath.Join(root, rel), buf.Bytes(), 0o644)
	}
	out := filepath.Join(t.TempDir(), "folder.beton")
	var stdout, stderr bytes.Buffer
	if code := run([]string{"convert", "imagefolder", root, out, "--write-mode", "raw"}, &stdout, &stderr); code != exitOK {
		t.Fatalf("exit status %d: %s", code, stderr.String())
	}
	if !bytes.Contains(stdout.Bytes(), []byte("3 samples of "+root+" (2 classes)")) {
		t.Errorf("stdout %q", stdout.String())
	}
	r, err := beton.Open(out, beton.ReadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	for i, want := range []int64{0, 0, 1} {
		ref, _ := r.Image(0, i)
		if r.Int(1, i) != want || ref.JPEG || ref.Width != 8+i || ref.Height != 6 || ref.Channels != 3 {
			t.Errorf("sample %d: label %d, %dx%dx%d JPEG %v", i, r.Int(1, i), ref.Width, ref.Height, ref.Channels, ref.JPEG)
		}
	}
	// --max-pixels reaches the source: only the 10×6 image is over a limit of 55.
	if code := run([]string{"convert", "imagefolder", root, out, "--max-pixels", "55"}, &stdout, &stderr); code != exitFailure ||
		!bytes.Contains(stderr.Bytes(), []byte("10×6 image exceeds the pixel limit of 55")) {
		t.Errorf("--max-pixels 55: exit status %d, stderr %q", code, stderr.String())
	}
	// Pixel (2, 1) of the first image, alpha dropped.
	ref, _ := r.Image(0, 0)
	m, _ := png.Decode(bytes.NewReader(mustRead(t, filepath.Join(root, "cat/1.png"))))
	c := color.NRGBAModel.Convert(m.At(2, 1)).(color.NRGBA)
	if got := ref.Data[(1*8+2)*3:][:3]; got[0] != c.R || got[1] != c.G || got[2] != c.B {
		t.Errorf("pixel (2, 1): %v, want %v", got, c)
	}
}

func mustRead(t *testing.T, path string) []byte {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestConvertFashionMNIST converts the Fashion-MNIST test set in FFCV's
// ndarray layout and compares it with the IDX files.
func TestConvertFashionMNIST(t *testing.T) {
	needData(t)
	out := filepath.Join(t.TempDir(), "fm.beton")
	var stdout, stderr bytes.Buffer
	if code := run([]string{"convert", "fashion-mnist", "--split", "test", out}, &stdout, &stderr); code != exitOK {
		t.Fatalf("exit status %d: %s", code, stderr.String())
	}
	got, err := ffcv.ReadImages(context.Background(), out, ffcv.ReadImagesOptions{})
	if err != nil {
		t.Fatal(err)
	}
	_, test, err := dataset.LoadFashionMNIST(context.Background(), dataset.FashionMNISTOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if got.N != 10000 || got.H != 28 || got.W != 28 || got.C != 1 || !bytes.Equal(got.Pixels, test.Pixels) {
		t.Fatalf("converted set %d×%d×%d×%d differs from the IDX files", got.N, got.H, got.W, got.C)
	}
	for i, y := range got.Labels {
		if y != test.Labels[i] {
			t.Fatalf("label %d: %d, want %d", i, y, test.Labels[i])
		}
	}
}
