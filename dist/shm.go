package dist

import (
	"context"
	"crypto/rand"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"runtime"
	"strconv"
	"sync"
	"sync/atomic"
	"time"
	"unsafe"
)

// Shared-memory transport. When every rank of a TCP job runs under one
// kernel, the world communicator's collectives move their data through
// memory the ranks share instead of through sockets; the TCP connections
// stay up, carry point-to-point messages and groups' collectives, and tell
// the ranks when a peer fails.
//
// Each rank owns a region: a control block (its step counter, a futex
// word, and the descriptors of its recent operations) and two data
// buffers of shmWindow bytes. A rank writes only its own buffers; its
// peers read them. The file behind a region lives in shmDir, is created
// with mode 0600 under a name with 128 random bits that only travels over
// the authenticated TCP connections, and is unlinked as soon as every peer
// has mapped it, so nothing is left behind however the processes end.
//
// Ranks agree on progress through their step counters: a rank finishes a
// step (a phase of a round of a collective) by incrementing its counter,
// and a phase that needs a peer's data waits until the peer's counter has
// reached the step that produced it. A waiter spins briefly when the job
// has no more ranks than the machine has CPUs, then sleeps on the peer's
// counter as a futex, waking at least every shmPoll to notice a failed
// world, a cancelled context or the timeout.

// shmDir holds the regions' files.
var shmDir = "/dev/shm"

// shmWindow is the size of one data buffer. A round of a collective moves
// at most shmWindow bytes through each rank's buffer; two buffers let a
// rank fill the next round's while its peers still read the last one. A
// window small enough to stay in the caches beats a large one: the data
// then crosses main memory only on its way in and out of the tensors.
var shmWindow = 1 << 20

// shmEnv is the environment variable that turns the transport off when
// set to 0 (or false, off, no).
const shmEnv = "FLOCK_SHM"

const (
	shmCtlSize = 4096
	// shmDescs is the number of operation descriptors a control block
	// keeps, by sequence number: a peer is never more than one operation
	// ahead of the rank that checks its descriptor.
	shmDescs = 4
	// shmPoll bounds one futex sleep.
	shmPoll = 20 * time.Millisecond
	// shmSpin bounds the spinning before a sleep.
	shmSpin = 30 * time.Microsecond
)

// shmCtl is the control block at the start of a region.
type shmCtl struct {
	step    atomic.Uint32 // steps this rank has completed; the futex word
	waiters atomic.Uint32 // processes sleeping on step
	_       [56]byte
	desc    [shmDescs]shmDesc
}

// shmDesc describes one collective: the peers check that they run the
// same one.
type shmDesc struct {
	seq   atomic.Uint64
	kind  atomic.Uint64 // op | dtype<<8 | reduction<<16 | (root+1)<<32
	count atomic.Uint64
	_     [40]byte
}

var _ [shmCtlSize - unsafe.Sizeof(shmCtl{})]byte // the control block fits its page

// shmWorld is the shared-memory state of a job's world: every rank's
// region mapped into this process.
type shmWorld struct {
	rank, size int
	win        int
	regions    [][]byte  // by world rank
	ctl        []*shmCtl // by world rank
	spin       bool

	// Operations hold mu for reading while they touch the regions; close
	// unmaps them under the write lock.
	mu     sync.RWMutex
	closed bool

	words []*uint32   // every rank's step counter, for wakeAll
	gone  atomic.Bool // close has begun
}

func (s *shmWorld) buffer(rank, b int) []byte {
	return s.regions[rank][shmCtlSize+b*s.win : shmCtlSize+(b+1)*s.win]
}

// wakeAll wakes the sleepers on every rank's step counter, so that this
// process's notice a failure at once (the others check and sleep again).
// It takes no lock, as a sleeper's operation may be the one failing the
// world; a wake that races with close and lands on an unmapped address is
// harmless, as futex sleepers tolerate spurious wakes.
func (s *shmWorld) wakeAll() {
	if s.gone.Load() {
		return
	}
	for _, w := range s.words {
		shmFutexWake(w)
	}
}

func (s *shmWorld) close() {
	s.gone.Store(true)
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return
	}
	s.closed = true
	for _, b := range s.regions {
		shmUnmap(b)
	}
	s.regions, s.ctl = nil, nil
}

// shmDisabled reports whether the environment turns the transport off.
func shmDisabled() bool {
	switch os.Getenv(shmEnv) {
	case "0", "false", "off", "no":
		return true
	}
	return false
}

// Setup exchange. After the TCP mesh is up and before any frame, every
// pair of ranks trades, on its authenticated connection,
//
//	hello = "FLKS" | version u16 | len(id) u16 | len(name) u16 | 0 u16 |
//	        window u32 | region size u64 | id | name
//	ack   = "FLKA" | ok u8 | 0 0 0
//
// where id is the rank's shmHostIdentity and name its region's file ("" when
// it offers none). A rank acks ok when it offered a region, every peer
// offered one with its own identity and sizes, and it mapped them all; the
// transport is used when every rank acked ok, which every rank learns from
// the acks, so that all agree.
const (
	shmHelloMagic = "FLKS"
	shmAckMagic   = "FLKA"
	shmVersion    = 1
	shmHelloFixed = 24
	shmMaxID      = 256
	shmMaxName    = 64
	shmNamePrefix = "flock-"
)

type shmHello struct {
	id, name string
	window   uint32
	size     uint64
}

var errSHMHello = errors.New("malformed shared-memory hello")

func (h *shmHello) marshal() []byte {
	b := make([]byte, shmHelloFixed, shmHelloFixed+len(h.id)+len(h.name))
	copy(b, shmHelloMagic)
	binary.LittleEndian.PutUint16(b[4:], shmVersion)
	binary.LittleEndian.PutUint16(b[6:], uint16(len(h.id)))
	binary.LittleEndian.PutUint16(b[8:], uint16(len(h.name)))
	binary.LittleEndian.PutUint32(b[12:], h.window)
	binary.LittleEndian.PutUint64(b[16:], h.size)
	b = append(b, h.id...)
	return append(b, h.name...)
}

// shmReadHello reads and validates a peer's hello.
func shmReadHello(r io.Reader) (shmHello, error) {
	var b [shmHelloFixed]byte
	if _, err := io.ReadFull(r, b[:]); err != nil {
		return shmHello{}, err
	}
	if string(b[:4]) != shmHelloMagic {
		return shmHello{}, fmt.Errorf("%w: bad magic", errSHMHello)
	}
	if v := binary.LittleEndian.Uint16(b[4:]); v != shmVersion {
		return shmHello{}, fmt.Errorf("%w: version %d, want %d", errSHMHello, v, shmVersion)
	}
	nid, nname := int(binary.LittleEndian.Uint16(b[6:])), int(binary.LittleEndian.Uint16(b[8:]))
	if nid > shmMaxID || nname > shmMaxName || binary.LittleEndian.Uint16(b[10:]) != 0 {
		return shmHello{}, fmt.Errorf("%w: identity of %d bytes, name of %d", errSHMHello, nid, nname)
	}
	rest := make([]byte, nid+nname)
	if _, err := io.ReadFull(r, rest); err != nil {
		return shmHello{}, err
	}
	h := shmHello{id: string(rest[:nid]), name: string(rest[nid:]),
		window: binary.LittleEndian.Uint32(b[12:]), size: binary.LittleEndian.Uint64(b[16:])}
	if h.name != "" && !shmValidName(h.name) {
		return shmHello{}, fmt.Errorf("%w: file name %q", errSHMHello, h.name)
	}
	return h, nil
}

// shmNewName returns a fresh region file name: "flock-<pid>-<32 hex digits>".
func shmNewName() (string, error) {
	var r [16]byte
	if _, err := rand.Read(r[:]); err != nil {
		return "", err
	}
	return shmNamePrefix + strconv.Itoa(os.Getpid()) + "-" + hex.EncodeToString(r[:]), nil
}

// shmValidName reports whether name has the form shmNewName makes, so that
// a peer cannot point this rank at another file.
func shmValidName(name string) bool {
	if len(name) <= len(shmNamePrefix) || name[:len(shmNamePrefix)] != shmNamePrefix {
		return false
	}
	rest := name[len(shmNamePrefix):]
	i := 0
	for i < len(rest) && rest[i] >= '0' && rest[i] <= '9' {
		i++
	}
	if i == 0 || i > 10 || i >= len(rest) || rest[i] != '-' {
		return false
	}
	h := rest[i+1:]
	if len(h) != 32 {
		return false
	}
	for _, c := range []byte(h) {
		if (c < '0' || c > '9') && (c < 'a' || c > 'f') {
			return false
		}
	}
	return true
}

// shmRegionSize is the size of a region with buffers of win bytes.
func shmRegionSize(win int) int { return shmCtlSize + 2*win }

// shmConnect runs the setup exchange over conns (by world rank; nil for
// this rank) and returns the mapped world, or nil when the ranks talk over
// TCP only. It fails only when a connection does.
func shmConnect(ctx context.Context, cfg TCPConfig, conns []net.Conn, log *slog.Logger) (*shmWorld, error) {
	win := shmWindow
	size := shmRegionSize(win)
	s := &shmWorld{rank: cfg.Rank, size: cfg.Size, win: win, regions: make([][]byte, cfg.Size)}
	release := func() {
		for _, b := range s.regions {
			shmUnmap(b)
		}
	}
	dir := shmDir
	hello := shmHello{window: uint32(win), size: uint64(size)}
	var name string
	// A round needs a slot of at least 16 elements of 8 bytes per rank.
	offer := shmSupported && !cfg.NoSharedMemory && !shmDisabled() && cfg.Size <= win/128
	if offer {
		var err error
		hello.id, err = shmHostIdentity(dir)
		if err == nil {
			name, err = shmNewName()
		}
		if err == nil {
			s.regions[cfg.Rank], err = shmCreate(dir, name, size)
		}
		if err != nil {
			log.Debug("dist: shm: not offered", "err", err)
			offer, name = false, ""
		} else {
			hello.name = name
		}
	}
	defer func() {
		if name != "" {
			shmUnlink(dir, name)
		}
	}()
	hb := hello.marshal()
	for p, c := range conns {
		if c == nil {
			continue
		}
		if err := tcpHandshakeWithin(ctx, c, func() error { _, err := c.Write(hb); return err }); err != nil {
			release()
			return nil, fmt.Errorf("shared memory hello to rank %d: %w", p, err)
		}
	}
	ok := offer
	for p, c := range conns {
		if c == nil {
			continue
		}
		var h shmHello
		err := tcpHandshakeWithin(ctx, c, func() error {
			var err error
			h, err = shmReadHello(c)
			return err
		})
		if err != nil {
			release()
			return nil, fmt.Errorf("shared memory hello from rank %d: %w", p, err)
		}
		if !ok {
			continue
		}
		switch {
		case h.name == "":
			ok = false
			log.Debug("dist: shm: peer offers no region", "peer", p)
		case h.id != hello.id || h.window != hello.window || h.size != hello.size:
			ok = false
			log.Debug("dist: shm: peer elsewhere", "peer", p, "id", h.id, "window", h.window)
		default:
			s.regions[p], err = shmOpen(dir, h.name, size)
			if err != nil {
				ok = false
				log.Debug("dist: shm: cannot map peer's region", "peer", p, "err", err)
			}
		}
	}
	ack := []byte(shmAckMagic + "\x00\x00\x00\x00")
	if ok {
		ack[4] = 1
	}
	for p, c := range conns {
		if c == nil {
			continue
		}
		if err := tcpHandshakeWithin(ctx, c, func() error { _, err := c.Write(ack); return err }); err != nil {
			release()
			return nil, fmt.Errorf("shared memory ack to rank %d: %w", p, err)
		}
	}
	all := ok
	for p, c := range conns {
		if c == nil {
			continue
		}
		var a [8]byte
		err := tcpHandshakeWithin(ctx, c, func() error { _, err := io.ReadFull(c, a[:]); return err })
		if err == nil && (string(a[:4]) != shmAckMagic || a[4] > 1 || a[5] != 0 || a[6] != 0 || a[7] != 0) {
			err = fmt.Errorf("%w: bad ack", errSHMHello)
		}
		if err != nil {
			release()
			return nil, fmt.Errorf("shared memory ack from rank %d: %w", p, err)
		}
		all = all && a[4] == 1
	}
	if !all {
		release()
		return nil, nil
	}
	s.ctl = make([]*shmCtl, cfg.Size)
	s.words = make([]*uint32, cfg.Size)
	for r, b := range s.regions {
		s.ctl[r] = (*shmCtl)(unsafe.Pointer(unsafe.SliceData(b)))
		s.words[r] = (*uint32)(unsafe.Pointer(&s.ctl[r].step))
	}
	s.spin = cfg.Size <= runtime.NumCPU()
	log.Debug("dist: shm: collectives through shared memory", "dir", dir, "window", win)
	return s, nil
}
