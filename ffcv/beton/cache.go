package beton

import (
	"container/list"
	"fmt"
	"sync"
)

// mmapSource reads from a mapping of the whole file.
type mmapSource struct {
	f        file
	data     []byte
	pageSize int64
	release  func() error // unmaps data, if set
}

func (m *mmapSource) slice(off, n int64) ([]byte, error) {
	if off < 0 || n < 0 || off > int64(len(m.data)) || n > int64(len(m.data))-off {
		return nil, fmt.Errorf("range [%d, %d) outside the %d-byte mapping", off, off+n, len(m.data))
	}
	return m.data[off : off+n : off+n], nil
}

func (m *mmapSource) prefetch(pages []int64) {
	for _, p := range pages {
		start := p * m.pageSize
		if p < 0 || start >= int64(len(m.data)) {
			continue
		}
		willNeed(m.data[start:min(start+m.pageSize, int64(len(m.data)))])
	}
}

func (m *mmapSource) close() error {
	var err error
	if m.release != nil {
		err = m.release()
	}
	if cerr := m.f.Close(); err == nil {
		err = cerr
	}
	return err
}

// processCache keeps whole pages read with pread, evicting the least
// recently used beyond maxPages. Evicted pages are dropped, never reused,
// so slices handed out stay valid.
type processCache struct {
	f        file
	pageSize int64
	end      int64 // end of the data region
	maxPages int

	mu    sync.Mutex
	pages map[int64]*cachedPage
	lru   *list.List // of int64 page indices, most recent first

	queue chan int64
	done  chan struct{}
	wg    sync.WaitGroup
	once  sync.Once
}

type cachedPage struct {
	ready chan struct{} // closed once data or err is set
	data  []byte
	err   error
	elem  *list.Element
}

func newProcessCache(f file, pageSize, end int64, opt ReadOptions) *processCache {
	limit := opt.CacheBytes
	if limit <= 0 {
		limit = 1 << 30
	}
	workers := opt.PrefetchWorkers
	if workers <= 0 {
		workers = 4
	}
	c := &processCache{
		f:        f,
		pageSize: pageSize,
		end:      end,
		maxPages: int(max(2, limit/pageSize)),
		pages:    map[int64]*cachedPage{},
		lru:      list.New(),
		done:     make(chan struct{}),
	}
	c.queue = make(chan int64, min(4*c.maxPages, 4096))
	c.wg.Add(workers)
	for range workers {
		go c.prefetcher()
	}
	return c
}

func (c *processCache) prefetcher() {
	defer c.wg.Done()
	for {
		select {
		case <-c.done:
			return
		case p := <-c.queue:
			c.page(p)
		}
	}
}

func (c *processCache) prefetch(pages []int64) {
	for _, p := range pages {
		select {
		case <-c.done:
			return
		case c.queue <- p:
		default:
			return
		}
	}
}

// page returns page p, loading it unless it is cached or being loaded.
func (c *processCache) page(p int64) ([]byte, error) {
	c.mu.Lock()
	if e := c.pages[p]; e != nil {
		c.lru.MoveToFront(e.elem)
		c.mu.Unlock()
		<-e.ready
		return e.data, e.err
	}
	e := &cachedPage{ready: make(chan struct{})}
	e.elem = c.lru.PushFront(p)
	c.pages[p] = e
	for c.lru.Len() > c.maxPages {
		old := c.lru.Back()
		c.lru.Remove(old)
		delete(c.pages, old.Value.(int64))
	}
	c.mu.Unlock()

	e.data, e.err = c.load(p)
	if e.err != nil {
		c.mu.Lock()
		if c.pages[p] == e {
			c.lru.Remove(e.elem)
			delete(c.pages, p)
		}
		c.mu.Unlock()
	}
	close(e.ready)
	return e.data, e.err
}

func (c *processCache) load(p int64) ([]byte, error) {
	start := p * c.pageSize
	if p < 0 || start >= c.end {
		return nil, fmt.Errorf("page %d outside the data region", p)
	}
	n := min(c.pageSize, c.end-start)
	b := make([]byte, n)
	if _, err := c.f.ReadAt(b, start); err != nil {
		return nil, fmt.Errorf("read page %d: %w", p, err)
	}
	return b, nil
}

func (c *processCache) slice(off, n int64) ([]byte, error) {
	p := off / c.pageSize
	b, err := c.page(p)
	if err != nil {
		return nil, err
	}
	o := off - p*c.pageSize
	if o < 0 || n < 0 || o+n > int64(len(b)) {
		return nil, fmt.Errorf("range [%d, %d) outside page %d", off, off+n, p)
	}
	return b[o : o+n : o+n], nil
}

func (c *processCache) close() error {
	c.once.Do(func() { close(c.done) })
	c.wg.Wait()
	return c.f.Close()
}
