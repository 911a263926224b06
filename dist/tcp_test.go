package dist_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"os/exec"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/flockml/flock/dist"
	"github.com/flockml/flock/dist/commtest"
	"github.com/flockml/flock/tensor"
)

var tcpTestToken = []byte("tcp-test-token-0123456789")

// tcpListeners opens n loopback listeners and returns them with their
// addresses.
func tcpListeners(t testing.TB, n int) ([]net.Listener, []string) {
	t.Helper()
	lns := make([]net.Listener, n)
	addrs := make([]string, n)
	for i := range lns {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { ln.Close() })
		lns[i], addrs[i] = ln, ln.Addr().String()
	}
	return lns, addrs
}

// tcpWorld connects n ranks running as goroutines of this process, with
// their collectives on TCP.
func tcpWorld(t testing.TB, n int, timeout time.Duration, tokens ...[]byte) ([]dist.Comm, []error) {
	t.Helper()
	return dialWorld(t, n, timeout, false, tokens...)
}

// dialWorld connects n ranks running as goroutines of this process; with
// shm their collectives may go through shared memory.
func dialWorld(t testing.TB, n int, timeout time.Duration, shm bool, tokens ...[]byte) ([]dist.Comm, []error) {
	t.Helper()
	lns, addrs := tcpListeners(t, n)
	comms := make([]dist.Comm, n)
	errs := make([]error, n)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	var wg sync.WaitGroup
	for r := range n {
		tok := tcpTestToken
		if r < len(tokens) {
			tok = tokens[r]
		}
		wg.Go(func() {
			comms[r], errs[r] = dist.DialTCP(ctx, dist.TCPConfig{
				Rank: r, Size: n, Addrs: addrs, Listener: lns[r], Token: tok, Timeout: timeout,
				NoSharedMemory: !shm,
			})
		})
	}
	wg.Wait()
	t.Cleanup(func() {
		// Together, as the ranks of a job close: a closing rank waits
		// for its peers to close too.
		var wg sync.WaitGroup
		for _, c := range comms {
			if c != nil {
				wg.Go(func() { c.Close() })
			}
		}
		wg.Wait()
	})
	return comms, errs
}

func tcpFactory(t *testing.T, n int) []dist.Comm {
	comms, errs := tcpWorld(t, n, 5*time.Second)
	for r, err := range errs {
		if err != nil {
			t.Fatalf("rank %d: %v", r, err)
		}
		if dist.SHMActive(comms[r]) {
			t.Fatalf("rank %d: collectives on shared memory with NoSharedMemory set", r)
		}
	}
	return comms
}

func TestTCPComm(t *testing.T) {
	commtest.Run(t, tcpFactory)
}

// tcpRun runs fn on every rank and returns the ranks' errors.
func tcpRun(comms []dist.Comm, fn func(r int, c dist.Comm) error) []error {
	errs := make([]error, len(comms))
	var wg sync.WaitGroup
	for r, c := range comms {
		wg.Go(func() { errs[r] = fn(r, c) })
	}
	wg.Wait()
	return errs
}

// TestTCPAllReduceSizes covers both algorithms on either side of the
// small-message threshold, non-power-of-two worlds and uneven chunks,
// against sums computed here in float64.
func TestTCPAllReduceSizes(t *testing.T) {
	sizes := []int{0, 1, 7, 16384, 16385, 300007}
	worlds := []int{2, 3, 5}
	if testing.Short() {
		sizes = []int{0, 7, 16385, 140001}
		worlds = []int{3}
	}
	for _, n := range worlds {
		comms := tcpFactory(t, n)
		for _, size := range sizes {
			for _, op := range []dist.ReduceOp{dist.Sum, dist.Avg, dist.Max} {
				t.Run(fmt.Sprintf("n=%d/len=%d/%v", n, size, op), func(t *testing.T) {
					in := make([][]float32, n)
					for r := range in {
						in[r] = make([]float32, size)
						for i := range in[r] {
							in[r][i] = float32((i*7+r*13)%101) - 50
						}
					}
					want := make([]float64, size)
					for i := range want {
						acc := float64(in[0][i])
						for r := 1; r < n; r++ {
							switch op {
							case dist.Max:
								acc = max(acc, float64(in[r][i]))
							default:
								acc += float64(in[r][i])
							}
						}
						if op == dist.Avg {
							acc /= float64(n)
						}
						want[i] = acc
					}
					outs := make([][]float32, n)
					errs := tcpRun(comms, func(r int, c dist.Comm) error {
						x := tensor.FromSlice(in[r], nil)
						defer x.Release()
						if err := c.AllReduce(context.Background(), x, op); err != nil {
							return err
						}
						outs[r] = x.Float32s()
						return nil
					})
					for r, err := range errs {
						if err != nil {
							t.Fatalf("rank %d: %v", r, err)
						}
					}
					for r := range n {
						for i, w := range want {
							if d := float64(outs[r][i]) - w; d > 1e-4 || d < -1e-4 {
								t.Fatalf("rank %d: element %d = %v, want %v", r, i, outs[r][i], w)
							}
							if outs[r][i] != outs[0][i] {
								t.Fatalf("rank %d: element %d = %v differs from rank 0's %v", r, i, outs[r][i], outs[0][i])
							}
						}
					}
				})
			}
		}
	}
}

func TestTCPWrongToken(t *testing.T) {
	var logs strings.Builder
	var mu sync.Mutex
	lns, addrs := tcpListeners(t, 2)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	var errs [2]error
	var wg sync.WaitGroup
	for r, tok := range [][]byte{tcpTestToken, []byte("another job's token")} {
		wg.Go(func() {
			log := slog.New(slog.NewTextHandler(&lockedWriter{w: &logs, mu: &mu}, nil))
			c, err := dist.DialTCP(ctx, dist.TCPConfig{Rank: r, Size: 2, Addrs: addrs, Listener: lns[r], Token: tok, Logger: log})
			if c != nil {
				c.Close()
			}
			errs[r] = err
		})
	}
	wg.Wait()
	for r, err := range errs {
		if err == nil {
			t.Errorf("rank %d connected with a wrong token", r)
		}
	}
	mu.Lock()
	defer mu.Unlock()
	if !strings.Contains(logs.String(), "refused connection") {
		t.Errorf("no refusal logged; log:\n%s", logs.String())
	}
}

type lockedWriter struct {
	w  *strings.Builder
	mu *sync.Mutex
}

func (l *lockedWriter) Write(b []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(b)
}

// TestTCPRejectsStrangers sends garbage and a replayed-looking hello to a
// rank that is waiting for its peers; it must drop them and still connect.
func TestTCPRejectsStrangers(t *testing.T) {
	lns, addrs := tcpListeners(t, 2)
	for _, junk := range [][]byte{
		[]byte("GET / HTTP/1.1\r\nHost: x\r\n\r\n"),
		append([]byte("FLKH\x01\x00\x00\x00\x00\x00\x00\x00\x02\x00\x00\x00"), make([]byte, 32)...),
	} {
		c, err := net.Dial("tcp", addrs[1])
		if err != nil {
			t.Fatal(err)
		}
		c.Write(junk)
		defer c.Close()
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	comms := make([]dist.Comm, 2)
	errs := make([]error, 2)
	var wg sync.WaitGroup
	for r := range 2 {
		wg.Go(func() {
			comms[r], errs[r] = dist.DialTCP(ctx, dist.TCPConfig{Rank: r, Size: 2, Addrs: addrs, Listener: lns[r], Token: tcpTestToken})
		})
	}
	wg.Wait()
	for r, err := range errs {
		if err != nil {
			t.Fatalf("rank %d: %v", r, err)
		}
		defer comms[r].Close()
	}
	errs = tcpRun(comms, func(r int, c dist.Comm) error { return c.Barrier(ctx) })
	for r, err := range errs {
		if err != nil {
			t.Fatalf("rank %d: barrier: %v", r, err)
		}
	}
}

// TestTCPPeerDies closes one rank's communicator in the middle of a large
// all-reduce: the others must fail promptly with an OpError naming it.
func TestTCPPeerDies(t *testing.T) {
	const n, victim = 4, 2
	checkPeerDies(t, tcpFactory(t, n), victim)
}

// checkPeerDies closes rank victim of comms 20 ms into a loop of large
// all-reduces and checks that every other rank fails within 4 s with an
// OpError naming it.
func checkPeerDies(t *testing.T, comms []dist.Comm, victim int) {
	t.Helper()
	start := time.Now()
	errs := tcpRun(comms, func(r int, c dist.Comm) error {
		x := tensor.Zeros(tensor.Shape{8 << 20})
		defer x.Release()
		if r == victim {
			time.Sleep(20 * time.Millisecond)
			return c.Close()
		}
		for {
			if err := c.AllReduce(context.Background(), x, dist.Sum); err != nil {
				return err
			}
		}
	})
	if d := time.Since(start); d > 4*time.Second {
		t.Errorf("failure took %v to surface", d)
	}
	for r, err := range errs {
		if r == victim {
			continue
		}
		var oe *dist.OpError
		if !errors.As(err, &oe) {
			t.Fatalf("rank %d: %v is not an OpError", r, err)
		}
		if oe.Rank != victim {
			t.Errorf("rank %d: %v names rank %d, want %d", r, err, oe.Rank, victim)
		}
	}
}

// TestTCPPeerHangs stops a rank from taking part: the others must fail
// after the timeout naming a rank, instead of hanging.
func TestTCPPeerHangs(t *testing.T) {
	const n = 3
	comms, errs := tcpWorld(t, n, 300*time.Millisecond)
	for r, err := range errs {
		if err != nil {
			t.Fatalf("rank %d: %v", r, err)
		}
	}
	start := time.Now()
	errs = tcpRun(comms[:n-1], func(r int, c dist.Comm) error {
		x := tensor.Zeros(tensor.Shape{1000})
		defer x.Release()
		return c.AllReduce(context.Background(), x, dist.Sum)
	})
	if d := time.Since(start); d > 3*time.Second {
		t.Errorf("timeout took %v", d)
	}
	for r, err := range errs {
		var oe *dist.OpError
		if !errors.As(err, &oe) || oe.Rank < 0 {
			t.Errorf("rank %d: got %v, want an OpError naming a rank", r, err)
		}
	}
}

// TestTCPKilledProcess runs rank 1 in a child process (this test binary)
// and kills it during an all-reduce loop.
func TestTCPKilledProcess(t *testing.T) {
	killedProcess(t, "TestTCPKilledProcess", true, nil)
}

// killedChildEnv, when set, makes a killed-process test run as its child;
// its value is the addresses of the two ranks, comma-separated.
const killedChildEnv = "FLOCK_KILLED_CHILD_ADDRS"

// killedProcess runs rank 1 of a 2-rank job in a child process (this test
// binary, running only the test name) that all-reduces until it is killed,
// kills it after three all-reduces of rank 0, and checks that rank 0 fails
// within 3 s with an OpError naming rank 1. check, if not nil, runs on
// rank 0's communicator and the child's pid after the three all-reduces.
// noSHM keeps the collectives on TCP; otherwise both ranks must be on
// shared memory.
func killedProcess(t *testing.T, name string, noSHM bool, check func(c dist.Comm, child int)) {
	if addrs := os.Getenv(killedChildEnv); addrs != "" {
		killedChild(strings.Split(addrs, ","), noSHM)
		return
	}
	if testing.Short() {
		t.Skip("spawns a process")
	}
	lns, addrs := tcpListeners(t, 2)
	lns[1].Close()
	ln1, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addrs[1] = ln1.Addr().String()
	f, err := ln1.(*net.TCPListener).File()
	if err != nil {
		t.Fatal(err)
	}
	ln1.Close()
	cmd := exec.Command(os.Args[0], "-test.run=^"+name+"$")
	cmd.Env = append(os.Environ(), killedChildEnv+"="+strings.Join(addrs, ","))
	cmd.ExtraFiles = []*os.File{f}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	f.Close()
	defer cmd.Wait()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	c, err := dist.DialTCP(ctx, dist.TCPConfig{Rank: 0, Size: 2, Addrs: addrs, Listener: lns[0], Token: tcpTestToken, Timeout: 5 * time.Second, NoSharedMemory: noSHM})
	if err != nil {
		cmd.Process.Kill()
		t.Fatal(err)
	}
	defer c.Close()
	if !noSHM && !dist.SHMActive(c) {
		cmd.Process.Kill()
		t.Fatal("collectives not on shared memory")
	}
	x := tensor.Zeros(tensor.Shape{4 << 20})
	defer x.Release()
	for range 3 {
		if err := c.AllReduce(ctx, x, dist.Sum); err != nil {
			cmd.Process.Kill()
			t.Fatal(err)
		}
	}
	if check != nil {
		check(c, cmd.Process.Pid)
	}
	killed := time.Now()
	cmd.Process.Kill()
	for {
		err := c.AllReduce(ctx, x, dist.Sum)
		if err == nil {
			continue
		}
		var oe *dist.OpError
		if !errors.As(err, &oe) || oe.Rank != 1 {
			t.Fatalf("got %v, want an OpError naming rank 1", err)
		}
		if d := time.Since(killed); d > 3*time.Second {
			t.Errorf("failure took %v to surface", d)
		}
		return
	}
}

// killedChild is the child of killedProcess: rank 1, listening on the file
// descriptor 3 it inherits, all-reducing until it is killed.
func killedChild(addrs []string, noSHM bool) {
	ln, err := net.FileListener(os.NewFile(3, "listener"))
	if err != nil {
		os.Exit(3)
	}
	c, err := dist.DialTCP(context.Background(), dist.TCPConfig{Rank: 1, Size: 2, Addrs: addrs, Listener: ln, Token: tcpTestToken, Timeout: 5 * time.Second, NoSharedMemory: noSHM})
	if err != nil || (!noSHM && !dist.SHMActive(c)) {
		os.Exit(4)
	}
	x := tensor.Zeros(tensor.Shape{4 << 20})
	for {
		if err := c.AllReduce(context.Background(), x, dist.Sum); err != nil {
			os.Exit(5)
		}
	}
}

// TestTCPSteadyStateAllocs checks that repeated all-reduces of a fixed
// tensor allocate nothing per message.
func TestTCPSteadyStateAllocs(t *testing.T) {
	// Both ranks run in this process, so the count covers both; 1 MiB of
	// float32 is 8 segments per rank and phase.
	if a := allocsPerAllReduce(t, tcpFactory(t, 2)); a > 4 {
		t.Errorf("%v allocations per all-reduce", a)
	}
}

// allocsPerAllReduce returns the allocations of an all-reduce of 1 Mi
// float32 over the two ranks of comms, both run by this process.
func allocsPerAllReduce(t *testing.T, comms []dist.Comm) float64 {
	t.Helper()
	xs := []*tensor.Tensor{tensor.Zeros(tensor.Shape{1 << 20}), tensor.Zeros(tensor.Shape{1 << 20})}
	defer xs[0].Release()
	defer xs[1].Release()
	start, stop := make(chan struct{}), make(chan error)
	go func() {
		for range start {
			stop <- comms[1].AllReduce(context.Background(), xs[1], dist.Sum)
		}
	}()
	defer close(start)
	run := func() {
		start <- struct{}{}
		if err := comms[0].AllReduce(context.Background(), xs[0], dist.Sum); err != nil {
			t.Fatal(err)
		}
		if err := <-stop; err != nil {
			t.Fatal(err)
		}
	}
	run()
	return testing.AllocsPerRun(10, run)
}

func TestTCPConfigErrors(t *testing.T) {
	ctx := context.Background()
	for _, cfg := range []dist.TCPConfig{
		{Rank: 0, Size: 0},
		{Rank: 2, Size: 2},
		{Rank: 0, Size: 2, Addrs: []string{"a"}},
		{Rank: 0, Size: 2, Addrs: []string{"a", "b"}},
	} {
		if _, err := dist.DialTCP(ctx, cfg); err == nil {
			t.Errorf("%+v: no error", cfg)
		}
	}
	c, err := dist.DialTCP(ctx, dist.TCPConfig{Rank: 0, Size: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	x := tensor.FromSlice([]float32{1, 2}, nil)
	defer x.Release()
	if err := c.AllReduce(ctx, x, dist.Avg); err != nil {
		t.Fatal(err)
	}
	if got := x.Float32s(); got[0] != 1 || got[1] != 2 {
		t.Errorf("single-rank all-reduce changed the tensor: %v", got)
	}
}

// TestTCPLateRank runs collectives where one rank always starts late, so
// that its peers' frames arrive before its receives are posted and are
// held until then: the results are those of ranks in step.
func TestTCPLateRank(t *testing.T) {
	t.Parallel()
	const n, size = 3, 3 << 20 / 4 // 3 MB: each rank's chunk is two ring segments
	comms := tcpFactory(t, n)
	errs := tcpRun(comms, func(r int, c dist.Comm) error {
		ctx := context.Background()
		for round := range 3 {
			if r == round%n {
				time.Sleep(50 * time.Millisecond)
			}
			v := make([]float32, size)
			for i := range v {
				v[i] = float32(r + i%5)
			}
			x := tensor.FromSlice(v, nil)
			if err := c.AllReduce(ctx, x, dist.Sum); err != nil {
				return err
			}
			for i, got := range x.Float32s() {
				if want := float32(0+1+2) + float32(3*(i%5)); got != want {
					return fmt.Errorf("round %d: element %d is %v, want %v", round, i, got, want)
				}
			}
			x.Release()
			src := make([]float32, size)
			if r == 1 {
				for i := range src {
					src[i] = float32(i % 7)
				}
			}
			b := tensor.FromSlice(src, nil)
			if err := c.Broadcast(ctx, b, 1); err != nil {
				return err
			}
			for i, got := range b.Float32s() {
				if want := float32(i % 7); got != want {
					return fmt.Errorf("round %d: broadcast element %d is %v, want %v", round, i, got, want)
				}
			}
			b.Release()
			if err := c.Barrier(ctx); err != nil {
				return err
			}
		}
		return nil
	})
	for r, err := range errs {
		if err != nil {
			t.Fatalf("rank %d: %v", r, err)
		}
	}
}
