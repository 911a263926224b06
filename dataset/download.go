package dataset

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/flockml/flock/internal/atomicfile"
	"github.com/flockml/flock/internal/term"
)

// fetch downloads each file, as name+".gz", from base into dir.
func fetch(ctx context.Context, client *http.Client, base, dir string, files []remoteFile, progress io.Writer) error {
	if len(files) == 0 {
		return nil
	}
	if client == nil {
		client = downloadClient
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("dataset: download: %w", err)
	}
	p := newProgress(progress)
	for _, f := range files {
		if err := fetchFile(ctx, client, base, dir, f, p); err != nil {
			return err
		}
	}
	return nil
}

// downloadClient makes the downloads of clients that name none: it gives
// up on a mirror it cannot reach within seconds, as on a machine without
// a network, but lets a slow transfer run.
var downloadClient = &http.Client{Transport: func() http.RoundTripper {
	t := http.DefaultTransport.(*http.Transport).Clone()
	t.DialContext = (&net.Dialer{Timeout: 15 * time.Second, KeepAlive: 30 * time.Second}).DialContext
	t.TLSHandshakeTimeout = 15 * time.Second
	t.ResponseHeaderTimeout = 30 * time.Second
	return t
}()}

// fetchFile writes the download to a temporary file in dir and renames it
// to its name only after its length and SHA-256 match f and it has been
// synced, so that dir never holds a partial or corrupt file under that name.
func fetchFile(ctx context.Context, client *http.Client, base, dir string, f remoteFile, p *progress) error {
	name := f.name + ".gz"
	u, err := url.JoinPath(base, name)
	if err != nil {
		return fmt.Errorf("dataset: download %s: base URL %q: %w", name, base, err)
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return fmt.Errorf("dataset: download %s: %w", u, err)
	}
	resp, err := client.Do(req)
	if err != nil {
		return fmt.Errorf("dataset: download %s: %w", u, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("dataset: download %s: %s", u, resp.Status)
	}
	err = atomicfile.WriteFile(filepath.Join(dir, name), func(tmp *os.File) error {
		h := sha256.New()
		bar := p.start(u, f.gzSize)
		n, err := io.Copy(io.MultiWriter(tmp, h, bar), io.LimitReader(resp.Body, f.gzSize+1))
		bar.finish(err == nil && n == f.gzSize)
		got := hex.EncodeToString(h.Sum(nil))
		switch {
		case err != nil:
			return fmt.Errorf("stopped after %d of %d bytes (SHA-256 so far %s, want %s), partial file deleted: %w", n, f.gzSize, got, f.gzSHA256, err)
		case n != f.gzSize || got != f.gzSHA256:
			size := fmt.Sprint(n)
			if n > f.gzSize {
				size = fmt.Sprintf("more than %d", f.gzSize)
			}
			return fmt.Errorf("corrupt: SHA-256 %s over %s bytes, want %s over %d bytes; file deleted", got, size, f.gzSHA256, f.gzSize)
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("dataset: download %s: %w", u, err)
	}
	return nil
}

// progress reports downloads to a writer: on a terminal as a bar redrawn in
// place, otherwise as one line when a file starts and one when it ends. A nil
// *progress reports nothing.
type progress struct {
	w   io.Writer
	tty bool
}

func newProgress(w io.Writer) *progress {
	if w == nil {
		return nil
	}
	return &progress{w: w, tty: term.IsTerminal(w)}
}

// bar counts the bytes of one download written through it.
type bar struct {
	p           *progress
	name        string
	n, total    int64
	begin, last time.Time
}

func (p *progress) start(u string, total int64) *bar {
	if p == nil {
		return nil
	}
	b := &bar{p: p, name: u[strings.LastIndexByte(u, '/')+1:], total: total, begin: time.Now()}
	if p.tty {
		b.draw()
	} else {
		fmt.Fprintf(p.w, "dataset: downloading %s (%s)\n", u, megabytes(total))
	}
	return b
}

func (b *bar) Write(q []byte) (int, error) {
	if b == nil {
		return len(q), nil
	}
	b.n += int64(len(q))
	if b.p.tty {
		if now := time.Now(); now.Sub(b.last) >= 100*time.Millisecond {
			b.last = now
			b.draw()
		}
	}
	return len(q), nil
}

func (b *bar) draw() {
	const width = 30
	frac := 0.0
	if b.total > 0 {
		frac = min(float64(b.n)/float64(b.total), 1)
	}
	fill := int(frac * width)
	fmt.Fprintf(b.p.w, "\r%-26s [%s%s] %3.0f%% %s/%s %s/s ", b.name,
		strings.Repeat("=", fill), strings.Repeat(" ", width-fill), 100*frac,
		megabytes(b.n), megabytes(b.total), megabytes(b.rate()))
}

func (b *bar) rate() int64 {
	s := time.Since(b.begin).Seconds()
	if s <= 0 {
		return 0
	}
	return int64(float64(b.n) / s)
}

func (b *bar) finish(ok bool) {
	if b == nil {
		return
	}
	status := "done"
	if !ok {
		status = "failed"
	}
	if b.p.tty {
		b.draw()
		fmt.Fprintln(b.p.w, status)
		return
	}
	fmt.Fprintf(b.p.w, "dataset: %s: %s, %s in %.1fs\n", b.name, status, megabytes(b.n), time.Since(b.begin).Seconds())
}

func megabytes(n int64) string { return fmt.Sprintf("%.1f MB", float64(n)/1e6) }
