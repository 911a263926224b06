package main

import (
	"bytes"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/flockml/flock/dataset"
)

// noData hides every copy of Fashion-MNIST from the commands, as on a
// fresh machine.
func noData(t *testing.T) {
	t.Setenv("FLOCK_DATA", t.TempDir())
	t.Setenv("XDG_CACHE_HOME", t.TempDir())
	t.Setenv(dataset.SystemDataEnv, "")
}

// TestTrainEmbeddedSubset: with no copy of the data set and no download,
// flock train says so in one line and trains on the embedded subset, which
// its run record names.
func TestTrainEmbeddedSubset(t *testing.T) {
	if testing.Short() {
		t.Skip("trains for an epoch; skipped in -short mode")
	}
	noData(t)
	var stdout, stderr bytes.Buffer
	if code := run([]string{"train", "--no-download", "--workers", "2", "--epochs", "1", "--json"}, &stdout, &stderr); code != exitOK {
		t.Fatalf("exit status %d: %s", code, stderr.String())
	}
	if lines := strings.Count(stderr.String(), "\n"); lines != 1 || !strings.Contains(stderr.String(), "Fashion-MNIST not found: using the subset embedded in flock (6000 training, 2000 test images)") {
		t.Errorf("stderr: %q, want one line announcing the embedded subset", stderr.String())
	}
	var first, last struct {
		Kind        string  `json:"kind"`
		Data        string  `json:"data"`
		TrainImages int     `json:"train_images"`
		TestImages  int     `json:"test_images"`
		TestAcc     float64 `json:"test_acc"`
	}
	lines := strings.Split(strings.TrimSpace(stdout.String()), "\n")
	if err := json.Unmarshal([]byte(lines[0]), &first); err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal([]byte(lines[len(lines)-1]), &last); err != nil {
		t.Fatal(err)
	}
	if first.Kind != "run" || first.Data != "Fashion-MNIST (embedded subset)" || first.TrainImages != 6000 || first.TestImages != 2000 {
		t.Errorf("run record %+v: want the embedded subset of 6000 and 2000 images", first)
	}
	// An epoch of 23 steps is well past chance (10%).
	if last.Kind != "summary" || last.TestAcc < 0.3 {
		t.Errorf("last record %+v: want a summary with a test accuracy above 30%%", last)
	}
}

// TestDownloadFallsBack: a failed download leads to the embedded subset,
// and the line says why; with --data DIR it is an error instead.
func TestDownloadFallsBack(t *testing.T) {
	noData(t)
	srv := httptest.NewServer(http.NotFoundHandler())
	defer srv.Close()
	old := fashionMNISTURL
	fashionMNISTURL = srv.URL
	defer func() { fashionMNISTURL = old }()

	var stderr bytes.Buffer
	train, test, subset, err := fashionMNIST(t.Context(), "flock train", "", true, nil, &stderr)
	if err != nil || !subset || train.N != 6000 || test.N != 2000 {
		t.Fatalf("got subset %v, %v: want the embedded subset", subset, err)
	}
	if !strings.Contains(stderr.String(), "not found and not downloaded") || !strings.Contains(stderr.String(), "404 Not Found") {
		t.Errorf("stderr %q: want the failed download's reason", stderr.String())
	}
	dir := t.TempDir()
	if _, _, _, err := fashionMNIST(t.Context(), "flock train", dir, true, nil, &stderr); err == nil || !strings.Contains(err.Error(), "404 Not Found") {
		t.Errorf("--data %s and a failed download: got %v, want the download's error", dir, err)
	}
}
