package bench_test

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/flockml/flock/bench"
)

// TestSummarizeTorchFT compares flock's Local synchronization with
// torchft's round by round; a strategy without measured rounds has no
// figures, null in the record.
func TestSummarizeTorchFT(t *testing.T) {
	t.Parallel()
	sync := func(impl string, pair int, s float64) bench.StrategySyncMeasurement {
		m := bench.StrategySyncMeasurement{Record: "sync", Model: "mlp"}
		m.Impl, m.NProc, m.Bytes, m.Transport, m.Pair, m.WarmupPair, m.MedianS = impl, 2, 4e6, "tcp", pair, pair == 0, s
		return m
	}
	flock := []bench.StrategySyncMeasurement{
		sync(bench.ImplLocalSync, 0, 1), sync(bench.ImplAllReduce, 0, 1),
		sync(bench.ImplLocalSync, 1, 0.002), sync(bench.ImplAllReduce, 1, 0.001),
		sync(bench.ImplLocalSync, 2, 0.004), sync(bench.ImplAllReduce, 2, 0.001),
	}
	peers := []bench.TorchFTMeasurement{
		{Impl: bench.ImplTorchFTLocalSGD, Pair: 0, WarmupPair: true, MedianS: 1},
		{Impl: bench.ImplTorchFTLocalSGD, Pair: 1, MedianS: 0.004, Version: "0.1"},
		{Impl: bench.ImplTorchFTLocalSGD, Pair: 2, MedianS: 0.012, Version: "0.1"},
	}
	s := bench.SummarizeTorchFT(flock, peers)
	if s.Model != "mlp" || s.NProc != 2 || s.Transport != "tcp" || s.Version != "0.1" || s.Flock.N != 2 || s.Flock.Median != 3 {
		t.Errorf("summary %+v", s)
	}
	if r := s.Ratio[bench.ImplTorchFTLocalSGD]; r.N != 2 || r.Min != 2 || r.Max != 3 {
		t.Errorf("ratio torchft/flock %+v, want 2 and 3 over 2 rounds", r)
	}
	if s.Peer[bench.ImplTorchFTDiLoCo].N != 0 {
		t.Errorf("DiLoCo %+v, want no figures", s.Peer[bench.ImplTorchFTDiLoCo])
	}
	b, err := json.Marshal(s.Record())
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(b), `"torchft-diloco_sync_ms":null`) || !strings.Contains(string(b), `"ratio_torchft-localsgd_flock":{`) {
		t.Errorf("record %s", b)
	}
	var w strings.Builder
	if err := bench.WriteTorchFTTable(&w, s); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(w.String(), "| mlp | 2 | 4.00 MB | tcp | 3.00 (2.00–4.00) | 8.00 (4.00–12.00) | 2.50 (2.00–3.00) |") {
		t.Errorf("table:\n%s", w.String())
	}
}
