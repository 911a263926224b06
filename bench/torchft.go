package bench

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"time"
)

// The strategies that bench/peers/torchft_sync.py measures, by the impl
// names of its records.
const (
	ImplTorchFTLocalSGD = "torchft-localsgd" // torchft.local_sgd.LocalSGD
	ImplTorchFTDiLoCo   = "torchft-diloco"   // torchft.local_sgd.DiLoCo
)

// torchftStrategies are the torchft strategies in the order of the
// tables.
var torchftStrategies = []string{ImplTorchFTLocalSGD, ImplTorchFTDiLoCo}

// TorchFTMeasurement is one pair's figure from bench/peers/torchft_sync.py:
// the median seconds of one synchronization on replica 0.
type TorchFTMeasurement struct {
	Record     string  `json:"record"` // "sync"
	Impl       string  `json:"impl"`   // ImplTorchFTLocalSGD or ImplTorchFTDiLoCo
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

// TorchFTCommand returns the command line of torchft's synchronization
// measurement for cfg: the Python of the peers' environment (PeerPython),
// script (bench/peers/torchft_sync.py), and cfg's model, ranks and
// operations as its flags; RunStrategySyncTorchFT appends the pairs.
func TorchFTCommand(cfg StrategySyncConfig, script string) ([]string, error) {
	python, err := PeerPython(ImplTorchFT, "")
	if err != nil {
		return nil, err
	}
	return []string{python, script, "--model", cfg.Model, "--image", strconv.Itoa(cfg.Image), "--channels", strconv.Itoa(cfg.Channels),
		"--classes", strconv.Itoa(cfg.Classes), "--nproc", strconv.Itoa(cfg.NProc), "--warmup", strconv.Itoa(cfg.Warmup), "--iters", strconv.Itoa(cfg.Iters)}, nil
}

// RunStrategySyncTorchFT alternates, round by round, flock's
// synchronization measurement (RunStrategySync, one job of a warm-up pair
// and one measured pair, over TCP: FLOCK_SHM=0, as torchft's Gloo) and
// torchft's (the command peer, TorchFTCommand, likewise), for cfg.Pairs
// rounds after a warm-up round 0. Each job's measured pair is relabelled
// with its round and passed to emit or emitPeer (either may be nil) as it
// comes; flock's and torchft's are returned.
func RunStrategySyncTorchFT(ctx context.Context, cfg StrategySyncConfig, peer []string,
	emit func(StrategySyncMeasurement), emitPeer func(TorchFTMeasurement)) ([]StrategySyncMeasurement, []TorchFTMeasurement, error) {
	one := cfg
	one.Pairs = 1
	one.Env = append(slices.Clone(cfg.Env), "FLOCK_SHM=0")
	timeout := cfg.Timeout
	if timeout <= 0 {
		timeout = 10 * time.Minute
	}
	var flock []StrategySyncMeasurement
	var peers []TorchFTMeasurement
	for round := 0; round <= cfg.Pairs; round++ {
		ms, err := RunStrategySync(ctx, one, nil)
		if err != nil {
			return flock, peers, err
		}
		for _, m := range measuredPair(ms, round, func(m *StrategySyncMeasurement) (*int, *bool) { return &m.Pair, &m.WarmupPair }) {
			flock = append(flock, m)
			if emit != nil {
				emit(m)
			}
		}
		argv := append(slices.Clone(peer), "--pairs", "1")
		recs, err := runTorchFT(ctx, argv, timeout, cfg.Stderr)
		if err != nil {
			return flock, peers, err
		}
		for _, r := range measuredPair(recs, round, func(r *TorchFTMeasurement) (*int, *bool) { return &r.Pair, &r.WarmupPair }) {
			peers = append(peers, r)
			if emitPeer != nil {
				emitPeer(r)
			}
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

// runTorchFT runs torchft's measurement and reads its records: a warm-up
// and a measured pair of each strategy.
func runTorchFT(ctx context.Context, argv []string, timeout time.Duration, stderr io.Writer) ([]TorchFTMeasurement, error) {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, argv[0], argv[1:]...)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	cmd.Env = append(os.Environ(), "GLOO_SOCKET_IFNAME=lo", "RUST_LOG=warn")
	if err := cmd.Run(); err != nil {
		// torchft logs each quorum; pass on only the end of it.
		if stderr != nil {
			lines := strings.Split(strings.TrimSpace(errb.String()), "\n")
			fmt.Fprintf(stderr, "[torchft] %s\n", strings.Join(lines[max(0, len(lines)-10):], "\n[torchft] "))
		}
		return nil, fmt.Errorf("%s: %w", strings.Join(argv, " "), err)
	}
	var recs []TorchFTMeasurement
	sc := bufio.NewScanner(&out)
	for sc.Scan() {
		line := sc.Bytes()
		if !bytes.HasPrefix(line, []byte("{")) {
			continue
		}
		var r TorchFTMeasurement
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

// TorchFTSummary compares, round by round, flock's Local synchronization
// with each torchft strategy's: the ratio is torchft's time over flock's
// (above 1: flock's synchronization is faster).
type TorchFTSummary struct {
	Model     string
	NProc     int
	Bytes     int64
	Transport string
	Flock     Stats            // ms per Local synchronization
	Peer      map[string]Stats // ms per synchronization, by strategy
	Ratio     map[string]Stats // torchft ms / flock ms, by strategy
	Version   string           // torchft's
}

// SummarizeTorchFT summarises the measured rounds of flock's Local
// synchronizations (ImplLocalSync of flock) and torchft's (peers), the
// warm-up round left out.
func SummarizeTorchFT(flock []StrategySyncMeasurement, peers []TorchFTMeasurement) TorchFTSummary {
	s := TorchFTSummary{Peer: map[string]Stats{}, Ratio: map[string]Stats{}}
	byRound := map[int]float64{}
	var fms []float64
	for _, m := range flock {
		if m.Impl != ImplLocalSync || m.WarmupPair {
			continue
		}
		s.Model, s.NProc, s.Bytes, s.Transport = m.Model, m.NProc, m.Bytes, m.Transport
		byRound[m.Pair] = 1e3 * m.MedianS
		fms = append(fms, 1e3*m.MedianS)
	}
	s.Flock = StatsOf(fms)
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
		s.Peer[name], s.Ratio[name] = StatsOf(ms), StatsOf(ratio)
	}
	return s
}

// Record returns s as a JSON record of kind "summary"; a figure without
// values is null.
func (s TorchFTSummary) Record() map[string]any {
	rec := map[string]any{"record": "summary", "measure": "sync", "peer": ImplTorchFT, "model": s.Model, "nproc": s.NProc,
		"bytes": s.Bytes, "transport": s.Transport, "flock_sync_ms": statsRecord(s.Flock), "peer_version": s.Version}
	for _, name := range torchftStrategies {
		rec[name+"_sync_ms"] = statsRecord(s.Peer[name])
		rec["ratio_"+name+"_flock"] = statsRecord(s.Ratio[name])
	}
	return rec
}

// WriteTorchFTTable writes s as a Markdown table: milliseconds per
// synchronization of flock and of each torchft strategy, median (min–max),
// and the ratios torchft/flock.
func WriteTorchFTTable(w io.Writer, s TorchFTSummary) error {
	var b strings.Builder
	b.WriteString("| model | ranks | bytes | flock transport | flock Local sync ms |")
	for _, name := range torchftStrategies {
		fmt.Fprintf(&b, " %s ms | %s/flock |", name, name)
	}
	b.WriteString(" rounds |\n")
	b.WriteString("|---|---:|---:|---|---:|" + strings.Repeat("---:|---:|", len(torchftStrategies)) + "---:|\n")
	fmt.Fprintf(&b, "| %s | %d | %.2f MB | %s | %s |", s.Model, s.NProc, float64(s.Bytes)/1e6, s.Transport, fixedSpan(s.Flock, 2))
	for _, name := range torchftStrategies {
		fmt.Fprintf(&b, " %s | %s |", fixedSpan(s.Peer[name], 2), fixedSpan(s.Ratio[name], 2))
	}
	fmt.Fprintf(&b, " %d |\n", s.Flock.N)
	_, err := io.WriteString(w, b.String())
	return err
}

// fixedSpan writes s as "median (min–max)", NaN included when there are
// no figures.
func fixedSpan(s Stats, prec int) string {
	return fmt.Sprintf("%.*f (%.*f–%.*f)", prec, s.Median, prec, s.Min, prec, s.Max)
}
