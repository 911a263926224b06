package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/flockml/flock/bench"
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

// begin starts the run of flock bench NAME args: it returns the run's
// machine record, with the benchmark's settings, and its start time, and
// reports the record.
func (r *benchReport) begin(args []string, settings map[string]any) (machine map[string]any, start time.Time) {
	start = time.Now().UTC()
	machine = bench.MachineRecord(append([]string{"flock", "bench", r.name}, args...), start, settings)
	if r.json {
		_ = r.enc.Encode(machine)
	}
	return machine, start
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

// benchResults are the results of a benchmark run (bench.GemmResults and
// the like).
type benchResults interface {
	SummaryRecords() []any
	WriteTables(w io.Writer) error
	Write(dir string) error
}

// finish reports the summaries of res, as JSON records or a blank line and
// the tables, writes its results files into dir unless dir is "", and
// returns the exit status.
func (r *benchReport) finish(res benchResults, dir string) int {
	if r.json {
		for _, rec := range res.SummaryRecords() {
			_ = r.enc.Encode(rec)
		}
	} else {
		fmt.Fprintln(r.stdout)
		if err := res.WriteTables(r.stdout); err != nil {
			return r.fail(err)
		}
	}
	if dir != "" {
		if err := res.Write(dir); err != nil {
			return r.fail(err)
		}
	}
	return exitOK
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
