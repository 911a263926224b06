package cpu

import (
	"math/bits"
	"sync"
)

// Size classes: four per power of two above 256 bytes, so a pooled buffer
// wastes at most 25% of its size. Requests above 1<<40 bytes are not pooled.
const (
	minClassBits = 8
	subClasses   = 4
	numClasses   = (40-minClassBits)*subClasses + 1
)

type bufferPool struct {
	mu     sync.Mutex
	free   [numClasses][]*Buffer
	hits   int64
	misses int64
	idle   int64
}

// classOf returns the size class for n bytes and that class's capacity.
func classOf(n int) (class, size int) {
	if n <= 1<<minClassBits {
		return 0, 1 << minClassBits
	}
	e := bits.Len(uint(n-1)) - 1 // 2^e < n ≤ 2^(e+1)
	step := 1 << (e - 2)         // quarter of 2^e
	q := (n - (1 << e) + step - 1) / step
	class = (e-minClassBits)*subClasses + q
	return class, 1<<e + q*step
}

func (p *bufferPool) get(owner *Backend, n int) *Buffer {
	class, size := classOf(n)
	if class >= numClasses {
		return &Buffer{owner: owner, data: make([]byte, n), class: -1}
	}
	p.mu.Lock()
	if l := p.free[class]; len(l) > 0 {
		b := l[len(l)-1]
		l[len(l)-1] = nil
		p.free[class] = l[:len(l)-1]
		p.hits++
		p.idle -= int64(cap(b.data))
		p.mu.Unlock()
		b.data = b.data[:n]
		return b
	}
	p.misses++
	p.mu.Unlock()
	return &Buffer{owner: owner, data: make([]byte, n, size), class: class}
}

func (p *bufferPool) put(b *Buffer) {
	if b.class < 0 {
		b.data = nil
		return
	}
	p.mu.Lock()
	p.free[b.class] = append(p.free[b.class], b)
	p.idle += int64(cap(b.data))
	p.mu.Unlock()
}

func (p *bufferPool) stats() (hits, misses, idle int64) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.hits, p.misses, p.idle
}

func (p *bufferPool) trim() {
	p.mu.Lock()
	defer p.mu.Unlock()
	for i := range p.free {
		clear(p.free[i])
		p.free[i] = p.free[i][:0]
	}
	p.idle = 0
}
