package bench

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

// MachineRecord returns the first record of a benchmark's results: the
// command that ran it (its words joined by spaces), when it started, the
// machine (CPUs and their model, Go version and architecture, GOMAXPROCS)
// and its load before the run, and the run's settings, whose keys are
// added as they are. The *Config types' MachineSettings give the
// settings of each benchmark.
func MachineRecord(command []string, start time.Time, settings map[string]any) map[string]any {
	rec := map[string]any{
		"record":     "machine",
		"command":    strings.Join(command, " "),
		"start":      start.Format(time.RFC3339),
		"nproc":      runtime.NumCPU(),
		"gomaxprocs": runtime.GOMAXPROCS(0),
		"go":         runtime.Version(),
		"goarch":     runtime.GOARCH,
		"cpu_model":  CPUModel(),
		"loadavg":    LoadAvg(),
	}
	for k, v := range settings {
		rec[k] = v
	}
	return rec
}

// LoadAvg returns the first three fields of /proc/loadavg, the load
// averages over 1, 5 and 15 minutes, or "" where the system has none.
func LoadAvg() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return ""
	}
	f := strings.Fields(string(b))
	return strings.Join(f[:min(3, len(f))], " ")
}

// CPUModel returns the model name of the first processor in
// /proc/cpuinfo, or "" where the system does not say.
func CPUModel() string {
	b, err := os.ReadFile("/proc/cpuinfo")
	if err != nil {
		return ""
	}
	for line := range strings.SplitSeq(string(b), "\n") {
		if k, v, ok := strings.Cut(line, ":"); ok && strings.TrimSpace(k) == "model name" {
			return strings.TrimSpace(v)
		}
	}
	return ""
}

// appendRecords appends every element of xs to recs.
func appendRecords[T any](recs []any, xs []T) []any {
	for _, x := range xs {
		recs = append(recs, x)
	}
	return recs
}

// peerRecorder is a summary that is a record against a peer.
type peerRecorder interface {
	Record(peer string) map[string]any
}

// peerRecords returns each summary's record against peer.
func peerRecords[S peerRecorder](sums []S, peer string) []any {
	recs := make([]any, len(sums))
	for i, s := range sums {
		recs[i] = s.Record(peer)
	}
	return recs
}

// writeResults writes recs, one JSON value a line, to dir/name_<date>.jsonl
// and the Markdown report that report writes (given the base name of the
// records file) to dir/name_<date>.md, the date being start's.
func writeResults(dir, name string, start time.Time, recs []any, report func(b *strings.Builder, jsonl string) error) error {
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

// reportHeader starts a report: its title with the date, and the command
// that made it.
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

// statsMap is s as a JSON object, even without figures.
func statsMap(s Stats) map[string]any {
	return map[string]any{"median": s.Median, "min": s.Min, "max": s.Max, "n": s.N}
}

// statsRecord is s as a JSON object, or nil (null) when there are no
// figures, JSON having no NaN.
func statsRecord(s Stats) map[string]any {
	if s.N == 0 {
		return nil
	}
	return statsMap(s)
}
