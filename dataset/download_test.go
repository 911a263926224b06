package dataset

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"maps"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// mirror serves files by name and counts requests.
type mirror struct {
	mu     sync.Mutex
	files  map[string][]byte
	hits   map[string]int
	handle func(w http.ResponseWriter, r *http.Request, body []byte)
}

func newMirror(t *testing.T, files map[string][]byte, handle func(w http.ResponseWriter, r *http.Request, body []byte)) (*mirror, *httptest.Server) {
	m := &mirror{files: files, hits: map[string]int{}, handle: handle}
	srv := httptest.NewServer(m)
	t.Cleanup(srv.Close)
	return m, srv
}

func (m *mirror) requests() map[string]int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return maps.Clone(m.hits)
}

func (m *mirror) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	name := strings.TrimPrefix(r.URL.Path, "/mirror/")
	m.mu.Lock()
	m.hits[name]++
	body, ok := m.files[name]
	m.mu.Unlock()
	if !ok {
		http.NotFound(w, r)
		return
	}
	if m.handle != nil {
		m.handle(w, r, body)
		return
	}
	w.Header().Set("Content-Length", strconv.Itoa(len(body)))
	w.Write(body)
}

func hexSHA256(b []byte) string {
	s := sha256.Sum256(b)
	return hex.EncodeToString(s[:])
}

func dirNames(t *testing.T, dir string) []string {
	t.Helper()
	es, err := os.ReadDir(dir)
	if err != nil && !os.IsNotExist(err) {
		t.Fatal(err)
	}
	var names []string
	for _, e := range es {
		names = append(names, e.Name())
	}
	return names
}

func TestFetch(t *testing.T) {
	t.Parallel()
	body := seq(5000)
	file := remoteFile{name: "blob", gzSize: int64(len(body)), gzSHA256: hexSHA256(body)}
	corrupt := bytes.Clone(body)
	corrupt[1234] ^= 1
	tests := []struct {
		name    string
		handle  func(w http.ResponseWriter, r *http.Request, body []byte)
		path    string
		wantErr []string
	}{
		{name: "good"},
		{name: "corrupted", handle: func(w http.ResponseWriter, _ *http.Request, _ []byte) { w.Write(corrupt) },
			wantErr: []string{"blob.gz", "corrupt", hexSHA256(corrupt), file.gzSHA256, "deleted"}},
		{name: "truncated with length", handle: func(w http.ResponseWriter, _ *http.Request, b []byte) {
			w.Header().Set("Content-Length", strconv.Itoa(len(b)))
			w.Write(b[:3000])
		}, wantErr: []string{"blob.gz", "stopped after 3000 of 5000 bytes", hexSHA256(body[:3000]), file.gzSHA256, "unexpected EOF"}},
		{name: "truncated without length", handle: func(w http.ResponseWriter, _ *http.Request, b []byte) { w.Write(b[:4999]) },
			wantErr: []string{"blob.gz", "over 4999 bytes", hexSHA256(body[:4999]), file.gzSHA256}},
		{name: "too long", handle: func(w http.ResponseWriter, _ *http.Request, b []byte) { w.Write(append(bytes.Clone(b), 0, 0)) },
			wantErr: []string{"blob.gz", "more than 5000 bytes", hexSHA256(append(bytes.Clone(body), 0)), file.gzSHA256}},
		{name: "404", path: "/elsewhere/", wantErr: []string{"blob.gz", "404 Not Found"}},
		{name: "server error", handle: func(w http.ResponseWriter, _ *http.Request, _ []byte) {
			http.Error(w, "busy", http.StatusServiceUnavailable)
		},
			wantErr: []string{"blob.gz", "503"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			_, srv := newMirror(t, map[string][]byte{"blob.gz": body}, tt.handle)
			dir := filepath.Join(t.TempDir(), "cache")
			path := "/mirror/"
			if tt.path != "" {
				path = tt.path
			}
			var out bytes.Buffer
			err := fetch(context.Background(), srv.Client(), srv.URL+path, dir, []remoteFile{file}, &out)
			if tt.wantErr == nil {
				if err != nil {
					t.Fatal(err)
				}
				got, err := os.ReadFile(filepath.Join(dir, "blob.gz"))
				if err != nil || !bytes.Equal(got, body) {
					t.Fatalf("downloaded file: %d bytes, %v", len(got), err)
				}
				st, _ := os.Stat(filepath.Join(dir, "blob.gz"))
				if st.Mode().Perm() != 0o644 {
					t.Errorf("mode %v, want 0644", st.Mode().Perm())
				}
				if names := dirNames(t, dir); len(names) != 1 {
					t.Errorf("cache holds %q, want only blob.gz", names)
				}
				if s := out.String(); !strings.Contains(s, "downloading "+srv.URL+"/mirror/blob.gz") || !strings.Contains(s, "blob.gz: done, 0.0 MB") {
					t.Errorf("progress output %q", s)
				}
				return
			}
			if err == nil {
				t.Fatal("download succeeded")
			}
			for _, s := range tt.wantErr {
				if !strings.Contains(err.Error(), s) {
					t.Errorf("error %q does not mention %q", err, s)
				}
			}
			if names := dirNames(t, dir); len(names) != 0 {
				t.Errorf("failed download left %q in the cache", names)
			}
		})
	}
}

func TestFetchCanceled(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	body := seq(1 << 20)
	_, srv := newMirror(t, map[string][]byte{"blob.gz": body}, func(w http.ResponseWriter, r *http.Request, b []byte) {
		w.Header().Set("Content-Length", strconv.Itoa(len(b)))
		w.Write(b[:1000])
		w.(http.Flusher).Flush()
		cancel()
		<-r.Context().Done()
	})
	dir := t.TempDir()
	err := fetch(ctx, srv.Client(), srv.URL+"/mirror/", dir, []remoteFile{{name: "blob", gzSize: 1 << 20, gzSHA256: hexSHA256(body)}}, nil)
	if err == nil || !strings.Contains(err.Error(), "context canceled") {
		t.Fatalf("error %v, want context canceled", err)
	}
	if names := dirNames(t, dir); len(names) != 0 {
		t.Errorf("canceled download left %q", names)
	}
}

func TestProgressTerminal(t *testing.T) {
	t.Parallel()
	var out bytes.Buffer
	p := &progress{w: &out, tty: true}
	b := p.start("http://host/x/file.gz", 2_000_000)
	b.Write(make([]byte, 1_000_000))
	b.last = time.Time{}
	b.Write(make([]byte, 1_000_000))
	b.finish(true)
	s := out.String()
	for _, want := range []string{"\rfile.gz", "[===============               ]  50%", "100%", "2.0 MB/2.0 MB", "done\n"} {
		if !strings.Contains(s, want) {
			t.Errorf("terminal progress %q lacks %q", s, want)
		}
	}
	if newProgress(nil) != nil {
		t.Error("newProgress(nil) reports")
	}
	var nilBar *bar
	if n, err := nilBar.Write([]byte{1, 2}); n != 2 || err != nil {
		t.Errorf("nil bar Write = %d, %v", n, err)
	}
	nilBar.finish(false)
}

// originals returns the distribution's files, rebuilt from the Debian
// copies, keyed by file name.
func originals(t *testing.T) map[string][]byte {
	files := map[string][]byte{}
	for _, f := range fashionMNISTFiles {
		files[f.name+".gz"] = originalGzip(t, f.name)
	}
	return files
}

// TestFetchFashionMNIST checks the SHA-256 and size constants against the
// distribution's files.
func TestFetchFashionMNIST(t *testing.T) {
	t.Parallel()
	needDebian(t)
	files := originals(t)
	_, srv := newMirror(t, files, nil)
	dir := t.TempDir()
	if err := fetch(context.Background(), srv.Client(), srv.URL+"/mirror", dir, fashionMNISTFiles[:], nil); err != nil {
		t.Fatal(err)
	}
	for name, want := range files {
		got, err := os.ReadFile(filepath.Join(dir, name))
		if err != nil || !bytes.Equal(got, want) {
			t.Errorf("%s: not the served file (%v)", name, err)
		}
	}
	if names := dirNames(t, dir); len(names) != 4 {
		t.Errorf("directory holds %q", names)
	}
}

// TestDownloadFashionMNIST checks LoadFashionMNIST downloads, verifies and
// loads the files, fetching only what the target directory lacks.
func TestDownloadFashionMNIST(t *testing.T) {
	t.Parallel()
	needDebian(t)
	if raceEnabled {
		t.Skip("full-dataset load; TestFetchFashionMNIST and TestFashionMNISTDebian cover its parts under -race")
	}
	files := originals(t)
	m, srv := newMirror(t, files, nil)
	dir := filepath.Join(t.TempDir(), "cache")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	linkDebian(t, dir, 1, 3)
	var out bytes.Buffer
	train, test, err := LoadFashionMNIST(context.Background(), FashionMNISTOptions{
		Dir: dir, Download: true, BaseURL: srv.URL + "/mirror/", Progress: &out, Client: srv.Client(), Verify: true,
	})
	if err != nil {
		t.Fatal(err)
	}
	if train.N != 60000 || test.N != 10000 {
		t.Fatalf("loaded %d and %d images", train.N, test.N)
	}
	want := map[string]int{"train-images-idx3-ubyte.gz": 1, "t10k-images-idx3-ubyte.gz": 1}
	if got := m.requests(); !maps.Equal(got, want) {
		t.Errorf("requests %v, want %v", got, want)
	}
	for name := range want {
		got, err := os.ReadFile(filepath.Join(dir, name))
		if err != nil || !bytes.Equal(got, files[name]) {
			t.Errorf("%s: not the served file (%v)", name, err)
		}
	}
	if strings.Count(out.String(), ": done,") != 2 {
		t.Errorf("progress %q, want two completed downloads", out.String())
	}
	if _, _, err := LoadFashionMNIST(context.Background(), FashionMNISTOptions{Dir: dir, Download: true, BaseURL: srv.URL + "/mirror/"}); err != nil {
		t.Fatal(err)
	}
	if got := m.requests(); !maps.Equal(got, want) {
		t.Errorf("second load downloaded again: %v", got)
	}
}

func TestDownloadFashionMNISTFailures(t *testing.T) {
	t.Parallel()
	needDebian(t)
	debian := map[string][]byte{}
	for _, f := range fashionMNISTFiles {
		b, err := os.ReadFile(filepath.Join(DebianFashionMNISTDir, f.name+".gz"))
		if err != nil {
			t.Fatal(err)
		}
		debian[f.name+".gz"] = b
	}
	_, srv := newMirror(t, debian, nil)
	offline := httptest.NewServer(http.NotFoundHandler())
	offline.Close()
	tests := []struct {
		name    string
		base    string
		wantErr []string
	}{
		// Debian's recompressed files differ from the mirror's bytes.
		{"recompressed", srv.URL + "/mirror/", []string{"train-images-idx3-ubyte.gz", "corrupt", hexSHA256(debian["train-images-idx3-ubyte.gz"]), fashionMNISTFiles[0].gzSHA256}},
		{"404", srv.URL + "/nothing/", []string{"train-images-idx3-ubyte.gz", "404"}},
		{"offline", offline.URL, []string{"train-images-idx3-ubyte.gz", "connection refused"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			dir := filepath.Join(t.TempDir(), "cache")
			_, _, err := LoadFashionMNIST(context.Background(), FashionMNISTOptions{Dir: dir, Download: true, BaseURL: tt.base})
			if err == nil {
				t.Fatal("load succeeded")
			}
			for _, s := range append(tt.wantErr, "apt-get install dataset-fashion-mnist", "FLOCK_DATA") {
				if !strings.Contains(err.Error(), s) {
					t.Errorf("error %q does not mention %q", err, s)
				}
			}
			if names := dirNames(t, dir); len(names) != 0 {
				t.Errorf("failed download left %q", names)
			}
		})
	}
}
