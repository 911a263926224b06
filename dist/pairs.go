package dist

import (
	"context"
	"errors"
	"fmt"
	"net"
	"slices"
	"strconv"
	"sync"

	"github.com/flockml/flock/tensor"
)

// Pairs returns a communicator of two ranks for each edge of an
// undirected graph that touches this rank, keyed by the other end: rank
// 0 of a pair's Comm is the lower of the two world ranks, rank 1 the
// higher. Every rank of c calls Pairs at once with the same edges (each
// {i, j} with i ≠ j listed once, in any order and either way round).
//
// The pairs fail apart: a peer that dies or hangs fails the pairs it
// belongs to, and the other pairs go on. That is what pairwise gossip
// (Swarm SGD) needs to drop a lost partner and keep training, where a
// world communicator fails as a whole. Over TCP each pair is a world of
// its own — one more authenticated connection, with its own heartbeat
// and timeout, the world's token and timeout. In-process (NewLocal) the
// pairs are groups of c, whose failures are also their own.
//
// Closing a pair's Comm is the caller's business. Over TCP, c itself is
// used only while Pairs runs (to trade the pairs' listen addresses), and
// closing it later does not close the pairs; in-process, closing c
// closes its groups, the pairs with them.
func Pairs(ctx context.Context, c Comm, edges [][2]int) (map[int]Comm, error) {
	n := c.Size()
	norm := make([][2]int, 0, len(edges))
	seen := map[[2]int]bool{}
	for _, e := range edges {
		lo, hi := min(e[0], e[1]), max(e[0], e[1])
		if lo < 0 || hi >= n || lo == hi {
			return nil, fmt.Errorf("dist: pairs: edge %v: not two distinct ranks of [0, %d)", e, n)
		}
		if seen[[2]int{lo, hi}] {
			return nil, fmt.Errorf("dist: pairs: edge %v listed twice", e)
		}
		seen[[2]int{lo, hi}] = true
		norm = append(norm, [2]int{lo, hi})
	}
	slices.SortFunc(norm, func(a, b [2]int) int {
		if a[0] != b[0] {
			return a[0] - b[0]
		}
		return a[1] - b[1]
	})
	switch c := c.(type) {
	case *localComm:
		return localPairs(ctx, c, norm)
	case *tcpComm:
		if c.id != 0 {
			return nil, errors.New("dist: pairs: over a group of a TCP world; call it on the world")
		}
		return tcpPairs(ctx, c, norm)
	}
	if n == 1 {
		return map[int]Comm{}, nil
	}
	return nil, fmt.Errorf("dist: pairs: %T communicators cannot make pairs", c)
}

// localPairs makes each pair a group of c.
func localPairs(ctx context.Context, c *localComm, edges [][2]int) (map[int]Comm, error) {
	out := map[int]Comm{}
	for _, e := range edges {
		g, err := c.NewGroup(ctx, e[:])
		if err != nil {
			closePairs(out)
			return nil, fmt.Errorf("dist: pairs: %w", err)
		}
		if g != nil {
			out[e[0]+e[1]-c.rank] = g
		}
	}
	return out, nil
}

// pairsTag tags the listen addresses traded over the world.
const pairsTag = 0x70616972 // "pair"

// pairsAddrLen is the bytes of a traded address (int32 elements, one byte
// each, zero-padded): room for a bracketed IPv6 address and its port.
const pairsAddrLen = 64

// tcpPairs makes each pair a two-rank TCP world: the higher rank listens,
// sends the lower its address over c, and DialTCP connects them.
func tcpPairs(ctx context.Context, c *tcpComm, edges [][2]int) (map[int]Comm, error) {
	me := c.rank
	ctx, cancel := WithDefaultTimeout(ctx, c.w.timeout)
	defer cancel()
	host := ""
	for _, p := range c.w.peers {
		if p != nil {
			host, _, _ = net.SplitHostPort(p.conn.LocalAddr().String())
			break
		}
	}
	type pair struct {
		peer, rank int // the other end; this rank's rank in the pair
		ln         net.Listener
		addr       string
	}
	var mine []*pair
	defer func() {
		for _, p := range mine {
			if p.ln != nil {
				p.ln.Close()
			}
		}
	}()
	for _, e := range edges {
		switch me {
		case e[1]:
			ln, err := net.Listen("tcp", net.JoinHostPort(host, "0"))
			if err != nil {
				return nil, fmt.Errorf("dist: pairs: listen: %w", err)
			}
			mine = append(mine, &pair{peer: e[0], rank: 1, ln: ln})
		case e[0]:
			mine = append(mine, &pair{peer: e[1], rank: 0})
		}
	}
	// Trade the addresses: the higher rank of each pair sends, the lower
	// receives, all at once so that no order of the edges can deadlock.
	var wg sync.WaitGroup
	errs := make([]error, len(mine))
	for i, p := range mine {
		wg.Go(func() {
			t := tensor.Zeros(tensor.Shape{pairsAddrLen}, tensor.Of(tensor.Int32), tensor.On(DeviceOf(c)))
			defer t.Release()
			if p.rank == 1 {
				a := p.ln.Addr().String()
				if len(a) > pairsAddrLen {
					errs[i] = fmt.Errorf("address %s longer than %d bytes", a, pairsAddrLen)
					return
				}
				v := make([]int32, pairsAddrLen)
				for j := range len(a) {
					v[j] = int32(a[j])
				}
				src := tensor.FromSlice(v, tensor.Shape{pairsAddrLen}, tensor.On(DeviceOf(c)))
				defer src.Release()
				errs[i] = c.Send(ctx, src, p.peer, pairsTag)
				return
			}
			if errs[i] = c.Recv(ctx, t, p.peer, pairsTag); errs[i] != nil {
				return
			}
			var b []byte
			for _, x := range tensor.ToSlice[int32](t) {
				if x == 0 {
					break
				}
				b = append(b, byte(x))
			}
			p.addr = string(b)
		})
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return nil, fmt.Errorf("dist: pairs: trade addresses: %w", err)
	}
	comms := make([]Comm, len(mine))
	for i, p := range mine {
		wg.Go(func() {
			addrs := []string{"-", "-"}
			if p.rank == 0 {
				addrs[1] = p.addr
			} else {
				addrs[1] = p.ln.Addr().String()
			}
			log := c.w.log.With("pair", strconv.Itoa(min(me, p.peer))+"-"+strconv.Itoa(max(me, p.peer)))
			comms[i], errs[i] = DialTCP(ctx, TCPConfig{
				Rank: p.rank, Size: 2, Addrs: addrs, Listener: p.ln,
				Token: c.w.token, Timeout: c.w.timeout, Logger: log, NoSharedMemory: true,
			})
		})
	}
	wg.Wait()
	out := map[int]Comm{}
	for i, p := range mine {
		if comms[i] != nil {
			out[p.peer] = comms[i]
		}
	}
	if err := errors.Join(errs...); err != nil {
		closePairs(out)
		return nil, fmt.Errorf("dist: pairs: connect: %w", err)
	}
	return out, nil
}

func closePairs(m map[int]Comm) {
	for _, c := range m {
		c.Close()
	}
}
