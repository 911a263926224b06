// Package atomicfile writes files so that a crash or error leaves either the
// old contents or the complete new file at the path, never a part.
package atomicfile

import (
	"bufio"
	"io"
	"os"
	"path/filepath"
	"runtime"
)

// Write writes what fill writes to path atomically: under a temporary name
// in the same directory, synced, renamed over path, and the directory
// synced. On error the temporary file is removed and path is untouched.
// Errors are returned as they come, for the caller to wrap.
func Write(path string, fill func(w io.Writer) error) (err error) {
	dir, base := filepath.Split(path)
	if dir == "" {
		dir = "."
	}
	tmp, err := os.CreateTemp(dir, tempPrefix(base)+"*")
	if err != nil {
		return err
	}
	renamed := false
	defer func() {
		if err != nil && !renamed {
			tmp.Close()
			os.Remove(tmp.Name())
		}
	}()
	bw := bufio.NewWriterSize(tmp, 1<<20)
	if err := fill(bw); err != nil {
		return err
	}
	if err := bw.Flush(); err != nil {
		return err
	}
	if err := tmp.Chmod(0o644); err != nil {
		return err
	}
	if err := tmp.Sync(); err != nil {
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	if err := os.Rename(tmp.Name(), path); err != nil {
		return err
	}
	renamed = true
	if runtime.GOOS == "windows" {
		// Directories cannot be opened for syncing there; the rename is
		// durable once the file system journals it.
		return nil
	}
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	return d.Sync()
}
