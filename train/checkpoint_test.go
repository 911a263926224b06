package train_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/flockml/flock/safetensors"
	"github.com/flockml/flock/train"
)

// TestCheckpointDamaged loads checkpoints damaged or edited after they
// were written and checks that each is refused with an error naming the
// problem, before anything changes.
func TestCheckpointDamaged(t *testing.T) {
	dir := t.TempDir()
	data := synthetic(96, 3, 1)
	good := filepath.Join(dir, "good.safetensors")
	checkpointAt(t, data, train.Options{}, 4, good)
	raw, err := os.ReadFile(good)
	if err != nil {
		t.Fatal(err)
	}
	// rewrite writes a copy of the good checkpoint changed by edit.
	rewrite := func(name string, edit func(f *safetensors.File)) string {
		f, err := safetensors.Open(good)
		if err != nil {
			t.Fatal(err)
		}
		edit(f)
		path := filepath.Join(dir, name)
		if err := safetensors.WriteFile(path, f.Tensors, f.Metadata); err != nil {
			t.Fatal(err)
		}
		return path
	}
	editConfig := func(edit func(map[string]any)) func(f *safetensors.File) {
		return func(f *safetensors.File) {
			var cfg map[string]any
			if err := json.Unmarshal([]byte(f.Metadata["config"]), &cfg); err != nil {
				t.Fatal(err)
			}
			edit(cfg)
			b, err := json.Marshal(cfg)
			if err != nil {
				t.Fatal(err)
			}
			f.Metadata["config"] = string(b)
		}
	}
	var buffer string // an optimizer buffer of the checkpoint
	rewrite("probe.safetensors", func(f *safetensors.File) {
		for _, n := range f.Names() {
			if strings.HasPrefix(n, "optim.") && buffer == "" {
				buffer = n
			}
		}
	})
	flipped := filepath.Join(dir, "flipped.safetensors")
	raw[len(raw)-3] ^= 0x10 // a byte of the last tensor's data
	if err := os.WriteFile(flipped, raw, 0o644); err != nil {
		t.Fatal(err)
	}

	for _, tt := range []struct {
		name string
		path string
		want string
	}{
		{"flipped byte", flipped, "the file is damaged"},
		{"optimizer buffer left out", rewrite("nobuf.safetensors", func(f *safetensors.File) { delete(f.Tensors, buffer) }),
			fmt.Sprintf("tensor %q, which its metadata lists, is missing", buffer)},
		{"unknown config key", rewrite("key.safetensors", editConfig(func(c map[string]any) { c["learning_rate"] = 0.1 })),
			`config: json: unknown field "learning_rate"`},
		{"bad config value", rewrite("lr.safetensors", editConfig(func(c map[string]any) { c["lr"] = -1 })),
			"stored config: lr -1: want a finite value > 0"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			tr, err := train.New(tinyConfig(), data, nil, train.Options{})
			if err != nil {
				t.Fatal(err)
			}
			defer tr.Close()
			before := weights(tr.Model())
			err = tr.LoadCheckpoint(tt.path)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("load: %v, want an error containing %q", err, tt.want)
			}
			sameWeights(t, before, weights(tr.Model()))
			if tr.Step() != 0 {
				t.Errorf("step %d after a refused load", tr.Step())
			}
		})
	}
	if _, err := train.ReadCheckpointConfig(filepath.Join(dir, "lr.safetensors")); err == nil || !strings.Contains(err.Error(), "stored config: lr -1") {
		t.Errorf("ReadCheckpointConfig of a bad config: %v", err)
	}
}

// TestCheckpointPath checks that a checkpoint path that cannot be written
// is refused when the run is built, not at its first checkpoint.
func TestCheckpointPath(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	file := filepath.Join(dir, "file")
	if err := os.WriteFile(file, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct{ path, want string }{
		{filepath.Join(dir, "missing", "c.safetensors"), "directory " + filepath.Join(dir, "missing") + ": stat"},
		{filepath.Join(file, "c.safetensors"), "directory " + file + ": not a directory"},
		{dir, "is a directory"},
	} {
		_, err := train.New(tinyConfig(), synthetic(96, 3, 1), nil, train.Options{CheckpointPath: tt.path})
		if err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("checkpoint %s: %v, want an error containing %q", tt.path, err, tt.want)
		}
	}
	entries, _ := os.ReadDir(dir)
	if len(entries) != 1 {
		t.Errorf("the checks left files: %v", entries)
	}
}

// TestCheckpointEvery checks that Options.CheckpointEvery saves mid-epoch
// and that a save removes the temporary files of killed ones.
func TestCheckpointEvery(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	path := filepath.Join(dir, "c.safetensors")
	stale := filepath.Join(dir, ".c.safetensors.tmp12345")
	if err := os.WriteFile(stale, []byte("killed"), 0o644); err != nil {
		t.Fatal(err)
	}
	tr, err := train.New(tinyConfig(), synthetic(96, 3, 1), nil, train.Options{CheckpointPath: path, CheckpointEvery: 4})
	if err != nil {
		t.Fatal(err)
	}
	defer tr.Close()
	// 6 steps per epoch: checkpoints at 4 (every), 6 (epoch end), then 8.
	for _, tc := range []struct{ until, saved int }{{3, -1}, {5, 4}, {7, 6}, {9, 8}} {
		if _, err := tr.RunUntil(context.Background(), tc.until); err != nil {
			t.Fatal(err)
		}
		f, err := safetensors.Open(path)
		switch {
		case tc.saved < 0 && err == nil:
			t.Errorf("step %d: a checkpoint already", tc.until)
		case tc.saved >= 0 && err != nil:
			t.Errorf("step %d: %v", tc.until, err)
		case tc.saved >= 0 && f.Metadata["step"] != strconv.Itoa(tc.saved):
			t.Errorf("step %d: checkpoint of step %s, want %d", tc.until, f.Metadata["step"], tc.saved)
		}
	}
	if _, err := os.Stat(stale); !os.IsNotExist(err) {
		t.Errorf("stale temporary file still there: %v", err)
	}
}
