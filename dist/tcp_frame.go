package dist

import (
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
	"io"

	"github.com/flockml/flock/backend"
)

// Wire format of the TCP backend. Every message on an established
// connection is a frame: a 32-byte little-endian header followed by len
// payload bytes.
//
//	offset size field
//	0      4    magic "FLK1"
//	4      1    type  (collective, point-to-point, ping, bye)
//	5      1    dtype (backend.DType of the payload; 0 when it has none)
//	6      2    op    (collective kind; 0 otherwise)
//	8      4    comm  (communicator id: 0 for the world, a hash for groups)
//	12     4    len   (payload bytes, ≤ tcpMaxFrame)
//	16     8    tag   (collective sequence number, or the user's Send tag)
//	24     8    count (elements of the whole operation or message)
//
// A bye frame (sent when a rank closes or fails) carries in tag the world
// rank to blame (−1: the sender) and in op whether it closed or failed.
//
// A collective frame fills exactly one receive that the receiving rank has
// posted, which checks op, sequence number, dtype and count against its own
// call: ranks that disagree fail instead of exchanging garbage. A
// point-to-point message may span several consecutive frames.
const (
	tcpMagic      = 0x314B4C46 // "FLK1"
	tcpHeaderSize = 32
	// tcpMaxFrame bounds one frame's payload; larger frames are malformed.
	tcpMaxFrame = 8 << 20
	// tcpMaxCount bounds the element count a header may announce.
	tcpMaxCount = 1 << 48
)

// Frame types.
const (
	tcpColl = 1 + iota
	tcpP2P
	tcpPing
	tcpBye
	// tcpClosing says that the sender has finished every operation and
	// is closing its communicator: its bye will follow.
	tcpClosing
)

// Collective kinds carried in the op field.
const (
	tcpOpAllReduce = 1 + iota
	tcpOpReduceScatter
	tcpOpAllGather
	tcpOpBroadcast
	tcpOpBarrier
)

var tcpOpNames = [...]string{"", "all-reduce", "reduce-scatter", "all-gather", "broadcast", "barrier"}

type tcpHeader struct {
	typ   uint8
	dtype uint8
	op    uint16
	comm  uint32
	len   uint32
	tag   int64
	count int64
}

var errTCPFrame = errors.New("malformed frame")

func (h *tcpHeader) put(b []byte) {
	_ = b[tcpHeaderSize-1]
	binary.LittleEndian.PutUint32(b[0:], tcpMagic)
	b[4] = h.typ
	b[5] = h.dtype
	binary.LittleEndian.PutUint16(b[6:], h.op)
	binary.LittleEndian.PutUint32(b[8:], h.comm)
	binary.LittleEndian.PutUint32(b[12:], h.len)
	binary.LittleEndian.PutUint64(b[16:], uint64(h.tag))
	binary.LittleEndian.PutUint64(b[24:], uint64(h.count))
}

// tcpParseHeader decodes and validates a frame header.
func tcpParseHeader(b []byte) (tcpHeader, error) {
	if len(b) < tcpHeaderSize {
		return tcpHeader{}, fmt.Errorf("%w: short header (%d bytes)", errTCPFrame, len(b))
	}
	if m := binary.LittleEndian.Uint32(b[0:]); m != tcpMagic {
		return tcpHeader{}, fmt.Errorf("%w: bad magic %#08x", errTCPFrame, m)
	}
	h := tcpHeader{
		typ:   b[4],
		dtype: b[5],
		op:    binary.LittleEndian.Uint16(b[6:]),
		comm:  binary.LittleEndian.Uint32(b[8:]),
		len:   binary.LittleEndian.Uint32(b[12:]),
		tag:   int64(binary.LittleEndian.Uint64(b[16:])),
		count: int64(binary.LittleEndian.Uint64(b[24:])),
	}
	if h.len > tcpMaxFrame {
		return tcpHeader{}, fmt.Errorf("%w: %d-byte payload exceeds the %d-byte limit", errTCPFrame, h.len, tcpMaxFrame)
	}
	if h.count < 0 || h.count > tcpMaxCount {
		return tcpHeader{}, fmt.Errorf("%w: count %d out of range", errTCPFrame, h.count)
	}
	switch h.typ {
	case tcpPing, tcpClosing:
		if h.dtype != 0 || h.op != 0 || h.comm != 0 || h.len != 0 || h.tag != 0 || h.count != 0 {
			return tcpHeader{}, fmt.Errorf("%w: type %d with fields set", errTCPFrame, h.typ)
		}
	case tcpBye:
		// tag: the world rank to blame, −1 for the sender; op: closed or failed.
		if h.dtype != 0 || h.op > 1 || h.comm != 0 || h.len != 0 || h.tag < -1 || h.tag > 1<<30 || h.count != 0 {
			return tcpHeader{}, fmt.Errorf("%w: type %d with fields set", errTCPFrame, h.typ)
		}
	case tcpColl:
		if h.op == 0 || int(h.op) >= len(tcpOpNames) {
			return tcpHeader{}, fmt.Errorf("%w: unknown collective %d", errTCPFrame, h.op)
		}
		if h.dtype != 0 && !tcpDTypeOK(backend.DType(h.dtype)) || h.dtype == 0 && h.len != 0 {
			return tcpHeader{}, fmt.Errorf("%w: dtype %d", errTCPFrame, h.dtype)
		}
	case tcpP2P:
		if h.op != 0 || !tcpDTypeOK(backend.DType(h.dtype)) {
			return tcpHeader{}, fmt.Errorf("%w: point-to-point dtype %d op %d", errTCPFrame, h.dtype, h.op)
		}
		if int64(h.len) > h.count*int64(backend.DType(h.dtype).Size()) {
			return tcpHeader{}, fmt.Errorf("%w: %d-byte payload for %d elements", errTCPFrame, h.len, h.count)
		}
	default:
		return tcpHeader{}, fmt.Errorf("%w: unknown type %d", errTCPFrame, h.typ)
	}
	return h, nil
}

// tcpDTypeOK reports whether the backend moves tensors of dtype d.
func tcpDTypeOK(d backend.DType) bool {
	return d == backend.Float32 || d == backend.Float64 || d == backend.Int32 || d == backend.Int64
}

// Handshake. The dialling rank c and the accepting rank s prove to each
// other that they hold the job token without sending it:
//
//	c → s  hello  = "FLKH" | version u16 | 0 u16 | rank_c u32 | size u32 | nonce_c[32]
//	s → c  reply  = "FLKH" | rank_s u32 | nonce_s[32] | HMAC(token, "flock/tcp server" | hello | reply[:40])
//	c → s  proof  = HMAC(token, "flock/tcp client" | hello | reply[:40])
//	s → c  "FLOK"
//
// Both MACs cover both fresh nonces and both ranks, so no message can be
// replayed into another connection or reflected back. Once the whole mesh
// is up, every connection carries the shared-memory setup exchange
// (shm.go) before its first frame.
const (
	tcpHandshakeMagic = "FLKH"
	tcpVersion        = 2
	tcpHelloSize      = 48
	tcpReplySize      = 72
	tcpProofSize      = 32
	tcpAccept         = "FLOK"
)

var errTCPAuth = errors.New("authentication failed")

func tcpMAC(token []byte, label string, hello, reply []byte) []byte {
	m := hmac.New(sha256.New, token)
	m.Write([]byte(label))
	m.Write(hello)
	m.Write(reply)
	return m.Sum(nil)
}

// tcpClientHandshake authenticates the connection from rank to peer.
func tcpClientHandshake(rw io.ReadWriter, token []byte, rank, size, peer int) error {
	var hello [tcpHelloSize]byte
	copy(hello[:], tcpHandshakeMagic)
	binary.LittleEndian.PutUint16(hello[4:], tcpVersion)
	binary.LittleEndian.PutUint32(hello[8:], uint32(rank))
	binary.LittleEndian.PutUint32(hello[12:], uint32(size))
	if _, err := rand.Read(hello[16:]); err != nil {
		return err
	}
	if _, err := rw.Write(hello[:]); err != nil {
		return fmt.Errorf("send hello: %w", err)
	}
	var reply [tcpReplySize]byte
	if _, err := io.ReadFull(rw, reply[:]); err != nil {
		return fmt.Errorf("read reply: %w", err)
	}
	if string(reply[:4]) != tcpHandshakeMagic {
		return fmt.Errorf("%w: bad reply magic", errTCPAuth)
	}
	if got := binary.LittleEndian.Uint32(reply[4:]); got != uint32(peer) {
		return fmt.Errorf("%w: expected rank %d, reached rank %d", errTCPAuth, peer, got)
	}
	if !hmac.Equal(reply[40:], tcpMAC(token, "flock/tcp server", hello[:], reply[:40])) {
		return fmt.Errorf("%w: rank %d does not hold the job token", errTCPAuth, peer)
	}
	if _, err := rw.Write(tcpMAC(token, "flock/tcp client", hello[:], reply[:40])); err != nil {
		return fmt.Errorf("send proof: %w", err)
	}
	var ok [len(tcpAccept)]byte
	if _, err := io.ReadFull(rw, ok[:]); err != nil || string(ok[:]) != tcpAccept {
		return fmt.Errorf("%w: rank %d refused the connection", errTCPAuth, peer)
	}
	return nil
}

// tcpServerHandshake authenticates a connection accepted by rank and returns
// the dialling peer's rank, which is below rank.
func tcpServerHandshake(rw io.ReadWriter, token []byte, rank, size int) (int, error) {
	var hello [tcpHelloSize]byte
	if _, err := io.ReadFull(rw, hello[:]); err != nil {
		return -1, fmt.Errorf("read hello: %w", err)
	}
	if string(hello[:4]) != tcpHandshakeMagic {
		return -1, fmt.Errorf("%w: bad hello magic", errTCPAuth)
	}
	if v := binary.LittleEndian.Uint16(hello[4:]); v != tcpVersion {
		return -1, fmt.Errorf("%w: protocol version %d, want %d", errTCPAuth, v, tcpVersion)
	}
	peer := binary.LittleEndian.Uint32(hello[8:])
	if n := binary.LittleEndian.Uint32(hello[12:]); n != uint32(size) {
		return -1, fmt.Errorf("%w: peer believes the world has %d ranks, not %d", errTCPAuth, n, size)
	}
	if peer >= uint32(rank) {
		return -1, fmt.Errorf("%w: rank %d must not dial rank %d", errTCPAuth, peer, rank)
	}
	var reply [tcpReplySize]byte
	copy(reply[:], tcpHandshakeMagic)
	binary.LittleEndian.PutUint32(reply[4:], uint32(rank))
	if _, err := rand.Read(reply[8:40]); err != nil {
		return -1, err
	}
	copy(reply[40:], tcpMAC(token, "flock/tcp server", hello[:], reply[:40]))
	if _, err := rw.Write(reply[:]); err != nil {
		return -1, fmt.Errorf("send reply: %w", err)
	}
	var proof [tcpProofSize]byte
	if _, err := io.ReadFull(rw, proof[:]); err != nil {
		return -1, fmt.Errorf("read proof: %w", err)
	}
	if !hmac.Equal(proof[:], tcpMAC(token, "flock/tcp client", hello[:], reply[:40])) {
		return -1, fmt.Errorf("%w: peer claiming rank %d does not hold the job token", errTCPAuth, peer)
	}
	if _, err := rw.Write([]byte(tcpAccept)); err != nil {
		return -1, fmt.Errorf("send accept: %w", err)
	}
	return int(peer), nil
}
