package train

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/flockml/flock/dist"
	"github.com/flockml/flock/internal/atomicfile"
	"github.com/flockml/flock/tensor"
)

const manifestFormat = "flock-train-checkpoint-set"

// manifest names the files of a checkpoint set, one per rank, relative to
// the manifest's directory.
type manifest struct {
	Format  string   `json:"format"`
	Version string   `json:"version"`
	World   int      `json:"world"`
	Step    int      `json:"step"`
	Files   []string `json:"files"`
}

// file returns the path of rank r's file of m, whose manifest is at path.
func (m manifest) file(path string, r int) string {
	return filepath.Join(filepath.Dir(path), m.Files[r])
}

// readManifest reads the manifest at path; it fails for anything else (a
// single-file checkpoint among them).
func readManifest(path string) (manifest, error) {
	var m manifest
	fi, err := os.Stat(path)
	if err != nil {
		return m, err
	}
	if fi.Size() > 1<<20 {
		return m, errors.New("too large for a manifest")
	}
	data, err := os.ReadFile(path)
	if err != nil {
		return m, err
	}
	if err := json.Unmarshal(data, &m); err != nil || m.Format != manifestFormat {
		return m, errors.New("not a manifest")
	}
	if m.Version != checkpointVersion || m.World < 1 || len(m.Files) != m.World {
		return m, fmt.Errorf("train: checkpoint set %s: version %q with %d files for %d ranks: want version %s and a file per rank",
			path, m.Version, len(m.Files), m.World, checkpointVersion)
	}
	for _, f := range m.Files {
		if f != filepath.Base(f) || f == "." || f == ".." {
			return m, fmt.Errorf("train: checkpoint set %s: file %q is not a name in the manifest's directory", path, f)
		}
	}
	return m, nil
}

// checkpointFile returns the file this worker resumes from: path itself,
// or its rank's file when path is a checkpoint set's manifest.
func (t *Trainer) checkpointFile(path string) (string, error) {
	m, err := readManifest(path)
	if err != nil {
		if m.Format == manifestFormat {
			return "", err
		}
		return path, nil
	}
	c := t.opts.CheckpointComm
	if c == nil || c.Size() != m.World {
		world := 1
		if c != nil {
			world = c.Size()
		}
		return "", fmt.Errorf("train: load checkpoint %s: it is a set of %d workers' checkpoints, this run has %d workers sharing checkpoints (resume with the same strategy and number of workers)",
			path, m.World, world)
	}
	t.setFile = m.file(path, c.Rank())
	return t.setFile, nil
}

// saveCheckpointSet writes this rank's part of a checkpoint set; see
// SaveCheckpoint.
func (t *Trainer) saveCheckpointSet(path string) error {
	c := t.opts.CheckpointComm
	name := fmt.Sprintf("%s.step%d.rank%d", filepath.Base(path), t.step, c.Rank())
	file := filepath.Join(filepath.Dir(path), name)
	werr := t.writeCheckpoint(file)
	if err := agree(c, werr); err != nil {
		return fmt.Errorf("train: save checkpoint set %s: %w", path, err)
	}
	var merr error
	if c.Rank() == 0 {
		m := manifest{Format: manifestFormat, Version: checkpointVersion, World: c.Size(), Step: t.step}
		for r := range c.Size() {
			m.Files = append(m.Files, fmt.Sprintf("%s.step%d.rank%d", filepath.Base(path), t.step, r))
		}
		merr = atomicfile.Write(path, func(w io.Writer) error {
			enc := json.NewEncoder(w)
			enc.SetIndent("", "  ")
			return enc.Encode(m)
		})
		if merr != nil {
			merr = fmt.Errorf("write manifest: %w", merr)
		}
	}
	if err := agree(c, merr); err != nil {
		return fmt.Errorf("train: save checkpoint set %s: %w", path, err)
	}
	if t.setFile != "" && t.setFile != file {
		os.Remove(t.setFile)
	}
	t.setFile = file
	removeStaleSetFiles(path, c.Rank(), file)
	return nil
}

// removeStaleSetFiles removes, best effort, what killed saves of the set
// at path left of rank's files: temporary files, and complete files that
// no manifest names because the save stopped before its commit. keep is
// the rank's file of the set now in place. Rank 0 also removes the
// manifest's temporary files.
func removeStaleSetFiles(path string, rank int, keep string) {
	if rank == 0 {
		atomicfile.RemoveTemps(path)
	}
	dir, base := filepath.Split(path)
	entries, err := os.ReadDir(filepath.Clean(dir))
	if err != nil {
		return
	}
	digits := func(s string) bool { return s != "" && strings.Trim(s, "0123456789") == "" }
	suffix := fmt.Sprintf(".rank%d", rank)
	for _, e := range entries {
		name := e.Name()
		hidden := strings.HasPrefix(name, ".")
		rest, ok := strings.CutPrefix(strings.TrimPrefix(name, "."), base+".step")
		if !ok || !e.Type().IsRegular() {
			continue
		}
		step, rest, ok := strings.Cut(rest, ".")
		if !ok || !digits(step) {
			continue
		}
		// rankR (a file of the set) or rankR.tmpDIGITS (its temporary file).
		tail, isRank := strings.CutPrefix("."+rest, suffix)
		stale := isRank && (!hidden && tail == "" || hidden && strings.HasPrefix(tail, ".tmp") && digits(tail[len(".tmp"):]))
		if p := filepath.Join(dir, name); stale && p != keep {
			os.Remove(p)
		}
	}
}

// agree tells every rank whether all of them succeeded: it returns err
// when this rank failed, an error naming the failure elsewhere when another
// did, and nil when none did.
func agree(c dist.Comm, err error) error {
	flag := tensor.Zeros(tensor.Shape{1}, tensor.On(dist.DeviceOf(c)))
	defer flag.Release()
	if err != nil {
		flag.Fill(1)
	}
	ctx, cancel := dist.WithDefaultTimeout(context.Background(), dist.DefaultTimeout)
	defer cancel()
	if cerr := c.AllReduce(ctx, flag, dist.Max); cerr != nil {
		return errors.Join(err, cerr)
	}
	if err != nil {
		return err
	}
	if flag.Item() != 0 {
		return errors.New("another rank failed to write its part; the previous set stays in place")
	}
	return nil
}
