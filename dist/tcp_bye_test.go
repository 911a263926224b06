package dist

import (
	"context"
	"encoding/binary"
	"errors"
	"io"
	"log/slog"
	"math"
	"net"
	"testing"
	"time"

	"github.com/flockml/flock/backend"
	"github.com/flockml/flock/tensor"
)

// TestRecvAfterReportedClose: rank 0 learns from rank 1 that rank 2 closed
// before it has read what rank 2 sent; rank 2's messages, which precede its
// own bye on its connection, are still delivered, in order, and only the
// Recv after them fails, naming rank 2.
func TestRecvAfterReportedClose(t *testing.T) {
	w := &tcpWorld{rank: 0, size: 3, timeout: 5 * time.Second, log: slog.New(slog.DiscardHandler),
		dead: make(chan struct{}), peers: make([]*tcpPeer, 3)}
	remotes := make([]net.Conn, 3)
	for r := 1; r < 3; r++ {
		local, remote := net.Pipe()
		remotes[r] = remote
		w.peers[r] = newTCPPeer(w, r, local)
		// The remote ranks take whatever rank 0 writes.
		go io.Copy(io.Discard, remote)
	}
	for _, p := range w.peers[1:] {
		w.io.Add(2)
		go p.readLoop()
		go p.writeLoop()
	}
	c := newTCPComm(w, 0, tcpIdentity(3), 0)
	t.Cleanup(func() {
		for _, r := range remotes[1:] {
			r.Close()
		}
		w.fail(-1, ErrClosed)
		w.io.Wait()
	})

	// Rank 1 reports rank 2's close.
	if _, err := remotes[1].Write(tcpFrameBytes(tcpHeader{typ: tcpBye, op: tcpByeClosed, tag: 2}, nil)); err != nil {
		t.Fatal(err)
	}
	select {
	case <-w.dead:
	case <-time.After(5 * time.Second):
		t.Fatal("the world did not fail on rank 1's report")
	}
	// Rank 2's messages were still on their way; its bye follows them.
	go func() {
		for i := range 3 {
			payload := make([]byte, 8)
			binary.LittleEndian.PutUint32(payload, math.Float32bits(float32(i)))
			binary.LittleEndian.PutUint32(payload[4:], math.Float32bits(-1))
			remotes[2].Write(tcpFrameBytes(tcpHeader{typ: tcpP2P, dtype: uint8(backend.Float32), comm: c.id, tag: 5, count: 2}, payload))
		}
		remotes[2].Write(tcpFrameBytes(tcpHeader{typ: tcpBye, op: tcpByeClosed, tag: -1}, nil))
	}()
	ctx := context.Background()
	for i := range 3 {
		x := tensor.Zeros(tensor.Shape{2})
		if err := c.Recv(ctx, x, 2, 5); err != nil {
			t.Fatalf("message %d, sent before rank 2's bye: %v", i, err)
		}
		if got := x.Float64s(); got[0] != float64(i) || got[1] != -1 {
			t.Errorf("message %d: got %v", i, got)
		}
		x.Release()
	}
	x := tensor.Zeros(tensor.Shape{2})
	defer x.Release()
	err := c.Recv(ctx, x, 2, 5)
	var oe *OpError
	if !errors.As(err, &oe) || oe.Rank != 2 || !errors.Is(err, ErrClosed) {
		t.Errorf("recv after the messages: got %v, want an *OpError naming rank 2 that wraps ErrClosed", err)
	}
}
