package atomicfile

import (
	"errors"
	"io"
	"os"
	"path/filepath"
	"testing"
)

// entries lists the names in dir.
func entries(t *testing.T, dir string) []string {
	t.Helper()
	es, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range es {
		names = append(names, e.Name())
	}
	return names
}

func TestWrite(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	path := filepath.Join(dir, "f.bin")
	if err := Write(path, func(w io.Writer) error { _, err := io.WriteString(w, "old"); return err }); err != nil {
		t.Fatal(err)
	}
	// WriteFile writes at offsets of the file itself.
	err := WriteFile(path, func(f *os.File) error {
		if _, err := f.WriteAt([]byte("tail"), 4); err != nil {
			return err
		}
		_, err := f.WriteAt([]byte("head"), 0)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(path); string(b) != "headtail" {
		t.Errorf("contents %q, want %q", b, "headtail")
	}
	if st, _ := os.Stat(path); st.Mode().Perm() != 0o644 {
		t.Errorf("mode %v, want 0644", st.Mode().Perm())
	}
	// A failing fill leaves the old file and no temporary one.
	boom := errors.New("boom")
	for name, write := range map[string]func() error{
		"Write":     func() error { return Write(path, func(w io.Writer) error { io.WriteString(w, "part"); return boom }) },
		"WriteFile": func() error { return WriteFile(path, func(f *os.File) error { f.WriteString("part"); return boom }) },
	} {
		if err := write(); !errors.Is(err, boom) {
			t.Errorf("%s: error %v, want fill's", name, err)
		}
		if b, _ := os.ReadFile(path); string(b) != "headtail" {
			t.Errorf("%s: contents %q after a failed write, want the old ones", name, b)
		}
		if names := entries(t, dir); len(names) != 1 {
			t.Errorf("%s: directory holds %v after a failed write, want only f.bin", name, names)
		}
	}
	// A missing directory is reported, not created.
	if err := Write(filepath.Join(dir, "none", "f"), func(io.Writer) error { return nil }); err == nil {
		t.Error("write into a missing directory succeeded")
	}
}
