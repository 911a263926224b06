package dist

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"github.com/flockml/flock/backend"
)

// TCPConfig describes this rank's place in a TCP job.
type TCPConfig struct {
	// Rank is this process's index in [0, Size); Size is the number of ranks.
	Rank, Size int
	// Addrs holds every rank's listen address, index = rank.
	Addrs []string
	// Listener is this rank's, already listening on Addrs[Rank]. DialTCP
	// accepts the lower ranks' connections on it and does not close it.
	Listener net.Listener
	// Token is the job secret every rank shares; it never goes on the wire.
	Token []byte
	// Timeout bounds how long a peer may stay silent (no data, no
	// heartbeat) and an operation whose context has no deadline; 0 means
	// DefaultTimeout.
	Timeout time.Duration
	// Logger receives connection events and the reasons connections are
	// refused or dropped; nil discards them.
	Logger *slog.Logger
	// NoSharedMemory keeps the collectives on TCP even when every rank
	// runs on this host; so does FLOCK_SHM=0 in the environment.
	NoSharedMemory bool
}

// tcpSocketBuffer is the kernel send and receive buffer size asked for on
// every connection, large enough to keep a loopback or datacenter link busy
// while the other side reduces a segment.
const tcpSocketBuffer = 4 << 20

// DialTCP connects this rank to every other rank of the job and returns the
// world communicator. Every pair of ranks shares one persistent connection:
// the lower rank dials, the higher rank accepts, and both prove they hold
// cfg.Token by answering the other's fresh nonce with HMAC-SHA256 over both
// nonces and both ranks; the token itself is never sent.
// DialTCP returns once the full mesh is up, or fails when ctx ends (bounded by
// the timeout when ctx has no deadline).
//
// Collectives: AllReduce of more than tcpSmallBytes uses the ring algorithm
// (reduce-scatter then all-gather, Patarasuk & Yuan 2009), each chunk cut
// into tcpSegment-byte segments so that receiving segment j+1, reducing
// segment j and sending segment j−1 overlap; smaller all-reduces use
// recursive doubling (Thakur, Rabenseifner & Gropp 2005), folding the ranks
// beyond the largest power of two into a partner first. Broadcast is a
// pipelined chain from the root; Barrier is a dissemination barrier.
// Float32, float64, int32 and int64 tensors are supported.
//
// When every rank runs under the same kernel and can map files in
// /dev/shm, the world communicator's collectives go through shared memory
// instead (see shm.go and shm_ops.go): each rank reduces its share of the
// data reading its peers' contributions from buffers they share, then
// copies the others' reduced shares. The ranks agree on this while
// connecting, over the authenticated connections; point-to-point messages,
// groups made by NewGroup and failure detection stay on TCP.
// cfg.NoSharedMemory or FLOCK_SHM=0 keeps everything on TCP. The returned
// Comm's method Transport() string says which ("shm" or "tcp").
func DialTCP(ctx context.Context, cfg TCPConfig) (Comm, error) {
	if cfg.Size < 1 || cfg.Rank < 0 || cfg.Rank >= cfg.Size {
		return nil, fmt.Errorf("dist: tcp: rank %d of %d out of range", cfg.Rank, cfg.Size)
	}
	if cfg.Size > 1 {
		if len(cfg.Addrs) != cfg.Size {
			return nil, fmt.Errorf("dist: tcp: %d addresses for %d ranks", len(cfg.Addrs), cfg.Size)
		}
		if len(cfg.Token) == 0 {
			return nil, errors.New("dist: tcp: empty job token")
		}
		if cfg.Listener == nil && cfg.Rank > 0 {
			return nil, errors.New("dist: tcp: no listener")
		}
	}
	timeout := cfg.Timeout
	if timeout <= 0 {
		timeout = DefaultTimeout
	}
	log := cfg.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	log = log.With("rank", cfg.Rank)
	ctx, cancel := WithDefaultTimeout(ctx, timeout)
	defer cancel()

	conns := make([]net.Conn, cfg.Size)
	closeAll := func() {
		for _, c := range conns {
			if c != nil {
				c.Close()
			}
		}
	}
	errc := make(chan error, 2)
	var mu sync.Mutex
	go func() { errc <- tcpAcceptPeers(ctx, cfg, log, conns, &mu) }()
	go func() { errc <- tcpDialPeers(ctx, cfg, log, conns, &mu) }()
	var err error
	for range 2 {
		if e := <-errc; e != nil && err == nil {
			err = e
			cancel()
		}
	}
	if err != nil {
		closeAll()
		return nil, fmt.Errorf("dist: tcp: rank %d: connect: %w", cfg.Rank, err)
	}
	shm, err := shmConnect(ctx, cfg, conns, log)
	if err != nil {
		closeAll()
		return nil, fmt.Errorf("dist: tcp: rank %d: connect: %w", cfg.Rank, err)
	}
	w := &tcpWorld{
		rank:    cfg.Rank,
		size:    cfg.Size,
		timeout: timeout,
		log:     log,
		token:   cfg.Token,
		dead:    make(chan struct{}),
		peers:   make([]*tcpPeer, cfg.Size),
		shm:     shm,
	}
	for r, c := range conns {
		if c == nil {
			continue
		}
		tcpTune(c)
		w.peers[r] = newTCPPeer(w, r, c)
	}
	for _, p := range w.peers {
		if p == nil {
			continue
		}
		w.io.Add(2)
		go p.readLoop()
		go p.writeLoop()
	}
	log.Debug("dist: tcp: mesh up", "size", cfg.Size)
	return newTCPComm(w, 0, tcpIdentity(cfg.Size), cfg.Rank), nil
}

func tcpIdentity(n int) []int {
	r := make([]int, n)
	for i := range r {
		r[i] = i
	}
	return r
}

func tcpTune(c net.Conn) {
	if tc, ok := c.(*net.TCPConn); ok {
		tc.SetNoDelay(true)
		tc.SetReadBuffer(tcpSocketBuffer)
		tc.SetWriteBuffer(tcpSocketBuffer)
		tc.SetKeepAlive(true)
	}
}

// tcpDialPeers dials every higher rank, retrying until it answers or ctx
// ends.
func tcpDialPeers(ctx context.Context, cfg TCPConfig, log *slog.Logger, conns []net.Conn, mu *sync.Mutex) error {
	var d net.Dialer
	for peer := cfg.Rank + 1; peer < cfg.Size; peer++ {
		backoff := 10 * time.Millisecond
		for {
			c, err := d.DialContext(ctx, "tcp", cfg.Addrs[peer])
			if err == nil {
				err = tcpHandshakeWithin(ctx, c, func() error {
					return tcpClientHandshake(c, cfg.Token, cfg.Rank, cfg.Size, peer)
				})
				if err == nil {
					mu.Lock()
					conns[peer] = c
					mu.Unlock()
					log.Debug("dist: tcp: connected", "peer", peer, "addr", cfg.Addrs[peer])
					break
				}
				c.Close()
				if errors.Is(err, errTCPAuth) {
					return fmt.Errorf("rank %d at %s: %w", peer, cfg.Addrs[peer], err)
				}
			}
			if ctx.Err() != nil {
				return fmt.Errorf("rank %d at %s: %w (last error: %v)", peer, cfg.Addrs[peer], ctx.Err(), err)
			}
			log.Debug("dist: tcp: dial retry", "peer", peer, "err", err)
			select {
			case <-time.After(backoff):
			case <-ctx.Done():
			}
			backoff = min(2*backoff, time.Second)
		}
	}
	return nil
}

// tcpHandshakeWithin runs hs with c's deadline set from ctx.
func tcpHandshakeWithin(ctx context.Context, c net.Conn, hs func() error) error {
	if dl, ok := ctx.Deadline(); ok {
		c.SetDeadline(dl)
	}
	stop := context.AfterFunc(ctx, func() { c.SetDeadline(time.Unix(1, 0)) })
	err := hs()
	stop()
	c.SetDeadline(time.Time{})
	return err
}

// tcpAcceptPeers accepts one authenticated connection from every lower rank.
// Connections that fail the handshake are closed and logged; accepting goes
// on.
func tcpAcceptPeers(ctx context.Context, cfg TCPConfig, log *slog.Logger, conns []net.Conn, mu *sync.Mutex) error {
	want := cfg.Rank
	if want == 0 {
		return nil
	}
	type result struct {
		c    net.Conn
		peer int
	}
	got := make(chan result)
	stop := context.AfterFunc(ctx, func() {
		if dl, ok := cfg.Listener.(interface{ SetDeadline(time.Time) error }); ok {
			dl.SetDeadline(time.Unix(1, 0))
		}
	})
	defer stop()
	defer func() {
		if dl, ok := cfg.Listener.(interface{ SetDeadline(time.Time) error }); ok {
			dl.SetDeadline(time.Time{})
		}
	}()
	acceptErr := make(chan error, 1)
	var wg sync.WaitGroup
	done := make(chan struct{})
	hctx, hcancel := context.WithCancel(ctx)
	defer func() {
		hcancel()
		close(done)
		wg.Wait()
	}()
	go func() {
		for {
			c, err := cfg.Listener.Accept()
			if err != nil {
				acceptErr <- err
				return
			}
			wg.Add(1)
			go func() {
				defer wg.Done()
				peer := -1
				err := tcpHandshakeWithin(hctx, c, func() error {
					var err error
					peer, err = tcpServerHandshake(c, cfg.Token, cfg.Rank, cfg.Size)
					return err
				})
				if err != nil {
					log.Warn("dist: tcp: refused connection", "remote", c.RemoteAddr().String(), "reason", err)
					c.Close()
					return
				}
				select {
				case got <- result{c, peer}:
				case <-done:
					c.Close()
				}
			}()
		}
	}()
	for want > 0 {
		select {
		case r := <-got:
			mu.Lock()
			dup := conns[r.peer] != nil
			if !dup {
				conns[r.peer] = r.c
				want--
			}
			mu.Unlock()
			if dup {
				log.Warn("dist: tcp: refused connection", "remote", r.c.RemoteAddr().String(), "reason", fmt.Sprintf("rank %d is already connected", r.peer))
				r.c.Close()
			}
		case err := <-acceptErr:
			if ctx.Err() != nil {
				return fmt.Errorf("waiting for %d lower ranks: %w", want, ctx.Err())
			}
			return fmt.Errorf("accept: %w", err)
		case <-ctx.Done():
			return fmt.Errorf("waiting for %d lower ranks: %w", want, ctx.Err())
		}
	}
	// Unblock the accepting goroutine; it exits on the deadline error.
	if dl, ok := cfg.Listener.(interface{ SetDeadline(time.Time) error }); ok {
		dl.SetDeadline(time.Unix(1, 0))
		<-acceptErr
	}
	return nil
}

// tcpWorld is the state the world communicator and its groups share: the
// connections and the failure that ends them all.
type tcpWorld struct {
	rank, size int
	timeout    time.Duration
	log        *slog.Logger
	token      []byte     // the job secret, for the pair worlds of Pairs
	peers      []*tcpPeer // by world rank; nil for this rank
	shm        *shmWorld  // nil when the collectives run over TCP

	failOnce sync.Once
	dead     chan struct{} // closed on failure or Close
	failRank int           // world rank blamed for the failure, or −1
	failErr  error

	io sync.WaitGroup // reader and writer goroutines
}

// fail ends the world: every pending and later operation returns an
// OpError naming rank. Each peer gets a bye frame naming the rank to blame
// (so that a failure seen first here is not blamed on this rank), then the
// connections close.
func (w *tcpWorld) fail(rank int, err error) { w.failAs(rank, err, true) }

// failAs is fail, logging the failure only when warn is set.
func (w *tcpWorld) failAs(rank int, err error, warn bool) {
	w.failOnce.Do(func() {
		w.failRank, w.failErr = rank, err
		bye := tcpHeader{typ: tcpBye, op: tcpByeFailed, tag: int64(rank)}
		if errors.Is(err, ErrClosed) {
			bye.op = tcpByeClosed
		}
		for _, p := range w.peers {
			if p != nil {
				p.byeq <- bye
			}
		}
		close(w.dead)
		if w.shm != nil {
			w.shm.wakeAll()
		}
		if rank >= 0 && warn {
			w.log.Warn("dist: tcp: communicator failed", "peer", rank, "err", err)
		}
		w.io.Add(1)
		go func() {
			defer w.io.Done()
			t := time.NewTimer(tcpByeGrace)
			defer t.Stop()
			// The bye goes out first. Then each connection is read to
			// its end, the peer's own bye or close, so that what a
			// peer sent before it left still reaches its Recv.
			expired := false
			waitAll := func(done func(*tcpPeer) chan struct{}) {
				for _, p := range w.peers {
					if p == nil || expired {
						continue
					}
					select {
					case <-done(p):
					case <-t.C:
						expired = true
					}
				}
			}
			waitAll(func(p *tcpPeer) chan struct{} { return p.wdone })
			waitAll(func(p *tcpPeer) chan struct{} { return p.rdone })
			for _, p := range w.peers {
				if p != nil {
					p.conn.Close()
				}
			}
		}()
	})
}

// tcpByeGrace bounds how long a failing rank tries to tell its peers and
// reads what they sent before they learnt of the failure.
const tcpByeGrace = 500 * time.Millisecond

// Reasons carried by a bye frame's op field.
const (
	tcpByeClosed = 0
	tcpByeFailed = 1
)

// abort fails the world from an operation's goroutine and waits until no
// connection goroutine can touch the operation's buffers any more.
func (w *tcpWorld) abort(rank int, err error) {
	w.fail(rank, err)
	w.io.Wait()
}

// tcpPeer is the connection to one other rank.
type tcpPeer struct {
	w    *tcpWorld
	rank int
	conn net.Conn
	// Messages for the writer, in order. The queue is unbounded so that an
	// operation never blocks on its own sends while the peer waits for its
	// receives to be posted.
	qmu    sync.Mutex
	queue  []*tcpSend
	qhead  int
	notify chan struct{}  // capacity 1: the queue is non-empty
	byeq   chan tcpHeader // capacity 1: the bye written once the world fails
	wdone  chan struct{}  // closed when the writer has exited
	rdone  chan struct{}  // closed when the reader has exited
	// closing is closed when the peer said it is closing (tcpClosing):
	// its bye is then the end of a job, not a failure.
	closing     chan struct{}
	closingOnce sync.Once

	mu    sync.Mutex
	lanes map[uint32]*tcpLane

	// Collective frames and point-to-point messages that arrived before
	// their receive was posted, on all lanes together: the bytes they hold
	// (see tcpEarlyCost), at most earlyMax unless a single frame or
	// message is larger, and the reader's wake-up when a receive is posted
	// or a held frame or message is taken.
	early    atomic.Int64
	earlyMax int64
	room     chan struct{} // capacity 1
}

func newTCPPeer(w *tcpWorld, rank int, conn net.Conn) *tcpPeer {
	return &tcpPeer{w: w, rank: rank, conn: conn, notify: make(chan struct{}, 1), lanes: map[uint32]*tcpLane{},
		byeq: make(chan tcpHeader, 1), wdone: make(chan struct{}), rdone: make(chan struct{}), earlyMax: tcpEarlyMax, room: make(chan struct{}, 1),
		closing: make(chan struct{})}
}

// tcpLane holds, for one communicator and one peer, the receives posted by
// this rank and the messages that arrived before their receive.
//
// A collective frame fills the oldest collective receive posted on its
// lane, read straight from the connection into the operation's buffer.
// When none is posted yet (the peer is ahead), the reader keeps the frame
// (up to the peer's earlyMax bytes, then it waits for room at most the
// world's timeout) and goes on reading the connection, so that a bye or a
// ping behind it is never stuck; the next receive posted takes the oldest
// held frame instead of waiting. Point-to-point messages that arrive before
// their Recv are held within the same bound.
type tcpLane struct {
	p     *tcpPeer
	cmu   sync.Mutex
	slots []*tcpSlot // posted collective receives, in the order their frames will come
	early []tcpEarly // held collective frames, oldest at head; never both non-empty
	head  int

	posted     map[int64][]*tcpRecv // point-to-point, under p.mu
	unexpected map[int64][]*tcpMsg
}

// tcpEarly is a collective frame held until its receive is posted.
type tcpEarly struct {
	h    tcpHeader
	data []byte
	cost int64
}

// tcpEarlyMax bounds the bytes held for one peer before their receives
// are posted: 64 segments, enough for a peer a little ahead never to wait.
const tcpEarlyMax = 32 << 20

// tcpEarlyCost is what a held frame of n payload bytes counts against
// tcpEarlyMax: its buffer and a share for its bookkeeping, so that empty
// frames are bounded too.
func tcpEarlyCost(n int) int64 {
	if n > 0 && n <= tcpSegment {
		n = tcpSegment
	}
	return int64(n) + 512
}

// tcpEarlyPool recycles the segment-sized buffers of held frames.
var tcpEarlyPool = sync.Pool{New: func() any { b := make([]byte, tcpSegment); return &b }}

func tcpEarlyBuf(n int) []byte {
	if n == 0 {
		return nil
	}
	if n > tcpSegment {
		return make([]byte, n)
	}
	return (*tcpEarlyPool.Get().(*[]byte))[:n]
}

func (p *tcpPeer) lane(comm uint32) *tcpLane {
	p.mu.Lock()
	defer p.mu.Unlock()
	l := p.lanes[comm]
	if l == nil {
		l = &tcpLane{p: p, posted: map[int64][]*tcpRecv{}, unexpected: map[int64][]*tcpMsg{}}
		p.lanes[comm] = l
	}
	return l
}

// wake tells the reader that a receive was posted or a held frame taken.
func (p *tcpPeer) wake() {
	select {
	case p.room <- struct{}{}:
	default:
	}
}

// post hands the collective receive s to the lane's reader, or fills it at
// once from the oldest held frame. It returns an error, leaving s
// unfinished, when that frame does not match s.
func (l *tcpLane) post(s *tcpSlot) error {
	l.cmu.Lock()
	if l.head == len(l.early) {
		l.slots = append(l.slots, s)
		l.cmu.Unlock()
		l.p.wake()
		return nil
	}
	e := l.early[l.head]
	l.early[l.head] = tcpEarly{}
	l.head++
	if l.head == len(l.early) {
		l.early, l.head = l.early[:0], 0
	}
	l.cmu.Unlock()
	return l.p.fill(s, e)
}

// fill completes the receive s with the held frame e, which it releases.
func (p *tcpPeer) fill(s *tcpSlot, e tcpEarly) error {
	err := tcpMatch(e.h, s)
	if err == nil {
		copy(s.buf, e.data)
	}
	if b := e.data; cap(b) == tcpSegment {
		b = b[:cap(b)]
		tcpEarlyPool.Put(&b)
	}
	p.early.Add(-e.cost)
	p.wake()
	if err != nil {
		return err
	}
	s.done <- nil
	return nil
}

// takeSlot returns the oldest posted receive, or nil.
func (l *tcpLane) takeSlot() *tcpSlot {
	l.cmu.Lock()
	defer l.cmu.Unlock()
	return l.popSlot()
}

func (l *tcpLane) popSlot() *tcpSlot {
	if len(l.slots) == 0 {
		return nil
	}
	s := l.slots[0]
	copy(l.slots, l.slots[1:])
	l.slots[len(l.slots)-1] = nil
	l.slots = l.slots[:len(l.slots)-1]
	return s
}

// tcpSlot is a posted collective receive: the frame that fills it must carry
// the same op, sequence number, dtype and count.
type tcpSlot struct {
	buf   []byte
	op    uint16
	dtype uint8
	seq   int64
	count int64
	done  chan error
	send  *tcpSend // outstanding send from buf, if any
}

// tcpMatch checks that the collective frame h is the one the receive s
// waits for.
func tcpMatch(h tcpHeader, s *tcpSlot) error {
	if h.op != s.op || h.tag != s.seq {
		return fmt.Errorf("collectives out of order: peer is in %s #%d, this rank in %s #%d",
			tcpOpNames[h.op], h.tag, tcpOpNames[s.op], s.seq)
	}
	if h.dtype != s.dtype || h.count != s.count {
		return fmt.Errorf("%s: peer has %d elements of %s, this rank %d of %s",
			tcpOpNames[h.op], h.count, tcpDTypeName(h.dtype), s.count, tcpDTypeName(s.dtype))
	}
	if int(h.len) != len(s.buf) {
		return fmt.Errorf("%w: %s segment of %d bytes, want %d", errTCPFrame, tcpOpNames[h.op], h.len, len(s.buf))
	}
	return nil
}

// tcpRecv is a posted point-to-point receive.
type tcpRecv struct {
	buf   []byte
	dtype uint8
	count int64
	done  chan error
}

// tcpMsg is a point-to-point message that arrived before its Recv.
type tcpMsg struct {
	dtype uint8
	count int64
	data  []byte
	cost  int64 // bytes counted against the peer's earlyMax
}

// tcpSend is a message for the writer: header fields and the payload, cut
// into frames of at most tcpMaxFrame bytes.
type tcpSend struct {
	h       tcpHeader
	payload []byte
	to      int // world rank
	done    chan error
}

var tcpSendPool = sync.Pool{New: func() any { return &tcpSend{done: make(chan error, 1)} }}

var errTCPSilent = errors.New("peer silent past the timeout")

func (p *tcpPeer) readLoop() {
	defer p.w.io.Done()
	defer close(p.rdone)
	var hb [tcpHeaderSize]byte
	var cur *tcpRecv // point-to-point receive being filled
	var msg *tcpMsg  // or unexpected message being filled
	var curHdr tcpHeader
	var off int64
	for {
		p.conn.SetReadDeadline(time.Now().Add(p.w.timeout))
		if _, err := io.ReadFull(p.conn, hb[:]); err != nil {
			p.readFailed(err)
			return
		}
		h, err := tcpParseHeader(hb[:])
		if err != nil {
			p.protocolError(err)
			return
		}
		switch h.typ {
		case tcpPing:
		case tcpClosing:
			p.closingOnce.Do(func() { close(p.closing) })
		case tcpBye:
			p.bye(h)
			return
		case tcpColl:
			if cur != nil || msg != nil {
				p.protocolError(fmt.Errorf("%w: collective frame inside a point-to-point message", errTCPFrame))
				return
			}
			if !p.readColl(h) {
				return
			}
		case tcpP2P:
			if cur == nil && msg == nil {
				curHdr, off = h, 0
				cur, msg = p.startMsg(h)
			} else if h.comm != curHdr.comm || h.tag != curHdr.tag || h.dtype != curHdr.dtype || h.count != curHdr.count {
				p.protocolError(fmt.Errorf("%w: frame of another message inside a point-to-point message", errTCPFrame))
				return
			}
			total := h.count * int64(tcpDTypeSize(h.dtype))
			if off+int64(h.len) > total {
				p.protocolError(fmt.Errorf("%w: point-to-point message longer than announced", errTCPFrame))
				return
			}
			var dst []byte
			if cur != nil {
				dst = cur.buf[off : off+int64(h.len)]
			} else {
				if !p.holdMsg(msg, h) {
					return
				}
				n := len(msg.data)
				msg.data = append(msg.data, make([]byte, h.len)...)
				dst = msg.data[n:]
			}
			if _, err := io.ReadFull(p.conn, dst); err != nil {
				p.readFailed(err)
				return
			}
			off += int64(h.len)
			if off == total {
				p.finishMsg(curHdr, cur, msg)
				cur, msg = nil, nil
			}
		}
	}
}

func tcpDTypeSize(d uint8) int { return backend.DType(d).Size() }

func tcpDTypeName(d uint8) string { return backend.DType(d).String() }

// bye fails the world as a peer's bye frame says: blaming the rank it
// names, or the peer itself.
func (p *tcpPeer) bye(h tcpHeader) {
	blame := p.rank
	if h.tag >= 0 && h.tag < int64(p.w.size) && int(h.tag) != p.w.rank {
		blame = int(h.tag)
	}
	var err error
	if h.op == tcpByeClosed {
		err = fmt.Errorf("peer closed its communicator: %w", ErrClosed)
	} else {
		err = errors.New("peer failed")
	}
	if blame != p.rank {
		err = fmt.Errorf("%w (reported by rank %d)", err, p.rank)
	}
	if h.op == tcpByeClosed {
		// The peer finished its part and closed (or learnt that another
		// did): the end of the job, which this rank reaches too, or an
		// operation of this rank that still needs the peer fails and
		// says so. Nothing to warn of here.
		p.w.failAs(blame, err, false)
		return
	}
	p.w.fail(blame, err)
}

func (p *tcpPeer) readFailed(err error) {
	var ne net.Error
	switch {
	case errors.As(err, &ne) && ne.Timeout():
		err = errTCPSilent
	case errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF):
		err = fmt.Errorf("connection closed by peer: %w", err)
	}
	p.w.fail(p.rank, err)
}

func (p *tcpPeer) protocolError(err error) {
	p.w.log.Warn("dist: tcp: dropping connection", "peer", p.rank, "reason", err)
	p.w.fail(p.rank, err)
}

// readColl reads a collective frame into the oldest receive posted on its
// lane or, when none is, holds it for the receive to come (see tcpLane).
func (p *tcpPeer) readColl(h tcpHeader) bool {
	l := p.lane(h.comm)
	cost := tcpEarlyCost(int(h.len))
	var bound *time.Timer
	for {
		if s := l.takeSlot(); s != nil {
			if bound != nil {
				bound.Stop()
			}
			if err := tcpMatch(h, s); err != nil {
				p.w.fail(p.rank, err)
				return false
			}
			p.conn.SetReadDeadline(time.Now().Add(p.w.timeout))
			if _, err := io.ReadFull(p.conn, s.buf); err != nil {
				p.readFailed(err)
				return false
			}
			s.done <- nil
			return true
		}
		if p.fits(cost, 0) {
			break
		}
		if !p.awaitRoom(&bound, func() string { return fmt.Sprintf("%s #%d", tcpOpNames[h.op], h.tag) }) {
			return false
		}
	}
	if bound != nil {
		bound.Stop()
	}
	buf := tcpEarlyBuf(int(h.len))
	p.early.Add(cost)
	p.conn.SetReadDeadline(time.Now().Add(p.w.timeout))
	if _, err := io.ReadFull(p.conn, buf); err != nil {
		p.readFailed(err)
		return false
	}
	// A receive posted while the payload was read takes the frame now.
	e := tcpEarly{h: h, data: buf, cost: cost}
	l.cmu.Lock()
	s := l.popSlot()
	if s == nil {
		l.early = append(l.early, e)
	}
	l.cmu.Unlock()
	if s != nil {
		if err := p.fill(s, e); err != nil {
			p.w.fail(p.rank, err)
			return false
		}
	}
	return true
}

// fits reports whether cost more bytes may be held, own of those held
// being the message they extend: a message alone may exceed earlyMax.
func (p *tcpPeer) fits(cost, own int64) bool {
	held := p.early.Load()
	return held == own || held+cost <= p.earlyMax
}

// awaitRoom waits until a receive is posted or held bytes are taken, for
// at most the world's timeout from its first call with *bound nil. It
// returns false once the world has failed, failing it when the timeout
// passes while what (a collective or message) waits.
func (p *tcpPeer) awaitRoom(bound **time.Timer, what func() string) bool {
	if *bound == nil {
		*bound = time.NewTimer(p.w.timeout)
	}
	select {
	case <-p.room:
		return true
	case <-p.w.dead:
		(*bound).Stop()
		return false
	case <-(*bound).C:
		p.w.fail(p.rank, fmt.Errorf("%s: no receive posted within %v while the peer's earlier messages hold %d bytes: %w",
			what(), p.w.timeout, p.early.Load(), errTCPSilent))
		return false
	}
}

// holdMsg counts the frame h of the unexpected message m against earlyMax,
// waiting for room when other messages hold it; false once the world has
// failed.
func (p *tcpPeer) holdMsg(m *tcpMsg, h tcpHeader) bool {
	cost := int64(h.len)
	if m.cost == 0 {
		cost += tcpEarlyCost(0)
	}
	var bound *time.Timer
	for !p.fits(cost, m.cost) {
		if !p.awaitRoom(&bound, func() string { return fmt.Sprintf("point-to-point message with tag %d", h.tag) }) {
			return false
		}
	}
	if bound != nil {
		bound.Stop()
	}
	p.early.Add(cost)
	m.cost += cost
	return true
}

// releaseMsg gives back what the unexpected message m held.
func (p *tcpPeer) releaseMsg(m *tcpMsg) {
	if m.cost > 0 {
		p.early.Add(-m.cost)
		p.wake()
	}
}

// startMsg picks where a point-to-point message goes: a posted Recv with
// the same tag, or a new unexpected message.
func (p *tcpPeer) startMsg(h tcpHeader) (*tcpRecv, *tcpMsg) {
	l := p.lane(h.comm)
	p.mu.Lock()
	defer p.mu.Unlock()
	if q := l.posted[h.tag]; len(q) > 0 && q[0].dtype == h.dtype && q[0].count == h.count {
		r := q[0]
		tcpPopRecv(l, h.tag)
		return r, nil
	}
	return nil, &tcpMsg{dtype: h.dtype, count: h.count}
}

func tcpPopRecv(l *tcpLane, tag int64) { popFront(l.posted, tag) }

// popFront removes and returns the first element of the non-empty queue
// of key, deleting the queue once empty.
func popFront[T any](queues map[int64][]*T, key int64) *T {
	q := queues[key]
	x := q[0]
	copy(q, q[1:])
	q[len(q)-1] = nil
	if len(q) == 1 {
		delete(queues, key)
	} else {
		queues[key] = q[:len(q)-1]
	}
	return x
}

// finishMsg completes a received message: it wakes the Recv it was read
// into, hands an unexpected message to a Recv posted meanwhile, or queues
// it.
func (p *tcpPeer) finishMsg(h tcpHeader, r *tcpRecv, m *tcpMsg) {
	if r != nil {
		r.done <- nil
		return
	}
	l := p.lane(h.comm)
	p.mu.Lock()
	defer p.mu.Unlock()
	if q := l.posted[h.tag]; len(q) > 0 {
		r := q[0]
		tcpPopRecv(l, h.tag)
		r.done <- tcpDeliver(r, m)
		p.releaseMsg(m)
		return
	}
	l.unexpected[h.tag] = append(l.unexpected[h.tag], m)
}

func tcpDeliver(r *tcpRecv, m *tcpMsg) error {
	if r.dtype != m.dtype || r.count != m.count {
		return fmt.Errorf("message of %d elements of %s, receiving %d of %s",
			m.count, tcpDTypeName(m.dtype), r.count, tcpDTypeName(r.dtype))
	}
	copy(r.buf, m.data)
	return nil
}

func (p *tcpPeer) writeLoop() {
	defer p.w.io.Done()
	defer close(p.wdone)
	var hb [tcpHeaderSize]byte
	var bufs, out net.Buffers
	idle := max(p.w.timeout/4, time.Millisecond)
	ping := time.NewTimer(idle)
	defer ping.Stop()
	write := func(h *tcpHeader, payload []byte) error {
		h.put(hb[:])
		p.conn.SetWriteDeadline(time.Now().Add(p.w.timeout))
		bufs = append(bufs[:0], hb[:])
		if len(payload) > 0 {
			bufs = append(bufs, payload)
		}
		out = bufs
		_, err := out.WriteTo(p.conn)
		return err
	}
	for {
		s := p.pop()
		if s != nil && s.h.typ != tcpClosing {
			// Once the world is dead only a closing notice still goes
			// out, before the bye.
			select {
			case <-p.w.dead:
				s = nil
			default:
			}
		}
		if s == nil {
			select {
			case <-p.notify:
				continue
			case <-ping.C:
				h := tcpHeader{typ: tcpPing}
				if err := write(&h, nil); err != nil {
					p.writeFailed(err)
					return
				}
				ping.Reset(idle)
				continue
			case <-p.w.dead:
				// A closing notice queued before the world died still
				// goes out, ahead of the bye.
				for q := p.pop(); q != nil; q = p.pop() {
					if q.h.typ == tcpClosing {
						h := q.h
						p.conn.SetWriteDeadline(time.Now().Add(tcpByeGrace))
						h.put(hb[:])
						p.conn.Write(hb[:])
					}
				}
				select {
				case h := <-p.byeq:
					p.conn.SetWriteDeadline(time.Now().Add(tcpByeGrace))
					h.put(hb[:])
					p.conn.Write(hb[:])
				default:
				}
				return
			}
		}
		h := s.h
		rest := s.payload
		var err error
		for first := true; first || len(rest) > 0; first = false {
			n := min(len(rest), tcpMaxFrame)
			h.len = uint32(n)
			if err = write(&h, rest[:n]); err != nil {
				break
			}
			rest = rest[n:]
		}
		s.done <- err
		if err != nil {
			p.writeFailed(err)
			return
		}
		ping.Reset(idle)
	}
}

// push queues s for the writer.
func (p *tcpPeer) push(s *tcpSend) {
	p.qmu.Lock()
	p.queue = append(p.queue, s)
	p.qmu.Unlock()
	select {
	case p.notify <- struct{}{}:
	default:
	}
}

func (p *tcpPeer) pop() *tcpSend {
	p.qmu.Lock()
	defer p.qmu.Unlock()
	if p.qhead == len(p.queue) {
		return nil
	}
	s := p.queue[p.qhead]
	p.queue[p.qhead] = nil
	p.qhead++
	if p.qhead == len(p.queue) {
		p.queue, p.qhead = p.queue[:0], 0
	}
	return s
}

func (p *tcpPeer) writeFailed(err error) {
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		err = fmt.Errorf("peer stopped reading: %w", errTCPSilent)
	}
	p.w.fail(p.rank, err)
}

// tcpCloseLinger bounds how long a closing rank of a world of three or
// more waits for its peers to close too: long enough for the others to
// finish the collective this rank left first (its last messages are a
// network round or two away), short enough not to delay the report of a
// rank that closes alone.
const tcpCloseLinger = 250 * time.Millisecond

// linger is the first half of closing a healthy world of three or more
// ranks: it tells every peer that this rank is closing and waits, up to
// tcpCloseLinger, until each has said the same. A rank may leave a
// collective — a barrier's last round, say — while others still wait for
// messages of it from ranks that have not yet sent them; were its bye to
// fail their world at once, they would fail a collective that is about to
// succeed. Once every peer is closing, none waits for anything. A rank
// that closes alone (it failed, or stops early) waits the whole linger,
// then its bye fails the others' world as before. Two ranks need no
// linger: what a peer sent before its bye still reaches a Recv.
func (w *tcpWorld) linger() {
	if w.size < 3 {
		return
	}
	select {
	case <-w.dead:
		return
	default:
	}
	for _, p := range w.peers {
		if p != nil {
			p.push(&tcpSend{h: tcpHeader{typ: tcpClosing}, done: make(chan error, 1)})
		}
	}
	t := time.NewTimer(tcpCloseLinger)
	defer t.Stop()
	for _, p := range w.peers {
		if p == nil {
			continue
		}
		select {
		case <-p.closing:
		case <-w.dead:
			return
		case <-t.C:
			return
		}
	}
}
