package dist

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"slices"
	"strconv"
	"sync"
	"syscall"
	"testing"
	"time"
)

var storeTestToken = []byte("0123456789abcdef-test-token")

// storeLog collects a server's log output.
type storeLog struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (l *storeLog) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.Write(p)
}

func (l *storeLog) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.String()
}

// waitFor polls cond for up to 5 s.
func storeWaitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for end := time.Now().Add(5 * time.Second); time.Now().Before(end); time.Sleep(5 * time.Millisecond) {
		if cond() {
			return
		}
	}
	t.Fatalf("timed out waiting for %s", what)
}

func storeNewTest(t *testing.T) (*StoreServer, *storeLog) {
	t.Helper()
	lg := &storeLog{}
	srv, err := ListenStore("127.0.0.1:0", StoreConfig{Token: storeTestToken, Logger: slog.New(slog.NewTextHandler(lg, nil))})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { srv.Close() })
	return srv, lg
}

func storeDialTest(t *testing.T, srv *StoreServer) *Store {
	t.Helper()
	c, err := DialStore(context.Background(), srv.Addr().String(), StoreConfig{Token: storeTestToken, Timeout: 10 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

func storeCtx(t *testing.T, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}

func TestStoreBindsGivenAddress(t *testing.T) {
	srv, _ := storeNewTest(t)
	a := srv.Addr().(*net.TCPAddr)
	if !a.IP.Equal(net.IPv4(127, 0, 0, 1)) {
		t.Fatalf("listening on %v, want 127.0.0.1 only", a)
	}
}

func TestStoreSetGetDelete(t *testing.T) {
	t.Parallel()
	srv, _ := storeNewTest(t)
	c := storeDialTest(t, srv)
	ctx := storeCtx(t, 10*time.Second)
	big := bytes.Repeat([]byte{0xa5, 0, 1}, 1<<18)
	cases := []struct {
		key string
		val []byte
	}{
		{"a", []byte("1")},
		{"empty", nil},
		{"binary", []byte{0, 255, 0, 10}},
		{"big", big},
		{"a", []byte("overwritten")},
		{"ключ/with/slashes", []byte("x")},
	}
	want := map[string][]byte{}
	for _, tc := range cases {
		if err := c.Set(ctx, tc.key, tc.val); err != nil {
			t.Fatalf("Set(%q): %v", tc.key, err)
		}
		want[tc.key] = tc.val
	}
	for k, v := range want {
		got, err := c.Get(ctx, k)
		if err != nil {
			t.Fatalf("Get(%q): %v", k, err)
		}
		if !bytes.Equal(got, v) {
			t.Fatalf("Get(%q) = %d bytes, want %d", k, len(got), len(v))
		}
	}
	for _, tc := range []struct {
		key  string
		want bool
	}{{"a", true}, {"a", false}, {"never", false}} {
		got, err := c.Delete(ctx, tc.key)
		if err != nil || got != tc.want {
			t.Fatalf("Delete(%q) = %v, %v; want %v", tc.key, got, err, tc.want)
		}
	}
	short := storeCtx(t, 100*time.Millisecond)
	if _, err := c.Get(short, "a"); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Get of a deleted key: %v, want deadline exceeded", err)
	}
	if _, err := c.Get(ctx, string(make([]byte, storeMaxKey+1))); err == nil {
		t.Fatal("Get with an oversized key succeeded")
	}
}

func TestStoreGetBlocksUntilSet(t *testing.T) {
	t.Parallel()
	srv, _ := storeNewTest(t)
	a, b := storeDialTest(t, srv), storeDialTest(t, srv)
	ctx := storeCtx(t, 10*time.Second)
	got := make(chan []byte, 1)
	go func() {
		v, err := a.Get(ctx, "late")
		if err != nil {
			t.Error(err)
		}
		got <- v
	}()
	time.Sleep(50 * time.Millisecond)
	select {
	case v := <-got:
		t.Fatalf("Get returned %q before the key was set", v)
	default:
	}
	if err := b.Set(ctx, "late", []byte("here")); err != nil {
		t.Fatal(err)
	}
	if v := <-got; string(v) != "here" {
		t.Fatalf("Get = %q, want %q", v, "here")
	}
}

func TestStoreTimeouts(t *testing.T) {
	t.Parallel()
	srv, _ := storeNewTest(t)
	cfgTimeout, err := DialStore(context.Background(), srv.Addr().String(), StoreConfig{Token: storeTestToken, Timeout: 150 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	defer cfgTimeout.Close()
	c := storeDialTest(t, srv)
	cases := []struct {
		name string
		op   func() error
		want time.Duration
	}{
		{"get ctx", func() error { _, err := c.Get(storeCtx(t, 100*time.Millisecond), "missing"); return err }, 100 * time.Millisecond},
		{"wait ctx", func() error {
			if err := c.Set(context.Background(), "w1", nil); err != nil {
				return err
			}
			return c.Wait(storeCtx(t, 100*time.Millisecond), "w1", "w2")
		}, 100 * time.Millisecond},
		{"get config timeout", func() error { _, err := cfgTimeout.Get(context.Background(), "missing"); return err }, 150 * time.Millisecond},
	}
	for _, tc := range cases {
		start := time.Now()
		err := tc.op()
		el := time.Since(start)
		if !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("%s: %v, want deadline exceeded", tc.name, err)
		}
		if el < tc.want-10*time.Millisecond || el > tc.want+2*time.Second {
			t.Fatalf("%s: gave up after %v, want about %v", tc.name, el, tc.want)
		}
	}
	if err := c.Set(context.Background(), "after", []byte("ok")); err != nil {
		t.Fatalf("client unusable after timeouts: %v", err)
	}
	if v, err := c.Get(context.Background(), "after"); err != nil || string(v) != "ok" {
		t.Fatalf("Get after timeouts = %q, %v", v, err)
	}
}

func TestStoreCancel(t *testing.T) {
	t.Parallel()
	srv, _ := storeNewTest(t)
	c := storeDialTest(t, srv)
	ctx, cancel := context.WithCancel(context.Background())
	time.AfterFunc(50*time.Millisecond, cancel)
	start := time.Now()
	if _, err := c.Get(ctx, "missing"); !errors.Is(err, context.Canceled) {
		t.Fatalf("Get = %v, want canceled", err)
	}
	if el := time.Since(start); el > 2*time.Second {
		t.Fatalf("cancel took %v", el)
	}
	if _, err := c.Add(context.Background(), "n", 3); err != nil {
		t.Fatalf("client unusable after cancel: %v", err)
	}
}

func TestStoreWait(t *testing.T) {
	t.Parallel()
	srv, _ := storeNewTest(t)
	a, b := storeDialTest(t, srv), storeDialTest(t, srv)
	ctx := storeCtx(t, 10*time.Second)
	done := make(chan error, 1)
	go func() { done <- a.Wait(ctx, "k0", "k1", "k2") }()
	for i := range 3 {
		time.Sleep(20 * time.Millisecond)
		select {
		case err := <-done:
			t.Fatalf("Wait returned (%v) with %d of 3 keys set", err, i)
		default:
		}
		if err := b.Set(ctx, fmt.Sprint("k", i), nil); err != nil {
			t.Fatal(err)
		}
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}

func TestStoreAddConcurrent(t *testing.T) {
	t.Parallel()
	srv, _ := storeNewTest(t)
	const clients, per = 8, 50
	ctx := storeCtx(t, 20*time.Second)
	seen := make(chan int64, clients*per)
	var wg sync.WaitGroup
	for range clients {
		c := storeDialTest(t, srv)
		wg.Go(func() {
			for range per {
				n, err := c.Add(ctx, "counter", 1)
				if err != nil {
					t.Error(err)
					return
				}
				seen <- n
			}
		})
	}
	wg.Wait()
	close(seen)
	var got []int64
	for n := range seen {
		got = append(got, n)
	}
	slices.Sort(got)
	for i, n := range got {
		if n != int64(i+1) {
			t.Fatalf("Add results %v…, want each of 1..%d once", got[:i+1], clients*per)
		}
	}
	c := storeDialTest(t, srv)
	for _, tc := range []struct {
		delta, want int64
	}{{-400, 0}, {-5, -5}, {1 << 40, 1<<40 - 5}} {
		n, err := c.Add(ctx, "counter", tc.delta)
		if err != nil || n != tc.want {
			t.Fatalf("Add(%d) = %d, %v; want %d", tc.delta, n, err, tc.want)
		}
	}
	v, err := c.Get(ctx, "counter")
	if err != nil || string(v) != strconv.FormatInt(1<<40-5, 10) {
		t.Fatalf("Get(counter) = %q, %v", v, err)
	}
	if err := c.Set(ctx, "text", []byte("x")); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Add(ctx, "text", 1); err == nil {
		t.Fatal("Add to a non-integer value succeeded")
	}
}

func TestStoreCompareSet(t *testing.T) {
	t.Parallel()
	srv, _ := storeNewTest(t)
	c := storeDialTest(t, srv)
	ctx := storeCtx(t, 10*time.Second)
	cases := []struct {
		name              string
		expected, desired string
		want              string
		wantNil, swapped  bool
	}{
		{"absent, expects a value", "x", "y", "", true, false},
		{"absent, expects absent", "", "v1", "v1", false, true},
		{"present, expects absent", "", "v2", "v1", false, false},
		{"present, mismatch", "zz", "v2", "v1", false, false},
		{"present, match", "v1", "v2", "v2", false, true},
	}
	for _, tc := range cases {
		cur, swapped, err := c.CompareSet(ctx, "cas", []byte(tc.expected), []byte(tc.desired))
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		if swapped != tc.swapped || (cur == nil) != tc.wantNil || string(cur) != tc.want {
			t.Fatalf("%s: CompareSet = %q (nil %v), %v; want %q (nil %v), %v", tc.name, cur, cur == nil, swapped, tc.want, tc.wantNil, tc.swapped)
		}
	}
	const racers = 6
	winners := make(chan int, racers)
	var wg sync.WaitGroup
	for i := range racers {
		r := storeDialTest(t, srv)
		wg.Go(func() {
			_, ok, err := r.CompareSet(ctx, "leader", nil, []byte(strconv.Itoa(i)))
			if err != nil {
				t.Error(err)
			}
			if ok {
				winners <- i
			}
		})
	}
	wg.Wait()
	close(winners)
	var ws []int
	for w := range winners {
		ws = append(ws, w)
	}
	v, err := c.Get(ctx, "leader")
	if len(ws) != 1 || err != nil || string(v) != strconv.Itoa(ws[0]) {
		t.Fatalf("compare-set election: winners %v, stored %q (%v)", ws, v, err)
	}
}

func TestStoreWrongToken(t *testing.T) {
	t.Parallel()
	srv, lg := storeNewTest(t)
	start := time.Now()
	_, err := DialStore(storeCtx(t, 10*time.Second), srv.Addr().String(), StoreConfig{Token: []byte("not the token")})
	if !errors.Is(err, errStoreAuth) {
		t.Fatalf("DialStore with a wrong token: %v, want an authentication error", err)
	}
	if el := time.Since(start); el > 2*time.Second {
		t.Fatalf("refusal took %v; a wrong token must not be retried", el)
	}
	storeWaitFor(t, "a logged refusal", func() bool { return bytes.Contains([]byte(lg.String()), []byte("wrong token")) })
	if _, err := DialStore(context.Background(), srv.Addr().String(), StoreConfig{}); err == nil {
		t.Fatal("DialStore with an empty token succeeded")
	}
	if _, err := ListenStore("127.0.0.1:0", StoreConfig{}); err == nil {
		t.Fatal("ListenStore with an empty token succeeded")
	}
}

// TestStoreImpostor checks that a client refuses a server that answers the
// handshake without the token.
func TestStoreImpostor(t *testing.T) {
	t.Parallel()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		c, err := ln.Accept()
		if err != nil {
			return
		}
		defer c.Close()
		hello := append(storeHelloMagic[:], storeVersion)
		hello = append(hello, make([]byte, storeNonceLen)...)
		c.Write(hello)
		io.ReadFull(c, make([]byte, storeProofLen))
		c.Write(make([]byte, storeMACLen))
		io.Copy(io.Discard, c)
	}()
	_, err = DialStore(storeCtx(t, 5*time.Second), ln.Addr().String(), StoreConfig{Token: storeTestToken})
	if !errors.Is(err, errStoreAuth) {
		t.Fatalf("DialStore to an impostor: %v, want an authentication error", err)
	}
}

// TestStoreRejectsBadFrames sends frames the server must refuse, each on a
// fresh connection, and checks that it closes the connection, logs why,
// and keeps serving others.
func TestStoreRejectsBadFrames(t *testing.T) {
	t.Parallel()
	srv, lg := storeNewTest(t)
	valid, _ := storeAppendFrame(nil, &storeMsg{op: storeOpSet, keys: []string{"k"}, vals: [][]byte{[]byte("v")}})
	oversized := append(storeFrameMagic[:], storeOpSet)
	oversized = binary.BigEndian.AppendUint32(oversized, storeMaxFrame+1)
	wrongShape, _ := storeAppendFrame(nil, &storeMsg{op: storeOpSet, keys: []string{"k"}})
	unknownOp, _ := storeAppendFrame(nil, &storeMsg{op: 0x42, keys: []string{"k"}})
	trailing := slices.Clone(valid)
	binary.BigEndian.PutUint32(trailing[5:], binary.BigEndian.Uint32(trailing[5:])+1)
	trailing = append(trailing, 0)
	cases := []struct {
		name   string
		auth   bool
		send   []byte
		reason string
	}{
		{"unauthenticated request", false, append(valid, make([]byte, storeProofLen)...), "not a flock store handshake"},
		{"garbage before auth", false, bytes.Repeat([]byte("GET / HTTP/1.1\r\n"), 8), "not a flock store handshake"},
		{"bad magic", true, append([]byte("XXXX"), valid[4:]...), "bad magic"},
		{"oversized", true, oversized, "exceeds"},
		{"wrong shape", true, wrongShape, "set with 1 keys and 0 values"},
		{"unknown op", true, unknownOp, "unknown op"},
		{"trailing bytes", true, trailing, "trailing bytes"},
	}
	for _, tc := range cases {
		c, err := net.Dial("tcp", srv.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		if tc.auth {
			if err := storeClientHandshake(c, storeTestToken, time.Now().Add(5*time.Second)); err != nil {
				t.Fatal(err)
			}
		} else if _, err := io.ReadFull(c, make([]byte, storeHelloLen)); err != nil {
			t.Fatal(err)
		}
		c.Write(tc.send)
		c.SetReadDeadline(time.Now().Add(5 * time.Second))
		n, err := io.Copy(io.Discard, c)
		c.Close()
		if (err != nil && !errors.Is(err, syscall.ECONNRESET)) || n != 0 {
			t.Fatalf("%s: server answered %d bytes (%v) instead of closing", tc.name, n, err)
		}
		storeWaitFor(t, tc.name+" logged", func() bool { return bytes.Contains([]byte(lg.String()), []byte(tc.reason)) })
	}
	good := storeDialTest(t, srv)
	if err := good.Set(context.Background(), "still", []byte("serving")); err != nil {
		t.Fatal(err)
	}
}

func TestStoreDialRetriesUntilUp(t *testing.T) {
	t.Parallel()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	type result struct {
		c   *Store
		err error
	}
	res := make(chan result, 1)
	go func() {
		c, err := DialStore(storeCtx(t, 10*time.Second), addr, StoreConfig{Token: storeTestToken})
		res <- result{c, err}
	}()
	time.Sleep(150 * time.Millisecond)
	srv, err := ListenStore(addr, StoreConfig{Token: storeTestToken})
	if err != nil {
		t.Skipf("port %s taken meanwhile: %v", addr, err)
	}
	defer srv.Close()
	r := <-res
	if r.err != nil {
		t.Fatal(r.err)
	}
	defer r.c.Close()
	if _, err := r.c.Add(context.Background(), "x", 1); err != nil {
		t.Fatal(err)
	}
}

func TestStoreServerClose(t *testing.T) {
	t.Parallel()
	srv, _ := storeNewTest(t)
	c := storeDialTest(t, srv)
	done := make(chan error, 1)
	go func() { _, err := c.Get(storeCtx(t, time.Minute), "never"); done <- err }()
	time.Sleep(50 * time.Millisecond)
	srv.Close()
	select {
	case err := <-done:
		if err == nil || errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("Get on a closed server: %v, want a failure that is not a timeout", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("Get still blocked 5 s after the server closed")
	}
	if err := c.Close(); err != nil {
		t.Logf("close: %v", err)
	}
	if err := c.Set(context.Background(), "k", nil); !errors.Is(err, ErrClosed) {
		t.Fatalf("Set on a closed client: %v, want ErrClosed", err)
	}
}

func TestStoreDialTimeout(t *testing.T) {
	t.Parallel()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	start := time.Now()
	_, err = DialStore(context.Background(), addr, StoreConfig{Token: storeTestToken, Timeout: 200 * time.Millisecond})
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("DialStore with no server: %v, want deadline exceeded", err)
	}
	if el := time.Since(start); el < 190*time.Millisecond || el > 3*time.Second {
		t.Fatalf("gave up after %v, want about 200ms", el)
	}
}

// TestStoreFrameGrowsAsBytesArrive checks that a frame announcing the
// largest body gets memory only as its bytes come, and that a large value
// still arrives whole.
func TestStoreFrameGrowsAsBytesArrive(t *testing.T) {
	t.Parallel()
	announced := append(storeFrameMagic[:], storeOpSet)
	announced = binary.BigEndian.AppendUint32(announced, storeMaxFrame)
	announced = append(announced, make([]byte, 100)...)
	_, buf, err := storeReadFrame(bytes.NewReader(announced), nil)
	if !errors.Is(err, io.ErrUnexpectedEOF) {
		t.Fatalf("truncated frame: %v, want unexpected EOF", err)
	}
	if cap(buf) > storeReadChunk {
		t.Fatalf("100 bytes of a %d-byte frame took a %d-byte buffer, want at most %d", storeMaxFrame, cap(buf), storeReadChunk)
	}
	val := make([]byte, 3<<20+12345)
	for i := range val {
		val[i] = byte(i * 7)
	}
	frame, err := storeAppendFrame(nil, &storeMsg{op: storeOpSet, keys: []string{"k"}, vals: [][]byte{val}})
	if err != nil {
		t.Fatal(err)
	}
	for _, start := range [][]byte{nil, make([]byte, 0, 1<<20)} {
		m, _, err := storeReadFrame(bytes.NewReader(frame), start)
		if err != nil {
			t.Fatal(err)
		}
		if len(m.vals) != 1 || !bytes.Equal(m.vals[0], val) {
			t.Fatalf("value of %d bytes read back wrong", len(val))
		}
	}
}
