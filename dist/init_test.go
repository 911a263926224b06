package dist

import (
	"context"
	"errors"
	"log/slog"
	"net"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/flockml/flock/tensor"
)

// initFreePort returns a loopback port that was free a moment ago.
func initFreePort(t *testing.T) int {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port
}

// initRanks runs Init for every env concurrently and returns the comms
// and errors by rank.
func initRanks(t *testing.T, envs []Env, timeout time.Duration) ([]Comm, []error) {
	t.Helper()
	comms := make([]Comm, len(envs))
	errs := make([]error, len(envs))
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	var wg sync.WaitGroup
	for i, e := range envs {
		wg.Go(func() {
			comms[i], errs[i] = Init(ctx, e, InitOptions{Timeout: timeout})
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

func initEnvs(size, port int, token string) []Env {
	envs := make([]Env, size)
	for r := range envs {
		envs[r] = Env{Rank: r, Size: size, LocalRank: r, LocalSize: size, MasterAddr: "127.0.0.1", MasterPort: port, Token: []byte(token)}
	}
	return envs
}

func TestInitLoopback(t *testing.T) {
	t.Parallel()
	const size = 3
	comms, errs := initRanks(t, initEnvs(size, initFreePort(t), envTestToken), 20*time.Second)
	for r, err := range errs {
		if err != nil {
			t.Fatalf("rank %d: %v", r, err)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	const n = 1000
	var wg sync.WaitGroup
	got := make([][]float32, size)
	for r, c := range comms {
		if c.Rank() != r || c.Size() != size {
			t.Fatalf("comm %d has rank %d of %d", r, c.Rank(), c.Size())
		}
		wg.Go(func() {
			v := make([]float32, n)
			for i := range v {
				v[i] = float32(r*n + i)
			}
			x := tensor.FromSlice(v, nil)
			defer x.Release()
			if err := c.AllReduce(ctx, x, Sum); err != nil {
				t.Errorf("rank %d: all-reduce: %v", r, err)
				return
			}
			got[r] = x.Float32s()
		})
	}
	wg.Wait()
	for r := range size {
		for i, g := range got[r] {
			want := float32(0)
			for q := range size {
				want += float32(q*n + i)
			}
			if g != want {
				t.Fatalf("rank %d element %d: %v, want %v", r, i, g, want)
			}
		}
	}
}

func TestInitSingleRank(t *testing.T) {
	t.Parallel()
	c, err := Init(context.Background(), Env{Size: 1, LocalSize: 1}, InitOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	x := tensor.FromSlice([]float32{1, 2, 3}, nil)
	defer x.Release()
	if err := c.AllReduce(context.Background(), x, Sum); err != nil || c.Size() != 1 {
		t.Fatalf("single-rank all-reduce: %v (size %d)", err, c.Size())
	}
	if got := x.Float32s(); got[0] != 1 || got[1] != 2 || got[2] != 3 {
		t.Fatalf("single-rank all-reduce changed the tensor: %v", got)
	}
}

func TestInitFailures(t *testing.T) {
	t.Parallel()
	const other = "fedcba9876543210-other"
	cases := []struct {
		name    string
		envs    func(port int) []Env
		failing []int // ranks that must fail, one of them with want
		want    string
	}{
		{"wrong token", func(port int) []Env {
			e := initEnvs(2, port, envTestToken)
			e[1].Token = []byte(other)
			return e
		}, []int{1}, "authentication failed"},
		{"world sizes differ", func(port int) []Env {
			e := initEnvs(3, port, envTestToken)[:2]
			e[1].Size, e[1].LocalSize = 2, 2
			return e
		}, []int{0, 1}, "world size"},
		{"missing rank", func(port int) []Env {
			return initEnvs(3, port, envTestToken)[:2]
		}, []int{0, 1}, "rank 2 never registered"},
		{"invalid env", func(port int) []Env {
			e := initEnvs(2, port, envTestToken)
			e[0].Token = nil
			return e[:1]
		}, []int{0}, "FLOCK_JOB_TOKEN"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			start := time.Now()
			_, errs := initRanks(t, tc.envs(initFreePort(t)), time.Second)
			if el := time.Since(start); el > 10*time.Second {
				t.Fatalf("took %v with a 1 s timeout", el)
			}
			named := false
			for _, r := range tc.failing {
				if errs[r] == nil {
					t.Fatalf("rank %d joined", r)
				}
				named = named || strings.Contains(errs[r].Error(), tc.want)
			}
			if !named {
				t.Fatalf("errors %v, want one containing %q", errs, tc.want)
			}
		})
	}
}

// TestInitReportsMissingRanks checks that rank 0 names, while it waits, the
// ranks that have not joined and logs a connection with the wrong token,
// and that FLOCK_TIMEOUT's value in the Env bounds the wait.
func TestInitReportsMissingRanks(t *testing.T) {
	t.Parallel()
	envs := initEnvs(3, initFreePort(t), envTestToken)
	for r := range envs {
		envs[r].Timeout = 1500 * time.Millisecond
	}
	lg := &storeLog{}
	log := slog.New(slog.NewTextHandler(lg, nil))
	errs := make([]error, 2)
	start := time.Now()
	var wg sync.WaitGroup
	for r := range errs {
		wg.Go(func() {
			opts := InitOptions{}
			if r == 0 {
				opts.Logger = log
			}
			var c Comm
			if c, errs[r] = Init(context.Background(), envs[r], opts); c != nil {
				c.Close()
			}
		})
	}
	master := net.JoinHostPort(envs[0].MasterAddr, strconv.Itoa(envs[0].MasterPort))
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if _, err := DialStore(ctx, master, StoreConfig{Token: []byte("not the job token, wrong")}); !errors.Is(err, errStoreAuth) {
		t.Errorf("dial with a wrong token: %v, want an authentication error", err)
	}
	wg.Wait()
	if took := time.Since(start); took > 10*time.Second {
		t.Errorf("Init gave up after %v, want about the 1.5s of Env.Timeout", took)
	}
	if errs[0] == nil || !strings.Contains(errs[0].Error(), "rank 2 never registered") {
		t.Errorf("rank 0: %v, want rank 2 never registered", errs[0])
	}
	out := lg.String()
	for _, want := range []string{"waiting for ranks to join", "missing=[2]", "joined=2", "refused connection", "wrong token"} {
		if !strings.Contains(out, want) {
			t.Errorf("log lacks %q:\n%s", want, out)
		}
	}
}
