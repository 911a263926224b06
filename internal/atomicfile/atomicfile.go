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
func Write(path string, fill func(w io.Writer) error) error {
	return WriteFile(path, func(f *os.File) error {
		bw := bufio.NewWriterSize(f, 1<<20)
		if err := fill(bw); err != nil {
			return err
		}
		return bw.Flush()
	})
}

// WriteFile is Write for writers that need the file itself, to write at
// offsets (io.WriterAt) or unbuffered: fill gets the temporary file, which
// it must not close. The file is made readable by all (0644) before it is
// renamed over path.
func WriteFile(path string, fill func(f *os.File) error) (err error) {
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
	if err := fill(tmp); err != nil {
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
