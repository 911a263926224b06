//go:build unix

package launch

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// helperEnv selects what the test binary does when a test starts it as a
// rank; TestMain runs the helper instead of the tests when it is set.
const helperEnv = "LAUNCH_TEST_HELPER"

func TestMain(m *testing.M) {
	if mode := os.Getenv(helperEnv); mode != "" {
		os.Exit(helper(mode))
	}
	os.Exit(m.Run())
}

// helper is the body of a rank started by a test.
func helper(mode string) int {
	rank, _ := strconv.Atoi(os.Getenv("RANK"))
	switch mode {
	case "env":
		for _, k := range []string{"RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT", TokenEnv, "GOMAXPROCS", "OMP_NUM_THREADS"} {
			fmt.Printf("%s=%s\n", k, os.Getenv(k))
		}
	case "output":
		// Lines written in pieces that split them anywhere, and a last
		// line without its newline.
		for i := range 50 {
			line := fmt.Sprintf("out %d %d\n", rank, i)
			for j := 0; j < len(line); j += 1 + i%4 {
				os.Stdout.WriteString(line[j:min(len(line), j+1+i%4)])
			}
			fmt.Fprintf(os.Stderr, "err %d %d\n", rank, i)
		}
		fmt.Printf("tail %d", rank)
	case "fail":
		if os.Getenv("IGNORE_TERM") != "" {
			signal.Ignore(syscall.SIGTERM)
		}
		if os.Getenv("KILL_ON_TERM") == strconv.Itoa(rank) {
			// Killed from outside as the launcher stops it.
			c := make(chan os.Signal, 1)
			signal.Notify(c, syscall.SIGTERM)
			go func() {
				<-c
				syscall.Kill(os.Getpid(), syscall.SIGKILL)
			}()
		}
		fmt.Println("ready")
		if os.Getenv("FAIL_RANK") == strconv.Itoa(rank) {
			time.Sleep(100 * time.Millisecond)
			code, _ := strconv.Atoi(os.Getenv("FAIL_CODE"))
			if code < 0 {
				syscall.Kill(os.Getpid(), syscall.Signal(-code))
			}
			return code
		}
		time.Sleep(time.Hour)
	case "signal":
		c := make(chan os.Signal, 1)
		signal.Notify(c, syscall.SIGINT)
		fmt.Println("ready")
		<-c
		fmt.Println("interrupted")
		if os.Getenv("EXIT_ZERO") != "" {
			return 0
		}
		return 130
	case "wait":
		fmt.Println("ready")
		time.Sleep(time.Hour)
	}
	return 0
}

// lines collects output and tells when n lines equal to want were written.
type lines struct {
	mu    sync.Mutex
	buf   bytes.Buffer
	want  string
	n     int
	ready chan struct{}
}

func newLines(want string, n int) *lines {
	return &lines{want: want, n: n, ready: make(chan struct{})}
}

func (l *lines) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.buf.Write(p)
	if l.n > 0 && strings.Count(l.buf.String(), l.want+"\n") >= l.n {
		l.n = 0
		close(l.ready)
	}
	return len(p), nil
}

func (l *lines) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.String()
}

func helperConfig(t *testing.T, mode string, nproc int, env ...string) Config {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	return Config{
		NProc:   nproc,
		Program: exe,
		Env:     append(os.Environ(), append([]string{helperEnv + "=" + mode}, env...)...),
		Grace:   10 * time.Second,
	}
}

// parseEnv returns the variables each rank printed, by rank.
func parseEnv(t *testing.T, out string) map[int]map[string]string {
	t.Helper()
	ranks := map[int]map[string]string{}
	re := regexp.MustCompile(`^\[(\d+)\] (\w+)=(.*)$`)
	for line := range strings.Lines(out) {
		m := re.FindStringSubmatch(strings.TrimSuffix(line, "\n"))
		if m == nil {
			t.Fatalf("line %q is not [rank] KEY=VALUE", line)
		}
		r, _ := strconv.Atoi(m[1])
		if ranks[r] == nil {
			ranks[r] = map[string]string{}
		}
		ranks[r][m[2]] = m[3]
	}
	return ranks
}

// TestEnvironment checks the variables every rank gets, on one node (a
// made-up secret) and on the second of two nodes (the user's secret).
func TestEnvironment(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name             string
		nproc, nodes, nr int
		master           string
		env              []string
		ranks            []int
		addr, port       string
		token            string
		threads          string
	}{
		{"one node", 3, 1, 0, "", []string{"RANK=99", "MASTER_PORT=1"}, []int{0, 1, 2}, "127.0.0.1", "", "", ""},
		{"second node", 2, 2, 1, "node7:29500", []string{TokenEnv + "=s3cret", "GOMAXPROCS=3"}, []int{2, 3}, "node7", "29500", "s3cret", "3"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			cfg := helperConfig(t, "env", c.nproc, c.env...)
			cfg.Env = slices.DeleteFunc(cfg.Env, func(kv string) bool {
				return strings.HasPrefix(kv, TokenEnv+"=") || strings.HasPrefix(kv, "GOMAXPROCS=")
			})
			cfg.Env = append(cfg.Env, c.env...)
			cfg.NNodes, cfg.NodeRank, cfg.Master = c.nodes, c.nr, c.master
			var out, errOut bytes.Buffer
			cfg.Stdout, cfg.Stderr = &out, &errOut
			code, err := Run(context.Background(), cfg)
			if code != 0 || err != nil {
				t.Fatalf("Run: %d, %v; stderr %s", code, err, errOut.String())
			}
			got := parseEnv(t, out.String())
			if len(got) != len(c.ranks) {
				t.Fatalf("%d ranks printed, want %d:\n%s", len(got), len(c.ranks), out.String())
			}
			var tokens []string
			for local, r := range c.ranks {
				e := got[r]
				want := map[string]string{
					"RANK": strconv.Itoa(r), "WORLD_SIZE": strconv.Itoa(c.nodes * c.nproc),
					"LOCAL_RANK": strconv.Itoa(local), "LOCAL_WORLD_SIZE": strconv.Itoa(c.nproc),
					"MASTER_ADDR": c.addr,
				}
				if c.port != "" {
					want["MASTER_PORT"] = c.port
				}
				if c.token != "" {
					want[TokenEnv] = c.token
				}
				if c.threads != "" {
					want["GOMAXPROCS"] = c.threads
				}
				for k, v := range want {
					if e[k] != v {
						t.Errorf("rank %d: %s=%q, want %q", r, k, e[k], v)
					}
				}
				if p, err := strconv.Atoi(e["MASTER_PORT"]); err != nil || p < 1 || p > 65535 || p == 1 {
					t.Errorf("rank %d: MASTER_PORT=%q, want a chosen port", r, e["MASTER_PORT"])
				}
				if n, err := strconv.Atoi(e["GOMAXPROCS"]); err != nil || n < 1 {
					t.Errorf("rank %d: GOMAXPROCS=%q", r, e["GOMAXPROCS"])
				}
				tokens = append(tokens, e[TokenEnv])
			}
			if c.token == "" {
				if !regexp.MustCompile(`^[0-9a-f]{64}$`).MatchString(tokens[0]) {
					t.Errorf("made-up token %q: want 64 hex digits", tokens[0])
				}
				if len(slices.Compact(slices.Clone(tokens))) != 1 {
					t.Errorf("ranks got different tokens %q", tokens)
				}
			}
		})
	}
}

// TestTokenPerJob checks that two jobs on one node get different secrets.
func TestTokenPerJob(t *testing.T) {
	t.Parallel()
	var tokens []string
	for range 2 {
		cfg := helperConfig(t, "env", 1)
		cfg.Env = slices.DeleteFunc(cfg.Env, func(kv string) bool { return strings.HasPrefix(kv, TokenEnv+"=") })
		var out bytes.Buffer
		cfg.Stdout = &out
		if code, err := Run(context.Background(), cfg); code != 0 || err != nil {
			t.Fatalf("Run: %d, %v", code, err)
		}
		tokens = append(tokens, parseEnv(t, out.String())[0][TokenEnv])
	}
	if tokens[0] == tokens[1] || tokens[0] == "" {
		t.Errorf("two jobs got tokens %q", tokens)
	}
}

// TestConfigErrors checks that Run refuses a bad Config before starting
// anything.
func TestConfigErrors(t *testing.T) {
	t.Parallel()
	noToken := slices.DeleteFunc(os.Environ(), func(kv string) bool { return strings.HasPrefix(kv, TokenEnv+"=") })
	cases := []struct {
		name string
		cfg  Config
		code int
		want string
	}{
		{"no processes", Config{NProc: 0, Program: "true"}, 2, "nproc 0"},
		{"negative nodes", Config{NProc: 1, NNodes: -1, Program: "true"}, 2, "nnodes -1"},
		{"node rank too big", Config{NProc: 1, NNodes: 2, NodeRank: 2, Master: "h:1", Program: "true"}, 2, "node rank 2: want in [0, 2)"},
		{"negative node rank", Config{NProc: 1, NodeRank: -1, Program: "true"}, 2, "node rank -1"},
		{"no program", Config{NProc: 1}, 2, "no program"},
		{"nodes without master", Config{NProc: 1, NNodes: 2, Program: "true"}, 2, "need the master's HOST:PORT"},
		{"master without port", Config{NProc: 1, Master: "node1", Program: "true"}, 2, `master "node1"`},
		{"master without host", Config{NProc: 1, Master: ":29500", Program: "true"}, 2, "no host"},
		{"master port zero", Config{NProc: 1, Master: "h:0", Program: "true"}, 2, "port out of range"},
		{"master port not a number", Config{NProc: 1, Master: "h:http", Program: "true"}, 2, `master "h:http"`},
		{"nodes without token", Config{NProc: 1, NNodes: 2, Master: "h:1", Program: "true", Env: noToken}, 2, TokenEnv},
		{"program not found", Config{NProc: 1, Program: "no-such-program-flock"}, 1, "no-such-program-flock"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			code, err := Run(context.Background(), c.cfg)
			if code != c.code || err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("Run: %d, %v; want %d and an error containing %q", code, err, c.code, c.want)
			}
			if errors.Is(err, ErrConfig) != (c.code == 2) {
				t.Errorf("errors.Is(%v, ErrConfig) = %v", err, !(c.code == 2))
			}
		})
	}
}

// TestOutput checks that every line of every rank arrives whole, with its
// rank's prefix, in the rank's order, on the right stream.
func TestOutput(t *testing.T) {
	t.Parallel()
	const nproc = 4
	cfg := helperConfig(t, "output", nproc)
	var out, errOut bytes.Buffer
	cfg.Stdout, cfg.Stderr = &out, &errOut
	if code, err := Run(context.Background(), cfg); code != 0 || err != nil {
		t.Fatalf("Run: %d, %v", code, err)
	}
	for _, s := range []struct {
		name, text, word string
		tail             bool
	}{{"stdout", out.String(), "out", true}, {"stderr", errOut.String(), "err", false}} {
		next := make([]int, nproc)
		tails := 0
		for line := range strings.Lines(s.text) {
			var r, i int
			if _, err := fmt.Sscanf(line, "[%d] "+s.word+" %d %d\n", &r, &r, &i); err == nil {
				if !strings.HasPrefix(line, fmt.Sprintf("[%d] %s %d ", r, s.word, r)) {
					t.Fatalf("%s: line %q has another rank's prefix", s.name, line)
				}
				if i != next[r] {
					t.Fatalf("%s: rank %d line %d, want line %d", s.name, r, i, next[r])
				}
				next[r]++
				continue
			}
			if _, err := fmt.Sscanf(line, "[%d] tail %d\n", &r, &i); err == nil && s.tail && r == i && strings.HasSuffix(line, "\n") {
				tails++
				continue
			}
			t.Fatalf("%s: unexpected line %q", s.name, line)
		}
		for r, n := range next {
			if n != 50 {
				t.Errorf("%s: rank %d wrote %d lines, want 50", s.name, r, n)
			}
		}
		if s.tail && tails != nproc {
			t.Errorf("%s: %d unterminated last lines, want %d", s.name, tails, nproc)
		}
	}
}

// TestPrefixWriter checks line splitting against the lines written, for
// writes cut at every place, and the breaking of over-long lines.
func TestPrefixWriter(t *testing.T) {
	t.Parallel()
	long := strings.Repeat("x", 2*maxLine+5)
	cases := []struct {
		name, in, want string
	}{
		{"empty", "", ""},
		{"one line", "a\n", "[3] a\n"},
		{"no newline", "a", "[3] a\n"},
		{"empty lines", "\n\nb\n", "[3] \n[3] \n[3] b\n"},
		{"long line", long + "\nz\n", "[3] " + long[:maxLine] + "\n[3] " + long[maxLine:2*maxLine] + "\n[3] xxxxx\n[3] z\n"},
	}
	for _, c := range cases {
		for _, step := range []int{1, 3, 7, 1 << 20} {
			var mu sync.Mutex
			var out bytes.Buffer
			pw := newPrefixWriter(&mu, &out, 3)
			for i := 0; i < len(c.in); i += step {
				piece := c.in[i:min(len(c.in), i+step)]
				if n, err := pw.Write([]byte(piece)); n != len(piece) || err != nil {
					t.Fatalf("%s: Write: %d, %v", c.name, n, err)
				}
			}
			pw.Flush()
			if out.String() != c.want {
				t.Errorf("%s, writes of %d bytes: got %.80q, want %.80q", c.name, step, out.String(), c.want)
			}
		}
	}
}

// TestFailure checks that a failing rank stops the others and that its
// status is returned: by SIGTERM at once, or by SIGKILL after the grace
// period when the others ignore SIGTERM.
func TestFailure(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name       string
		code       string
		ignoreTerm bool
		want       int
		signal     os.Signal
		min, max   time.Duration
	}{
		{"exit 3", "3", false, 3, nil, 0, 5 * time.Second},
		{"killed", "-9", false, 137, syscall.SIGKILL, 0, 5 * time.Second},
		{"ignores SIGTERM", "7", true, 7, nil, time.Second, 8 * time.Second},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			cfg := helperConfig(t, "fail", 4, "FAIL_RANK=2", "FAIL_CODE="+c.code)
			if c.ignoreTerm {
				cfg.Env = append(cfg.Env, "IGNORE_TERM=1")
				cfg.Grace = time.Second
			}
			out := newLines("ready", 0)
			cfg.Stdout = out
			start := time.Now()
			code, err := Run(context.Background(), cfg)
			took := time.Since(start)
			var ee *ExitError
			if code != c.want || !errors.As(err, &ee) {
				t.Fatalf("Run: %d, %v; want %d and an *ExitError", code, err, c.want)
			}
			if ee.Rank != 2 || ee.Code != c.want || ee.Signal != c.signal || ee.Stopped != 3 {
				t.Errorf("ExitError %+v, want rank 2, status %d, signal %v, 3 stopped", *ee, c.want, c.signal)
			}
			if took < c.min || took > c.max {
				t.Errorf("Run took %v, want within [%v, %v]", took, c.min, c.max)
			}
		})
	}
}

// TestKilledFromOutside checks that a rank that a signal from outside the
// launcher ends after another rank's failure is named in the error, beside
// the first failure: its peers' exits may be seen before its own.
func TestKilledFromOutside(t *testing.T) {
	t.Parallel()
	cfg := helperConfig(t, "fail", 4, "FAIL_RANK=2", "FAIL_CODE=1", "KILL_ON_TERM=0")
	cfg.Stdout = newLines("ready", 0)
	code, err := Run(context.Background(), cfg)
	var ee *ExitError
	if code != 1 || !errors.As(err, &ee) {
		t.Fatalf("Run: %d, %v; want 1 and an *ExitError", code, err)
	}
	if ee.Rank != 2 || len(ee.Killed) != 1 || ee.Killed[0] != (RankSignal{0, syscall.SIGKILL}) {
		t.Errorf("ExitError %+v, want rank 2's failure and rank 0 killed by SIGKILL (ranks 1 and 3 end by the launcher's SIGTERM)", *ee)
	}
	if want := "rank 0 was killed by signal killed"; !strings.Contains(err.Error(), want) {
		t.Errorf("error %q does not say %q", err, want)
	}
}

// TestSignal forwards SIGINT to ranks that handle it, and checks the
// status: the ranks' when they fail, 128+SIGINT when they all exit with 0.
func TestSignal(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		name string
		env  []string
		want int
	}{{"ranks exit 130", nil, 130}, {"ranks exit 0", []string{"EXIT_ZERO=1"}, 128 + int(syscall.SIGINT)}} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			const nproc = 3
			cfg := helperConfig(t, "signal", nproc, c.env...)
			out := newLines("ready", nproc)
			cfg.Stdout = out
			sigs := make(chan os.Signal, 1)
			cfg.Signals = sigs
			go func() {
				select {
				case <-out.ready:
					sigs <- syscall.SIGINT
				case <-time.After(30 * time.Second):
				}
			}()
			code, err := Run(context.Background(), cfg)
			var ie *InterruptedError
			if code != c.want || !errors.As(err, &ie) || ie.Signal != syscall.SIGINT {
				t.Fatalf("Run: %d, %v; want %d and an *InterruptedError for SIGINT\n%s", code, err, c.want, out.String())
			}
			if n := strings.Count(out.String(), "interrupted\n"); n != nproc {
				t.Errorf("%d ranks handled the signal, want %d:\n%s", n, nproc, out.String())
			}
		})
	}
}

// TestContext checks that the end of Run's context stops the ranks.
func TestContext(t *testing.T) {
	t.Parallel()
	const nproc = 2
	cfg := helperConfig(t, "wait", nproc)
	out := newLines("ready", nproc)
	cfg.Stdout = out
	ctx, cancel := context.WithCancel(context.Background())
	go func() {
		<-out.ready
		cancel()
	}()
	code, err := Run(ctx, cfg)
	var ie *InterruptedError
	if code != 128+int(syscall.SIGTERM) || !errors.As(err, &ie) || !errors.Is(err, context.Canceled) {
		t.Fatalf("Run: %d, %v; want %d and an *InterruptedError wrapping context.Canceled", code, err, 128+int(syscall.SIGTERM))
	}
}
