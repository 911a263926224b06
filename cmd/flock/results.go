package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"time"
)

// records collects the JSON Lines records of a benchmark run: the machine
// record, then the measurements, then the summaries.
type records []any

// add appends every element of xs.
func add[T any](r records, xs []T) records {
	for _, x := range xs {
		r = append(r, x)
	}
	return r
}

// writeResults writes a benchmark's records to DIR/NAME_<date>.jsonl and
// the Markdown report that report writes (given the name of the records
// file) to DIR/NAME_<date>.md.
func writeResults(dir, name string, start time.Time, recs records, report func(b *strings.Builder, jsonl string) error) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	base := filepath.Join(dir, name+"_"+start.Format("2006-01-02"))
	var jl bytes.Buffer
	enc := json.NewEncoder(&jl)
	for _, r := range recs {
		if err := enc.Encode(r); err != nil {
			return err
		}
	}
	if err := os.WriteFile(base+".jsonl", jl.Bytes(), 0o644); err != nil {
		return err
	}
	var b strings.Builder
	if err := report(&b, filepath.Base(base)+".jsonl"); err != nil {
		return err
	}
	return os.WriteFile(base+".md", []byte(b.String()), 0o644)
}

// reportHeader starts a benchmark report: its title with the date and the
// command that made it.
func reportHeader(b *strings.Builder, title string, start time.Time, command any) {
	fmt.Fprintf(b, "# %s (%s)\n\nMade by (from the repository root, with the flock binary built by `go build -o /tmp/flock ./cmd/flock`):\n\n```\n%s\n```\n\n",
		title, start.Format("2006-01-02"), command)
}

// reportMachine starts a report's Setup section with the machine record's
// processor, Go version, threads and load.
func reportMachine(b *strings.Builder, machine map[string]any) {
	fmt.Fprintf(b, "\n## Setup\n\n- Machine: %v CPUs, %v; %v, GOMAXPROCS %v per process; load average %v at the start (other processes share these cores).\n",
		machine["nproc"], machine["cpu_model"], machine["go"], machine["gomaxprocs"], machine["loadavg"])
}

// machineRecord is the first record of a run of flock bench NAME args: the
// command, the machine, its load, and the extra settings given.
func machineRecord(name string, args []string, start time.Time, extra map[string]any) map[string]any {
	rec := map[string]any{
		"record":     "machine",
		"command":    strings.Join(append([]string{"flock", "bench", name}, args...), " "),
		"start":      start.Format(time.RFC3339),
		"nproc":      runtime.NumCPU(),
		"gomaxprocs": runtime.GOMAXPROCS(0),
		"go":         runtime.Version(),
		"goarch":     runtime.GOARCH,
		"cpu_model":  cpuModel(),
		"loadavg":    loadAvg(),
	}
	for k, v := range extra {
		rec[k] = v
	}
	return rec
}
