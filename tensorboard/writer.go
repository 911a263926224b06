package tensorboard

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"time"
	"unicode/utf8"
)

// bufferSize is how many bytes of events a Writer holds before it writes
// them out without being asked to.
const bufferSize = 64 << 10

// sequence numbers the files this process creates, so that two made in
// the same second get different names.
var sequence atomic.Uint64

// Writer appends scalar events to one event file. Its methods are safe
// for concurrent use.
type Writer struct {
	path string

	mu  sync.Mutex
	f   *os.File
	buf []byte // events not yet written to f
	// err is the first error writing or closing the file, returned by
	// every call after it.
	err error
}

// Create makes dir (and its parents) if needed and starts a new event
// file in it, writing its first event (the file version) at once.
func Create(dir string) (*Writer, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("tensorboard: %w", err)
	}
	now := time.Now()
	host := hostName()
	for range 1000 {
		name := fmt.Sprintf("events.out.tfevents.%010d.%s.%d.%d", now.Unix(), host, os.Getpid(), sequence.Add(1)-1)
		path := filepath.Join(dir, name)
		f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
		if errors.Is(err, fs.ErrExist) {
			continue // left by an earlier process with the same pid
		}
		if err != nil {
			return nil, fmt.Errorf("tensorboard: %w", err)
		}
		w := &Writer{path: path, f: f, buf: appendRecord(nil, appendVersionEvent(nil, wallTime(now)))}
		if err := w.Flush(); err != nil {
			f.Close()
			os.Remove(path)
			return nil, err
		}
		return w, nil
	}
	return nil, fmt.Errorf("tensorboard: create an event file in %s: every name taken", dir)
}

// hostName returns the host's name as a file name may hold it.
func hostName() string {
	h, err := os.Hostname()
	if err != nil || h == "" {
		return "localhost"
	}
	return strings.Map(func(r rune) rune {
		if r == '/' || r == '\\' || r == 0 {
			return '_'
		}
		return r
	}, h)
}

// Path returns the path of the event file.
func (w *Writer) Path() string { return w.path }

// Scalar appends an event holding value under tag at step. A zero wall
// time stands for now. A tag must be non-empty UTF-8.
func (w *Writer) Scalar(tag string, step int64, value float64, wall time.Time) error {
	return w.Scalars(step, wall, Value{Tag: tag, Value: value})
}

// Scalars appends one event holding values at step (none: no event),
// which TensorBoard reads as Scalar would each of them. A zero wall time
// stands for now.
func (w *Writer) Scalars(step int64, wall time.Time, values ...Value) error {
	for _, v := range values {
		if v.Tag == "" {
			return errors.New("tensorboard: empty tag")
		}
		if !utf8.ValidString(v.Tag) {
			return fmt.Errorf("tensorboard: tag %q: not UTF-8", v.Tag)
		}
	}
	if len(values) == 0 {
		return nil
	}
	if wall.IsZero() {
		wall = time.Now()
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.err != nil {
		return w.err
	}
	w.buf = appendRecord(w.buf, appendScalarEvent(nil, wallTime(wall), step, values))
	if len(w.buf) >= bufferSize {
		return w.writeOut()
	}
	return nil
}

// Flush writes the events held in memory to the file, where a TensorBoard
// watching the directory reads them.
func (w *Writer) Flush() error {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.err != nil {
		return w.err
	}
	return w.writeOut()
}

// writeOut writes w.buf to the file; w.mu is held.
func (w *Writer) writeOut() error {
	if len(w.buf) == 0 {
		return nil
	}
	if _, err := w.f.Write(w.buf); err != nil {
		w.err = fmt.Errorf("tensorboard: %w", err)
		return w.err
	}
	w.buf = w.buf[:0]
	return nil
}

// Close flushes the events, syncs the file to disk and closes it. Calls
// after Close return an error that wraps os.ErrClosed, or the first error
// the Writer met.
func (w *Writer) Close() error {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.f == nil {
		return w.err
	}
	err := w.err
	if err == nil {
		err = w.writeOut()
	}
	if err == nil {
		if e := w.f.Sync(); e != nil {
			err = fmt.Errorf("tensorboard: %w", e)
		}
	}
	if e := w.f.Close(); e != nil && err == nil {
		err = fmt.Errorf("tensorboard: %w", e)
	}
	w.f = nil
	if err != nil {
		w.err = err
		return err
	}
	w.err = fmt.Errorf("tensorboard: %s: %w", w.path, os.ErrClosed)
	return nil
}
