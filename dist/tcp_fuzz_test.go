package dist

import (
	"bytes"
	"errors"
	"io"
	"log/slog"
	"net"
	"testing"
	"time"

	"github.com/flockml/flock/backend"
)

func tcpFrameBytes(h tcpHeader, payload []byte) []byte {
	h.len = uint32(len(payload))
	b := make([]byte, tcpHeaderSize, tcpHeaderSize+len(payload))
	h.put(b)
	return append(b, payload...)
}

// FuzzFrame feeds arbitrary bytes to the header parser and to a
// connection's reader, with collective receives posted as an operation
// would post them: nothing may panic, accepted headers must re-encode to
// the same bytes, and the reader must end (EOF or a protocol error).
func FuzzFrame(f *testing.F) {
	coll := tcpHeader{typ: tcpColl, dtype: uint8(backend.Float32), op: tcpOpAllReduce, tag: 1, count: 4}
	f.Add(tcpFrameBytes(coll, make([]byte, 16)))
	f.Add(tcpFrameBytes(tcpHeader{typ: tcpPing}, nil))
	f.Add(tcpFrameBytes(tcpHeader{typ: tcpBye, tag: -1}, nil))
	p2p := tcpHeader{typ: tcpP2P, dtype: uint8(backend.Int64), tag: 7, count: 3}
	f.Add(append(tcpFrameBytes(p2p, make([]byte, 16)), tcpFrameBytes(p2p, make([]byte, 8))...))
	f.Add(tcpFrameBytes(tcpHeader{typ: tcpP2P, dtype: uint8(backend.Float64), count: 1 << 40}, make([]byte, 64)))
	f.Add([]byte("FLK1garbage"))
	f.Fuzz(func(t *testing.T, data []byte) {
		if h, err := tcpParseHeader(data); err == nil {
			var b [tcpHeaderSize]byte
			h.put(b[:])
			if !bytes.Equal(b[:], data[:tcpHeaderSize]) {
				t.Fatalf("header %+v re-encodes to %x, parsed from %x", h, b, data[:tcpHeaderSize])
			}
			if h.len > tcpMaxFrame {
				t.Fatalf("accepted a %d-byte frame", h.len)
			}
		}
		tcpFuzzReader(t, data)
	})
}

func tcpFuzzReader(t *testing.T, data []byte) {
	local, remote := net.Pipe()
	w := &tcpWorld{rank: 1, size: 2, timeout: time.Second, log: slog.New(slog.DiscardHandler), dead: make(chan struct{}), peers: make([]*tcpPeer, 2)}
	p := newTCPPeer(w, 0, local)
	close(p.wdone)
	w.peers[0] = p
	go func() {
		remote.Write(data)
		remote.Close()
	}()
	lane := p.lane(0)
	posted := make(chan struct{})
	go func() {
		defer close(posted)
		s := &tcpSlot{buf: make([]byte, 16), op: tcpOpAllReduce, dtype: uint8(backend.Float32), seq: 1, count: 4, done: make(chan error, 1)}
		for {
			if err := lane.post(s); err != nil {
				w.fail(0, err)
				return
			}
			select {
			case <-s.done:
			case <-w.dead:
				return
			}
		}
	}()
	w.io.Add(1)
	go p.readLoop()
	select {
	case <-w.dead:
	case <-time.After(5 * time.Second):
		t.Fatal("reader did not end")
	}
	w.io.Wait()
	<-posted
	if w.failErr == nil {
		t.Fatal("reader ended without an error")
	}
}

type tcpFuzzConn struct {
	io.Reader
	io.Writer
}

// FuzzHandshake plays arbitrary bytes as the other side of both halves of
// the handshake: without the token no input may authenticate, and none may
// panic.
func FuzzHandshake(f *testing.F) {
	f.Add([]byte("FLKH\x01\x00\x00\x00\x00\x00\x00\x00\x02\x00\x00\x00"))
	f.Add(bytes.Repeat([]byte{0}, tcpHelloSize+tcpProofSize))
	f.Add(append([]byte("FLKH\x01\x00\x00\x00\x00\x00\x00\x00\x02\x00\x00\x00"), make([]byte, 64)...))
	token := []byte("fuzz-token")
	f.Fuzz(func(t *testing.T, data []byte) {
		if _, err := tcpServerHandshake(tcpFuzzConn{bytes.NewReader(data), io.Discard}, token, 1, 2); err == nil {
			t.Fatal("server accepted a forged client")
		}
		if err := tcpClientHandshake(tcpFuzzConn{bytes.NewReader(data), io.Discard}, token, 0, 2, 1); err == nil {
			t.Fatal("client accepted a forged server")
		}
	})
}

func TestTCPHandshake(t *testing.T) {
	cases := []struct {
		name           string
		client, server []byte
		serverRank     int
		ok             bool
	}{
		{"same token", []byte("k"), []byte("k"), 1, true},
		{"wrong token", []byte("k"), []byte("j"), 1, false},
		{"unexpected rank", []byte("k"), []byte("k"), 2, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			a, b := net.Pipe()
			defer a.Close()
			defer b.Close()
			a.SetDeadline(time.Now().Add(2 * time.Second))
			b.SetDeadline(time.Now().Add(2 * time.Second))
			errc := make(chan error, 1)
			go func() {
				_, err := tcpServerHandshake(b, tc.server, tc.serverRank, 3)
				if err != nil {
					b.Close()
				}
				errc <- err
			}()
			cerr := tcpClientHandshake(a, tc.client, 0, 3, 1)
			if cerr != nil {
				a.Close()
			}
			serr := <-errc
			if tc.ok && (cerr != nil || serr != nil) {
				t.Fatalf("client: %v, server: %v", cerr, serr)
			}
			if !tc.ok && (cerr == nil || serr == nil) {
				t.Fatalf("client: %v, server: %v: want both to fail", cerr, serr)
			}
			if !tc.ok && !errors.Is(cerr, errTCPAuth) && !errors.Is(serr, errTCPAuth) {
				t.Errorf("neither error is an authentication failure: %v, %v", cerr, serr)
			}
		})
	}
}
