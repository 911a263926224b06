package dist

import (
	"context"
	"errors"
	"testing"
	"time"
)

// TestWaitAfterPeerClosed checks an operation's wait when the world ends
// because the peer finished and closed while this rank's writer had
// written its last send but not yet reported it: the send succeeded, and
// so does the operation. A send that the writer never wrote fails.
func TestWaitAfterPeerClosed(t *testing.T) {
	for _, written := range []bool{true, false} {
		w := &tcpWorld{rank: 0, size: 2, dead: make(chan struct{}), peers: make([]*tcpPeer, 2)}
		p := &tcpPeer{w: w, rank: 1, wdone: make(chan struct{}), rdone: make(chan struct{})}
		w.peers[1] = p
		o := &tcpOp{c: &tcpComm{w: w, rank: 0, ranks: []int{0, 1}}, name: "barrier", ctx: context.Background()}
		done := make(chan error, 1)
		// The peer's bye was read first: the world is dead.
		w.failRank, w.failErr = 1, errors.New("peer closed its communicator")
		close(w.dead)
		go func() {
			time.Sleep(20 * time.Millisecond)
			if written {
				done <- nil
			}
			close(p.wdone)
			close(p.rdone)
		}()
		err := o.wait(done, 1)
		if written && err != nil {
			t.Errorf("a send written before the peer closed: %v", err)
		}
		var oe *OpError
		if !written && (!errors.As(err, &oe) || oe.Rank != 1) {
			t.Errorf("a send never written: %v, want an OpError naming rank 1", err)
		}
	}
}
