package dist

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"

	"github.com/flockml/flock/backend"
	"github.com/flockml/flock/tensor"
)

// NewLocal returns k communicators connected inside this process; element r
// is rank r. Each is meant to be driven by its own goroutine, as the K
// workers of a simulated job.
//
// The collectives move data directly between the ranks' tensors, with no
// staging buffers: every rank reduces its own 1/k of the elements straight
// from its peers' memory and then copies the other chunks from their owners,
// so an all-reduce reads and writes each element O(k) times in all and runs
// on k goroutines at once. Every rank ends with bit-identical results.
// Send copies into the receiver's tensor when a matching Recv is waiting and
// otherwise keeps a copy until one arrives, so Send never waits for its Recv.
//
// A collective abandoned by one rank (its context ended, or its Comm was
// closed) breaks the communicator: every pending and later operation of the
// others fails with an *OpError naming the rank that was missing or closed,
// except that a Recv still takes a message sent before the break. A Recv
// whose context ends only fails itself.
func NewLocal(k int) []Comm {
	if k < 1 {
		panic("dist: NewLocal: k < 1")
	}
	w := &localWorld{closed: make([]bool, k)}
	ranks := make([]int, k)
	for i := range ranks {
		ranks[i] = i
	}
	g := w.newGroup(ranks)
	cs := make([]Comm, k)
	for r := range cs {
		cs[r] = &localComm{g: g, rank: r, world: true}
	}
	return cs
}

var _ Comm = (*localComm)(nil)

// localWorld is the job: which world ranks have closed, and every group
// (the world's and the sub-groups) so that a closing rank breaks them all.
type localWorld struct {
	mu     sync.Mutex
	closed []bool
	groups []*localGroup
}

func (w *localWorld) newGroup(ranks []int) *localGroup {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.newGroupLocked(ranks)
}

func (w *localWorld) newGroupLocked(ranks []int) *localGroup {
	g := &localGroup{
		w:      w,
		ranks:  ranks,
		dead:   make(chan struct{}),
		rounds: make(map[uint64]*localRound),
		boxes:  make(map[localMailKey]*localMailbox),
	}
	g.cond = sync.NewCond(&g.mu)
	w.groups = append(w.groups, g)
	for i, wr := range ranks {
		if w.closed[wr] {
			g.poison(i, errLocalPeerClosed)
		}
	}
	return g
}

var errLocalPeerClosed = fmt.Errorf("peer %w", ErrClosed)

// localGroup is the shared state of the members of one communicator.
type localGroup struct {
	w     *localWorld
	ranks []int // world rank of each member

	mu       sync.Mutex
	cond     *sync.Cond // a round's working count fell to zero
	dead     chan struct{}
	failRank int
	failErr  error
	rounds   map[uint64]*localRound
	boxes    map[localMailKey]*localMailbox
}

// poison breaks the group: every pending and later operation fails naming
// member rank.
func (g *localGroup) poison(rank int, err error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.poisonLocked(rank, err)
}

func (g *localGroup) poisonLocked(rank int, err error) {
	if g.failErr != nil {
		return
	}
	g.failRank, g.failErr = rank, err
	close(g.dead)
}

func (g *localGroup) failure(op string) error {
	return &OpError{Op: op, Rank: g.failRank, Err: g.failErr}
}

// localRound is one collective: the arguments each member brought, and the
// barriers that separate its phases.
type localRound struct {
	slots   []*localSlot
	at      []int // phases each member has reached
	count   [3]int
	done    [3]chan struct{}
	working int // members reading or writing a peer's tensor
	left    int
	group   *localGroup // NewGroup's result
}

type localSlot struct {
	op       string
	dst, src *tensor.Tensor
	red      ReduceOp
	root     int
	ranks    []int
}

// localComm is one rank's handle on a group.
type localComm struct {
	g      *localGroup
	rank   int
	world  bool
	seq    uint64
	closed atomic.Bool
}

func (c *localComm) Rank() int { return c.rank }
func (c *localComm) Size() int { return len(c.g.ranks) }

// Close breaks every group this rank belongs to (for a Comm from NewLocal)
// or the one group of a Comm from NewGroup. Later calls do nothing.
func (c *localComm) Close() error {
	if c.closed.Swap(true) {
		return nil
	}
	if !c.world {
		c.g.poison(c.rank, errLocalPeerClosed)
		return nil
	}
	w := c.g.w
	wr := c.g.ranks[c.rank]
	w.mu.Lock()
	defer w.mu.Unlock()
	w.closed[wr] = true
	for _, g := range w.groups {
		if i := slices.Index(g.ranks, wr); i >= 0 {
			g.poison(i, errLocalPeerClosed)
		}
	}
	return nil
}

func (c *localComm) closedErr(op string) error {
	return &OpError{Op: op, Rank: -1, Err: ErrClosed}
}

// fail is the error of an operation that found the group broken; g.mu is
// held.
func (c *localComm) fail(op string) error {
	if c.closed.Load() {
		return c.closedErr(op)
	}
	return c.g.failure(op)
}

// collective runs body as round c.seq once every member has brought its
// slot and the slots agree.
func (c *localComm) collective(ctx context.Context, s *localSlot, body func(r *localRound) error) error {
	if c.closed.Load() {
		return c.closedErr(s.op)
	}
	ctx, cancel := WithDefaultTimeout(ctx, DefaultTimeout)
	defer cancel()
	g := c.g
	seq := c.seq
	c.seq++
	g.mu.Lock()
	if g.failErr != nil {
		g.mu.Unlock()
		return c.fail(s.op)
	}
	r := g.rounds[seq]
	if r == nil {
		n := len(g.ranks)
		r = &localRound{slots: make([]*localSlot, n), at: make([]int, n)}
		for i := range r.done {
			r.done[i] = make(chan struct{})
		}
		g.rounds[seq] = r
	}
	r.slots[c.rank] = s
	g.mu.Unlock()
	defer func() {
		g.mu.Lock()
		r.left++
		if r.left == len(g.ranks) {
			delete(g.rounds, seq)
		}
		g.mu.Unlock()
	}()
	if err := c.sync(ctx, r, 0, s.op); err != nil {
		return err
	}
	if err := localValidate(r.slots); err != nil {
		return err
	}
	return body(r)
}

// sync marks this rank as having reached phase p of r and waits for every
// member to reach it. On failure it returns only once no member is still
// touching this rank's tensors.
func (c *localComm) sync(ctx context.Context, r *localRound, p int, op string) error {
	g := c.g
	n := len(g.ranks)
	g.mu.Lock()
	r.count[p]++
	r.at[c.rank] = p + 1
	if r.count[p] == n {
		close(r.done[p])
	}
	g.mu.Unlock()
	select {
	case <-r.done[p]:
		return nil
	case <-g.dead:
	case <-ctx.Done():
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	if r.count[p] == n {
		return nil
	}
	if g.failErr == nil {
		missing := slices.IndexFunc(r.at, func(a int) bool { return a <= p })
		g.poisonLocked(missing, fmt.Errorf("did not join the %s in time: %w", op, ctx.Err()))
	}
	for r.working > 0 {
		g.cond.Wait()
	}
	return c.fail(op)
}

// work runs fn, which may touch peers' tensors, unless the group is broken.
func (c *localComm) work(r *localRound, op string, fn func()) error {
	g := c.g
	g.mu.Lock()
	if g.failErr != nil {
		for r.working > 0 {
			g.cond.Wait()
		}
		err := c.fail(op)
		g.mu.Unlock()
		return err
	}
	r.working++
	g.mu.Unlock()
	defer func() {
		g.mu.Lock()
		r.working--
		if r.working == 0 {
			g.cond.Broadcast()
		}
		g.mu.Unlock()
	}()
	fn()
	return nil
}

// localValidate checks that every member called the same collective with
// matching arguments; all members reach the same verdict.
func localValidate(slots []*localSlot) error {
	s0 := slots[0]
	for i, s := range slots {
		if s.op != s0.op {
			return &OpError{Op: s.op, Rank: i, Err: fmt.Errorf("rank 0 called %s", s0.op)}
		}
	}
	op := s0.op
	for i, s := range slots {
		if s.red != s0.red || s.root != s0.root {
			return &OpError{Op: op, Rank: i, Err: fmt.Errorf("arguments (%v, root %d) differ from rank 0's (%v, root %d)", s.red, s.root, s0.red, s0.root)}
		}
		if !slices.Equal(s.ranks, s0.ranks) {
			return &OpError{Op: op, Rank: i, Err: fmt.Errorf("ranks %v differ from rank 0's %v", s.ranks, s0.ranks)}
		}
		for _, pair := range [][2]*tensor.Tensor{{s.dst, s0.dst}, {s.src, s0.src}} {
			a, b := pair[0], pair[1]
			if a == nil {
				continue
			}
			if a.DType() != b.DType() || a.NumElements() != b.NumElements() {
				return &OpError{Op: op, Rank: i, Err: fmt.Errorf("%d %v elements, rank 0 has %d %v", a.NumElements(), a.DType(), b.NumElements(), b.DType())}
			}
		}
	}
	if s0.dst == nil {
		return nil
	}
	if s0.red < Sum || s0.red > Min {
		return &OpError{Op: op, Rank: -1, Err: fmt.Errorf("unknown %v", s0.red)}
	}
	switch dt := s0.dst.DType(); dt {
	case tensor.Float32, tensor.Float64:
	case tensor.Int32, tensor.Int64:
		if s0.red == Avg {
			return &OpError{Op: op, Rank: -1, Err: fmt.Errorf("avg of %v: %w", dt, errors.ErrUnsupported)}
		}
	default:
		return &OpError{Op: op, Rank: -1, Err: fmt.Errorf("dtype %v: %w", dt, errors.ErrUnsupported)}
	}
	if s0.src != nil && s0.src.DType() != s0.dst.DType() {
		return &OpError{Op: op, Rank: -1, Err: fmt.Errorf("dst is %v, src is %v", s0.dst.DType(), s0.src.DType())}
	}
	k := len(slots)
	switch op {
	case "reduce-scatter":
		if s0.src.NumElements() != k*s0.dst.NumElements() {
			return &OpError{Op: op, Rank: -1, Err: fmt.Errorf("src has %d elements, want %d·%d", s0.src.NumElements(), k, s0.dst.NumElements())}
		}
	case "all-gather":
		if s0.dst.NumElements() != k*s0.src.NumElements() {
			return &OpError{Op: op, Rank: -1, Err: fmt.Errorf("dst has %d elements, want %d·%d", s0.dst.NumElements(), k, s0.src.NumElements())}
		}
	}
	return nil
}

// AllReduce reduces chunk r = [r·n/k, (r+1)·n/k) of every rank's t into
// rank r's t, then copies each chunk from its owner to the other ranks.
func (c *localComm) AllReduce(ctx context.Context, t *tensor.Tensor, op ReduceOp) error {
	checkLocalTensor("AllReduce", t)
	const name = "all-reduce"
	return c.collective(ctx, &localSlot{op: name, dst: t, red: op}, func(r *localRound) error {
		k, n, dt := len(r.slots), t.NumElements(), t.DType()
		sz := dt.Size()
		chunk := func(b []byte, j int) []byte { return b[j*n/k*sz : (j+1)*n/k*sz] }
		own := localBytes(t)
		err := c.work(r, name, func() {
			srcs := make([][]byte, 0, k-1)
			for j, s := range r.slots {
				if j != c.rank {
					srcs = append(srcs, chunk(localBytes(s.dst), c.rank))
				}
			}
			localReduce(dt, op, chunk(own, c.rank), srcs, k)
		})
		if err != nil {
			return err
		}
		if err := c.sync(ctx, r, 1, name); err != nil {
			return err
		}
		err = c.work(r, name, func() {
			for j, s := range r.slots {
				if j != c.rank {
					copy(chunk(own, j), chunk(localBytes(s.dst), j))
				}
			}
		})
		if err != nil {
			return err
		}
		return c.sync(ctx, r, 2, name)
	})
}

// ReduceScatter reduces chunk r of every rank's src into rank r's dst. dst
// may be chunk r of src itself; it must not overlap src otherwise.
func (c *localComm) ReduceScatter(ctx context.Context, dst, src *tensor.Tensor, op ReduceOp) error {
	checkLocalTensor("ReduceScatter", dst)
	checkLocalTensor("ReduceScatter", src)
	const name = "reduce-scatter"
	return c.collective(ctx, &localSlot{op: name, dst: dst, src: src, red: op}, func(r *localRound) error {
		k := len(r.slots)
		nb := dst.NumElements() * dst.DType().Size()
		own := localBytes(dst)
		err := c.work(r, name, func() {
			srcs := make([][]byte, 0, k-1)
			for j, s := range r.slots {
				b := localBytes(s.src)[c.rank*nb : (c.rank+1)*nb]
				if j == c.rank {
					localCopy(own, b)
				} else {
					srcs = append(srcs, b)
				}
			}
			localReduce(dst.DType(), op, own, srcs, k)
		})
		if err != nil {
			return err
		}
		return c.sync(ctx, r, 1, name)
	})
}

// AllGather copies every rank's src into its place in dst. Rank r's src may
// be chunk r of its dst; it must not overlap dst otherwise.
func (c *localComm) AllGather(ctx context.Context, dst, src *tensor.Tensor) error {
	checkLocalTensor("AllGather", dst)
	checkLocalTensor("AllGather", src)
	const name = "all-gather"
	return c.collective(ctx, &localSlot{op: name, dst: dst, src: src}, func(r *localRound) error {
		nb := src.NumElements() * src.DType().Size()
		own := localBytes(dst)
		err := c.work(r, name, func() {
			for j, s := range r.slots {
				localCopy(own[j*nb:(j+1)*nb], localBytes(s.src))
			}
		})
		if err != nil {
			return err
		}
		return c.sync(ctx, r, 1, name)
	})
}

// Broadcast copies root's t into every other rank's t.
func (c *localComm) Broadcast(ctx context.Context, t *tensor.Tensor, root int) error {
	checkLocalTensor("Broadcast", t)
	c.checkRank("Broadcast", root)
	const name = "broadcast"
	return c.collective(ctx, &localSlot{op: name, dst: t, root: root}, func(r *localRound) error {
		if c.rank != root {
			err := c.work(r, name, func() { copy(localBytes(t), localBytes(r.slots[root].dst)) })
			if err != nil {
				return err
			}
		}
		return c.sync(ctx, r, 1, name)
	})
}

// Barrier returns once every rank has entered it.
func (c *localComm) Barrier(ctx context.Context) error {
	return c.collective(ctx, &localSlot{op: "barrier"}, func(*localRound) error { return nil })
}

// NewGroup gives the members of ranks a communicator over them. Closing it
// breaks only that group; closing a Comm from NewLocal breaks every group
// that rank belongs to.
func (c *localComm) NewGroup(ctx context.Context, ranks []int) (Comm, error) {
	const name = "new-group"
	ranks = slices.Clone(ranks)
	var sub Comm
	err := c.collective(ctx, &localSlot{op: name, ranks: ranks}, func(r *localRound) error {
		for i, x := range ranks {
			if x < 0 || x >= c.Size() || (i > 0 && x <= ranks[i-1]) {
				return &OpError{Op: name, Rank: -1, Err: fmt.Errorf("ranks %v are not sorted distinct ranks of [0, %d)", ranks, c.Size())}
			}
		}
		me := slices.Index(ranks, c.rank)
		if me < 0 {
			return nil
		}
		w := c.g.w
		w.mu.Lock()
		if r.group == nil {
			world := make([]int, len(ranks))
			for i, x := range ranks {
				world[i] = c.g.ranks[x]
			}
			r.group = w.newGroupLocked(world)
		}
		sub = &localComm{g: r.group, rank: me}
		w.mu.Unlock()
		return nil
	})
	if err != nil {
		return nil, err
	}
	return sub, nil
}

type localMailKey struct{ from, to, tag int }

// localMailbox holds, for one (from, to, tag), the sent messages no Recv has
// taken yet and the Recvs no message has reached yet, each in order.
type localMailbox struct {
	msgs  []localMsg
	recvs []*localRecv
}

type localMsg struct {
	dt   tensor.DType
	n    int
	data []byte
}

type localRecv struct {
	t       *tensor.Tensor
	claimed bool
	done    chan struct{}
	err     error
}

func (g *localGroup) box(k localMailKey) *localMailbox {
	b := g.boxes[k]
	if b == nil {
		b = &localMailbox{}
		g.boxes[k] = b
	}
	return b
}

// localDeliver fills a claimed Recv from a message.
func localDeliver(w *localRecv, from int, dt tensor.DType, n int, data []byte) {
	if w.t.DType() != dt || w.t.NumElements() != n {
		w.err = &OpError{Op: "recv", Rank: from, Err: fmt.Errorf("message of %d %v, want %d %v", n, dt, w.t.NumElements(), w.t.DType())}
	} else {
		copy(localBytes(w.t), data)
	}
	close(w.done)
}

// Send hands t to a waiting Recv or, when none waits, queues a copy.
func (c *localComm) Send(ctx context.Context, t *tensor.Tensor, to, tag int) error {
	checkLocalTensor("Send", t)
	c.checkRank("Send", to)
	if c.closed.Load() {
		return c.closedErr("send")
	}
	g := c.g
	key := localMailKey{c.rank, to, tag}
	data := localBytes(t)
	claim := func() (*localRecv, error) {
		if g.failErr != nil {
			return nil, c.fail("send")
		}
		b := g.box(key)
		if len(b.recvs) == 0 {
			return nil, nil
		}
		w := b.recvs[0]
		b.recvs = b.recvs[1:]
		w.claimed = true
		return w, nil
	}
	g.mu.Lock()
	w, err := claim()
	g.mu.Unlock()
	if err != nil {
		return err
	}
	if w != nil {
		localDeliver(w, c.rank, t.DType(), t.NumElements(), data)
		return nil
	}
	msg := localMsg{dt: t.DType(), n: t.NumElements(), data: slices.Clone(data)}
	g.mu.Lock()
	w, err = claim()
	if err == nil && w == nil {
		b := g.box(key)
		b.msgs = append(b.msgs, msg)
	}
	g.mu.Unlock()
	if w != nil {
		localDeliver(w, c.rank, msg.dt, msg.n, msg.data)
	}
	return err
}

// Recv takes the oldest message from rank from with tag, waiting for one.
func (c *localComm) Recv(ctx context.Context, t *tensor.Tensor, from, tag int) error {
	checkLocalTensor("Recv", t)
	c.checkRank("Recv", from)
	if c.closed.Load() {
		return c.closedErr("recv")
	}
	ctx, cancel := WithDefaultTimeout(ctx, DefaultTimeout)
	defer cancel()
	g := c.g
	g.mu.Lock()
	// A message sent before the group broke is still taken.
	b := g.box(localMailKey{from, c.rank, tag})
	w := &localRecv{t: t, done: make(chan struct{})}
	if len(b.msgs) > 0 {
		m := b.msgs[0]
		b.msgs[0] = localMsg{}
		b.msgs = b.msgs[1:]
		g.mu.Unlock()
		localDeliver(w, from, m.dt, m.n, m.data)
		return w.err
	}
	if g.failErr != nil {
		err := c.fail("recv")
		g.mu.Unlock()
		return err
	}
	b.recvs = append(b.recvs, w)
	g.mu.Unlock()
	select {
	case <-w.done:
		return w.err
	case <-g.dead:
	case <-ctx.Done():
	}
	g.mu.Lock()
	if w.claimed {
		g.mu.Unlock()
		<-w.done
		return w.err
	}
	b.recvs = slices.DeleteFunc(b.recvs, func(x *localRecv) bool { return x == w })
	defer g.mu.Unlock()
	if g.failErr != nil {
		return c.fail("recv")
	}
	return &OpError{Op: "recv", Rank: from, Err: ctx.Err()}
}

func (c *localComm) checkRank(op string, r int) {
	if r < 0 || r >= c.Size() {
		panic(fmt.Sprintf("dist: %s: rank %d out of range [0, %d)", op, r, c.Size()))
	}
}

// checkLocalTensor panics unless t is a contiguous host tensor.
func checkLocalTensor(op string, t *tensor.Tensor) {
	if t == nil {
		panic("dist: " + op + ": nil tensor")
	}
	if !t.IsContiguous() {
		panic("dist: " + op + ": tensor is not contiguous")
	}
	if _, ok := t.Raw().Buf.(backend.HostBuffer); !ok {
		panic("dist: " + op + ": tensor is not in host memory")
	}
}

// localBytes returns the memory of a contiguous host tensor.
func localBytes(t *tensor.Tensor) []byte {
	v := t.Raw()
	sz := v.DType.Size()
	off := v.Offset * sz
	return v.Buf.(backend.HostBuffer).Bytes()[off : off+v.NumElements()*sz]
}

// localCopy copies src to dst unless they are the same memory.
func localCopy(dst, src []byte) {
	if len(dst) > 0 && len(src) > 0 && &dst[0] == &src[0] {
		return
	}
	copy(dst, src)
}

// localReduce sets dst ← dst ⊕ srcs[0] ⊕ srcs[1] ⊕ … (left to right), and
// for Avg divides the sum by k, with the shared-memory path's kernels so
// that every backend's results agree bit for bit.
func localReduce(dt tensor.DType, op ReduceOp, dst []byte, srcs [][]byte, k int) {
	switch dt {
	case tensor.Float32, tensor.Float64, tensor.Int32, tensor.Int64:
	default:
		panic("dist: reduce: unsupported dtype " + dt.String())
	}
	if op != Sum && op != Avg && op != Max && op != Min {
		panic(fmt.Sprintf("dist: reduce: unknown %v", op))
	}
	if len(srcs) == 0 {
		return // k = 1: the average of one rank is itself
	}
	ins := make([][]byte, 0, 1+len(srcs))
	ins = append(append(ins, dst), srcs...)
	reduceMany(uint8(dt), op, dst, nil, ins, make([][]byte, len(ins)), k)
}
