package main

import (
	"bytes"
	"errors"
	"flag"
	"fmt"
	"io"

	"github.com/flockml/flock/internal/atomicfile"
	"github.com/flockml/flock/plot"
)

func init() {
	extraCommands = append(extraCommands, command{"plot", "draw runs' loss, accuracy, H and bytes sent from their JSON Lines", runPlot, plotHelp})
}

// plotDefaultOut is where flock plot writes its figure without -o.
const plotDefaultOut = "plot.svg"

func plotHelp(w io.Writer) {
	fmt.Fprint(w, `Usage: flock plot RUN.jsonl... [-o OUT.svg]

Draw runs from their logs in one SVG figure of four panels against the
step: the training loss, the test accuracy, the synchronization period H
(each round's H over its steps) and the bytes a worker sent, one line per
run, named in a legend by the file's name and the run's strategy.

A log is the output of 'flock train --json' (one run; NaN or infinite
values, written as null, are left out) or the runs file of 'flock
experiment' (DIR/runs.jsonl: each line a run, its test accuracy after each
epoch and what it sent in all; no losses). A line that is not such a record
is an error that names the file and the line.

Flags:
  -o PATH   write the figure to PATH, replacing it whole ('-': standard
            output; default `+plotDefaultOut+`)

Examples:
  flock train --json > local.jsonl
  flock train --json --strategy dp > dp.jsonl
  flock plot local.jsonl dp.jsonl -o runs.svg
  flock plot bench/results/strategies/runs.jsonl
`)
}

func runPlot(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("flock plot", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	out := fs.String("o", plotDefaultOut, "")
	paths, err := parseInterleaved(fs, args)
	if err != nil {
		if errors.Is(err, flag.ErrHelp) {
			plotHelp(stdout)
			return exitOK
		}
		fmt.Fprintf(stderr, "flock plot: %v; run 'flock plot --help' for usage\n", err)
		return exitUsage
	}
	if len(paths) == 0 {
		fmt.Fprintln(stderr, "flock plot: no logs to draw (want RUN.jsonl...); run 'flock plot --help' for usage")
		return exitUsage
	}
	if *out == "" {
		fmt.Fprintln(stderr, "flock plot: -o: empty path; run 'flock plot --help' for usage")
		return exitUsage
	}
	runs, err := plot.ReadFiles(paths...)
	if err != nil {
		fmt.Fprintf(stderr, "flock %v\n", err)
		return exitFailure
	}
	var svg bytes.Buffer
	if err := plot.WriteSVG(&svg, runs); err != nil {
		fmt.Fprintf(stderr, "flock %v\n", err)
		return exitFailure
	}
	if *out == "-" {
		if _, err := stdout.Write(svg.Bytes()); err != nil {
			fmt.Fprintf(stderr, "flock plot: write: %v\n", err)
			return exitFailure
		}
		return exitOK
	}
	if err := atomicfile.Write(*out, func(w io.Writer) error { _, err := w.Write(svg.Bytes()); return err }); err != nil {
		fmt.Fprintf(stderr, "flock plot: write %s: %v\n", *out, err)
		return exitFailure
	}
	fmt.Fprintf(stdout, "flock plot: %d runs drawn in %s\n", len(runs), *out)
	return exitOK
}
