package dist

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/fnv"
	"sync"
	"sync/atomic"
	"time"
	"unsafe"

	"github.com/flockml/flock/backend"
	"github.com/flockml/flock/tensor"
)

// Algorithm parameters of the TCP backend.
const (
	// tcpSmallBytes is the largest all-reduce done by recursive doubling:
	// below it latency (log₂ n messages) dominates, above it bandwidth
	// (the ring moves 2(n−1)/n of the data per rank, the minimum).
	tcpSmallBytes = 64 << 10
	// tcpSegment is the pipelining grain of the ring and the chain: small
	// enough that reducing one segment overlaps the transfer of the next,
	// large enough that per-frame overhead stays negligible.
	tcpSegment = 512 << 10
	// tcpDepth is the number of segment receives posted ahead.
	tcpDepth = 4
)

// tcpComm is a communicator over the world's connections: the world itself
// (id 0) or a group made by NewGroup.
type tcpComm struct {
	w     *tcpWorld
	id    uint32
	ranks []int // world rank of each member
	rank  int
	lanes []*tcpLane // by member; this rank's holds messages sent to itself
	self  *tcpPeer   // this rank's own lanes, not a connection

	closed    atomic.Bool
	closeOnce sync.Once
	groups    uint64

	// State of the running collective (one at a time).
	op    tcpOp
	seq   int64
	opc   uint16
	dt    uint8
	count int64
	timer *time.Timer

	slots   [tcpDepth]tcpSlot
	scratch []uint64 // tcpDepth segments
	small   []uint64 // tcpSmallBytes
	free    []*tcpSend
	fifo    []*tcpSend

	shm *shmComm // the world's collectives over shared memory, or nil
}

var _ Comm = (*tcpComm)(nil)

func newTCPComm(w *tcpWorld, id uint32, ranks []int, rank int) *tcpComm {
	c := &tcpComm{w: w, id: id, ranks: ranks, rank: rank, lanes: make([]*tcpLane, len(ranks))}
	c.self = &tcpPeer{w: w, rank: w.rank, lanes: map[uint32]*tcpLane{}}
	for i, r := range ranks {
		if r != w.rank {
			c.lanes[i] = w.peers[r].lane(id)
		} else {
			c.lanes[i] = c.self.lane(id)
		}
	}
	for i := range c.slots {
		c.slots[i].done = make(chan error, 1)
	}
	c.timer = time.NewTimer(time.Hour)
	c.timer.Stop()
	c.op.c = c
	if id == 0 && w.shm != nil {
		c.shm = newSHMComm(w.shm)
	}
	return c
}

func (c *tcpComm) Rank() int { return c.rank }

// Transport names how the communicator's collectives move data: "shm"
// through memory shared by the ranks, or "tcp".
func (c *tcpComm) Transport() string {
	if c.shm != nil {
		return "shm"
	}
	return "tcp"
}

func (c *tcpComm) Size() int { return len(c.ranks) }

// tcpOp carries what one operation waits under: its name for errors, its
// context, and the timeout's channel when the context has no deadline.
type tcpOp struct {
	c    *tcpComm
	name string
	ctx  context.Context
	tc   <-chan time.Time
}

// failure is the OpError for the world's failure, naming the blamed peer by
// its rank in this communicator.
func (o *tcpOp) failure() error {
	<-o.c.w.dead
	w := o.c.w
	err := w.failErr
	rank := -1
	if w.failRank >= 0 {
		rank = o.c.memberOf(w.failRank)
		if rank < 0 {
			err = fmt.Errorf("world rank %d: %w", w.failRank, err)
		}
	}
	return &OpError{Op: o.name, Rank: rank, Err: err}
}

// interrupt fails the world because the operation cannot finish while
// waiting on world rank peer: the byte streams would be out of step.
func (o *tcpOp) interrupt(peer int, err error) error {
	o.c.w.abort(peer, err)
	return o.failure()
}

func (o *tcpOp) cancelled(peer int) error {
	return o.interrupt(peer, fmt.Errorf("waiting for rank %d: %w", peer, o.ctx.Err()))
}

func (o *tcpOp) timedOut(peer int) error {
	return o.interrupt(peer, fmt.Errorf("waiting for rank %d: %w after %v", peer, errTCPSilent, o.c.w.timeout))
}

// wait blocks until ch reports, waiting on world rank peer.
func (o *tcpOp) wait(ch chan error, peer int) error {
	select {
	case err := <-ch:
		if err != nil {
			return o.failure()
		}
		return nil
	case <-o.c.w.dead:
		// The world ended, perhaps because the peer finished its part
		// and closed: what this rank waits for may have completed all
		// the same (the writer wrote the send before the peer's bye was
		// read; the reader delivered the message before it). Once the
		// peer's writer and reader have stopped (within tcpByeGrace),
		// ch holds the answer.
		if peer >= 0 && peer < len(o.c.w.peers) && o.c.w.peers[peer] != nil {
			p := o.c.w.peers[peer]
			<-p.wdone
			<-p.rdone
		}
		select {
		case err := <-ch:
			if err == nil {
				return nil
			}
		default:
		}
		return o.failure()
	case <-o.ctx.Done():
		return o.cancelled(peer)
	case <-o.tc:
		return o.timedOut(peer)
	}
}

func (o *tcpOp) enqueue(p *tcpPeer, s *tcpSend) error {
	select {
	case <-o.c.w.dead:
		return o.failure()
	default:
	}
	p.push(s)
	return nil
}

func (c *tcpComm) memberOf(world int) int {
	for i, r := range c.ranks {
		if r == world {
			return i
		}
	}
	return -1
}

// begin starts a collective; it returns false (and err) when the
// communicator can no longer run one.
func (c *tcpComm) begin(ctx context.Context, name string, opc uint16, dt uint8, count int64) error {
	c.op.name, c.op.ctx, c.op.tc = name, ctx, nil
	if c.closed.Load() {
		return &OpError{Op: name, Rank: -1, Err: ErrClosed}
	}
	select {
	case <-c.w.dead:
		return c.op.failure()
	default:
	}
	if _, ok := ctx.Deadline(); !ok {
		c.timer.Reset(c.w.timeout)
		c.op.tc = c.timer.C
	}
	c.seq++
	c.opc, c.dt, c.count = opc, dt, count
	return nil
}

func (c *tcpComm) end() {
	if c.op.tc != nil {
		c.timer.Stop()
	}
	c.op.ctx, c.op.tc = nil, nil
}

func (c *tcpComm) sendColl(to int, payload []byte) error {
	var s *tcpSend
	if n := len(c.free); n > 0 {
		s, c.free = c.free[n-1], c.free[:n-1]
	} else {
		s = &tcpSend{done: make(chan error, 1)}
	}
	s.h = tcpHeader{typ: tcpColl, dtype: c.dt, op: c.opc, comm: c.id, tag: c.seq, count: c.count}
	s.payload = payload
	s.to = c.ranks[to]
	if err := c.op.enqueue(c.w.peers[s.to], s); err != nil {
		return err
	}
	c.fifo = append(c.fifo, s)
	return nil
}

func (c *tcpComm) waitSend(s *tcpSend) error {
	if err := c.op.wait(s.done, s.to); err != nil {
		return err
	}
	s.payload = nil
	c.free = append(c.free, s)
	return nil
}

// drain waits until every queued send has been written.
func (c *tcpComm) drain() error {
	for i, s := range c.fifo {
		if err := c.waitSend(s); err != nil {
			return err
		}
		c.fifo[i] = nil
	}
	c.fifo = c.fifo[:0]
	return nil
}

func (c *tcpComm) post(from int, s *tcpSlot, buf []byte) {
	s.buf, s.op, s.dtype, s.seq, s.count = buf, c.opc, c.dt, c.seq, c.count
	if err := c.lanes[from].post(s); err != nil {
		c.w.fail(c.ranks[from], err)
	}
}

func (c *tcpComm) recv(from int, s *tcpSlot) error { return c.op.wait(s.done, c.ranks[from]) }

func (c *tcpComm) scratchBytes() []byte {
	if c.scratch == nil {
		c.scratch = make([]uint64, tcpDepth*tcpSegment/8)
	}
	return unsafe.Slice((*byte)(unsafe.Pointer(unsafe.SliceData(c.scratch))), 8*len(c.scratch))
}

func (c *tcpComm) smallBytes() []byte {
	if c.small == nil {
		c.small = make([]uint64, tcpSmallBytes/8)
	}
	return unsafe.Slice((*byte)(unsafe.Pointer(unsafe.SliceData(c.small))), 8*len(c.small))
}

// tcpTensor returns t's bytes, dtype and element count. Tensors must be
// contiguous and in host memory.
func tcpTensor(op string, t *tensor.Tensor) ([]byte, uint8, int64) {
	if t == nil {
		panic("dist: " + op + ": nil tensor")
	}
	if !t.IsContiguous() {
		panic("dist: " + op + ": tensor is not contiguous")
	}
	dt := t.DType()
	n := t.NumElements()
	if n == 0 {
		return nil, uint8(dt), 0
	}
	hb, ok := t.Raw().Buf.(backend.HostBuffer)
	if !ok {
		panic("dist: " + op + ": tensor is not in host memory")
	}
	off := t.Offset() * dt.Size()
	return hb.Bytes()[off : off+n*dt.Size()], uint8(dt), int64(n)
}

func tcpCheck(dt uint8, op ReduceOp) error {
	d := backend.DType(dt)
	if !tcpDTypeOK(d) {
		return fmt.Errorf("dtype %s not supported", d)
	}
	if op < Sum || op > Min {
		return fmt.Errorf("unknown reduction %v", op)
	}
	if op == Avg && !d.IsFloat() {
		return fmt.Errorf("avg of %s tensors", d)
	}
	return nil
}

// AllReduce: x ← op over ranks of x.
func (c *tcpComm) AllReduce(ctx context.Context, t *tensor.Tensor, op ReduceOp) error {
	data, dt, count := tcpTensor("AllReduce", t)
	if err := tcpCheck(dt, op); err != nil {
		return &OpError{Op: "all-reduce", Rank: -1, Err: err}
	}
	if err := c.begin(ctx, "all-reduce", tcpOpAllReduce, dt, count); err != nil {
		return err
	}
	defer c.end()
	n := len(c.ranks)
	if n == 1 {
		return nil
	}
	if c.shm != nil {
		return c.shmAllReduce(data, op)
	}
	if len(data) <= tcpSmallBytes {
		return c.recursiveDoubling(data, op)
	}
	esz := backend.DType(dt).Size()
	g := tcpRing{n: n, r: c.rank, total: int(count), esz: esz, seg: tcpSegment / esz}
	lo, hi := g.chunk(c.rank)
	if err := c.ringReduceScatter(&g, data, data[lo*esz:], true, op); err != nil {
		return err
	}
	if op == Avg {
		tcpScale(dt, data[lo*esz:hi*esz], n)
	}
	return c.ringAllGather(&g, data)
}

// recursiveDoubling all-reduces data in ⌈log₂ n⌉ (+2 when n is not a
// power of two) exchanges. With p the largest power of two ≤ n and
// e = n − p, ranks 2i and 2i+1 (i < e) first fold into 2i+1; the p
// remaining ranks exchange with the partner differing in bit k at step k;
// the folded ranks then get the result back. Both partners compute a⊕b
// and b⊕a, equal for commutative ⊕, so every rank ends bit-identical.
func (c *tcpComm) recursiveDoubling(data []byte, op ReduceOp) error {
	n, r := len(c.ranks), c.rank
	p := 1
	for p*2 <= n {
		p *= 2
	}
	extra := n - p
	tmp := c.smallBytes()[:len(data)]
	slot := &c.slots[0]
	sub := -1
	switch {
	case r < 2*extra && r%2 == 0:
		if err := c.sendColl(r+1, data); err != nil {
			return err
		}
		if err := c.drain(); err != nil {
			return err
		}
	case r < 2*extra:
		c.post(r-1, slot, tmp)
		if err := c.recv(r-1, slot); err != nil {
			return err
		}
		tcpReduce(c.dt, op, data, data, tmp)
		sub = r / 2
	default:
		sub = r - extra
	}
	if sub >= 0 {
		for mask := 1; mask < p; mask <<= 1 {
			q := sub ^ mask
			partner := q + extra
			if q < extra {
				partner = 2*q + 1
			}
			c.post(partner, slot, tmp)
			if err := c.sendColl(partner, data); err != nil {
				return err
			}
			if err := c.drain(); err != nil {
				return err
			}
			if err := c.recv(partner, slot); err != nil {
				return err
			}
			tcpReduce(c.dt, op, data, data, tmp)
		}
		if op == Avg {
			tcpScale(c.dt, data, n)
		}
	}
	if r < 2*extra {
		if r%2 == 1 {
			if err := c.sendColl(r-1, data); err != nil {
				return err
			}
			return c.drain()
		}
		c.post(r+1, slot, data)
		return c.recv(r+1, slot)
	}
	return nil
}

// tcpRing splits total elements into n chunks (the first total mod n one
// element longer) and each chunk into segments of seg elements.
type tcpRing struct {
	n, r, total, esz, seg int
}

func (g *tcpRing) chunk(c int) (lo, hi int) {
	c = ((c % g.n) + g.n) % g.n
	b, rem := g.total/g.n, g.total%g.n
	lo = c*b + min(c, rem)
	hi = lo + b
	if c < rem {
		hi++
	}
	return lo, hi
}

// tcpCursor walks the segments received in a ring phase: at step s the
// chunk r − s + shift.
type tcpCursor struct{ step, off int }

func (g *tcpRing) at(cur *tcpCursor, shift int) (lo, hi int, ok bool) {
	for cur.step < g.n-1 {
		clo, chi := g.chunk(g.r - cur.step + shift)
		if lo = clo + cur.off; lo < chi {
			return lo, min(lo+g.seg, chi), true
		}
		cur.step++
		cur.off = 0
	}
	return 0, 0, false
}

func (cur *tcpCursor) advance(lo, hi int) { cur.off += hi - lo }

// ringReduceScatter is the reduce-scatter half of the ring: at step s
// (0 ≤ s < n−1) rank r sends chunk r−s−1 to r+1 and receives chunk r−s−2
// from r−1, adds its own contribution and passes it on at step s+1; after
// n−1 steps chunk r holds the reduction of all ranks and lands in out
// (the chunk's elements, starting at out[0]). In place, partial sums
// accumulate in src; otherwise in the receive buffers, leaving src intact.
func (c *tcpComm) ringReduceScatter(g *tcpRing, src, out []byte, inPlace bool, op ReduceOp) error {
	right, left := (g.r+1)%g.n, (g.r-1+g.n)%g.n
	esz := g.esz
	lo0, hi0 := g.chunk(g.r - 1)
	for lo := lo0; lo < hi0; lo += g.seg {
		if err := c.sendColl(right, src[lo*esz:min(lo+g.seg, hi0)*esz]); err != nil {
			return err
		}
	}
	scratch := c.scratchBytes()
	segBytes := g.seg * esz
	var post, cons tcpCursor
	for i := range tcpDepth {
		lo, hi, ok := g.at(&post, -2)
		if !ok {
			break
		}
		c.post(left, &c.slots[i], scratch[i*segBytes:][:(hi-lo)*esz])
		post.advance(lo, hi)
	}
	outLo, _ := g.chunk(g.r)
	for i := 0; ; i++ {
		lo, hi, ok := g.at(&cons, -2)
		if !ok {
			break
		}
		sl := &c.slots[i%tcpDepth]
		if err := c.recv(left, sl); err != nil {
			return err
		}
		a := src[lo*esz : hi*esz]
		switch {
		case cons.step == g.n-2:
			tcpReduce(c.dt, op, out[(lo-outLo)*esz:(hi-outLo)*esz], a, sl.buf)
		case inPlace:
			tcpReduce(c.dt, op, a, a, sl.buf)
			if err := c.sendColl(right, a); err != nil {
				return err
			}
		default:
			tcpReduce(c.dt, op, sl.buf, a, sl.buf)
			if err := c.sendColl(right, sl.buf); err != nil {
				return err
			}
			sl.send = c.fifo[len(c.fifo)-1]
		}
		cons.advance(lo, hi)
		if lo, hi, ok := g.at(&post, -2); ok {
			if sl.send != nil {
				if err := c.drainTo(sl.send); err != nil {
					return err
				}
				sl.send = nil
			}
			c.post(left, sl, scratch[(i%tcpDepth)*segBytes:][:(hi-lo)*esz])
			post.advance(lo, hi)
		}
	}
	for i := range c.slots {
		c.slots[i].send = nil
	}
	return c.drain()
}

// drainTo waits for the queued sends up to and including s.
func (c *tcpComm) drainTo(s *tcpSend) error {
	for len(c.fifo) > 0 {
		f := c.fifo[0]
		if err := c.waitSend(f); err != nil {
			return err
		}
		copy(c.fifo, c.fifo[1:])
		c.fifo[len(c.fifo)-1] = nil
		c.fifo = c.fifo[:len(c.fifo)-1]
		if f == s {
			break
		}
	}
	return nil
}

// ringAllGather is the all-gather half of the ring: rank r starts with
// chunk r complete, and at step s sends chunk r−s to r+1 and receives chunk
// r−s−1 from r−1 straight into place.
func (c *tcpComm) ringAllGather(g *tcpRing, data []byte) error {
	right, left := (g.r+1)%g.n, (g.r-1+g.n)%g.n
	esz := g.esz
	lo0, hi0 := g.chunk(g.r)
	for lo := lo0; lo < hi0; lo += g.seg {
		if err := c.sendColl(right, data[lo*esz:min(lo+g.seg, hi0)*esz]); err != nil {
			return err
		}
	}
	var post, cons tcpCursor
	for i := range tcpDepth {
		lo, hi, ok := g.at(&post, -1)
		if !ok {
			break
		}
		c.post(left, &c.slots[i], data[lo*esz:hi*esz])
		post.advance(lo, hi)
	}
	for i := 0; ; i++ {
		lo, hi, ok := g.at(&cons, -1)
		if !ok {
			break
		}
		sl := &c.slots[i%tcpDepth]
		if err := c.recv(left, sl); err != nil {
			return err
		}
		if cons.step < g.n-2 {
			if err := c.sendColl(right, data[lo*esz:hi*esz]); err != nil {
				return err
			}
		}
		cons.advance(lo, hi)
		if lo, hi, ok := g.at(&post, -1); ok {
			c.post(left, sl, data[lo*esz:hi*esz])
			post.advance(lo, hi)
		}
	}
	return c.drain()
}

// ReduceScatter: dst on rank r ← chunk r of (op over ranks of src).
func (c *tcpComm) ReduceScatter(ctx context.Context, dst, src *tensor.Tensor, op ReduceOp) error {
	out, dt, m := tcpTensor("ReduceScatter", dst)
	in, sdt, count := tcpTensor("ReduceScatter", src)
	n := len(c.ranks)
	if err := tcpCheck(dt, op); err != nil {
		return &OpError{Op: "reduce-scatter", Rank: -1, Err: err}
	}
	if dt != sdt || count != int64(n)*m {
		return &OpError{Op: "reduce-scatter", Rank: -1, Err: fmt.Errorf("src has %d elements of %s, dst %d of %s, world of %d",
			count, tcpDTypeName(sdt), m, tcpDTypeName(dt), n)}
	}
	if err := c.begin(ctx, "reduce-scatter", tcpOpReduceScatter, dt, count); err != nil {
		return err
	}
	defer c.end()
	if n == 1 {
		copy(out, in)
		return nil
	}
	if c.shm != nil {
		return c.shmReduceScatter(out, in, op)
	}
	esz := backend.DType(dt).Size()
	g := tcpRing{n: n, r: c.rank, total: int(count), esz: esz, seg: tcpSegment / esz}
	if err := c.ringReduceScatter(&g, in, out, false, op); err != nil {
		return err
	}
	if op == Avg {
		tcpScale(dt, out, n)
	}
	return nil
}

// AllGather: dst ← concatenation over ranks of src.
func (c *tcpComm) AllGather(ctx context.Context, dst, src *tensor.Tensor) error {
	out, dt, count := tcpTensor("AllGather", dst)
	in, sdt, m := tcpTensor("AllGather", src)
	n := len(c.ranks)
	if !tcpDTypeOK(backend.DType(dt)) {
		return &OpError{Op: "all-gather", Rank: -1, Err: fmt.Errorf("dtype %s not supported", tcpDTypeName(dt))}
	}
	if dt != sdt || count != int64(n)*m {
		return &OpError{Op: "all-gather", Rank: -1, Err: fmt.Errorf("src has %d elements of %s, dst %d of %s, world of %d",
			m, tcpDTypeName(sdt), count, tcpDTypeName(dt), n)}
	}
	if err := c.begin(ctx, "all-gather", tcpOpAllGather, dt, count); err != nil {
		return err
	}
	defer c.end()
	copy(out[len(in)*c.rank:], in)
	if n == 1 {
		return nil
	}
	if c.shm != nil {
		return c.shmAllGather(out, in)
	}
	esz := backend.DType(dt).Size()
	g := tcpRing{n: n, r: c.rank, total: int(count), esz: esz, seg: tcpSegment / esz}
	return c.ringAllGather(&g, out)
}

// Broadcast pipelines t's segments down the chain root, root+1, …,
// root−1: each rank forwards segment j while it receives segment j+1.
func (c *tcpComm) Broadcast(ctx context.Context, t *tensor.Tensor, root int) error {
	data, dt, count := tcpTensor("Broadcast", t)
	n := len(c.ranks)
	if root < 0 || root >= n {
		return &OpError{Op: "broadcast", Rank: -1, Err: fmt.Errorf("root %d out of range [0, %d)", root, n)}
	}
	if !tcpDTypeOK(backend.DType(dt)) {
		return &OpError{Op: "broadcast", Rank: -1, Err: fmt.Errorf("dtype %s not supported", tcpDTypeName(dt))}
	}
	if err := c.begin(ctx, "broadcast", tcpOpBroadcast, dt, count); err != nil {
		return err
	}
	defer c.end()
	if n == 1 {
		return nil
	}
	if c.shm != nil {
		return c.shmBroadcast(data, root)
	}
	v := (c.rank - root + n) % n
	next, prev := (c.rank+1)%n, (c.rank-1+n)%n
	nseg := max(1, (len(data)+tcpSegment-1)/tcpSegment)
	seg := func(j int) []byte { return data[min(j*tcpSegment, len(data)):min((j+1)*tcpSegment, len(data))] }
	// The last rank of the chain acknowledges to the root, so that a root
	// whose peers disagree on the size fails too.
	last := (root - 1 + n) % n
	if v == 0 {
		for j := range nseg {
			if err := c.sendColl(next, seg(j)); err != nil {
				return err
			}
		}
		if err := c.drain(); err != nil {
			return err
		}
		c.post(last, &c.slots[0], nil)
		return c.recv(last, &c.slots[0])
	}
	for j := range min(nseg, tcpDepth) {
		c.post(prev, &c.slots[j], seg(j))
	}
	for j := range nseg {
		sl := &c.slots[j%tcpDepth]
		if err := c.recv(prev, sl); err != nil {
			return err
		}
		if v < n-1 {
			if err := c.sendColl(next, seg(j)); err != nil {
				return err
			}
		}
		if j+tcpDepth < nseg {
			c.post(prev, sl, seg(j+tcpDepth))
		}
	}
	if v == n-1 {
		if err := c.sendColl(root, nil); err != nil {
			return err
		}
	}
	return c.drain()
}

// Barrier is the dissemination barrier (Hensgen, Finkel & Manber 1988): in
// round k rank r signals r+2ᵏ and waits for r−2ᵏ; after ⌈log₂ n⌉ rounds
// every rank has heard, transitively, from all.
func (c *tcpComm) Barrier(ctx context.Context) error {
	if err := c.begin(ctx, "barrier", tcpOpBarrier, 0, 0); err != nil {
		return err
	}
	defer c.end()
	n := len(c.ranks)
	if c.shm != nil && n > 1 {
		return c.shmBarrier()
	}
	slot := &c.slots[0]
	for k := 1; k < n; k <<= 1 {
		to, from := (c.rank+k)%n, (c.rank-k+n)%n
		c.post(from, slot, nil)
		if err := c.sendColl(to, nil); err != nil {
			return err
		}
		if err := c.drain(); err != nil {
			return err
		}
		if err := c.recv(from, slot); err != nil {
			return err
		}
	}
	return nil
}

var tcpTimerPool = sync.Pool{New: func() any {
	t := time.NewTimer(time.Hour)
	t.Stop()
	return t
}}

var tcpRecvPool = sync.Pool{New: func() any { return &tcpRecv{done: make(chan error, 1)} }}

// p2p returns the state a point-to-point operation waits under and a
// function releasing it.
func (c *tcpComm) p2p(ctx context.Context, name string, peer int) (tcpOp, func(), error) {
	o := tcpOp{c: c, name: name, ctx: ctx}
	if peer < 0 || peer >= len(c.ranks) {
		return o, nil, &OpError{Op: name, Rank: -1, Err: fmt.Errorf("peer %d: not a rank of %d", peer, len(c.ranks))}
	}
	if c.closed.Load() {
		return o, nil, &OpError{Op: name, Rank: -1, Err: ErrClosed}
	}
	select {
	case <-c.w.dead:
		return o, nil, o.failure()
	default:
	}
	if _, ok := ctx.Deadline(); ok {
		return o, func() {}, nil
	}
	t := tcpTimerPool.Get().(*time.Timer)
	t.Reset(c.w.timeout)
	o.tc = t.C
	return o, func() { t.Stop(); tcpTimerPool.Put(t) }, nil
}

// Send writes t to rank to; it returns once the message is on the wire.
// A message that arrives before its Recv is buffered by the receiver.
func (c *tcpComm) Send(ctx context.Context, t *tensor.Tensor, to, tag int) error {
	data, dt, count := tcpTensor("Send", t)
	o, done, err := c.p2p(ctx, "send", to)
	if err != nil {
		return err
	}
	defer done()
	if !tcpDTypeOK(backend.DType(dt)) {
		return &OpError{Op: "send", Rank: to, Err: fmt.Errorf("dtype %s not supported", tcpDTypeName(dt))}
	}
	if to == c.rank {
		c.sendSelf(data, dt, count, int64(tag))
		return nil
	}
	s := tcpSendPool.Get().(*tcpSend)
	s.h = tcpHeader{typ: tcpP2P, dtype: dt, comm: c.id, tag: int64(tag), count: count}
	s.payload = data
	p := c.w.peers[c.ranks[to]]
	if err := o.enqueue(p, s); err != nil {
		return err
	}
	if err := o.wait(s.done, p.rank); err != nil {
		return err
	}
	s.payload = nil
	tcpSendPool.Put(s)
	return nil
}

// sendSelf delivers a message from this rank to itself.
func (c *tcpComm) sendSelf(data []byte, dt uint8, count, tag int64) {
	l := c.lanes[c.rank]
	c.self.mu.Lock()
	defer c.self.mu.Unlock()
	m := &tcpMsg{dtype: dt, count: count, data: append([]byte(nil), data...)}
	if q := l.posted[tag]; len(q) > 0 {
		r := q[0]
		tcpPopRecv(l, tag)
		r.done <- tcpDeliver(r, m)
		return
	}
	l.unexpected[tag] = append(l.unexpected[tag], m)
}

// Recv fills t with the next message from rank from carrying tag. A
// message that arrived before the world failed (a peer that sent and then
// closed) is still taken.
func (c *tcpComm) Recv(ctx context.Context, t *tensor.Tensor, from, tag int) error {
	data, dt, count := tcpTensor("Recv", t)
	o, done, err := c.p2p(ctx, "recv", from)
	if err != nil {
		if from >= 0 && from < len(c.ranks) && !c.closed.Load() {
			// The world failed; what the peer sent before it did is
			// still read, up to the peer's bye.
			<-c.readerGone(from)
			if took, qerr := c.takeQueued(from, tag, data, dt, count, nil); took {
				return qerr
			}
		}
		return err
	}
	defer done()
	r := tcpRecvPool.Get().(*tcpRecv)
	r.buf, r.dtype, r.count = data, dt, count
	if took, err := c.takeQueued(from, tag, data, dt, count, r); took {
		r.buf = nil
		tcpRecvPool.Put(r)
		return err
	}
	delivered := func(err error) error {
		r.buf = nil
		tcpRecvPool.Put(r)
		if err != nil {
			return &OpError{Op: "recv", Rank: from, Err: err}
		}
		return nil
	}
	select {
	case err := <-r.done:
		return delivered(err)
	case <-c.w.dead:
		// The reader goes on to the peer's bye: a message sent before
		// it is delivered.
		select {
		case err := <-r.done:
			return delivered(err)
		case <-c.readerGone(from):
		}
		select {
		case err := <-r.done:
			return delivered(err)
		default:
		}
		c.unpost(from, tag, r)
		return o.failure()
	case <-o.ctx.Done():
	case <-o.tc:
	}
	timedOut := o.ctx.Err() == nil
	if c.unpost(from, tag, r) {
		if timedOut {
			return &OpError{Op: "recv", Rank: from, Err: fmt.Errorf("no message within %v", c.w.timeout)}
		}
		return &OpError{Op: "recv", Rank: from, Err: o.ctx.Err()}
	}
	// The reader is filling t: stop it before returning.
	p := c.peerOf(from)
	if timedOut {
		return o.timedOut(p.rank)
	}
	return o.cancelled(p.rank)
}

// unpost withdraws the receive r posted for a message from rank from
// with tag, and reports whether it was still waiting (the reader had not
// begun to fill it).
func (c *tcpComm) unpost(from, tag int, r *tcpRecv) bool {
	p, l, key := c.peerOf(from), c.lanes[from], int64(tag)
	p.mu.Lock()
	defer p.mu.Unlock()
	q := l.posted[key]
	for i, x := range q {
		if x == r {
			l.posted[key] = append(q[:i], q[i+1:]...)
			if len(l.posted[key]) == 0 {
				delete(l.posted, key)
			}
			return true
		}
	}
	return false
}

// readerGone returns a channel closed once the reader of rank from's
// connection has stopped, after which every message the peer sent before
// its bye has been delivered or queued. Once the world has failed, the
// connections close within tcpByeGrace. Messages to this rank itself have
// no reader: the channel is closed.
func (c *tcpComm) readerGone(from int) <-chan struct{} {
	if from == c.rank {
		return tcpClosedChan
	}
	return c.peerOf(from).rdone
}

var tcpClosedChan = func() chan struct{} { ch := make(chan struct{}); close(ch); return ch }()

// takeQueued fills data with the oldest message from rank from carrying
// tag that arrived before its Recv, if there is one, and reports whether
// it did and the delivery's error. Otherwise it posts post, when not nil,
// for the reader to fill, under the same lock so that no message slips
// in between.
func (c *tcpComm) takeQueued(from, tag int, data []byte, dt uint8, count int64, post *tcpRecv) (bool, error) {
	p, l, key := c.peerOf(from), c.lanes[from], int64(tag)
	p.mu.Lock()
	if len(l.unexpected[key]) == 0 {
		if post != nil {
			l.posted[key] = append(l.posted[key], post)
		}
		p.mu.Unlock()
		return false, nil
	}
	m := popFront(l.unexpected, key)
	p.mu.Unlock()
	err := tcpDeliver(&tcpRecv{buf: data, dtype: dt, count: count}, m)
	p.releaseMsg(m)
	if err != nil {
		return true, &OpError{Op: "recv", Rank: from, Err: err}
	}
	return true, nil
}

// peerOf returns the peer behind member rank r (this rank's own for r).
func (c *tcpComm) peerOf(r int) *tcpPeer {
	if r == c.rank {
		return c.self
	}
	return c.w.peers[c.ranks[r]]
}

// NewGroup returns the communicator of ranks (sorted, distinct) for its
// members. Groups share the world's connections; their frames carry an id
// derived from the parent's id, the number of groups made before and the
// members, the same on every rank.
func (c *tcpComm) NewGroup(ctx context.Context, ranks []int) (Comm, error) {
	for i, r := range ranks {
		if r < 0 || r >= len(c.ranks) || i > 0 && r <= ranks[i-1] {
			return nil, &OpError{Op: "new-group", Rank: -1, Err: fmt.Errorf("ranks %v: not sorted distinct ranks of %d", ranks, len(c.ranks))}
		}
	}
	if len(ranks) == 0 {
		return nil, &OpError{Op: "new-group", Rank: -1, Err: errors.New("no ranks")}
	}
	if c.closed.Load() {
		return nil, &OpError{Op: "new-group", Rank: -1, Err: ErrClosed}
	}
	c.groups++
	h := fnv.New32a()
	var b [8]byte
	binary.LittleEndian.PutUint32(b[:], c.id)
	h.Write(b[:4])
	binary.LittleEndian.PutUint64(b[:], c.groups)
	h.Write(b[:])
	world := make([]int, len(ranks))
	me := -1
	for i, r := range ranks {
		world[i] = c.ranks[r]
		if r == c.rank {
			me = i
		}
		binary.LittleEndian.PutUint64(b[:], uint64(r))
		h.Write(b[:])
	}
	if me < 0 {
		return nil, nil
	}
	id := h.Sum32()
	if id == 0 {
		id = 1
	}
	return newTCPComm(c.w, id, world, me), nil
}

// Close ends the communicator. Closing the world tells every peer (whose
// pending and later operations then fail naming this rank) and closes the
// connections; closing a group only stops its own use.
func (c *tcpComm) Close() error {
	if c.id != 0 {
		c.closed.Store(true)
		return nil
	}
	c.closeOnce.Do(func() {
		c.closed.Store(true)
		c.w.linger()
		c.w.fail(-1, ErrClosed)
		c.w.io.Wait()
		if c.w.shm != nil {
			c.w.shm.close()
		}
	})
	return nil
}

func tcpAs[T any](b []byte) []T {
	if len(b) == 0 {
		return nil
	}
	var z T
	return unsafe.Slice((*T)(unsafe.Pointer(unsafe.SliceData(b))), len(b)/int(unsafe.Sizeof(z)))
}

// tcpReduce sets out[i] = a[i] ⊕ b[i]; out may alias a or b.
func tcpReduce(dt uint8, op ReduceOp, out, a, b []byte) {
	switch backend.DType(dt) {
	case backend.Float32:
		tcpReduceT(op, tcpAs[float32](out), tcpAs[float32](a), tcpAs[float32](b))
	case backend.Float64:
		tcpReduceT(op, tcpAs[float64](out), tcpAs[float64](a), tcpAs[float64](b))
	case backend.Int32:
		tcpReduceT(op, tcpAs[int32](out), tcpAs[int32](a), tcpAs[int32](b))
	case backend.Int64:
		tcpReduceT(op, tcpAs[int64](out), tcpAs[int64](a), tcpAs[int64](b))
	}
}

func tcpReduceT[T float32 | float64 | int32 | int64](op ReduceOp, out, a, b []T) {
	reduce2(op, out, a, b)
}

// tcpScale divides the float elements of b by n.
func tcpScale(dt uint8, b []byte, n int) {
	switch backend.DType(dt) {
	case backend.Float32:
		scaleBy(tcpAs[float32](b), n)
	case backend.Float64:
		scaleBy(tcpAs[float64](b), n)
	}
}
