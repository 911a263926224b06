package dist

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"strconv"
	"sync"
	"time"
)

// StoreConfig configures both ends of the rendezvous store.
type StoreConfig struct {
	// Token is the job secret; both ends prove they hold it. It must not
	// be empty.
	Token []byte
	// Timeout bounds a client operation whose context has no deadline
	// (0 = DefaultTimeout); blocking Get and Wait give up after it.
	Timeout time.Duration
	// Logger receives the reasons connections are refused (nil = discard).
	Logger *slog.Logger
}

func (c StoreConfig) logger() *slog.Logger {
	if c.Logger == nil {
		return slog.New(slog.DiscardHandler)
	}
	return c.Logger
}

func (c StoreConfig) timeout() time.Duration {
	if c.Timeout <= 0 {
		return DefaultTimeout
	}
	return c.Timeout
}

// StoreServer is the rendezvous key-value store a job's rank 0 serves,
// with the semantics of PyTorch's TCPStore: values are byte strings, Add
// keeps a decimal int64, Get and Wait block until their keys exist. Every
// connection must pass the token handshake before its first request.
type StoreServer struct {
	ln    net.Listener
	token []byte
	log   *slog.Logger

	mu      sync.Mutex
	data    map[string][]byte
	changed chan struct{}
	conns   map[net.Conn]struct{}

	closed    chan struct{}
	closeOnce sync.Once
	wg        sync.WaitGroup
}

// ListenStore serves a store on addr ("host:port"; port 0 picks a free
// one). It binds to that host only.
func ListenStore(addr string, cfg StoreConfig) (*StoreServer, error) {
	if len(cfg.Token) == 0 {
		return nil, errors.New("dist: store: empty token")
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("dist: store: listen %s: %w", addr, err)
	}
	return ServeStore(ln, cfg)
}

// ServeStore serves a store on ln until Close, which also closes ln.
func ServeStore(ln net.Listener, cfg StoreConfig) (*StoreServer, error) {
	if len(cfg.Token) == 0 {
		return nil, errors.New("dist: store: empty token")
	}
	s := &StoreServer{
		ln:      ln,
		token:   bytes.Clone(cfg.Token),
		log:     cfg.logger(),
		data:    map[string][]byte{},
		changed: make(chan struct{}),
		conns:   map[net.Conn]struct{}{},
		closed:  make(chan struct{}),
	}
	s.wg.Add(1)
	go s.accept()
	return s, nil
}

// Addr is the address the store listens on.
func (s *StoreServer) Addr() net.Addr { return s.ln.Addr() }

// Close stops the server, drops every connection and fails blocked
// requests.
func (s *StoreServer) Close() error {
	var err error
	s.closeOnce.Do(func() {
		close(s.closed)
		err = s.ln.Close()
		s.mu.Lock()
		for c := range s.conns {
			c.Close()
		}
		s.mu.Unlock()
		s.wg.Wait()
	})
	return err
}

func (s *StoreServer) accept() {
	defer s.wg.Done()
	var backoff time.Duration
	for {
		c, err := s.ln.Accept()
		if err != nil {
			select {
			case <-s.closed:
				return
			default:
			}
			if errors.Is(err, net.ErrClosed) {
				s.log.Error("dist: store: listener closed", "err", err)
				return
			}
			backoff = min(max(2*backoff, 5*time.Millisecond), time.Second)
			time.Sleep(backoff)
			continue
		}
		backoff = 0
		s.mu.Lock()
		select {
		case <-s.closed:
			s.mu.Unlock()
			c.Close()
			return
		default:
		}
		s.conns[c] = struct{}{}
		s.wg.Add(1)
		s.mu.Unlock()
		go s.serve(c)
	}
}

func (s *StoreServer) serve(c net.Conn) {
	defer s.wg.Done()
	defer func() {
		s.mu.Lock()
		delete(s.conns, c)
		s.mu.Unlock()
		c.Close()
	}()
	peer := c.RemoteAddr().String()
	if err := storeServerHandshake(c, s.token, time.Now().Add(storeAuthWindow)); err != nil {
		s.log.Warn("dist: store: refused connection", "peer", peer, "reason", err)
		return
	}
	r := bufio.NewReader(c)
	var rbuf, wbuf []byte
	for {
		req, buf, err := storeReadFrame(r, rbuf)
		rbuf = buf
		if err != nil {
			if !errors.Is(err, io.EOF) && !s.isClosed() && !errors.Is(err, net.ErrClosed) {
				s.log.Warn("dist: store: closing connection", "peer", peer, "reason", err)
			}
			return
		}
		if err := storeCheckRequest(&req); err != nil {
			s.log.Warn("dist: store: closing connection", "peer", peer, "reason", err)
			return
		}
		resp := s.handle(&req)
		wbuf, err = storeAppendFrame(wbuf[:0], &resp)
		if err != nil {
			resp = storeMsg{op: storeRespErr, vals: [][]byte{[]byte(err.Error())}}
			wbuf, _ = storeAppendFrame(wbuf[:0], &resp)
		}
		if _, err := c.Write(wbuf); err != nil {
			return
		}
		if cap(rbuf) > 1<<20 {
			rbuf = nil
		}
		if cap(wbuf) > 1<<20 {
			wbuf = nil
		}
	}
}

func (s *StoreServer) isClosed() bool {
	select {
	case <-s.closed:
		return true
	default:
		return false
	}
}

// has reports whether key is set.
func (s *StoreServer) has(key string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	_, ok := s.data[key]
	return ok
}

// notify wakes every blocked Get and Wait; s.mu must be held.
func (s *StoreServer) notify() {
	close(s.changed)
	s.changed = make(chan struct{})
}

func storeErrResp(format string, a ...any) storeMsg {
	return storeMsg{op: storeRespErr, vals: [][]byte{fmt.Appendf(nil, format, a...)}}
}

func (s *StoreServer) handle(req *storeMsg) storeMsg {
	switch req.op {
	case storeOpSet:
		s.mu.Lock()
		s.data[req.keys[0]] = bytes.Clone(req.vals[0])
		s.notify()
		s.mu.Unlock()
		return storeMsg{op: storeRespOK}
	case storeOpGet, storeOpWait:
		if !s.await(req.keys, time.Duration(req.arg)*time.Millisecond) {
			if s.isClosed() {
				return storeErrResp("store closed")
			}
			return storeMsg{op: storeRespTimeout}
		}
		if req.op == storeOpWait {
			return storeMsg{op: storeRespOK}
		}
		s.mu.Lock()
		v, ok := s.data[req.keys[0]]
		s.mu.Unlock()
		if !ok {
			return storeErrResp("key %q deleted while being read", req.keys[0])
		}
		return storeMsg{op: storeRespOK, vals: [][]byte{v}}
	case storeOpAdd:
		s.mu.Lock()
		defer s.mu.Unlock()
		var n int64
		if v, ok := s.data[req.keys[0]]; ok {
			var err error
			if n, err = strconv.ParseInt(string(v), 10, 64); err != nil {
				return storeErrResp("key %q does not hold an integer", req.keys[0])
			}
		}
		n += req.arg
		s.data[req.keys[0]] = strconv.AppendInt(nil, n, 10)
		s.notify()
		return storeMsg{op: storeRespOK, arg: n}
	case storeOpDelete:
		s.mu.Lock()
		defer s.mu.Unlock()
		if _, ok := s.data[req.keys[0]]; !ok {
			return storeMsg{op: storeRespOK}
		}
		delete(s.data, req.keys[0])
		return storeMsg{op: storeRespOK, arg: 1}
	case storeOpCompareSet:
		s.mu.Lock()
		defer s.mu.Unlock()
		k, expected, desired := req.keys[0], req.vals[0], req.vals[1]
		cur, ok := s.data[k]
		if (!ok && len(expected) == 0) || (ok && bytes.Equal(cur, expected)) {
			s.data[k] = bytes.Clone(desired)
			s.notify()
			return storeMsg{op: storeRespOK, arg: storeCASSwapped | storeCASPresent, vals: [][]byte{desired}}
		}
		if !ok {
			return storeMsg{op: storeRespOK, vals: [][]byte{nil}}
		}
		return storeMsg{op: storeRespOK, arg: storeCASPresent, vals: [][]byte{cur}}
	}
	return storeErrResp("unknown op %#x", req.op)
}

// Flags in a compare-set response's arg.
const (
	storeCASSwapped = 1 << iota
	storeCASPresent
)

// await blocks until every key exists, the wait d has passed, or the
// server closes; it reports whether the keys exist.
func (s *StoreServer) await(keys []string, d time.Duration) bool {
	var timer *time.Timer
	for {
		s.mu.Lock()
		all := true
		for _, k := range keys {
			if _, ok := s.data[k]; !ok {
				all = false
				break
			}
		}
		ch := s.changed
		s.mu.Unlock()
		if all {
			if timer != nil {
				timer.Stop()
			}
			return true
		}
		if d <= 0 {
			return false
		}
		if timer == nil {
			timer = time.NewTimer(d)
			defer timer.Stop()
		}
		select {
		case <-ch:
		case <-timer.C:
			return false
		case <-s.closed:
			return false
		}
	}
}
