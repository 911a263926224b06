package dist

import (
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"slices"
	"time"
)

// The store speaks a framed request–response protocol over TCP, after a
// mutual challenge–response on the job token.
//
// Handshake (token T, never sent):
//
//	server → client  "FLKH" v  Ns                 (Ns: 32 random bytes)
//	client → server  "FLKH" v  Nc  HMAC-SHA256(T, "flock store v1 client" ‖ Ns ‖ Nc)
//	server → client  HMAC-SHA256(T, "flock store v1 server" ‖ Ns ‖ Nc)
//
// The server closes the connection without answering when the client's
// proof is wrong; each side's proof binds both nonces and a distinct label,
// so neither can be replayed or reflected.
//
// Frame (big-endian):
//
//	"FLKS" op:u8 len:u32 body[len]
//	body = arg:i64 nkeys:u16 {klen:u16 key}… nvals:u16 {vlen:u32 val}…
//
// The body must be consumed exactly. Keys are at most storeMaxKey bytes and
// frames at most storeMaxFrame bytes; anything else is a protocol error
// and the connection is closed.
const (
	storeVersion    = 1
	storeNonceLen   = 32
	storeMACLen     = sha256.Size
	storeHeaderLen  = 9
	storeMaxFrame   = 16 << 20
	storeMaxKey     = 4096
	storeHelloLen   = 5 + storeNonceLen
	storeProofLen   = 5 + storeNonceLen + storeMACLen
	storeAuthWindow = 10 * time.Second
)

var (
	storeFrameMagic = [4]byte{'F', 'L', 'K', 'S'}
	storeHelloMagic = [4]byte{'F', 'L', 'K', 'H'}
)

// Request operations and response statuses.
const (
	storeOpSet byte = 1 + iota
	storeOpGet
	storeOpAdd
	storeOpWait
	storeOpDelete
	storeOpCompareSet

	storeRespOK      byte = 0x80
	storeRespErr     byte = 0x81
	storeRespTimeout byte = 0x82
)

func storeOpName(op byte) string {
	switch op {
	case storeOpSet:
		return "set"
	case storeOpGet:
		return "get"
	case storeOpAdd:
		return "add"
	case storeOpWait:
		return "wait"
	case storeOpDelete:
		return "delete"
	case storeOpCompareSet:
		return "compare-set"
	}
	return fmt.Sprintf("op %#x", op)
}

// storeMsg is one decoded frame: a request (op < 0x80) or a response.
type storeMsg struct {
	op   byte
	arg  int64
	keys []string
	vals [][]byte
}

var errStoreFrame = errors.New("malformed frame")

// storeAppendFrame appends m's encoding to dst.
func storeAppendFrame(dst []byte, m *storeMsg) ([]byte, error) {
	n := 8 + 2 + 2
	if len(m.keys) > 0xffff || len(m.vals) > 0xffff {
		return dst, fmt.Errorf("too many keys or values (%d, %d)", len(m.keys), len(m.vals))
	}
	for _, k := range m.keys {
		if len(k) > storeMaxKey {
			return dst, fmt.Errorf("key of %d bytes exceeds %d", len(k), storeMaxKey)
		}
		n += 2 + len(k)
	}
	for _, v := range m.vals {
		n += 4 + len(v)
	}
	if n > storeMaxFrame {
		return dst, fmt.Errorf("frame of %d bytes exceeds %d", n, storeMaxFrame)
	}
	dst = append(dst, storeFrameMagic[:]...)
	dst = append(dst, m.op)
	dst = binary.BigEndian.AppendUint32(dst, uint32(n))
	dst = binary.BigEndian.AppendUint64(dst, uint64(m.arg))
	dst = binary.BigEndian.AppendUint16(dst, uint16(len(m.keys)))
	for _, k := range m.keys {
		dst = binary.BigEndian.AppendUint16(dst, uint16(len(k)))
		dst = append(dst, k...)
	}
	dst = binary.BigEndian.AppendUint16(dst, uint16(len(m.vals)))
	for _, v := range m.vals {
		dst = binary.BigEndian.AppendUint32(dst, uint32(len(v)))
		dst = append(dst, v...)
	}
	return dst, nil
}

// storeReadFrame reads one frame from r into buf (grown as needed) and
// decodes it. Values alias the returned buffer.
func storeReadFrame(r io.Reader, buf []byte) (storeMsg, []byte, error) {
	if cap(buf) < storeHeaderLen {
		buf = make([]byte, 0, 512)
	}
	hdr := buf[:storeHeaderLen]
	if _, err := io.ReadFull(r, hdr); err != nil {
		return storeMsg{}, buf, err
	}
	if [4]byte(hdr[:4]) != storeFrameMagic {
		return storeMsg{}, buf, fmt.Errorf("%w: bad magic %q", errStoreFrame, hdr[:4])
	}
	op := hdr[4]
	n := binary.BigEndian.Uint32(hdr[5:9])
	if n > storeMaxFrame {
		return storeMsg{}, buf, fmt.Errorf("%w: frame of %d bytes exceeds %d", errStoreFrame, n, storeMaxFrame)
	}
	body, err := storeReadBody(r, buf[:0], int(n))
	if err != nil {
		return storeMsg{}, body, err
	}
	m, err := storeParseBody(op, body)
	return m, body, err
}

// storeReadChunk is the most a frame's body grows by before its bytes have
// arrived: a peer announcing a large frame gets memory only as it sends.
const storeReadChunk = 64 << 10

// storeReadBody reads n bytes from r into buf, growing it at most
// storeReadChunk bytes, or the length read so far, ahead of the data.
func storeReadBody(r io.Reader, buf []byte, n int) ([]byte, error) {
	for len(buf) < n {
		if len(buf) == cap(buf) {
			step := min(n-len(buf), max(len(buf), storeReadChunk))
			buf = slices.Grow(buf, step)
		}
		end := min(n, cap(buf))
		k, err := io.ReadFull(r, buf[len(buf):end])
		buf = buf[:len(buf)+k]
		if err != nil {
			if err == io.EOF {
				err = io.ErrUnexpectedEOF
			}
			return buf, err
		}
	}
	return buf, nil
}

// storeParseBody decodes a frame body; it never reads past body and
// rejects trailing bytes.
func storeParseBody(op byte, body []byte) (storeMsg, error) {
	m := storeMsg{op: op}
	if len(body) < 10 {
		return m, fmt.Errorf("%w: body of %d bytes is too short", errStoreFrame, len(body))
	}
	m.arg = int64(binary.BigEndian.Uint64(body))
	nk := int(binary.BigEndian.Uint16(body[8:]))
	p := body[10:]
	if nk > 0 {
		m.keys = make([]string, 0, min(nk, len(p)/2))
	}
	for range nk {
		if len(p) < 2 {
			return m, fmt.Errorf("%w: truncated key length", errStoreFrame)
		}
		kl := int(binary.BigEndian.Uint16(p))
		p = p[2:]
		if kl > storeMaxKey {
			return m, fmt.Errorf("%w: key of %d bytes exceeds %d", errStoreFrame, kl, storeMaxKey)
		}
		if len(p) < kl {
			return m, fmt.Errorf("%w: truncated key", errStoreFrame)
		}
		m.keys = append(m.keys, string(p[:kl]))
		p = p[kl:]
	}
	if len(p) < 2 {
		return m, fmt.Errorf("%w: truncated value count", errStoreFrame)
	}
	nv := int(binary.BigEndian.Uint16(p))
	p = p[2:]
	if nv > 0 {
		m.vals = make([][]byte, 0, min(nv, len(p)/4))
	}
	for range nv {
		if len(p) < 4 {
			return m, fmt.Errorf("%w: truncated value length", errStoreFrame)
		}
		vl := binary.BigEndian.Uint32(p)
		p = p[4:]
		if uint64(len(p)) < uint64(vl) {
			return m, fmt.Errorf("%w: truncated value", errStoreFrame)
		}
		m.vals = append(m.vals, p[:vl:vl])
		p = p[vl:]
	}
	if len(p) != 0 {
		return m, fmt.Errorf("%w: %d trailing bytes", errStoreFrame, len(p))
	}
	return m, nil
}

// storeCheckRequest validates the shape of a request: which ops take how
// many keys and values.
func storeCheckRequest(m *storeMsg) error {
	var nk, nv int
	switch m.op {
	case storeOpSet:
		nk, nv = 1, 1
	case storeOpGet, storeOpAdd, storeOpDelete:
		nk, nv = 1, 0
	case storeOpWait:
		if len(m.keys) == 0 || len(m.vals) != 0 {
			return fmt.Errorf("%w: wait with %d keys and %d values", errStoreFrame, len(m.keys), len(m.vals))
		}
		return nil
	case storeOpCompareSet:
		nk, nv = 1, 2
	default:
		return fmt.Errorf("%w: unknown op %#x", errStoreFrame, m.op)
	}
	if len(m.keys) != nk || len(m.vals) != nv {
		return fmt.Errorf("%w: %s with %d keys and %d values", errStoreFrame, storeOpName(m.op), len(m.keys), len(m.vals))
	}
	return nil
}

func storeMAC(token []byte, label string, ns, nc []byte) []byte {
	h := hmac.New(sha256.New, token)
	h.Write([]byte(label))
	h.Write(ns)
	h.Write(nc)
	return h.Sum(nil)
}

const (
	storeClientLabel = "flock store v1 client"
	storeServerLabel = "flock store v1 server"
)

// errStoreAuth marks a handshake the peer did not pass: a wrong token or
// not a flock store at all.
var errStoreAuth = errors.New("authentication failed")

// storeServerHandshake authenticates the client on c within the deadline.
func storeServerHandshake(c net.Conn, token []byte, deadline time.Time) error {
	if err := c.SetDeadline(deadline); err != nil {
		return err
	}
	var hello [storeHelloLen]byte
	copy(hello[:], storeHelloMagic[:])
	hello[4] = storeVersion
	ns := hello[5:]
	if _, err := rand.Read(ns); err != nil {
		return err
	}
	if _, err := c.Write(hello[:]); err != nil {
		return err
	}
	var proof [storeProofLen]byte
	if _, err := io.ReadFull(c, proof[:]); err != nil {
		return fmt.Errorf("reading client proof: %w", err)
	}
	if err := storeCheckProof(proof[:], token, ns); err != nil {
		return err
	}
	nc := proof[5 : 5+storeNonceLen]
	if _, err := c.Write(storeMAC(token, storeServerLabel, ns, nc)); err != nil {
		return err
	}
	return c.SetDeadline(time.Time{})
}

// storeCheckProof verifies the client's answer to the server nonce ns.
func storeCheckProof(proof, token, ns []byte) error {
	if len(proof) != storeProofLen || [4]byte(proof[:4]) != storeHelloMagic {
		return fmt.Errorf("%w: not a flock store handshake", errStoreAuth)
	}
	if proof[4] != storeVersion {
		return fmt.Errorf("%w: protocol version %d, want %d", errStoreAuth, proof[4], storeVersion)
	}
	nc := proof[5 : 5+storeNonceLen]
	if !hmac.Equal(proof[5+storeNonceLen:], storeMAC(token, storeClientLabel, ns, nc)) {
		return fmt.Errorf("%w: wrong token", errStoreAuth)
	}
	return nil
}

// storeClientHandshake proves the token to the server on c and checks the
// server's proof in return.
func storeClientHandshake(c net.Conn, token []byte, deadline time.Time) error {
	if err := c.SetDeadline(deadline); err != nil {
		return err
	}
	var hello [storeHelloLen]byte
	if _, err := io.ReadFull(c, hello[:]); err != nil {
		return fmt.Errorf("reading server hello: %w", err)
	}
	if [4]byte(hello[:4]) != storeHelloMagic {
		return fmt.Errorf("%w: server is not a flock store", errStoreAuth)
	}
	if hello[4] != storeVersion {
		return fmt.Errorf("%w: server protocol version %d, want %d", errStoreAuth, hello[4], storeVersion)
	}
	ns := hello[5:]
	var proof [storeProofLen]byte
	copy(proof[:], storeHelloMagic[:])
	proof[4] = storeVersion
	nc := proof[5 : 5+storeNonceLen]
	if _, err := rand.Read(nc); err != nil {
		return err
	}
	copy(proof[5+storeNonceLen:], storeMAC(token, storeClientLabel, ns, nc))
	if _, err := c.Write(proof[:]); err != nil {
		return err
	}
	var mac [storeMACLen]byte
	if _, err := io.ReadFull(c, mac[:]); err != nil {
		return fmt.Errorf("%w: server refused the token (%v)", errStoreAuth, err)
	}
	if !hmac.Equal(mac[:], storeMAC(token, storeServerLabel, ns, nc)) {
		return fmt.Errorf("%w: server does not hold the job token", errStoreAuth)
	}
	return c.SetDeadline(time.Time{})
}
