package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"github.com/flockml/flock/bench"
	"github.com/flockml/flock/internal/peers"
)

// benchReport is how the benchmark subcommands report: JSON Lines records
// with --json (the machine record first), else a line per measurement and
// a table at the end; and how they fail.
type benchReport struct {
	name           string // the subcommand, for messages
	json           bool
	enc            *json.Encoder
	stdout, stderr io.Writer
}

// newBenchReport starts the report of `flock bench name`.
func newBenchReport(name string, asJSON bool, stdout, stderr io.Writer) *benchReport {
	return &benchReport{name: name, json: asJSON, enc: json.NewEncoder(stdout), stdout: stdout, stderr: stderr}
}

// machine reports the machine record, the first of the JSON Lines.
func (r *benchReport) machine(m map[string]any) {
	if r.json {
		_ = r.enc.Encode(m)
	}
}

// measurement reports one measurement: rec as a JSON record, or a line
// "round N (warm-up)  " and the formatted text.
func (r *benchReport) measurement(rec any, round int, warmup bool, format string, args ...any) {
	if r.json {
		_ = r.enc.Encode(rec)
		return
	}
	tag := ""
	if warmup {
		tag = " (warm-up)"
	}
	fmt.Fprintf(r.stdout, "round %d%s  "+format+"\n", append([]any{round, tag}, args...)...)
}

// summaries reports the summaries, each as record(s) in JSON Lines, or a
// blank line and the table.
func summaries[S any](r *benchReport, sums []S, record func(S) any, table func(io.Writer) error) error {
	if r.json {
		for _, s := range sums {
			_ = r.enc.Encode(record(s))
		}
		return nil
	}
	fmt.Fprintln(r.stdout)
	return table(r.stdout)
}

// fail writes err and returns the failure exit status.
func (r *benchReport) fail(err error) int {
	fmt.Fprintf(r.stderr, "flock bench %s: %v\n", r.name, err)
	return exitFailure
}

// failRun writes err, met while running under ctx, and returns the exit
// status: interrupted when ctx was cancelled (Ctrl-C), else failure.
func (r *benchReport) failRun(ctx context.Context, err error) int {
	code := r.fail(err)
	if ctx.Err() != nil {
		return exitInterrupted
	}
	return code
}

// peerScript reports whether the peer's script exists, writing why not to
// stderr when it does not.
func peerScript(name, script string, stderr io.Writer) bool {
	if _, err := os.Stat(script); err != nil {
		fmt.Fprintf(stderr, "flock bench %s: peer script: %v (run from the repository root or give --peer-script)\n", name, err)
		return false
	}
	return true
}

// peerPython returns the interpreter that runs peer's script: python (the
// --python flag) for Debian's PyTorch peers, else the peers' environment
// that bench/peers/setup.sh installs.
func peerPython(peer, python string) (string, error) {
	switch peer {
	case bench.ImplTorch, bench.ImplGloo, bench.ImplNumpy:
		return python, nil
	}
	venv, err := peers.Python(".")
	if err != nil {
		return "", err
	}
	// Relative to the working directory when below it, so that the
	// results' commands read as they would be typed there.
	if wd, err := os.Getwd(); err == nil {
		if rel, err := filepath.Rel(wd, venv); err == nil && filepath.IsLocal(rel) {
			return "." + string(filepath.Separator) + rel, nil
		}
	}
	return venv, nil
}
