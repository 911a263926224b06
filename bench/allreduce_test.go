package bench_test

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"math"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/flockml/flock/backend/cpu"
	"github.com/flockml/flock/bench"
	"github.com/flockml/flock/dist"
	"github.com/flockml/flock/tensor"
)

// fakeWorkerEnv makes the test binary act as an all-reduce worker that
// checks its environment and reports made-up timings: with k timed
// operations, the i-th (from 1) of S bytes takes S·i/k nanoseconds.
// FAKE_FAIL_RANK makes that rank exit with status 3.
const fakeWorkerEnv = "BENCH_FAKE_ALLREDUCE_WORKER"

func TestMain(m *testing.M) {
	if impl := os.Getenv(fakeWorkerEnv); impl != "" {
		os.Exit(fakeWorker(impl, os.Args[1:]))
	}
	os.Exit(m.Run())
}

func fakeWorker(impl string, args []string) int {
	fs := flag.NewFlagSet("fake", flag.ContinueOnError)
	sizes := fs.String("sizes", "", "")
	warmup := fs.Int("warmup", -1, "")
	iters := fs.Int("iters", 0, "")
	if err := fs.Parse(args); err != nil || *warmup < 0 || *iters < 1 {
		fmt.Fprintln(os.Stderr, "fake worker: bad flags", args)
		return 2
	}
	rank, err1 := strconv.Atoi(os.Getenv("RANK"))
	n, err2 := strconv.Atoi(os.Getenv("WORLD_SIZE"))
	port, err3 := strconv.Atoi(os.Getenv("MASTER_PORT"))
	if err1 != nil || err2 != nil || err3 != nil || port <= 0 || len(os.Getenv("FLOCK_JOB_TOKEN")) < 32 ||
		os.Getenv("MASTER_ADDR") != "127.0.0.1" || os.Getenv("LOCAL_RANK") != os.Getenv("RANK") {
		fmt.Fprintln(os.Stderr, "fake worker: bad environment")
		return 2
	}
	if os.Getenv("FAKE_FAIL_RANK") == strconv.Itoa(rank) {
		fmt.Fprintln(os.Stderr, "fake worker: failing on purpose")
		return 3
	}
	if rank != 0 {
		return 0
	}
	for _, s := range strings.Split(*sizes, ",") {
		b, _ := strconv.ParseInt(s, 10, 64)
		secs := make([]float64, *iters)
		for i := range secs {
			secs[i] = float64(b) * 1e-9 * float64(i+1) / float64(*iters)
		}
		json.NewEncoder(os.Stdout).Encode(bench.AllReduceSample{Impl: impl, Version: "test", NProc: n, Bytes: b, Seconds: secs})
	}
	return 0
}

func TestParseSize(t *testing.T) {
	tests := []struct {
		in   string
		want int64
		ok   bool
	}{
		{"4096", 4096, true},
		{"1MiB", 1 << 20, true},
		{"16MiB", 16 << 20, true},
		{"100MiB", 100 << 20, true},
		{"64KiB", 64 << 10, true},
		{"1GiB", 1 << 30, true},
		{"0.5MiB", 1 << 19, true},
		{"100MB", 100e6, true},
		{"12B", 12, true},
		{"", 0, false},
		{"MiB", 0, false},
		{"-1MiB", 0, false},
		{"1.5B", 0, false},
		{"ten", 0, false},
		{"1TiB", 0, false},
	}
	for _, tc := range tests {
		got, err := bench.ParseSize(tc.in)
		if (err == nil) != tc.ok || got != tc.want {
			t.Errorf("ParseSize(%q) = %d, %v; want %d, ok %v", tc.in, got, err, tc.want, tc.ok)
		}
		if tc.ok && tc.want > 0 {
			back, err := bench.ParseSize(bench.FormatSize(tc.want))
			if err != nil || back != tc.want {
				t.Errorf("ParseSize(FormatSize(%d) = %q) = %d, %v", tc.want, bench.FormatSize(tc.want), back, err)
			}
		}
	}
}

func TestBusFactor(t *testing.T) {
	for _, tc := range []struct {
		n    int
		want float64
	}{{1, 0}, {2, 1}, {4, 1.5}, {8, 1.75}} {
		if got := bench.BusFactor(tc.n); got != tc.want {
			t.Errorf("BusFactor(%d) = %v, want %v", tc.n, got, tc.want)
		}
	}
}

// TestRunAllReduce runs the harness over the fake worker (the test binary)
// as both implementations and checks the measurements, their bandwidths
// and the summary against the fake's timings.
func TestRunAllReduce(t *testing.T) {
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	cmd := func(impl string) []string { return []string{"env", fakeWorkerEnv + "=" + impl, exe} }
	sizes := []int64{1 << 20, 12}
	cfg := bench.AllReduceConfig{
		NProc: []int{2, 3}, Sizes: sizes, Pairs: 2, Warmup: 1, Iters: 3,
		Flock: cmd(bench.ImplFlock), Peer: bench.ImplGloo, PeerCommand: cmd(bench.ImplGloo),
		Timeout: time.Minute,
	}
	var emitted int
	ms, err := bench.RunAllReduce(context.Background(), cfg, func(bench.AllReduceMeasurement) { emitted++ })
	if err != nil {
		t.Fatal(err)
	}
	if want := 3 * 2 * 2 * len(sizes); len(ms) != want || emitted != want {
		t.Fatalf("%d measurements, %d emitted; want %d", len(ms), emitted, want)
	}
	for _, m := range ms {
		// The fake's median timing is S·1e-9·2/3 s, so S/T = 1.5 GB/s.
		wantT := float64(m.Bytes) * 1e-9 * 2 / 3
		if math.Abs(m.MedianS-wantT) > 1e-9*wantT || math.Abs(m.AlgBW-1.5) > 1e-9 ||
			math.Abs(m.BusBW-1.5*2*float64(m.NProc-1)/float64(m.NProc)) > 1e-9 {
			t.Errorf("measurement %+v: want median %v s, algbw 1.5, busbw 2(n-1)/n·1.5", m, wantT)
		}
		if m.WarmupPair != (m.Pair == 0) || m.Warmup != 1 || len(m.Seconds) != 3 {
			t.Errorf("measurement %+v: pair/warm-up fields wrong", m)
		}
	}
	sums := bench.SummarizeAllReduce(ms, bench.ImplGloo)
	if len(sums) != 2*len(sizes) {
		t.Fatalf("%d summaries, want %d", len(sums), 2*len(sizes))
	}
	for _, s := range sums {
		if s.Flock.N != 2 || s.Peer.N != 2 || s.Ratio.N != 2 || math.Abs(s.Ratio.Median-1) > 1e-12 {
			t.Errorf("summary %+v: want 2 rounds each and ratio 1", s)
		}
	}
	var md bytes.Buffer
	if err := bench.WriteAllReduceTable(&md, sums, bench.ImplGloo); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(md.String(), "| 3 | 1MiB | 2.000 (2.000–2.000) | 2.000 (2.000–2.000) | 1.00 (1.00–1.00) | 2 |") {
		t.Errorf("table:\n%s", md.String())
	}
}

func TestRunAllReduceFailure(t *testing.T) {
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	cfg := bench.AllReduceConfig{
		NProc: []int{3}, Sizes: []int64{1024}, Iters: 1,
		Flock:   []string{"env", fakeWorkerEnv + "=flock", "FAKE_FAIL_RANK=2", exe},
		Timeout: time.Minute,
	}
	_, err = bench.RunAllReduce(context.Background(), cfg, nil)
	if err == nil || !strings.Contains(err.Error(), "rank 2") || !strings.Contains(err.Error(), "failing on purpose") {
		t.Fatalf("error %v, want one naming rank 2 and its message", err)
	}
	bad := []bench.AllReduceConfig{
		{NProc: []int{2}, Sizes: []int64{6}, Iters: 1, Flock: []string{exe}},
		{NProc: []int{0}, Sizes: []int64{8}, Iters: 1, Flock: []string{exe}},
		{NProc: []int{2}, Sizes: []int64{8}, Iters: 0, Flock: []string{exe}},
		{NProc: []int{2}, Sizes: []int64{8}, Iters: 1, Flock: []string{exe}, Peer: "mpi"},
	}
	for _, c := range bad {
		if _, err := bench.RunAllReduce(context.Background(), c, nil); err == nil {
			t.Errorf("config %+v accepted", c)
		}
	}
}

// addComm is rank 0 of a pretend world of size ranks whose other ranks
// contribute add to every element of an all-reduce.
type addComm struct {
	dist.Comm
	size     int
	add      float32
	reduces  int
	barriers int
}

func (c *addComm) Rank() int { return 0 }
func (c *addComm) Size() int { return c.size }
func (c *addComm) Barrier(context.Context) error {
	c.barriers++
	return nil
}
func (c *addComm) AllReduce(_ context.Context, t *tensor.Tensor, op dist.ReduceOp) error {
	if op != dist.Sum {
		return fmt.Errorf("op %v, want sum", op)
	}
	c.reduces++
	v := cpu.F32(t.Raw())[t.Offset() : t.Offset()+t.NumElements()]
	for i := range v {
		v[i] += c.add
	}
	return nil
}

func TestAllReduceWorker(t *testing.T) {
	sizes := []int64{4, 4096, 12}
	good := &addComm{size: 3, add: 2 + 3}
	var out bytes.Buffer
	if err := bench.AllReduceWorker(context.Background(), good, sizes, 2, 3, &out); err != nil {
		t.Fatal(err)
	}
	if good.reduces != len(sizes)*5 || good.barriers != len(sizes)*3+1 {
		t.Errorf("%d all-reduces and %d barriers, want %d and %d", good.reduces, good.barriers, len(sizes)*5, len(sizes)*3+1)
	}
	dec := json.NewDecoder(&out)
	for _, size := range sizes {
		var s bench.AllReduceSample
		if err := dec.Decode(&s); err != nil {
			t.Fatal(err)
		}
		if s.Impl != bench.ImplFlock || s.NProc != 3 || s.Bytes != size || len(s.Seconds) != 3 {
			t.Errorf("sample %+v, want flock, 3 ranks, %d bytes, 3 timings", s, size)
		}
	}
	wrong := &addComm{size: 3, add: 2}
	err := bench.AllReduceWorker(context.Background(), wrong, sizes, 0, 1, io.Discard)
	if err == nil || !strings.Contains(err.Error(), "element 0 is 3, want 6") {
		t.Errorf("wrong sums: error %v", err)
	}
	for _, bad := range []int64{0, 6} {
		if err := bench.AllReduceWorker(context.Background(), good, []int64{bad}, 0, 1, io.Discard); err == nil {
			t.Errorf("size %d accepted", bad)
		}
	}
}

// TestAllReduceWorkerLocal runs the worker on every rank of an in-process
// world, whose all-reduce the worker checks.
func TestAllReduceWorkerLocal(t *testing.T) {
	comms := dist.NewLocal(3)
	outs := make([]bytes.Buffer, len(comms))
	errs := make([]error, len(comms))
	var wg sync.WaitGroup
	for r, c := range comms {
		wg.Go(func() { errs[r] = bench.AllReduceWorker(context.Background(), c, []int64{4, 40000}, 1, 2, &outs[r]) })
	}
	wg.Wait()
	for r, c := range comms {
		if errs[r] != nil {
			t.Errorf("rank %d: %v", r, errs[r])
		}
		c.Close()
	}
	if n := strings.Count(outs[0].String(), "\n"); n != 2 || outs[1].Len()+outs[2].Len() != 0 {
		t.Errorf("rank 0 wrote %d lines, ranks 1 and 2 %d bytes; want 2 and 0", n, outs[1].Len()+outs[2].Len())
	}
}
