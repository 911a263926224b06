package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"time"

	"github.com/flockml/flock/bench"
)

// torchftStrategies are what bench/peers/torchft_sync.py measures, by the
// impl names of its records.
var torchftStrategies = []string{"torchft-localsgd", "torchft-diloco"}

// torchftRecord is one pair's figure from bench/peers/torchft_sync.py: the
// median seconds of one synchronization on replica 0.
type torchftRecord struct {
	Record     string  `json:"record"` // "sync"
	Impl       string  `json:"impl"`   // one of torchftStrategies
	Model      string  `json:"model"`
	Params     int64   `json:"params"`
	NProc      int     `json:"nproc"`
	Bytes      int64   `json:"bytes"`
	Pair       int     `json:"pair"`
	WarmupPair bool    `json:"warmup_pair"`
	MedianS    float64 `json:"median_s"`
	BusBW      float64 `json:"busbw_gbps"`
	Transport  string  `json:"transport"`
	Version    string  `json:"version"`
}

// runStrategySyncTorchft alternates, round by round, flock's sync
// measurement (one job of a warm-up pair and one measured pair, over TCP)
// and torchft's (bench/peers/torchft_sync.py, likewise); round 0 is the
// warm-up round. It returns flock's measured pairs and torchft's, each
// labelled with its round.
func runStrategySyncTorchft(ctx context.Context, cfg bench.StrategySyncConfig, peer []string, rounds int, timeout time.Duration,
	emit func(bench.StrategySyncMeasurement), emitPeer func(torchftRecord), stderr io.Writer) ([]bench.StrategySyncMeasurement, []torchftRecord, error) {
	one := cfg
	one.Pairs = 1
	var flock []bench.StrategySyncMeasurement
	var peers []torchftRecord
	for round := 0; round <= rounds; round++ {
		ms, err := bench.RunStrategySync(ctx, one, nil)
		if err != nil {
			return flock, peers, err
		}
		for _, m := range measuredPair(ms, round, func(m *bench.StrategySyncMeasurement) (*int, *bool) { return &m.Pair, &m.WarmupPair }) {
			flock = append(flock, m)
			emit(m)
		}
		argv := append(append([]string{}, peer...), "--pairs", "1")
		recs, err := runTorchft(ctx, argv, timeout, stderr)
		if err != nil {
			return flock, peers, err
		}
		for _, r := range measuredPair(recs, round, func(r *torchftRecord) (*int, *bool) { return &r.Pair, &r.WarmupPair }) {
			peers = append(peers, r)
			emitPeer(r)
		}
	}
	return flock, peers, nil
}

// measuredPair returns the records of a job's measured pair, relabelled
// as round's (a warm-up round when round is 0); at gives a record's pair
// and warm-up flag.
func measuredPair[T any](recs []T, round int, at func(*T) (*int, *bool)) []T {
	var out []T
	for i := range recs {
		pair, warm := at(&recs[i])
		if *warm {
			continue
		}
		*pair, *warm = round, round == 0
		out = append(out, recs[i])
	}
	return out
}

func runTorchft(ctx context.Context, argv []string, timeout time.Duration, stderr io.Writer) ([]torchftRecord, error) {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, argv[0], argv[1:]...)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	cmd.Env = append(os.Environ(), "GLOO_SOCKET_IFNAME=lo", "RUST_LOG=warn")
	if err := cmd.Run(); err != nil {
		// torchft logs each quorum; pass on only the end of it.
		lines := strings.Split(strings.TrimSpace(errb.String()), "\n")
		fmt.Fprintf(stderr, "[torchft] %s\n", strings.Join(lines[max(0, len(lines)-10):], "\n[torchft] "))
		return nil, fmt.Errorf("%s: %w", strings.Join(argv, " "), err)
	}
	var recs []torchftRecord
	sc := bufio.NewScanner(&out)
	for sc.Scan() {
		line := sc.Bytes()
		if !bytes.HasPrefix(line, []byte("{")) {
			continue
		}
		var r torchftRecord
		if err := json.Unmarshal(line, &r); err != nil {
			return nil, fmt.Errorf("%s: record %q: %w", argv[1], line, err)
		}
		recs = append(recs, r)
	}
	if len(recs) != 2*len(torchftStrategies) {
		return nil, fmt.Errorf("%s: %d records, want %d (a warm-up and a measured pair of %s)", argv[1], len(recs), 2*len(torchftStrategies), strings.Join(torchftStrategies, " and "))
	}
	return recs, nil
}

// torchftSummary compares, round by round, flock's Local synchronization
// with each torchft strategy's: the ratio is torchft's time over flock's
// (above 1: flock's synchronization is faster).
type torchftSummary struct {
	Model     string
	NProc     int
	Bytes     int64
	Transport string
	Flock     bench.Stats            // ms per Local synchronization
	Peer      map[string]bench.Stats // ms per synchronization, by strategy
	Ratio     map[string]bench.Stats // torchft ms / flock ms, by strategy
	Version   string
}

func summarizeTorchft(flock []bench.StrategySyncMeasurement, peers []torchftRecord) torchftSummary {
	s := torchftSummary{Peer: map[string]bench.Stats{}, Ratio: map[string]bench.Stats{}}
	byRound := map[int]float64{}
	var fms []float64
	for _, m := range flock {
		if m.Impl != bench.ImplLocalSync || m.WarmupPair {
			continue
		}
		s.Model, s.NProc, s.Bytes, s.Transport = m.Model, m.NProc, m.Bytes, m.Transport
		byRound[m.Pair] = 1e3 * m.MedianS
		fms = append(fms, 1e3*m.MedianS)
	}
	s.Flock = bench.StatsOf(fms)
	for _, name := range torchftStrategies {
		var ms, ratio []float64
		for _, r := range peers {
			if r.Impl != name || r.WarmupPair {
				continue
			}
			s.Version = r.Version
			ms = append(ms, 1e3*r.MedianS)
			if f, ok := byRound[r.Pair]; ok {
				ratio = append(ratio, 1e3*r.MedianS/f)
			}
		}
		s.Peer[name], s.Ratio[name] = bench.StatsOf(ms), bench.StatsOf(ratio)
	}
	return s
}

func torchftSummaryRecord(s torchftSummary) map[string]any {
	rec := map[string]any{"record": "summary", "measure": measureSync, "peer": bench.ImplTorchFT, "model": s.Model, "nproc": s.NProc,
		"bytes": s.Bytes, "transport": s.Transport, "flock_sync_ms": statsRecord(s.Flock), "peer_version": s.Version}
	for _, name := range torchftStrategies {
		rec[name+"_sync_ms"] = statsRecord(s.Peer[name])
		rec["ratio_"+name+"_flock"] = statsRecord(s.Ratio[name])
	}
	return rec
}

func writeTorchftTable(w io.Writer, s torchftSummary) error {
	span := func(x bench.Stats, prec int) string {
		return fmt.Sprintf("%.*f (%.*f–%.*f)", prec, x.Median, prec, x.Min, prec, x.Max)
	}
	fmt.Fprint(w, "| model | ranks | bytes | flock transport | flock Local sync ms |")
	for _, name := range torchftStrategies {
		fmt.Fprintf(w, " %s ms | %s/flock |", name, name)
	}
	fmt.Fprintln(w, " rounds |")
	fmt.Fprintln(w, "|---|---:|---:|---|---:|"+strings.Repeat("---:|---:|", len(torchftStrategies))+"---:|")
	fmt.Fprintf(w, "| %s | %d | %.2f MB | %s | %s |", s.Model, s.NProc, float64(s.Bytes)/1e6, s.Transport, span(s.Flock, 2))
	for _, name := range torchftStrategies {
		fmt.Fprintf(w, " %s | %s |", span(s.Peer[name], 2), span(s.Ratio[name], 2))
	}
	fmt.Fprintf(w, " %s |\n", strconv.Itoa(s.Flock.N))
	return nil
}
