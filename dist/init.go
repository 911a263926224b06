package dist

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"strconv"
	"strings"
	"time"
)

// InitOptions tunes Init.
type InitOptions struct {
	// Timeout bounds the rendezvous and becomes the communicator's timeout
	// (a peer silent that long has failed); 0 means env.Timeout, then
	// DefaultTimeout.
	Timeout time.Duration
	// Host is the address this rank's data listener binds to; "" means the
	// local address of the interface through which this host reaches the
	// master. When Host is unspecified ("0.0.0.0", "::"), peers are told
	// that interface's address.
	Host string
	// Logger receives connection events, refused connections, and on rank
	// 0 the ranks still missing while it waits for them (nil discards
	// them).
	Logger *slog.Logger
}

// Init joins the job env describes and returns the world communicator.
//
// A one-rank job gets NewLocal(1)[0]. Otherwise rank 0 serves the
// rendezvous store on MasterAddr:MasterPort; every rank listens on its
// host (an ephemeral port), registers the address under
// "flock/init/addr/<rank>", waits for all Size registrations and calls
// DialTCP with them. Rank 0 closes the store once every rank has read the
// addresses. Every connection, to the store and between ranks, is
// authenticated with env.Token.
func Init(ctx context.Context, env Env, opts InitOptions) (Comm, error) {
	if err := env.Validate(); err != nil {
		return nil, err
	}
	if env.Size == 1 {
		return NewLocal(1)[0], nil
	}
	timeout := opts.Timeout
	if timeout <= 0 {
		timeout = env.Timeout
	}
	if timeout <= 0 {
		timeout = DefaultTimeout
	}
	log := opts.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	fail := func(what string, err error) (Comm, error) {
		return nil, fmt.Errorf("dist: init: rank %d: %s: %w", env.Rank, what, err)
	}
	ctx, cancel := WithDefaultTimeout(ctx, timeout)
	defer cancel()

	master := net.JoinHostPort(env.MasterAddr, strconv.Itoa(env.MasterPort))
	scfg := StoreConfig{Token: env.Token, Timeout: timeout, Logger: log}
	var srv *StoreServer
	if env.Rank == 0 {
		var err error
		if srv, err = ListenStore(master, scfg); err != nil {
			return fail("serve rendezvous store", err)
		}
		defer srv.Close()
	}
	store, err := DialStore(ctx, master, scfg)
	if err != nil {
		return fail("rendezvous", err)
	}
	defer store.Close()

	localHost, _, err := net.SplitHostPort(store.LocalAddr().String())
	if err != nil {
		return fail("local address", err)
	}
	host := opts.Host
	if host == "" {
		host = localHost
	}
	ln, err := net.Listen("tcp", net.JoinHostPort(host, "0"))
	if err != nil {
		return fail("listen", err)
	}
	defer ln.Close()

	advertise := ln.Addr().String()
	if ta, ok := ln.Addr().(*net.TCPAddr); ok && ta.IP.IsUnspecified() {
		advertise = net.JoinHostPort(localHost, strconv.Itoa(ta.Port))
	}
	var stopReport func()
	if srv != nil {
		stopReport = initReportMissing(srv, log, env.Size, timeout)
	}
	addrs, err := initExchange(ctx, store, env, advertise)
	if stopReport != nil {
		stopReport()
	}
	if err != nil {
		return fail("rendezvous", err)
	}
	log.Debug("dist: init: rendezvous done", "rank", env.Rank, "addrs", addrs)
	c, err := DialTCP(ctx, TCPConfig{
		Rank: env.Rank, Size: env.Size, Addrs: addrs, Listener: ln,
		Token: env.Token, Timeout: timeout, Logger: opts.Logger,
	})
	if err != nil {
		return nil, err
	}
	if env.Rank == 0 {
		keys := make([]string, env.Size)
		for r := range keys {
			keys[r] = initKey("read", r)
		}
		if err := store.Wait(ctx, keys...); err != nil {
			c.Close()
			return fail("rendezvous", err)
		}
	}
	return c, nil
}

func initKey(kind string, rank int) string {
	return "flock/init/" + kind + "/" + strconv.Itoa(rank)
}

// initExchange registers addr as this rank's and returns every rank's
// address. A registration is "<size> <addr>", so that ranks started with
// different world sizes fail instead of hanging, and a rank registered
// twice is reported.
func initExchange(ctx context.Context, store *Store, env Env, addr string) ([]string, error) {
	mine := fmt.Appendf(nil, "%d %s", env.Size, addr)
	cur, ok, err := store.CompareSet(ctx, initKey("addr", env.Rank), nil, mine)
	if err != nil {
		return nil, err
	}
	if !ok {
		return nil, fmt.Errorf("rank %d registered twice (already at %q)", env.Rank, cur)
	}
	addrs := make([]string, env.Size)
	for r := range addrs {
		v, err := store.Get(ctx, initKey("addr", r))
		if err != nil {
			if errors.Is(err, context.DeadlineExceeded) {
				return nil, fmt.Errorf("rank %d never registered: %w", r, err)
			}
			return nil, err
		}
		size, a, ok := strings.Cut(string(v), " ")
		if !ok || a == "" {
			return nil, fmt.Errorf("rank %d registered %q, not \"<size> <addr>\"", r, v)
		}
		if size != strconv.Itoa(env.Size) {
			return nil, fmt.Errorf("rank %d runs with world size %s, this rank with %d", r, size, env.Size)
		}
		addrs[r] = a
	}
	if err := store.Set(ctx, initKey("read", env.Rank), nil); err != nil {
		return nil, err
	}
	return addrs, nil
}

// initReportEvery is how often rank 0 names the ranks it still waits for;
// a short timeout reports more often.
const initReportEvery = 5 * time.Second

// initReportMissing logs, every initReportEvery (at most a quarter of the
// timeout), the ranks that have not registered with srv yet, until stop is
// called.
func initReportMissing(srv *StoreServer, log *slog.Logger, size int, timeout time.Duration) (stop func()) {
	every := min(initReportEvery, max(timeout/4, time.Millisecond))
	done := make(chan struct{})
	finished := make(chan struct{})
	go func() {
		defer close(finished)
		t := time.NewTicker(every)
		defer t.Stop()
		start := time.Now()
		for {
			select {
			case <-done:
				return
			case <-t.C:
			}
			var missing []int
			for r := range size {
				if !srv.has(initKey("addr", r)) {
					missing = append(missing, r)
				}
			}
			if len(missing) == 0 {
				return
			}
			log.Warn("dist: init: waiting for ranks to join", "missing", missing, "joined", size-len(missing), "size", size,
				"waited", time.Since(start).Round(time.Millisecond), "timeout", timeout)
		}
	}()
	return func() {
		close(done)
		<-finished
	}
}
