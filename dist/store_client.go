package dist

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"sync"
	"time"
)

// Store is a client of a StoreServer. It is safe for concurrent use;
// requests take turns on one connection, which is re-established after an
// interrupted request.
type Store struct {
	addr string
	cfg  StoreConfig

	mu     sync.Mutex
	conn   net.Conn
	r      *bufio.Reader
	rbuf   []byte
	wbuf   []byte
	closed bool
}

// DialStore connects to the store at addr, retrying while it is not yet
// up (ranks start in any order) until ctx ends or cfg.Timeout passes. A
// server that fails the token handshake is not retried.
func DialStore(ctx context.Context, addr string, cfg StoreConfig) (*Store, error) {
	if len(cfg.Token) == 0 {
		return nil, errors.New("dist: store: empty token")
	}
	cfg.Token = bytes.Clone(cfg.Token)
	s := &Store{addr: addr, cfg: cfg}
	ctx, cancel := WithDefaultTimeout(ctx, cfg.timeout())
	defer cancel()
	if err := s.connect(ctx); err != nil {
		return nil, fmt.Errorf("dist: store: %w", err)
	}
	return s, nil
}

// LocalAddr is the local address of the client's connection (nil when it
// is not connected): the interface through which this host reaches the
// store.
func (s *Store) LocalAddr() net.Addr {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.conn == nil {
		return nil
	}
	return s.conn.LocalAddr()
}

// Close closes the connection; later requests fail.
func (s *Store) Close() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.closed = true
	if s.conn == nil {
		return nil
	}
	err := s.conn.Close()
	s.conn = nil
	return err
}

// Set stores value under key, replacing any previous value, and wakes the
// requests waiting for key.
func (s *Store) Set(ctx context.Context, key string, value []byte) error {
	_, err := s.do(ctx, &storeMsg{op: storeOpSet, keys: []string{key}, vals: [][]byte{value}})
	return err
}

// Get returns the value of key, waiting until some rank sets it. When ctx
// (or, without a deadline, the configured timeout) ends first the error
// wraps context.DeadlineExceeded or context.Canceled.
func (s *Store) Get(ctx context.Context, key string) ([]byte, error) {
	resp, err := s.do(ctx, &storeMsg{op: storeOpGet, keys: []string{key}})
	if err != nil {
		return nil, err
	}
	if len(resp.vals) != 1 {
		return nil, s.protocolError("get", key)
	}
	return resp.vals[0], nil
}

// Add adds delta to the integer stored (in decimal) under key, treating a
// missing key as 0, and returns the sum: n ranks calling Add(key, 1) see
// 1..n, each exactly once.
func (s *Store) Add(ctx context.Context, key string, delta int64) (int64, error) {
	resp, err := s.do(ctx, &storeMsg{op: storeOpAdd, arg: delta, keys: []string{key}})
	return resp.arg, err
}

// Wait returns once every key exists, with the same timeout rules as Get.
func (s *Store) Wait(ctx context.Context, keys ...string) error {
	if len(keys) == 0 {
		return nil
	}
	_, err := s.do(ctx, &storeMsg{op: storeOpWait, keys: keys})
	return err
}

// Delete removes key and reports whether it existed.
func (s *Store) Delete(ctx context.Context, key string) (bool, error) {
	resp, err := s.do(ctx, &storeMsg{op: storeOpDelete, keys: []string{key}})
	return resp.arg == 1, err
}

// CompareSet atomically sets key to desired when its value equals expected
// (an empty expected matches only a missing key), and returns the value
// key holds afterwards (nil when missing) and whether it was swapped.
func (s *Store) CompareSet(ctx context.Context, key string, expected, desired []byte) (current []byte, swapped bool, err error) {
	resp, err := s.do(ctx, &storeMsg{op: storeOpCompareSet, keys: []string{key}, vals: [][]byte{expected, desired}})
	if err != nil {
		return nil, false, err
	}
	if len(resp.vals) != 1 {
		return nil, false, s.protocolError("compare-set", key)
	}
	if resp.arg&storeCASPresent == 0 {
		return nil, false, nil
	}
	return resp.vals[0], resp.arg&storeCASSwapped != 0, nil
}

func (s *Store) protocolError(op, key string) error {
	s.mu.Lock()
	if s.conn != nil {
		s.conn.Close()
		s.conn = nil
	}
	s.mu.Unlock()
	return fmt.Errorf("dist: store: %s %q: %w: unexpected response", op, key, errStoreFrame)
}

// do sends req and returns the server's answer, with its values copied
// out of the read buffer.
func (s *Store) do(ctx context.Context, req *storeMsg) (storeMsg, error) {
	ctx, cancel := WithDefaultTimeout(ctx, s.cfg.timeout())
	defer cancel()
	fail := func(err error) (storeMsg, error) {
		var keys any = req.keys
		if len(req.keys) == 1 {
			keys = req.keys[0]
		}
		return storeMsg{}, fmt.Errorf("dist: store: %s %q: %w", storeOpName(req.op), keys, err)
	}
	if req.op == storeOpGet || req.op == storeOpWait {
		dl, _ := ctx.Deadline()
		req.arg = max(time.Until(dl).Milliseconds(), 0)
	}

	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return fail(ErrClosed)
	}
	wbuf, err := storeAppendFrame(s.wbuf[:0], req)
	if err != nil {
		return fail(err)
	}
	s.wbuf = wbuf
	if s.conn == nil {
		if err := s.connect(ctx); err != nil {
			return fail(err)
		}
	}
	c := s.conn
	stop := context.AfterFunc(ctx, func() { c.SetDeadline(time.Unix(1, 0)) })
	_, err = c.Write(wbuf)
	var resp storeMsg
	if err == nil {
		resp, s.rbuf, err = storeReadFrame(s.r, s.rbuf)
	}
	if !stop() || err != nil {
		c.Close()
		s.conn = nil
	}
	if err != nil {
		if ctx.Err() != nil {
			return fail(ctx.Err())
		}
		return fail(err)
	}
	if cap(s.wbuf) > 1<<20 {
		s.wbuf = nil
	}
	for i, v := range resp.vals {
		resp.vals[i] = bytes.Clone(v)
	}
	if cap(s.rbuf) > 1<<20 {
		s.rbuf = nil
	}
	switch resp.op {
	case storeRespOK:
		return resp, nil
	case storeRespTimeout:
		return fail(context.DeadlineExceeded)
	case storeRespErr:
		if len(resp.vals) == 1 {
			return fail(errors.New(string(resp.vals[0])))
		}
	}
	if s.conn != nil {
		s.conn.Close()
		s.conn = nil
	}
	return fail(fmt.Errorf("%w: response %#x", errStoreFrame, resp.op))
}

// connect dials and authenticates, retrying refused or dropped attempts
// with backoff until ctx ends; s.mu must be held (or s not yet shared).
func (s *Store) connect(ctx context.Context) error {
	var d net.Dialer
	backoff := 10 * time.Millisecond
	for {
		c, err := d.DialContext(ctx, "tcp", s.addr)
		if err == nil {
			dl := time.Now().Add(storeAuthWindow)
			if cd, ok := ctx.Deadline(); ok && cd.Before(dl) {
				dl = cd
			}
			stop := context.AfterFunc(ctx, func() { c.SetDeadline(time.Unix(1, 0)) })
			err = storeClientHandshake(c, s.cfg.Token, dl)
			if stop() && err == nil {
				s.conn, s.r = c, bufio.NewReader(c)
				return nil
			}
			c.Close()
			if err != nil && errors.Is(err, errStoreAuth) {
				return fmt.Errorf("connect %s: %w", s.addr, err)
			}
		}
		t := time.NewTimer(backoff)
		select {
		case <-ctx.Done():
			t.Stop()
			if err == nil {
				err = ctx.Err()
			}
			return fmt.Errorf("connect %s: %w (last attempt: %v)", s.addr, ctx.Err(), err)
		case <-t.C:
		}
		backoff = min(2*backoff, 500*time.Millisecond)
	}
}
