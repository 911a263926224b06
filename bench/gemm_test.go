package bench

import (
	"context"
	"strings"
	"testing"
	"time"
)

func TestParseGemmSize(t *testing.T) {
	for _, c := range []struct {
		in   string
		want GemmSize
		err  bool
	}{
		{in: "256", want: GemmSize{256, 256, 256}},
		{in: "3136x576x64", want: GemmSize{3136, 576, 64}},
		{in: " 7X5x3 ", want: GemmSize{7, 5, 3}},
		{in: "0", err: true},
		{in: "4x4", err: true},
		{in: "4x-1x4", err: true},
		{in: "ax2x3", err: true},
		{in: "", err: true},
	} {
		got, err := ParseGemmSize(c.in)
		if (err != nil) != c.err || got != c.want {
			t.Errorf("ParseGemmSize(%q) = %v, %v; want %v, error %v", c.in, got, err, c.want, c.err)
		}
	}
	if s := (GemmSize{3136, 576, 64}); s.String() != "3136x576x64" || s.FLOPs() != 2*3136*576*64 {
		t.Errorf("%v: String %q, FLOPs %g", s, s.String(), s.FLOPs())
	}
}

func TestMeasureGemm(t *testing.T) {
	m := MeasureGemm(GemmSize{33, 17, 40}, 2, time.Millisecond, 1)
	if m.Impl != ImplFlock || m.M != 33 || m.K != 17 || m.N != 40 || m.Threads != 2 || m.Calls < 3 || m.GFLOPS <= 0 || m.Kernel == "" {
		t.Errorf("MeasureGemm = %+v", m)
	}
	if want := m.Size().FLOPs() / m.MedianS / 1e9; m.GFLOPS != want {
		t.Errorf("GFLOPS %g, want FLOPs/median = %g", m.GFLOPS, want)
	}
}

func TestRunGemmErrors(t *testing.T) {
	ctx := context.Background()
	for _, cfg := range []GemmConfig{
		{Threads: []int{1}},
		{Sizes: []GemmSize{{2, 2, 2}}},
		{Sizes: []GemmSize{{2, 2, 2}}, Threads: []int{0}},
		{Sizes: []GemmSize{{2, 2, 2}}, Threads: []int{1}, Rounds: -1},
		{Sizes: []GemmSize{{2, 2, 2}}, Threads: []int{1}, Peer: "mkl"},
	} {
		if _, err := RunGemm(ctx, cfg, nil); err == nil {
			t.Errorf("RunGemm(%+v) succeeded", cfg)
		}
	}
	cfg := GemmConfig{Sizes: []GemmSize{{2, 2, 2}}, Threads: []int{1}, Peer: ImplNumpy, PeerCommand: []string{"/nonexistent/python"}}
	if _, err := RunGemm(ctx, cfg, nil); err == nil || !strings.Contains(err.Error(), "/nonexistent/python") {
		t.Errorf("RunGemm with a missing peer: %v", err)
	}
}

func TestRunGemm(t *testing.T) {
	var emitted int
	cfg := GemmConfig{Sizes: []GemmSize{{8, 8, 8}, {3, 5, 7}}, Threads: []int{1, 2}, Rounds: 2, MinTime: time.Millisecond,
		Peak: func(threads int) float64 { return 1000 * float64(threads) }}
	ms, err := RunGemm(context.Background(), cfg, func(GemmMeasurement) { emitted++ })
	if err != nil {
		t.Fatal(err)
	}
	if len(ms) != 12 || emitted != 12 {
		t.Fatalf("%d measurements, %d emitted; want 12 (3 rounds × 2 thread counts × 2 sizes)", len(ms), emitted)
	}
	for _, m := range ms {
		if m.Warmup != (m.Round == 0) || m.PeakFraction != m.GFLOPS/(1000*float64(m.Threads)) {
			t.Errorf("measurement %+v: warm-up flag or peak fraction wrong", m)
		}
	}
	sums := SummarizeGemm(ms, "")
	if len(sums) != 4 || sums[0].Size != (GemmSize{8, 8, 8}) || sums[0].Threads != 1 || sums[0].Flock.N != 2 || sums[0].Peer.N != 0 {
		t.Errorf("summaries %+v", sums)
	}
}

func TestSummarizeGemm(t *testing.T) {
	s := GemmSize{4, 4, 4}
	meas := func(impl string, round int, gflops float64) GemmMeasurement {
		return GemmMeasurement{Impl: impl, M: 4, K: 4, N: 4, Threads: 2, Round: round, Warmup: round == 0, GFLOPS: gflops, PeakFraction: gflops / 100}
	}
	ms := []GemmMeasurement{
		meas(ImplFlock, 0, 1), meas(ImplNumpy, 0, 1000),
		meas(ImplFlock, 1, 50), meas(ImplNumpy, 1, 25),
		meas(ImplFlock, 2, 60), meas(ImplNumpy, 2, 60),
		meas(ImplFlock, 3, 90), meas(ImplNumpy, 3, 45),
	}
	sums := SummarizeGemm(ms, ImplNumpy)
	if len(sums) != 1 {
		t.Fatalf("%d summaries, want 1", len(sums))
	}
	got := sums[0]
	if got.Size != s || got.Threads != 2 {
		t.Errorf("summary of %v on %d threads", got.Size, got.Threads)
	}
	if got.Flock != (Stats{Median: 60, Min: 50, Max: 90, N: 3}) || got.Peer != (Stats{Median: 45, Min: 25, Max: 60, N: 3}) {
		t.Errorf("flock %+v, peer %+v", got.Flock, got.Peer)
	}
	// Ratios round by round: 2, 1, 2.
	if got.Ratio != (Stats{Median: 2, Min: 1, Max: 2, N: 3}) {
		t.Errorf("ratio %+v", got.Ratio)
	}
	if got.FlockPeak != 0.6 || got.PeerPeak != 0.45 {
		t.Errorf("peak fractions %g, %g", got.FlockPeak, got.PeerPeak)
	}
	var b strings.Builder
	if err := WriteGemmTable(&b, sums, ImplNumpy); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"| 4x4x4 | 2 | 60.0 (50.0–90.0) | 60% | 45.0 (25.0–60.0) | 45% | 2.00 (1.00–2.00) |", "flock/numpy"} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("table lacks %q:\n%s", want, b.String())
		}
	}
}
