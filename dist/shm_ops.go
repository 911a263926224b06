package dist

import (
	"fmt"
	"time"
	"unsafe"

	"github.com/flockml/flock/backend"
)

// Collectives of the world communicator over shared memory.
//
// All-reduce and reduce-scatter are direct: the data is cut into n chunks,
// chunk j is reduced by rank j alone, reading every peer's contribution
// straight from the peer's buffer, and for all-reduce every rank then
// copies each finished chunk from its owner's buffer. A round moves
// shmWindow bytes through each rank's buffer in three steps:
//
//	A  rank r copies its contribution to every chunk j ≠ r into slot j of its buffer
//	B  rank r folds its own chunk r with slot r of every peer's buffer into
//	   the tensor and into slot r of its buffer
//	C  rank r copies slot j of rank j's buffer into chunk j of the tensor
//
// each after waiting until every peer has finished the step before (A of
// the next round may come between B and C, as it uses the other buffer).
// Every rank touches each element of its tensor once on the way in and
// once on the way out, the peers' data only through the buffers, which
// stay in the caches, and the ranks synchronise twice a round whatever
// their number: what matters when there are more ranks than cores, where
// a chain of steps handed from rank to rank (the ring) waits on the
// scheduler at every link. Each chunk is reduced on one rank only, so
// every rank ends with the same bits.

// shmComm is the world communicator's shared-memory state.
type shmComm struct {
	s       *shmWorld
	step    uint32    // steps this rank has completed
	round   uint64    // rounds done, whose parity picks the buffer
	release [2]uint32 // per buffer: the step after which no peer reads it
	ins     [][]byte  // reduction inputs
	blk     [][]byte
	spin    time.Duration // how long the next wait spins before sleeping
}

func newSHMComm(s *shmWorld) *shmComm {
	return &shmComm{s: s, ins: make([][]byte, s.size), blk: make([][]byte, s.size), spin: shmSpin}
}

// shmReached reports whether a step counter at v has reached target,
// modulo 2³².
func shmReached(v, target uint32) bool { return int32(v-target) >= 0 }

// shmKind packs what peers must agree on besides the sequence number and
// the element count.
func shmKind(opc uint16, dt uint8, op ReduceOp, root int) uint64 {
	return uint64(opc) | uint64(dt)<<8 | uint64(op&0xff)<<16 | uint64(root+1)<<32
}

// shmEnter starts a collective on shared memory: it holds the regions and
// publishes the operation's descriptor. Unless it fails, the caller runs
// shmLeave when done.
func (c *tcpComm) shmEnter(kind uint64) error {
	s := c.shm.s
	s.mu.RLock()
	if s.closed {
		s.mu.RUnlock()
		return c.op.failure()
	}
	d := &s.ctl[s.rank].desc[uint64(c.seq)%shmDescs]
	d.kind.Store(kind)
	d.count.Store(uint64(c.count))
	d.seq.Store(uint64(c.seq))
	return nil
}

func (c *tcpComm) shmLeave() { c.shm.s.mu.RUnlock() }

// shmAdvance completes a step and wakes the peers sleeping on it.
func (c *tcpComm) shmAdvance() {
	sc := c.shm
	sc.step++
	ctl := sc.s.ctl[sc.s.rank]
	ctl.step.Store(sc.step)
	if ctl.waiters.Load() != 0 {
		shmFutexWake((*uint32)(unsafe.Pointer(&ctl.step)))
	}
}

// shmWait waits until world rank p has completed target steps; when check
// is set it then compares p's descriptor of the running operation with
// this rank's.
func (c *tcpComm) shmWait(p int, target uint32, check bool) error {
	s := c.shm.s
	ctl := s.ctl[p]
	if !shmReached(ctl.step.Load(), target) {
		if err := c.shmSleep(p, ctl, target); err != nil {
			return err
		}
	}
	if check {
		return c.shmCheck(p)
	}
	return nil
}

// shmSleep waits for p's step counter: spinning while the peers have
// lately been quick to arrive (a wait that spun in vain halves the next
// one's spin, one that succeeded doubles it, up to shmSpin), then sleeping.
func (c *tcpComm) shmSleep(p int, ctl *shmCtl, target uint32) error {
	sc := c.shm
	if sc.s.spin && sc.spin > 0 {
		start := time.Now()
		for i := 1; ; i++ {
			if shmReached(ctl.step.Load(), target) {
				sc.spin = min(2*sc.spin, shmSpin)
				return nil
			}
			if i%64 == 0 && time.Since(start) > sc.spin {
				break
			}
		}
	}
	sc.spin = max(sc.spin/2, time.Microsecond)
	word := (*uint32)(unsafe.Pointer(&ctl.step))
	o := &c.op
	for {
		ctl.waiters.Add(1)
		v := ctl.step.Load()
		if !shmReached(v, target) {
			shmFutexWait(word, v, shmPoll)
			v = ctl.step.Load()
		}
		ctl.waiters.Add(^uint32(0))
		if shmReached(v, target) {
			return nil
		}
		select {
		case <-c.w.dead:
			return o.failure()
		case <-o.ctx.Done():
			return o.cancelled(c.ranks[p])
		case <-o.tc:
			return o.timedOut(c.ranks[p])
		default:
		}
	}
}

// shmWaitAll waits for every peer to complete target steps.
func (c *tcpComm) shmWaitAll(target uint32, check bool) error {
	for p := range c.ranks {
		if p == c.rank {
			continue
		}
		if err := c.shmWait(p, target, check); err != nil {
			return err
		}
	}
	return nil
}

// shmCheck fails the world when peer p runs another collective than this
// rank.
func (c *tcpComm) shmCheck(p int) error {
	s := c.shm.s
	slot := uint64(c.seq) % shmDescs
	d, me := &s.ctl[p].desc[slot], &s.ctl[s.rank].desc[slot]
	seq, kind, count := d.seq.Load(), d.kind.Load(), d.count.Load()
	mkind := me.kind.Load()
	name := func(k uint64) string {
		if i := int(k & 0xff); i < len(tcpOpNames) {
			return tcpOpNames[i]
		}
		return fmt.Sprintf("collective %d", k&0xff)
	}
	var err error
	switch {
	case seq != uint64(c.seq) || kind&0xff != mkind&0xff:
		err = fmt.Errorf("collectives out of order: peer is in %s #%d, this rank in %s #%d", name(kind), seq, name(mkind), c.seq)
	case kind>>8&0xff != mkind>>8&0xff || count != uint64(c.count):
		err = fmt.Errorf("%s: peer has %d elements of %s, this rank %d of %s",
			name(mkind), count, tcpDTypeName(uint8(kind>>8)), c.count, tcpDTypeName(c.dt))
	case kind>>16&0xff != mkind>>16&0xff:
		err = fmt.Errorf("%s: peer reduces by %v, this rank by %v", name(mkind), ReduceOp(kind>>16&0xff), ReduceOp(mkind>>16&0xff))
	case kind>>32 != mkind>>32:
		err = fmt.Errorf("%s: peer's root is %d, this rank's %d", name(mkind), int64(kind>>32)-1, int64(mkind>>32)-1)
	}
	if err != nil {
		return c.op.interrupt(c.ranks[p], err)
	}
	return nil
}

// shmBuffer returns the buffer this round uses and waits until no peer
// reads it any more.
func (c *tcpComm) shmBuffer() (int, error) {
	sc := c.shm
	b := int(sc.round & 1)
	return b, c.shmWaitAll(sc.release[b], false)
}

// shmEndRound records that buffer b is free once every peer has completed
// the steps done so far.
func (c *tcpComm) shmEndRound(b int) {
	sc := c.shm
	sc.release[b] = sc.step
	sc.round++
}

// shmChunkElems is the length of one chunk's slot in a round, in elements
// of esz bytes, when the buffer holds slots for n chunks.
func (c *tcpComm) shmChunkElems(n, esz int) int {
	return max(16, (c.shm.s.win/n/esz)&^15)
}

// shmCopyCached copies src into dst in pieces below the size from which
// the runtime's memmove bypasses the caches (1 MiB on amd64): the peers
// read dst next, from the cache they share.
func shmCopyCached(dst, src []byte) {
	const piece = 512 << 10
	for len(src) > piece {
		copy(dst[:piece], src[:piece])
		dst, src = dst[piece:], src[piece:]
	}
	copy(dst, src)
}

func shmRounds(length, per int) int {
	return max(1, (length+per-1)/per)
}

// shmAllReduce all-reduces data (count elements of c.dt). A rank fills
// its buffer for round k+1 before it waits for its peers to finish step B
// of round k, so that a rank ahead of the others works instead of leaving
// its core idle.
func (c *tcpComm) shmAllReduce(data []byte, op ReduceOp) error {
	if err := c.shmEnter(shmKind(tcpOpAllReduce, c.dt, op, 0)); err != nil {
		return err
	}
	defer c.shmLeave()
	sc, s := c.shm, c.shm.s
	n, r := len(c.ranks), c.rank
	esz := backend.DType(c.dt).Size()
	g := tcpRing{n: n, r: r, total: int(c.count), esz: esz}
	e := c.shmChunkElems(n, esz)
	// sub is round k's part of chunk j, in elements of data.
	sub := func(j, k int) (int, int) {
		lo, hi := g.chunk(j)
		return min(lo+k*e, hi), min(lo+(k+1)*e, hi)
	}
	rounds := shmRounds((g.total+n-1)/n, e)
	var stepA [2]uint32 // the step completing A of round k, by k's parity
	// fill is step A of round k: this rank's contributions to the other
	// chunks into its buffer.
	fill := func(k int) error {
		b := int((sc.round + uint64(k)) & 1)
		if err := c.shmWaitAll(sc.release[b], false); err != nil {
			return err
		}
		mine := s.buffer(r, b)
		for j := range n {
			if j != r {
				lo, hi := sub(j, k)
				shmCopyCached(mine[j*e*esz:], data[lo*esz:hi*esz])
			}
		}
		c.shmAdvance()
		stepA[k&1] = sc.step
		return nil
	}
	if err := fill(0); err != nil {
		return err
	}
	for k := range rounds {
		b := int((sc.round + uint64(k)) & 1)
		if err := c.shmWaitAll(stepA[k&1], k == 0); err != nil {
			return err
		}
		lo, hi := sub(r, k)
		out := data[lo*esz : hi*esz]
		sc.ins[0] = out
		for j, i := 0, 1; j < n; j++ {
			if j != r {
				sc.ins[i] = s.buffer(j, b)[r*e*esz:][:len(out)]
				i++
			}
		}
		reduceMany(c.dt, op, out, s.buffer(r, b)[r*e*esz:], sc.ins, sc.blk, n)
		clear(sc.ins)
		c.shmAdvance()
		stepB := sc.step
		if k+1 < rounds {
			if err := fill(k + 1); err != nil {
				return err
			}
		}
		if err := c.shmWaitAll(stepB, false); err != nil {
			return err
		}
		for j := range n {
			if j != r {
				lo, hi := sub(j, k)
				copy(data[lo*esz:hi*esz], s.buffer(j, b)[j*e*esz:])
			}
		}
		c.shmAdvance()
		sc.release[b] = sc.step
	}
	sc.round += uint64(rounds)
	return nil
}

// shmReduceScatter leaves chunk r of the reduction of in (n·m elements)
// in out (m elements).
func (c *tcpComm) shmReduceScatter(out, in []byte, op ReduceOp) error {
	if err := c.shmEnter(shmKind(tcpOpReduceScatter, c.dt, op, 0)); err != nil {
		return err
	}
	defer c.shmLeave()
	sc, s := c.shm, c.shm.s
	n, r := len(c.ranks), c.rank
	esz := backend.DType(c.dt).Size()
	m := int(c.count) / n
	e := c.shmChunkElems(n, esz)
	for k := range shmRounds(m, e) {
		b, err := c.shmBuffer()
		if err != nil {
			return err
		}
		mine := s.buffer(r, b)
		lo, hi := min(k*e, m), min((k+1)*e, m)
		for j := range n {
			if j != r {
				shmCopyCached(mine[j*e*esz:], in[(j*m+lo)*esz:(j*m+hi)*esz])
			}
		}
		c.shmAdvance()
		if err := c.shmWaitAll(sc.step, k == 0); err != nil {
			return err
		}
		sc.ins[0] = in[(r*m+lo)*esz : (r*m+hi)*esz]
		for j, i := 0, 1; j < n; j++ {
			if j != r {
				sc.ins[i] = s.buffer(j, b)[r*e*esz:][:(hi-lo)*esz]
				i++
			}
		}
		reduceMany(c.dt, op, out[lo*esz:hi*esz], nil, sc.ins, sc.blk, n)
		clear(sc.ins)
		c.shmAdvance()
		c.shmEndRound(b)
	}
	return nil
}

// shmAllGather gathers every rank's in (m elements) into out, whose part
// r already holds this rank's. As in shmAllReduce, a rank fills its buffer
// for round k+1 before it copies round k's parts from its peers.
func (c *tcpComm) shmAllGather(out, in []byte) error {
	if err := c.shmEnter(shmKind(tcpOpAllGather, c.dt, 0, 0)); err != nil {
		return err
	}
	defer c.shmLeave()
	sc, s := c.shm, c.shm.s
	n, r := len(c.ranks), c.rank
	esz := backend.DType(c.dt).Size()
	m := int(c.count) / n
	e := c.shmChunkElems(1, esz)
	rounds := shmRounds(m, e)
	var stepA [2]uint32
	fill := func(k int) error {
		b := int((sc.round + uint64(k)) & 1)
		if err := c.shmWaitAll(sc.release[b], false); err != nil {
			return err
		}
		lo, hi := min(k*e, m), min((k+1)*e, m)
		shmCopyCached(s.buffer(r, b), in[lo*esz:hi*esz])
		c.shmAdvance()
		stepA[k&1] = sc.step
		return nil
	}
	if err := fill(0); err != nil {
		return err
	}
	for k := range rounds {
		b := int((sc.round + uint64(k)) & 1)
		if err := c.shmWaitAll(stepA[k&1], k == 0); err != nil {
			return err
		}
		if k+1 < rounds {
			if err := fill(k + 1); err != nil {
				return err
			}
		}
		lo, hi := min(k*e, m), min((k+1)*e, m)
		for j := range n {
			if j != r {
				copy(out[(j*m+lo)*esz:(j*m+hi)*esz], s.buffer(j, b))
			}
		}
		c.shmAdvance()
		sc.release[b] = sc.step
	}
	sc.round += uint64(rounds)
	return nil
}

// shmBroadcast copies root's data to every rank through root's buffers.
// The root returns once every rank has checked that it runs the same
// broadcast.
func (c *tcpComm) shmBroadcast(data []byte, root int) error {
	if err := c.shmEnter(shmKind(tcpOpBroadcast, c.dt, 0, root)); err != nil {
		return err
	}
	defer c.shmLeave()
	sc, s := c.shm, c.shm.s
	esz := backend.DType(c.dt).Size()
	total := int(c.count)
	e := c.shmChunkElems(1, esz)
	for k := range shmRounds(total, e) {
		lo, hi := min(k*e, total), min((k+1)*e, total)
		if c.rank == root {
			b, err := c.shmBuffer()
			if err != nil {
				return err
			}
			shmCopyCached(s.buffer(root, b), data[lo*esz:hi*esz])
			c.shmAdvance()
			c.shmAdvance()
			c.shmEndRound(b)
			continue
		}
		b := int(sc.round & 1)
		c.shmAdvance()
		if err := c.shmWait(root, sc.step, k == 0); err != nil {
			return err
		}
		copy(data[lo*esz:hi*esz], s.buffer(root, b))
		c.shmAdvance()
		c.shmEndRound(b)
	}
	if c.rank == root {
		return c.shmWaitAll(sc.step, true)
	}
	return nil
}

// shmBarrier returns once every rank has entered it.
func (c *tcpComm) shmBarrier() error {
	if err := c.shmEnter(shmKind(tcpOpBarrier, 0, 0, 0)); err != nil {
		return err
	}
	defer c.shmLeave()
	c.shmAdvance()
	return c.shmWaitAll(c.shm.step, true)
}
