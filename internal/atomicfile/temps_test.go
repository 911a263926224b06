package atomicfile

import (
	"errors"
	"io"
	"os"
	"path/filepath"
	"slices"
	"testing"
)

// TestRemoveTemps leaves the temporary file of a write that failed as a
// killed process would, and checks that RemoveTemps removes it and nothing
// else.
func TestRemoveTemps(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	path := filepath.Join(dir, "run.ckpt")
	if err := Write(path, func(w io.Writer) error { _, err := io.WriteString(w, "saved"); return err }); err != nil {
		t.Fatal(err)
	}
	// A write killed mid-way: its temporary file stays.
	var left string
	killed := errors.New("killed")
	err := Write(path, func(w io.Writer) error {
		entries, _ := os.ReadDir(dir)
		for _, e := range entries {
			if e.Name() != "run.ckpt" {
				left = filepath.Join(dir, e.Name())
			}
		}
		return killed
	})
	if !errors.Is(err, killed) || left == "" {
		t.Fatalf("write: %v, temporary file %q", err, left)
	}
	if err := os.WriteFile(left, []byte("part"), 0o600); err != nil {
		t.Fatal(err)
	}
	keep := []string{"run.ckpt", ".run.ckpt.tmpfile", "other.ckpt", ".other.ckpt.tmp123", ".run.ckpt.tmp"}
	for _, n := range keep[1:] {
		if err := os.WriteFile(filepath.Join(dir, n), nil, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	removed, err := RemoveTemps(path)
	if err != nil {
		t.Fatal(err)
	}
	// ".run.ckpt.tmp" has no digits after the prefix: not Write's.
	if !slices.Equal(removed, []string{left}) {
		t.Errorf("removed %q, want %q", removed, left)
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range entries {
		names = append(names, e.Name())
	}
	slices.Sort(names)
	slices.Sort(keep)
	if !slices.Equal(names, keep) {
		t.Errorf("directory holds %q, want %q", names, keep)
	}
}
