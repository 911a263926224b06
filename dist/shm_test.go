package dist_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/flockml/flock/dist"
	"github.com/flockml/flock/dist/commtest"
	"github.com/flockml/flock/tensor"
)

// needSHM skips t where this machine has no shared-memory transport and
// clears FLOCK_SHM, so that the transport is on.
func needSHM(t testing.TB) {
	t.Helper()
	if runtime.GOOS != "linux" {
		t.Skip("shared memory transport needs Linux")
	}
	if st, err := os.Stat(dist.SHMDir()); err != nil || !st.IsDir() {
		t.Skipf("no %s", dist.SHMDir())
	}
	t.Setenv("FLOCK_SHM", "")
}

// shmComms connects n ranks of this process over shared memory with data
// buffers of window bytes (0: the default).
func shmComms(t testing.TB, n, window int, timeout time.Duration) []dist.Comm {
	t.Helper()
	if window > 0 {
		defer dist.SetSHMWindow(window)()
	}
	comms, errs := dialWorld(t, n, timeout, true)
	for r, err := range errs {
		if err != nil {
			t.Fatalf("rank %d: %v", r, err)
		}
	}
	for r, c := range comms {
		if n > 1 && (!dist.SHMActive(c) || transport(c) != "shm") {
			t.Fatalf("rank %d: collectives not on shared memory (transport %q)", r, transport(c))
		}
	}
	return comms
}

// transport is what c says its collectives run on.
func transport(c dist.Comm) string {
	if tc, ok := c.(interface{ Transport() string }); ok {
		return tc.Transport()
	}
	return ""
}

// TestSHMComm runs the conformance suite over shared memory, also with a
// window small enough that every collective of the suite's larger sizes
// takes many rounds.
func TestSHMComm(t *testing.T) {
	needSHM(t)
	windows := []int{0, 16 << 10}
	if testing.Short() {
		windows = windows[:1]
	}
	for _, window := range windows {
		name := "window=default"
		if window > 0 {
			name = fmt.Sprintf("window=%d", window)
		}
		t.Run(name, func(t *testing.T) {
			commtest.Run(t, func(t *testing.T, n int) []dist.Comm { return shmComms(t, n, window, 5*time.Second) })
		})
	}
}

// TestSHMAllReduceSizes crosses the round and chunk boundaries of the
// shared-memory all-reduce with a small window, against sums computed here
// in float64; every rank must end with the same bits.
func TestSHMAllReduceSizes(t *testing.T) {
	needSHM(t)
	const window = 1 << 10
	worlds := []int{2, 3, 4}
	sizes := []int{0, 1, 2, 63, 64, 65, 127, 128, 129, 1000, 4099, 65537}
	if testing.Short() {
		worlds, sizes = []int{3}, []int{0, 1, 129, 4099}
	}
	for _, n := range worlds {
		comms := shmComms(t, n, window, 5*time.Second)
		for _, size := range sizes {
			for _, op := range []dist.ReduceOp{dist.Sum, dist.Avg, dist.Max, dist.Min} {
				t.Run(fmt.Sprintf("n=%d/len=%d/%v", n, size, op), func(t *testing.T) {
					in := make([][]float32, n)
					for r := range in {
						in[r] = make([]float32, size)
						for i := range in[r] {
							in[r][i] = float32((i*7+r*13)%101) - 50 + float32(r)/8
						}
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
					for i := range size {
						acc := float64(in[0][i])
						for r := 1; r < n; r++ {
							switch op {
							case dist.Max:
								acc = max(acc, float64(in[r][i]))
							case dist.Min:
								acc = min(acc, float64(in[r][i]))
							default:
								acc += float64(in[r][i])
							}
						}
						if op == dist.Avg {
							acc /= float64(n)
						}
						for r := range n {
							if d := float64(outs[r][i]) - acc; d > 1e-4 || d < -1e-4 {
								t.Fatalf("rank %d: element %d = %v, want %v", r, i, outs[r][i], acc)
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

// TestSHMPeerDies closes one rank's communicator in the middle of a large
// all-reduce: the others must fail promptly with an OpError naming it.
func TestSHMPeerDies(t *testing.T) {
	needSHM(t)
	const n, victim = 4, 2
	checkPeerDies(t, shmComms(t, n, 0, 5*time.Second), victim)
}

// TestSHMPeerHangs leaves a rank out of an all-reduce whose context has no
// deadline: the others must fail after the communicator's timeout naming
// a rank, instead of hanging.
func TestSHMPeerHangs(t *testing.T) {
	needSHM(t)
	const n = 3
	for _, op := range []string{"all-reduce", "broadcast", "barrier"} {
		t.Run(op, func(t *testing.T) {
			comms := shmComms(t, n, 0, 300*time.Millisecond)
			start := time.Now()
			errs := tcpRun(comms[:n-1], func(r int, c dist.Comm) error {
				x := tensor.Zeros(tensor.Shape{1000})
				defer x.Release()
				switch op {
				case "broadcast":
					return c.Broadcast(context.Background(), x, n-1)
				case "barrier":
					return c.Barrier(context.Background())
				}
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
		})
	}
}

// shmFiles lists the regions' files that process pid created.
func shmFiles(t *testing.T, pid int) []string {
	t.Helper()
	m, err := filepath.Glob(filepath.Join(dist.SHMDir(), "flock-"+strconv.Itoa(pid)+"-*"))
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// TestSHMNoFilesLeft checks that the regions' files are gone once the
// world is connected: nothing can be left behind however the ranks end.
func TestSHMNoFilesLeft(t *testing.T) {
	needSHM(t)
	comms := shmComms(t, 3, 0, 5*time.Second)
	if f := shmFiles(t, os.Getpid()); len(f) > 0 {
		t.Errorf("files left after connecting: %v", f)
	}
	errs := tcpRun(comms, func(r int, c dist.Comm) error {
		x := tensor.Ones(tensor.Shape{1 << 16})
		defer x.Release()
		return c.AllReduce(context.Background(), x, dist.Sum)
	})
	for r, err := range errs {
		if err != nil {
			t.Fatalf("rank %d: %v", r, err)
		}
	}
	var wg sync.WaitGroup
	for _, c := range comms {
		wg.Go(func() { c.Close() })
	}
	wg.Wait()
	if f := shmFiles(t, os.Getpid()); len(f) > 0 {
		t.Errorf("files left after Close: %v", f)
	}
}

// TestSHMFallback connects worlds where some rank cannot or may not use
// shared memory: every rank must agree on TCP and the collectives work.
func TestSHMFallback(t *testing.T) {
	needSHM(t)
	cases := []struct {
		name  string
		setup func(t *testing.T)
		noSHM []bool // NoSharedMemory by rank
	}{
		{"env", func(t *testing.T) { t.Setenv("FLOCK_SHM", "0") }, nil},
		{"config", nil, []bool{true, true, true}},
		{"one rank opts out", nil, []bool{false, true, false}},
		{"no directory", func(t *testing.T) { t.Cleanup(dist.SetSHMDir(filepath.Join(t.TempDir(), "missing"))) }, nil},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if tc.setup != nil {
				tc.setup(t)
			}
			const n = 3
			lns, addrs := tcpListeners(t, n)
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			defer cancel()
			comms := make([]dist.Comm, n)
			errs := make([]error, n)
			var wg sync.WaitGroup
			for r := range n {
				wg.Go(func() {
					comms[r], errs[r] = dist.DialTCP(ctx, dist.TCPConfig{Rank: r, Size: n, Addrs: addrs, Listener: lns[r],
						Token: tcpTestToken, Timeout: 5 * time.Second, NoSharedMemory: tc.noSHM != nil && tc.noSHM[r]})
				})
			}
			wg.Wait()
			for r, err := range errs {
				if err != nil {
					t.Fatalf("rank %d: %v", r, err)
				}
				defer comms[r].Close()
				if dist.SHMActive(comms[r]) || transport(comms[r]) != "tcp" {
					t.Errorf("rank %d: collectives on shared memory (transport %q)", r, transport(comms[r]))
				}
			}
			errs = tcpRun(comms, func(r int, c dist.Comm) error {
				x := tensor.FromSlice([]float32{float32(r), 1}, nil)
				defer x.Release()
				if err := c.AllReduce(ctx, x, dist.Sum); err != nil {
					return err
				}
				if got := x.Float32s(); got[0] != 3 || got[1] != 3 {
					return fmt.Errorf("got %v, want [3 3]", got)
				}
				return nil
			})
			for r, err := range errs {
				if err != nil {
					t.Errorf("rank %d: %v", r, err)
				}
			}
		})
	}
}

// TestSHMKilledProcess runs rank 1 in a child process (this test binary)
// that talks over shared memory, and kills it during an all-reduce loop;
// neither process may leave region files while running.
func TestSHMKilledProcess(t *testing.T) {
	if os.Getenv(killedChildEnv) == "" {
		needSHM(t)
	}
	killedProcess(t, "TestSHMKilledProcess", false, func(c dist.Comm, child int) {
		for _, pid := range []int{os.Getpid(), child} {
			if f := shmFiles(t, pid); len(f) > 0 {
				t.Errorf("files of process %d left while running: %v", pid, f)
			}
		}
	})
}

// TestSHMSteadyStateAllocs checks that repeated shared-memory all-reduces
// of a fixed tensor allocate nothing.
func TestSHMSteadyStateAllocs(t *testing.T) {
	needSHM(t)
	if a := allocsPerAllReduce(t, shmComms(t, 2, 0, 5*time.Second)); a > 0 {
		t.Errorf("%v allocations per all-reduce", a)
	}
}
