package dataset

import (
	"context"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
)

// DefaultFashionMNISTURL is the canonical mirror of the Fashion-MNIST files.
const DefaultFashionMNISTURL = "http://fashion-mnist.s3-website.eu-central-1.amazonaws.com/"

// DebianFashionMNISTDir is where the Debian package dataset-fashion-mnist
// installs the files.
const DebianFashionMNISTDir = "/usr/share/datasets/fashion-mnist"

// FashionMNISTMean and FashionMNISTStd are the mean and standard deviation of
// the Fashion-MNIST training pixels scaled to [0, 1], the default
// normalisation of a Loader.
const (
	FashionMNISTMean = 0.2860
	FashionMNISTStd  = 0.3530
)

// FashionMNISTClasses names the ten Fashion-MNIST labels.
var FashionMNISTClasses = []string{
	"T-shirt/top", "Trouser", "Pullover", "Dress", "Coat",
	"Sandal", "Shirt", "Sneaker", "Bag", "Ankle boot",
}

// ErrNotFound is wrapped by the error LoadFashionMNIST returns when the files
// are in none of the searched directories and downloading is not allowed.
var ErrNotFound = errors.New("dataset: Fashion-MNIST not found")

// remoteFile is one file of the distribution. gzSHA256 is the digest of the
// file as served by the mirror (whose MD5 the Fashion-MNIST README lists);
// idxSHA256 the digest of its decompressed IDX bytes, which any
// recompression (such as Debian's) keeps.
type remoteFile struct {
	name      string // without ".gz"
	gzSize    int64
	gzSHA256  string
	idxSHA256 string
}

var fashionMNISTFiles = [4]remoteFile{
	{"train-images-idx3-ubyte", 26421880,
		"3aede38d61863908ad78613f6a32ed271626dd12800ba2636569512369268a84",
		"c59f468a2f672dc815687fe0f83887768d799fd8a3f3276145d20f83aa44d888"},
	{"train-labels-idx1-ubyte", 29515,
		"a04f17134ac03560a47e3764e11b92fc97de4d1bfaf8ba1a3aa29af54cc90845",
		"bad3541b69d912435c50bb6ba87bec294ff4f6a2e1246121d8633921760443d9"},
	{"t10k-images-idx3-ubyte", 4422102,
		"346e55b948d973a97e58d2351dde16a484bd415d4595297633bb08f03db6a073",
		"5b4141f0afbad91edebe8549f8fcffe087ea10ca49f1dbef5c9a5cd8815ce37b"},
	{"t10k-labels-idx1-ubyte", 5148,
		"67da17c76eaffca5446c3361aaab5c3cd6d1c2608764d35dfb1850b086bf8dd5",
		"0402a96d92fd2663957122ceb108a494c5af83dab82d92729df917d7dec38c34"},
}

// FashionMNISTOptions configures LoadFashionMNIST.
type FashionMNISTOptions struct {
	// Dir, when set, is the only directory searched and the download
	// target; otherwise FashionMNISTDirs are searched and downloads go to
	// the user cache directory.
	Dir string
	// Download allows fetching missing files from BaseURL.
	Download bool
	// BaseURL is the mirror to download from (DefaultFashionMNISTURL when
	// empty); file names are appended to it.
	BaseURL string
	// Progress receives download progress: a redrawn bar when it is a
	// terminal, a line per file otherwise, nothing when nil.
	Progress io.Writer
	// Client makes the download requests (when nil, a client that gives up
	// on a mirror it cannot reach within 15 seconds).
	Client *http.Client
	// Verify checks the SHA-256 of each file's decompressed IDX bytes
	// against the canonical distribution's, whatever the file's compression.
	Verify bool
	// Logger receives a warning for each searched directory that holds
	// some of the files but not all, and so is passed over (slog.Default()
	// when nil).
	Logger *slog.Logger
}

// SystemDataEnv names the environment variable that, when set, replaces
// the system-wide directory of the data sets (DebianFashionMNISTDir); set
// and empty, no system directory is searched, as on a machine without the
// Debian package.
const SystemDataEnv = "FLOCK_SYSTEM_DATA"

// FashionMNISTDirs returns the directories LoadFashionMNIST searches, in
// order: $FLOCK_DATA/fashion-mnist (when FLOCK_DATA is set), the user cache
// directory's flock/fashion-mnist, and DebianFashionMNISTDir (or
// $FLOCK_SYSTEM_DATA/fashion-mnist; see SystemDataEnv).
func FashionMNISTDirs() []string {
	var dirs []string
	if d := os.Getenv("FLOCK_DATA"); d != "" {
		dirs = append(dirs, filepath.Join(d, "fashion-mnist"))
	}
	if d, err := fashionMNISTCacheDir(); err == nil {
		dirs = append(dirs, d)
	}
	sys, set := os.LookupEnv(SystemDataEnv)
	switch {
	case !set:
		dirs = append(dirs, DebianFashionMNISTDir)
	case sys != "":
		dirs = append(dirs, filepath.Join(sys, "fashion-mnist"))
	}
	return dirs
}

func fashionMNISTCacheDir() (string, error) {
	d, err := os.UserCacheDir()
	if err != nil {
		return "", err
	}
	return filepath.Join(d, "flock", "fashion-mnist"), nil
}

// LoadFashionMNIST reads the Fashion-MNIST training (60000 images) and test
// (10000 images) sets of 28×28 grey-level images.
//
// Each of the four files train-images-idx3-ubyte, train-labels-idx1-ubyte,
// t10k-images-idx3-ubyte and t10k-labels-idx1-ubyte may be stored raw or
// gzip-compressed (with or without a ".gz" suffix; the content decides). The
// first directory holding all four is used. When none does and
// opts.Download is set, the missing files are downloaded into opts.Dir or
// the user cache directory; each download is checked against the
// distribution's SHA-256 before it is renamed into place, so a corrupt or
// truncated file never lands there.
func LoadFashionMNIST(ctx context.Context, opts FashionMNISTOptions) (train, test *Images, err error) {
	dirs := []string{opts.Dir}
	if opts.Dir == "" {
		dirs = FashionMNISTDirs()
	}
	log := opts.Logger
	if log == nil {
		log = slog.Default()
	}
	paths, found := locateFashionMNIST(dirs, log)
	if !found {
		if !opts.Download {
			return nil, nil, fmt.Errorf("%w (looked in %s); %s", ErrNotFound, strings.Join(dirs, ", "), fashionMNISTHint(true, opts.Dir))
		}
		target := opts.Dir
		if target == "" {
			if target, err = fashionMNISTCacheDir(); err != nil {
				return nil, nil, fmt.Errorf("dataset: Fashion-MNIST: no cache directory to download into: %w; %s", err, fashionMNISTHint(false, ""))
			}
		}
		base := opts.BaseURL
		if base == "" {
			base = DefaultFashionMNISTURL
		}
		have, _ := findFashionMNIST(target)
		var missing []remoteFile
		for i, f := range fashionMNISTFiles {
			if have[i] == "" {
				missing = append(missing, f)
			}
		}
		if err := fetch(ctx, opts.Client, base, target, missing, opts.Progress); err != nil {
			return nil, nil, fmt.Errorf("%w; %s", err, fashionMNISTHint(false, ""))
		}
		if paths, found = findFashionMNIST(target); !found {
			return nil, nil, fmt.Errorf("dataset: Fashion-MNIST: files missing from %s after download", target)
		}
	}
	return readFashionMNIST(paths, opts.Verify)
}

// fashionMNISTHint says how to get the data; target is where a download
// would go ("" for the cache).
func fashionMNISTHint(download bool, target string) string {
	if target == "" {
		target = "the user cache directory"
		if d, err := fashionMNISTCacheDir(); err == nil {
			target = d
		}
	}
	s := "to get the data, install the Debian package (apt-get install dataset-fashion-mnist, files in " + DebianFashionMNISTDir +
		"), put the four IDX files (.gz or raw) in $FLOCK_DATA/fashion-mnist"
	if download {
		s += ", or allow the download (FashionMNISTOptions.Download, flag --download) from " + DefaultFashionMNISTURL + " into " + target
	}
	return s
}

// locateFashionMNIST returns the files of the first of dirs that holds all
// four, warning on log of each directory before it that holds only some.
func locateFashionMNIST(dirs []string, log *slog.Logger) (paths [4]string, found bool) {
	for _, d := range dirs {
		if paths, found = findFashionMNIST(d); found {
			return paths, true
		}
		var missing []string
		for i, p := range paths {
			if p == "" {
				missing = append(missing, fashionMNISTFiles[i].name)
			}
		}
		if len(missing) < len(paths) {
			log.Warn("Fashion-MNIST: directory incomplete, passed over", "dir", d, "missing", strings.Join(missing, ", "))
		}
	}
	return [4]string{}, false
}

// findFashionMNIST returns the path of each of the four files in dir (raw
// name preferred over ".gz"), "" for those absent, and whether all are there.
func findFashionMNIST(dir string) (paths [4]string, all bool) {
	all = true
	for i, f := range fashionMNISTFiles {
		for _, name := range []string{f.name, f.name + ".gz"} {
			p := filepath.Join(dir, name)
			if st, err := os.Stat(p); err == nil && st.Mode().IsRegular() {
				paths[i] = p
				break
			}
		}
		all = all && paths[i] != ""
	}
	return paths, all
}

func readFashionMNIST(paths [4]string, verify bool) (train, test *Images, err error) {
	var idx [4]*IDX
	var errs [4]error
	var wg sync.WaitGroup
	for i := range paths {
		wg.Go(func() {
			idx[i], errs[i] = readIDXFile(paths[i])
			if errs[i] == nil && verify {
				errs[i] = verifyIDX(paths[i], idx[i], fashionMNISTFiles[i].idxSHA256)
			}
		})
	}
	wg.Wait()
	if err := errors.Join(errs[:]...); err != nil {
		return nil, nil, err
	}
	sets := [2]*Images{}
	for s, n := range [2]int{60000, 10000} {
		img, lab := idx[2*s], idx[2*s+1]
		m, err := NewImagesFromIDX(img, lab, FashionMNISTClasses)
		if err != nil {
			return nil, nil, fmt.Errorf("%w (%s, %s)", err, paths[2*s], paths[2*s+1])
		}
		if m.N != n || m.H != 28 || m.W != 28 {
			return nil, nil, fmt.Errorf("dataset: %s: %d images of %d×%d: Fashion-MNIST has %d of 28×28", paths[2*s], m.N, m.H, m.W, n)
		}
		sets[s] = m
	}
	return sets[0], sets[1], nil
}

// readIDXFile reads the IDX file at path. Its size, or for a gzip file the
// uncompressed size in the trailer, sizes the buffer.
func readIDXFile(path string) (*IDX, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("dataset: %w", err)
	}
	defer f.Close()
	hint := int64(-1)
	if st, err := f.Stat(); err == nil {
		hint = st.Size()
		var b [4]byte
		if _, err := f.ReadAt(b[:2], 0); err == nil && b[0] == 0x1f && b[1] == 0x8b {
			hint = -1
			// The gzip trailer's ISIZE is the uncompressed size mod 2³²;
			// deflate expands at most 1032:1, which bounds what it may claim.
			if _, err := f.ReadAt(b[:], st.Size()-4); err == nil {
				if n := int64(binary.LittleEndian.Uint32(b[:])); n <= 1032*st.Size() {
					hint = n
				}
			}
		}
	}
	x, err := readIDX(f, hint)
	if err != nil {
		return nil, fmt.Errorf("dataset: read %s: %w", path, err)
	}
	return x, nil
}

// verifyIDX checks the SHA-256 of x re-encoded, which is the file's
// decompressed content since ReadIDX accepts nothing else.
func verifyIDX(path string, x *IDX, want string) error {
	h := sha256.New()
	if err := WriteIDX(h, x); err != nil {
		return err
	}
	if got := hex.EncodeToString(h.Sum(nil)); got != want {
		return fmt.Errorf("dataset: verify %s: SHA-256 of the IDX content is %s, want %s", path, got, want)
	}
	return nil
}
