package main

import (
	"context"
	"sync/atomic"
	"testing"
	"time"
)

// TestWatchParent checks the fallback for a launcher's death: gone is
// called once the parent process changes, and never after ctx ends.
func TestWatchParent(t *testing.T) {
	t.Parallel()
	var ppid atomic.Int64
	ppid.Store(100)
	getppid := func() int { return int(ppid.Load()) }

	goneCalled := make(chan struct{})
	go watchParent(context.Background(), 100, time.Millisecond, getppid, func() { close(goneCalled) })
	select {
	case <-goneCalled:
		t.Fatal("gone called while the parent runs")
	case <-time.After(20 * time.Millisecond):
	}
	ppid.Store(1)
	select {
	case <-goneCalled:
	case <-time.After(5 * time.Second):
		t.Fatal("gone not called after the parent changed")
	}

	ctx, cancel := context.WithCancel(context.Background())
	returned := make(chan struct{})
	go func() {
		watchParent(ctx, 1, time.Millisecond, func() int { return 1 }, func() { t.Error("gone called") })
		close(returned)
	}()
	cancel()
	select {
	case <-returned:
	case <-time.After(5 * time.Second):
		t.Fatal("watchParent still running after its context ended")
	}
}
