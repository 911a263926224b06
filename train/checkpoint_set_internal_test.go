package train

import (
	"errors"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"testing"

	"github.com/flockml/flock/backend/cpu"
	"github.com/flockml/flock/dist"
	"github.com/flockml/flock/dist/commtest"
)

// TestRemoveStaleSetFiles lays out what killed saves of a checkpoint set
// leave and checks that a rank removes its own leftovers and nothing else.
func TestRemoveStaleSetFiles(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	path := filepath.Join(dir, "run.ckpt")
	files := []string{
		"run.ckpt",                       // the manifest
		".run.ckpt.tmp4711",              // a killed write of the manifest: rank 0's
		"run.ckpt.step12.rank0",          // the set in place
		"run.ckpt.step12.rank1",          //
		"run.ckpt.step18.rank0",          // a save killed before its commit
		"run.ckpt.step18.rank1",          //
		".run.ckpt.step24.rank0.tmp0815", // a save killed mid-write
		".run.ckpt.step24.rank1.tmp0815", //
		"run.ckpt.step18.rank10",         // another rank's
		"run.ckpt.stepX.rank0",           // not a file of the set
		"other.ckpt.step18.rank0",        //
		".run.ckpt.step24.rank0.tmp",     // not a temporary file of Write
	}
	for _, f := range files {
		if err := os.WriteFile(filepath.Join(dir, f), nil, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	removeStaleSetFiles(path, 0, filepath.Join(dir, "run.ckpt.step12.rank0"))
	removeStaleSetFiles(path, 1, filepath.Join(dir, "run.ckpt.step12.rank1"))
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, e := range entries {
		got = append(got, e.Name())
	}
	want := []string{"run.ckpt", "run.ckpt.step12.rank0", "run.ckpt.step12.rank1", "run.ckpt.step18.rank10", "run.ckpt.stepX.rank0", "other.ckpt.step18.rank0", ".run.ckpt.step24.rank0.tmp"}
	slices.Sort(got)
	slices.Sort(want)
	if !slices.Equal(got, want) {
		t.Errorf("left %q, want %q", got, want)
	}
}

// TestAgreeOnCommDevice checks that agree hands a Comm that claims a
// device of its own its flag on that device (the wrapper panics on any
// other), and that a failure on one rank reaches the other.
func TestAgreeOnCommDevice(t *testing.T) {
	t.Parallel()
	cs := commtest.OnDevice(dist.NewLocal(2), cpu.New())
	errs := make([]error, 2)
	var wg sync.WaitGroup
	for r, c := range cs {
		wg.Go(func() {
			var mine error
			if r == 1 {
				mine = errors.New("disk full")
			}
			errs[r] = agree(c, mine)
		})
	}
	wg.Wait()
	for r, err := range errs {
		if err == nil {
			t.Errorf("rank %d: agree = nil, want the failure of rank 1", r)
		}
	}
}
