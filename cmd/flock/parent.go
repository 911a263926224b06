package main

import (
	"context"
	"log/slog"
	"os"
	"time"
)

// parentPoll is how often a rank started by a launcher checks that the
// launcher still runs.
const parentPoll = time.Second

// watchParent calls gone once when getppid no longer returns parent (the
// parent died and the process was handed to another), checking every
// interval until ctx ends. It is the fallback for systems without a
// parent-death signal, where a rank whose launcher was killed would
// otherwise train on, unseen, until its next write to a closed pipe.
func watchParent(ctx context.Context, parent int, interval time.Duration, getppid func() int, gone func()) {
	tick := time.NewTicker(interval)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
			if getppid() != parent {
				gone()
				return
			}
		}
	}
}

// stopWithParent returns a context that ends with ctx or when this
// process's parent, a launcher, dies; see watchParent.
func stopWithParent(ctx context.Context, log *slog.Logger) (context.Context, context.CancelFunc) {
	ctx, cancel := context.WithCancel(ctx)
	parent := os.Getppid()
	go watchParent(ctx, parent, parentPoll, os.Getppid, func() {
		log.Warn("the launcher is gone; stopping", "pid", parent)
		cancel()
	})
	return ctx, cancel
}
