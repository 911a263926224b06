package dist

import (
	"bytes"
	"errors"
	"log/slog"
	"net"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/flockml/flock/backend"
)

// tcpTestReader runs a reader for rank 0's connection to rank 1 and returns
// its peer and the other end of the connection.
func tcpTestReader(t *testing.T, timeout time.Duration) (*tcpPeer, net.Conn) {
	t.Helper()
	local, remote := net.Pipe()
	w := &tcpWorld{rank: 1, size: 2, timeout: timeout, log: slog.New(slog.DiscardHandler), dead: make(chan struct{}), peers: make([]*tcpPeer, 2)}
	p := newTCPPeer(w, 0, local)
	close(p.wdone)
	w.peers[0] = p
	w.io.Add(1)
	go p.readLoop()
	t.Cleanup(func() {
		remote.Close()
		w.fail(-1, ErrClosed)
		w.io.Wait()
	})
	return p, remote
}

func tcpTestColl(comm uint32, seq int64, payload []byte) []byte {
	return tcpFrameBytes(tcpHeader{typ: tcpColl, dtype: uint8(backend.Float32), op: tcpOpAllReduce, comm: comm, tag: seq, count: int64(len(payload) / 4)}, payload)
}

func tcpTestSlot(seq int64, n int) *tcpSlot {
	return &tcpSlot{buf: make([]byte, n), op: tcpOpAllReduce, dtype: uint8(backend.Float32), seq: seq, count: int64(n / 4), done: make(chan error, 1)}
}

// tcpTestDead waits for the world to fail and returns its error.
func tcpTestDead(t *testing.T, w *tcpWorld) error {
	t.Helper()
	select {
	case <-w.dead:
		return w.failErr
	case <-time.After(5 * time.Second):
		t.Fatal("the reader is stuck: the world did not fail")
		return nil
	}
}

// tcpTestHeld waits until l holds a frame.
func tcpTestHeld(t *testing.T, l *tcpLane) {
	t.Helper()
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(time.Millisecond) {
		l.cmu.Lock()
		n := len(l.early) - l.head
		l.cmu.Unlock()
		if n > 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatal("the frame was not held")
		}
	}
}

// A collective frame that no receive was posted for must not stop the
// reader: the peer's bye behind it is read at once.
func TestTCPReaderByeBehindUnpostedFrame(t *testing.T) {
	t.Parallel()
	p, remote := tcpTestReader(t, time.Minute)
	go func() {
		remote.Write(tcpTestColl(7, 1, make([]byte, 64)))
		remote.Write(tcpFrameBytes(tcpHeader{typ: tcpBye, op: tcpByeFailed, tag: -1}, nil))
	}()
	if err := tcpTestDead(t, p.w); err == nil || !strings.Contains(err.Error(), "peer failed") {
		t.Fatalf("world failed with %v, want the peer's failure", err)
	}
}

// A frame held for want of a receive fills the receive posted later; a
// receive posted first is filled from the connection.
func TestTCPReaderHeldFrameFillsLaterReceive(t *testing.T) {
	t.Parallel()
	p, remote := tcpTestReader(t, time.Minute)
	first := bytes.Repeat([]byte{1, 2, 3, 4}, 8)
	if _, err := remote.Write(tcpTestColl(0, 1, first)); err != nil {
		t.Fatal(err)
	}
	tcpTestHeld(t, p.lane(0))
	l := p.lane(0)
	s := tcpTestSlot(1, len(first))
	if err := l.post(s); err != nil {
		t.Fatal(err)
	}
	if err := <-s.done; err != nil || !bytes.Equal(s.buf, first) {
		t.Fatalf("held frame: %v, %v; want %v", err, s.buf, first)
	}
	if n := p.early.Load(); n != 0 {
		t.Fatalf("%d bytes still held", n)
	}
	second := bytes.Repeat([]byte{5, 6, 7, 8}, 8)
	s2 := tcpTestSlot(2, len(second))
	if err := l.post(s2); err != nil {
		t.Fatal(err)
	}
	if _, err := remote.Write(tcpTestColl(0, 2, second)); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-s2.done:
		if err != nil || !bytes.Equal(s2.buf, second) {
			t.Fatalf("posted receive: %v, %v; want %v", err, s2.buf, second)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("posted receive not filled")
	}
}

// A held frame of another collective than the receive posted for it is an
// error, as it is for a frame read straight into the receive.
func TestTCPReaderHeldFrameMismatch(t *testing.T) {
	t.Parallel()
	p, remote := tcpTestReader(t, time.Minute)
	if _, err := remote.Write(tcpTestColl(0, 2, make([]byte, 16))); err != nil {
		t.Fatal(err)
	}
	tcpTestHeld(t, p.lane(0))
	err := p.lane(0).post(tcpTestSlot(1, 16))
	if err == nil || !strings.Contains(err.Error(), "out of order") {
		t.Fatalf("post: %v, want collectives out of order", err)
	}
	if n := p.early.Load(); n != 0 {
		t.Fatalf("%d bytes still held", n)
	}
}

// Held frames are bounded: past earlyMax the reader waits for a receive at
// most the timeout, then fails the world.
func TestTCPReaderHeldFramesBounded(t *testing.T) {
	t.Parallel()
	p, remote := tcpTestReader(t, 100*time.Millisecond)
	p.earlyMax = tcpEarlyCost(16)
	go func() {
		for seq := int64(1); seq <= 3; seq++ {
			if _, err := remote.Write(tcpTestColl(0, seq, make([]byte, 16))); err != nil {
				return
			}
		}
	}()
	err := tcpTestDead(t, p.w)
	if !errors.Is(err, errTCPSilent) || !strings.Contains(err.Error(), "no receive posted") {
		t.Fatalf("world failed with %v, want no receive posted", err)
	}
	if n := p.early.Load(); n != p.earlyMax {
		t.Fatalf("%d bytes held, want the bound %d", n, p.earlyMax)
	}
}

func tcpTestP2P(tag int64, payload []byte) []byte {
	return tcpFrameBytes(tcpHeader{typ: tcpP2P, dtype: uint8(backend.Float32), tag: tag, count: int64(len(payload) / 4)}, payload)
}

// tcpTestUnexpected returns the messages with tag held on l.
func tcpTestUnexpected(p *tcpPeer, l *tcpLane, tag int64) []*tcpMsg {
	p.mu.Lock()
	defer p.mu.Unlock()
	return slices.Clone(l.unexpected[tag])
}

// Point-to-point messages that arrive before their Recv are held within
// the same bound: one message alone may exceed it, a second one waits for
// the first to be received, at most the timeout.
func TestTCPReaderHeldMessagesBounded(t *testing.T) {
	t.Parallel()
	t.Run("timeout", func(t *testing.T) {
		t.Parallel()
		p, remote := tcpTestReader(t, 200*time.Millisecond)
		p.earlyMax = 1024
		go func() {
			remote.Write(tcpTestP2P(7, make([]byte, 1024)))
			remote.Write(tcpTestP2P(7, make([]byte, 16)))
		}()
		err := tcpTestDead(t, p.w)
		if !errors.Is(err, errTCPSilent) || !strings.Contains(err.Error(), "point-to-point message with tag 7: no receive posted") {
			t.Fatalf("world failed with %v, want no receive posted for the message", err)
		}
		if q := tcpTestUnexpected(p, p.lane(0), 7); len(q) != 1 || len(q[0].data) != 1024 {
			t.Fatalf("held %d messages, want the first one whole", len(q))
		}
	})
	t.Run("room", func(t *testing.T) {
		t.Parallel()
		p, remote := tcpTestReader(t, time.Minute)
		p.earlyMax = 1024
		go func() {
			remote.Write(tcpTestP2P(7, make([]byte, 1024)))
			remote.Write(tcpTestP2P(7, bytes.Repeat([]byte{9}, 16)))
		}()
		l := p.lane(0)
		var q []*tcpMsg
		for deadline := time.Now().Add(5 * time.Second); len(q) == 0; time.Sleep(time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatal("the first message was not held")
			}
			q = tcpTestUnexpected(p, l, 7)
		}
		time.Sleep(20 * time.Millisecond)
		if q = tcpTestUnexpected(p, l, 7); len(q) != 1 {
			t.Fatalf("%d messages held past the bound, want 1", len(q))
		}
		p.mu.Lock()
		delete(l.unexpected, 7)
		p.mu.Unlock()
		p.releaseMsg(q[0])
		for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(time.Millisecond) {
			if q = tcpTestUnexpected(p, l, 7); len(q) == 1 && bytes.Equal(q[0].data, bytes.Repeat([]byte{9}, 16)) {
				break
			}
			if time.Now().After(deadline) {
				t.Fatal("the second message was not held once the first was received")
			}
		}
	})
}
