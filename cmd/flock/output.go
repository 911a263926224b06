package main

import (
	"io"
	"sync"
)

// outputWriter remembers the first error writing to w and then calls
// failed once, so that a command whose output cannot be written (a full
// disk, a closed pipe) stops and fails instead of going on blind.
type outputWriter struct {
	w      io.Writer
	failed func()
	mu     sync.Mutex
	err    error
}

func (o *outputWriter) Write(p []byte) (int, error) {
	n, err := o.w.Write(p)
	if err != nil {
		o.mu.Lock()
		first := o.err == nil
		if first {
			o.err = err
		}
		o.mu.Unlock()
		if first && o.failed != nil {
			o.failed()
		}
	}
	return n, err
}

// Err returns the first write error.
func (o *outputWriter) Err() error {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.err
}
