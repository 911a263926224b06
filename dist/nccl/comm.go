package nccl

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"net"
	"strconv"
	"sync"
	"time"

	"github.com/flockml/flock/backend"
	"github.com/flockml/flock/backend/cuda"
	"github.com/flockml/flock/dist"
	"github.com/flockml/flock/tensor"
)

// Config describes one rank's part of an NCCL communicator.
type Config struct {
	Rank, Size int
	// Device is the GPU this rank's tensors live on.
	Device *cuda.Backend
	// Store is the job's rendezvous store, through which rank 0 hands its
	// NCCL unique id to the others.
	Store *dist.Store
	// Key prefixes the store keys this communicator uses (default
	// "flock/nccl"); communicators created on one store need distinct
	// keys.
	Key string
	// Timeout bounds every operation whose context has no deadline (0 =
	// dist.DefaultTimeout); past it the communicator is aborted.
	Timeout time.Duration
}

// Comm is a dist.Comm over NCCL for tensors on one GPU per rank.
// Collectives run on a communication stream of their own: each waits
// (through an event) for the work the compute stream has queued so far,
// and the compute stream's later work waits for it, so the host returns
// once the operation is done while other streams' kernels keep running.
// An operation's wait polls ncclCommGetAsyncError; when it fails or its
// deadline passes the communicator is aborted (ncclCommAbort) and it and
// every later operation return a *dist.OpError naming the operation.
type Comm struct {
	a       *api
	dev     *cuda.Backend
	rank    int
	size    int
	timeout time.Duration

	comm   uintptr
	stream *cuda.Stream
	ready  *cuda.Event // the compute stream's work before an operation
	done   *cuda.Event // the operation's end on the communication stream

	mu     sync.Mutex // one operation at a time
	broken error
	closed bool

	header *tensor.Tensor // [2] int64: tag and byte count of a Send
	one    *tensor.Tensor // [1] int32 for Barrier
}

var (
	_ dist.Comm      = (*Comm)(nil)
	_ dist.Exchanger = (*Comm)(nil)
	_ dist.Placed    = (*Comm)(nil)
)

// New creates this rank's communicator: rank 0 makes the unique id
// (ncclGetUniqueId) and publishes it in the store, every rank reads it and
// calls ncclCommInitRankScalable (or ncclCommInitRank on older NCCL).
func New(ctx context.Context, cfg Config) (*Comm, error) {
	if cfg.Device == nil || cfg.Store == nil {
		return nil, errors.New("nccl: new: Config needs a Device and a Store")
	}
	if cfg.Size < 1 || cfg.Rank < 0 || cfg.Rank >= cfg.Size {
		return nil, fmt.Errorf("nccl: new: rank %d of %d", cfg.Rank, cfg.Size)
	}
	a, err := load()
	if err != nil {
		return nil, fmt.Errorf("nccl: %w", err)
	}
	key := cfg.Key
	if key == "" {
		key = "flock/nccl"
	}
	timeout := cfg.Timeout
	if timeout <= 0 {
		timeout = dist.DefaultTimeout
	}
	ctx, cancel := dist.WithDefaultTimeout(ctx, timeout)
	defer cancel()
	var id uniqueID
	if cfg.Rank == 0 {
		if err := a.check(0, "ncclGetUniqueId", a.ncclGetUniqueId(&id)); err != nil {
			return nil, fmt.Errorf("nccl: new: %w", err)
		}
		if err := cfg.Store.Set(ctx, key+"/id", id[:]); err != nil {
			return nil, fmt.Errorf("nccl: new: publish the unique id: %w", err)
		}
	} else {
		v, err := cfg.Store.Get(ctx, key+"/id")
		if err != nil {
			return nil, fmt.Errorf("nccl: new: rank %d: read the unique id: %w", cfg.Rank, err)
		}
		if len(v) != len(id) {
			return nil, fmt.Errorf("nccl: new: unique id of %d bytes under %s/id", len(v), key)
		}
		copy(id[:], v)
	}
	c := &Comm{a: a, dev: cfg.Device, rank: cfg.Rank, size: cfg.Size, timeout: timeout}
	err = c.dev.Do(func() error { return a.initRank(&c.comm, cfg.Size, cfg.Rank, &id) })
	if err != nil {
		return nil, fmt.Errorf("nccl: new: rank %d of %d: %w", cfg.Rank, cfg.Size, err)
	}
	if err := c.setup(); err != nil {
		c.a.ncclCommDestroy(c.comm)
		return nil, err
	}
	return c, nil
}

// setup creates the stream, events and small buffers of a communicator.
func (c *Comm) setup() error {
	var err error
	if c.stream, err = c.dev.NewStream(); err != nil {
		return err
	}
	if c.ready, err = c.dev.NewEvent(); err != nil {
		return err
	}
	if c.done, err = c.dev.NewEvent(); err != nil {
		return err
	}
	c.header = tensor.Zeros(tensor.Shape{2}, tensor.On(c.dev), tensor.Of(tensor.Int64))
	c.one = tensor.Zeros(tensor.Shape{1}, tensor.On(c.dev), tensor.Of(tensor.Int32))
	return nil
}

// Init joins the job env describes with NCCL on dev: rank 0 serves the
// rendezvous store at MasterAddr:MasterPort (as dist.Init does), every rank
// dials it, and New runs with it. The timeout is opts.Timeout, else
// env.Timeout, else dist.DefaultTimeout, as for dist.Init.
func Init(ctx context.Context, env dist.Env, dev *cuda.Backend, opts dist.InitOptions) (*Comm, error) {
	if err := env.Validate(); err != nil {
		return nil, err
	}
	timeout := opts.Timeout
	if timeout <= 0 {
		timeout = env.Timeout
	}
	if timeout <= 0 {
		timeout = dist.DefaultTimeout
	}
	token := env.Token
	if len(token) == 0 && env.Size == 1 {
		token = []byte("flock-single-rank")
	}
	master := net.JoinHostPort(env.MasterAddr, strconv.Itoa(env.MasterPort))
	scfg := dist.StoreConfig{Token: token, Timeout: timeout, Logger: opts.Logger}
	if env.Rank == 0 {
		addr := master
		if env.Size == 1 {
			addr = "127.0.0.1:0"
		}
		srv, err := dist.ListenStore(addr, scfg)
		if err != nil {
			return nil, fmt.Errorf("nccl: init: serve rendezvous store: %w", err)
		}
		defer srv.Close()
		master = srv.Addr().String()
	}
	store, err := dist.DialStore(ctx, master, scfg)
	if err != nil {
		return nil, fmt.Errorf("nccl: init: rank %d: rendezvous: %w", env.Rank, err)
	}
	defer store.Close()
	c, err := New(ctx, Config{Rank: env.Rank, Size: env.Size, Device: dev, Store: store, Timeout: timeout})
	if err != nil {
		return nil, err
	}
	// Rank 0 keeps the store up until every rank has created its
	// communicator (and so has read the id).
	if _, err := store.Add(ctx, "flock/nccl/joined", 1); err != nil {
		c.Close()
		return nil, err
	}
	if env.Rank == 0 {
		for {
			v, err := store.Add(ctx, "flock/nccl/joined", 0)
			if err != nil {
				c.Close()
				return nil, err
			}
			if int(v) >= env.Size {
				break
			}
			select {
			case <-ctx.Done():
				c.Close()
				return nil, ctx.Err()
			case <-time.After(10 * time.Millisecond):
			}
		}
	}
	return c, nil
}

// Rank implements dist.Comm.
func (c *Comm) Rank() int { return c.rank }

// Size implements dist.Comm.
func (c *Comm) Size() int { return c.size }

// Device implements dist.Placed: the GPU the communicator's tensors live
// on.
func (c *Comm) Device() tensor.Device { return c.dev }

// ncclType is the ncclDataType_t of dt.
func ncclType(dt backend.DType) (int32, bool) {
	switch dt {
	case backend.Int32:
		return 2, true
	case backend.Int64:
		return 4, true
	case backend.Float16:
		return 6, true
	case backend.Float32:
		return 7, true
	case backend.Float64:
		return 8, true
	case backend.BFloat16:
		return 9, true
	case backend.Uint8, backend.Bool:
		return 1, true
	}
	return 0, false
}

// ncclOp is the ncclRedOp_t of op for dtype dt.
func ncclOp(op dist.ReduceOp, dt backend.DType) (int32, error) {
	switch op {
	case dist.Sum:
		return 0, nil
	case dist.Max:
		return 2, nil
	case dist.Min:
		return 3, nil
	case dist.Avg:
		if !dt.IsFloat() {
			return 0, fmt.Errorf("avg of %v (float dtypes only)", dt)
		}
		return 4, nil
	}
	return 0, fmt.Errorf("unknown reduction %v", op)
}

// operand checks a tensor argument: on this communicator's GPU, contiguous,
// of a dtype NCCL moves. Mistakes on their face panic, as dist.Comm says.
func (c *Comm) operand(op, name string, t *tensor.Tensor) (ptr uintptr, count int, dt int32) {
	if t == nil {
		panic(fmt.Sprintf("nccl: %s: nil %s", op, name))
	}
	if t.Device() != backend.Backend(c.dev) {
		panic(fmt.Sprintf("nccl: %s: %s is on %s, not %s", op, name, t.Device().Name(), c.dev.Name()))
	}
	if !t.IsContiguous() {
		panic(fmt.Sprintf("nccl: %s: %s (shape %v) is not contiguous", op, name, t.Shape()))
	}
	d, ok := ncclType(t.DType())
	if !ok {
		panic(fmt.Sprintf("nccl: %s: %s has dtype %v", op, name, t.DType()))
	}
	p, err := c.dev.Pointer(t.Raw())
	if err != nil {
		panic(fmt.Sprintf("nccl: %s: %s: %v", op, name, err))
	}
	return p, t.NumElements(), d
}

// run issues an operation on the communication stream after the compute
// stream's queued work, makes later compute work wait for it, and waits
// for it to finish, for the context to end, or for NCCL to report an
// error. uses are the tensors the operation reads or writes, whose memory
// must not be reused before it is done.
func (c *Comm) run(ctx context.Context, op string, uses []*tensor.Tensor, issue func(stream uintptr) error) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return &dist.OpError{Op: op, Rank: -1, Err: dist.ErrClosed}
	}
	if c.broken != nil {
		return &dist.OpError{Op: op, Rank: -1, Err: c.broken}
	}
	ctx, cancel := dist.WithDefaultTimeout(ctx, c.timeout)
	defer cancel()
	s := c.stream.Handle()
	err := c.dev.Do(func() error {
		if err := c.ready.Record(c.dev.Stream()); err != nil {
			return err
		}
		if err := c.ready.Wait(s); err != nil {
			return err
		}
		if err := issue(s); err != nil {
			return err
		}
		if err := c.done.Record(s); err != nil {
			return err
		}
		return c.done.Wait(c.dev.Stream())
	})
	for _, t := range uses {
		c.dev.RecordStream(t.Raw().Buf, s)
	}
	if err != nil {
		return c.fail(op, err)
	}
	return c.wait(ctx, op)
}

// wait polls the operation's completion and NCCL's asynchronous errors.
func (c *Comm) wait(ctx context.Context, op string) error {
	pause := 5 * time.Microsecond
	for {
		ok, err := c.done.Done()
		if err != nil {
			return c.fail(op, err)
		}
		if ok {
			return nil
		}
		var res int32
		if err := c.a.check(c.comm, "ncclCommGetAsyncError", c.a.ncclCommGetAsyncError(c.comm, &res)); err != nil {
			return c.fail(op, err)
		}
		if res != ncclSuccess && res != ncclInProgress {
			return c.fail(op, c.a.check(c.comm, "asynchronous error", res))
		}
		select {
		case <-ctx.Done():
			return c.fail(op, fmt.Errorf("not done after %v: %w", c.timeout, ctx.Err()))
		case <-time.After(pause):
		}
		pause = min(2*pause, time.Millisecond)
	}
}

// fail aborts the communicator (so that no rank waits on it for ever) and
// records the error every later operation returns. Called with mu held.
func (c *Comm) fail(op string, err error) error {
	if c.broken == nil {
		c.broken = fmt.Errorf("%s failed: %w", op, err)
		comm := c.comm
		c.comm = 0
		_ = c.dev.Do(func() error { return c.a.check(0, "ncclCommAbort", c.a.ncclCommAbort(comm)) })
	}
	return &dist.OpError{Op: op, Rank: -1, Err: err}
}

// AllReduce implements dist.Comm.
func (c *Comm) AllReduce(ctx context.Context, t *tensor.Tensor, op dist.ReduceOp) error {
	p, n, dt := c.operand("all-reduce", "tensor", t)
	rop, err := ncclOp(op, t.DType())
	if err != nil {
		return &dist.OpError{Op: "all-reduce", Rank: -1, Err: err}
	}
	return c.run(ctx, "all-reduce", []*tensor.Tensor{t}, func(s uintptr) error {
		return c.a.check(c.comm, "ncclAllReduce", c.a.ncclAllReduce(p, p, uint64(n), dt, rop, c.comm, s))
	})
}

// ReduceScatter implements dist.Comm.
func (c *Comm) ReduceScatter(ctx context.Context, dst, src *tensor.Tensor, op dist.ReduceOp) error {
	dp, dn, ddt := c.operand("reduce-scatter", "dst", dst)
	sp, sn, sdt := c.operand("reduce-scatter", "src", src)
	if ddt != sdt || sn != dn*c.size {
		return &dist.OpError{Op: "reduce-scatter", Rank: -1, Err: fmt.Errorf("src has %d %v elements, dst %d %v; want %d·%d of one dtype", sn, src.DType(), dn, dst.DType(), c.size, dn)}
	}
	rop, err := ncclOp(op, src.DType())
	if err != nil {
		return &dist.OpError{Op: "reduce-scatter", Rank: -1, Err: err}
	}
	return c.run(ctx, "reduce-scatter", []*tensor.Tensor{dst, src}, func(s uintptr) error {
		return c.a.check(c.comm, "ncclReduceScatter", c.a.ncclReduceScatter(sp, dp, uint64(dn), sdt, rop, c.comm, s))
	})
}

// AllGather implements dist.Comm.
func (c *Comm) AllGather(ctx context.Context, dst, src *tensor.Tensor) error {
	dp, dn, ddt := c.operand("all-gather", "dst", dst)
	sp, sn, sdt := c.operand("all-gather", "src", src)
	if ddt != sdt || dn != sn*c.size {
		return &dist.OpError{Op: "all-gather", Rank: -1, Err: fmt.Errorf("dst has %d %v elements, src %d %v; want %d·%d of one dtype", dn, dst.DType(), sn, src.DType(), c.size, sn)}
	}
	return c.run(ctx, "all-gather", []*tensor.Tensor{dst, src}, func(s uintptr) error {
		return c.a.check(c.comm, "ncclAllGather", c.a.ncclAllGather(sp, dp, uint64(sn), sdt, c.comm, s))
	})
}

// Broadcast implements dist.Comm.
func (c *Comm) Broadcast(ctx context.Context, t *tensor.Tensor, root int) error {
	if root < 0 || root >= c.size {
		panic(fmt.Sprintf("nccl: broadcast: root %d of %d ranks", root, c.size))
	}
	p, n, dt := c.operand("broadcast", "tensor", t)
	return c.run(ctx, "broadcast", []*tensor.Tensor{t}, func(s uintptr) error {
		return c.a.check(c.comm, "ncclBroadcast", c.a.ncclBroadcast(p, p, uint64(n), dt, int32(root), c.comm, s))
	})
}

// Barrier implements dist.Comm with an all-reduce of one element.
func (c *Comm) Barrier(ctx context.Context) error {
	p, _, dt := c.operand("barrier", "flag", c.one)
	return c.run(ctx, "barrier", nil, func(s uintptr) error {
		return c.a.check(c.comm, "ncclAllReduce", c.a.ncclAllReduce(p, p, 1, dt, 0, c.comm, s))
	})
}

// Send implements dist.Comm. NCCL matches sends and receives between two
// ranks in issue order and knows no tags, so each message is preceded by a
// 16-byte header (tag, byte count) that Recv checks: a mismatch is an
// error, and breaks the communicator.
func (c *Comm) Send(ctx context.Context, t *tensor.Tensor, to, tag int) error {
	c.peer("send", to)
	p, n, dt := c.operand("send", "tensor", t)
	var h [16]byte
	binary.LittleEndian.PutUint64(h[:], uint64(int64(tag)))
	binary.LittleEndian.PutUint64(h[8:], uint64(n*t.DType().Size()))
	if err := c.dev.Write(c.header.Raw().Buf, 0, h[:]); err != nil {
		return &dist.OpError{Op: "send", Rank: to, Err: err}
	}
	hp, _, _ := c.operand("send", "header", c.header)
	return c.run(ctx, "send", []*tensor.Tensor{t, c.header}, func(s uintptr) error {
		if err := c.a.check(c.comm, "ncclGroupStart", c.a.ncclGroupStart()); err != nil {
			return err
		}
		err := c.a.check(c.comm, "ncclSend", c.a.ncclSend(hp, 16, 1, int32(to), c.comm, s))
		if err == nil {
			err = c.a.check(c.comm, "ncclSend", c.a.ncclSend(p, uint64(n), dt, int32(to), c.comm, s))
		}
		if gerr := c.a.check(c.comm, "ncclGroupEnd", c.a.ncclGroupEnd()); err == nil {
			err = gerr
		}
		return err
	})
}

// Recv implements dist.Comm.
func (c *Comm) Recv(ctx context.Context, t *tensor.Tensor, from, tag int) error {
	c.peer("recv", from)
	p, n, dt := c.operand("recv", "tensor", t)
	hp, _, _ := c.operand("recv", "header", c.header)
	err := c.run(ctx, "recv", []*tensor.Tensor{c.header}, func(s uintptr) error {
		return c.a.check(c.comm, "ncclRecv", c.a.ncclRecv(hp, 16, 1, int32(from), c.comm, s))
	})
	if err != nil {
		return err
	}
	var h [16]byte
	if err := c.dev.Read(h[:], c.header.Raw().Buf, 0); err != nil {
		return &dist.OpError{Op: "recv", Rank: from, Err: err}
	}
	gotTag, gotBytes := int64(binary.LittleEndian.Uint64(h[:])), int(binary.LittleEndian.Uint64(h[8:]))
	if gotTag != int64(tag) || gotBytes != n*t.DType().Size() {
		c.mu.Lock()
		e := c.fail("recv", fmt.Errorf("message from rank %d has tag %d and %d bytes, want tag %d and %d bytes (sends and receives between two ranks must be issued in the same order)", from, gotTag, gotBytes, tag, n*t.DType().Size()))
		c.mu.Unlock()
		return e
	}
	return c.run(ctx, "recv", []*tensor.Tensor{t}, func(s uintptr) error {
		return c.a.check(c.comm, "ncclRecv", c.a.ncclRecv(p, uint64(n), dt, int32(from), c.comm, s))
	})
}

// Exchange implements dist.Exchanger: the sends and receives run as NCCL
// groups, so that two ranks sending to each other do not wait on one
// another as separate Sends would (each holds the communicator until its
// receive is posted). The headers (tag and byte count, as Send writes)
// travel in a first group and are checked as Recv checks them; the
// payloads in a second.
func (c *Comm) Exchange(ctx context.Context, sends, recvs []dist.Message) error {
	for _, m := range sends {
		c.peer("exchange", m.Peer)
	}
	for _, m := range recvs {
		c.peer("exchange", m.Peer)
	}
	ns, nr := len(sends), len(recvs)
	if ns+nr == 0 {
		return nil
	}
	// One 16-byte header per message: the sends' first, then the
	// receives' slots.
	h := make([]int64, 2*(ns+nr))
	for i, m := range sends {
		h[2*i] = int64(m.Tag)
		h[2*i+1] = int64(m.T.NumElements() * m.T.DType().Size())
	}
	hdr := tensor.FromSlice(h, tensor.Shape{len(h)}, tensor.On(c.dev))
	defer hdr.Release()
	hp, _, _ := c.operand("exchange", "headers", hdr)
	group := func(issue func() error) func(uintptr) error {
		return func(uintptr) error {
			if err := c.a.check(c.comm, "ncclGroupStart", c.a.ncclGroupStart()); err != nil {
				return err
			}
			err := issue()
			if gerr := c.a.check(c.comm, "ncclGroupEnd", c.a.ncclGroupEnd()); err == nil {
				err = gerr
			}
			return err
		}
	}
	err := c.run(ctx, "exchange", []*tensor.Tensor{hdr}, func(s uintptr) error {
		return group(func() error {
			for i, m := range sends {
				if err := c.a.check(c.comm, "ncclSend", c.a.ncclSend(hp+uintptr(16*i), 16, 1, int32(m.Peer), c.comm, s)); err != nil {
					return err
				}
			}
			for i, m := range recvs {
				if err := c.a.check(c.comm, "ncclRecv", c.a.ncclRecv(hp+uintptr(16*(ns+i)), 16, 1, int32(m.Peer), c.comm, s)); err != nil {
					return err
				}
			}
			return nil
		})(s)
	})
	if err != nil {
		return err
	}
	got := hdr.Int64s()
	for i, m := range recvs {
		tag, n := got[2*(ns+i)], got[2*(ns+i)+1]
		if want := int64(m.T.NumElements() * m.T.DType().Size()); tag != int64(m.Tag) || n != want {
			c.mu.Lock()
			e := c.fail("exchange", fmt.Errorf("message from rank %d has tag %d and %d bytes, want tag %d and %d bytes (sends and receives between two ranks must be issued in the same order)", m.Peer, tag, n, m.Tag, want))
			c.mu.Unlock()
			return e
		}
	}
	var uses []*tensor.Tensor
	for _, m := range sends {
		uses = append(uses, m.T)
	}
	for _, m := range recvs {
		uses = append(uses, m.T)
	}
	return c.run(ctx, "exchange", uses, func(s uintptr) error {
		return group(func() error {
			for _, m := range sends {
				p, n, dt := c.operand("exchange", "send", m.T)
				if err := c.a.check(c.comm, "ncclSend", c.a.ncclSend(p, uint64(n), dt, int32(m.Peer), c.comm, s)); err != nil {
					return err
				}
			}
			for _, m := range recvs {
				p, n, dt := c.operand("exchange", "recv", m.T)
				if err := c.a.check(c.comm, "ncclRecv", c.a.ncclRecv(p, uint64(n), dt, int32(m.Peer), c.comm, s)); err != nil {
					return err
				}
			}
			return nil
		})(s)
	})
}

func (c *Comm) peer(op string, r int) {
	if r < 0 || r >= c.size || r == c.rank {
		panic(fmt.Sprintf("nccl: %s: peer %d (this is rank %d of %d)", op, r, c.rank, c.size))
	}
}

// NewGroup implements dist.Comm with ncclCommSplit (NCCL 2.18 or later):
// members get a communicator over ranks, renumbered in that order; others
// take part in the split and get nil.
func (c *Comm) NewGroup(ctx context.Context, ranks []int) (dist.Comm, error) {
	for i, r := range ranks {
		if r < 0 || r >= c.size || (i > 0 && r <= ranks[i-1]) {
			panic(fmt.Sprintf("nccl: new group: ranks %v must be sorted, distinct and in [0, %d)", ranks, c.size))
		}
	}
	if c.a.ncclCommSplit == nil {
		return nil, &dist.OpError{Op: "new group", Rank: -1, Err: fmt.Errorf("%s lacks ncclCommSplit (NCCL 2.18)", c.a.lib.Path)}
	}
	color, key := int32(ncclSplitNone), int32(0)
	for i, r := range ranks {
		if r == c.rank {
			color, key = 0, int32(i)
		}
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed || c.broken != nil {
		return nil, &dist.OpError{Op: "new group", Rank: -1, Err: errors.Join(dist.ErrClosed, c.broken)}
	}
	var nc uintptr
	err := c.dev.Do(func() error {
		return c.a.check(c.comm, "ncclCommSplit", c.a.ncclCommSplit(c.comm, color, key, &nc, nil))
	})
	if err != nil {
		return nil, &dist.OpError{Op: "new group", Rank: -1, Err: err}
	}
	if color == ncclSplitNone {
		return nil, nil
	}
	g := &Comm{a: c.a, dev: c.dev, rank: int(key), size: len(ranks), timeout: c.timeout, comm: nc}
	if err := g.setup(); err != nil {
		c.a.ncclCommDestroy(nc)
		return nil, err
	}
	return g, nil
}

// Close implements dist.Comm: it finalizes and destroys the communicator
// (or, when broken, has already aborted it) and frees its stream, events
// and buffers.
func (c *Comm) Close() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return nil
	}
	c.closed = true
	var err error
	if c.comm != 0 {
		err = c.dev.Do(func() error {
			if c.a.ncclCommFinalize != nil {
				if err := c.a.check(c.comm, "ncclCommFinalize", c.a.ncclCommFinalize(c.comm)); err != nil {
					c.a.ncclCommAbort(c.comm)
					return err
				}
			}
			return c.a.check(0, "ncclCommDestroy", c.a.ncclCommDestroy(c.comm))
		})
		c.comm = 0
	}
	if c.stream != nil {
		if serr := c.stream.Synchronize(); err == nil {
			err = serr
		}
		c.stream.Destroy()
	}
	if c.ready != nil {
		c.ready.Destroy()
	}
	if c.done != nil {
		c.done.Destroy()
	}
	c.header.Release()
	c.one.Release()
	return err
}
