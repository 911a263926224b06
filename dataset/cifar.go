package dataset

import (
	"archive/tar"
	"bufio"
	"compress/gzip"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/http"
	"os"
	"path/filepath"
	"strings"
)

// DefaultCIFARURL is where the CIFAR archives are published.
const DefaultCIFARURL = "https://www.cs.toronto.edu/~kriz/"

// CIFAROptions configures LoadCIFAR.
type CIFAROptions struct {
	// Classes is 10 (CIFAR-10) or 100 (CIFAR-100, fine labels).
	Classes int
	// Dir holds the binary version's archive (cifar-10-binary.tar.gz,
	// cifar-100-binary.tar.gz), its extracted directory
	// (cifar-10-batches-bin, cifar-100-binary) or that directory's files;
	// downloads go there.
	Dir string
	// Download fetches the archive from BaseURL into Dir when Dir has
	// neither it nor its files.
	Download bool
	// BaseURL is where to download from (DefaultCIFARURL when empty).
	BaseURL string
	// Progress receives download progress (nothing when nil).
	Progress io.Writer
	// Client makes the download requests (http.DefaultClient when nil).
	Client *http.Client
}

// cifarKind describes the binary version of one CIFAR data set: records of
// labelBytes label bytes (the last one is the class) and 32·32·3 pixels,
// channel planes of rows.
type cifarKind struct {
	name       string
	archive    remoteFile // name without ".gz"
	dir        string     // the archive's top directory
	train      []string
	test       string
	meta       string // class names, one a line
	labelBytes int
}

// cifarKinds are the binary versions, with the archives' sizes and SHA-256
// digests (the MD5s the CIFAR page lists match them).
var cifarKinds = map[int]*cifarKind{
	10: {
		name:    "CIFAR-10",
		archive: remoteFile{name: "cifar-10-binary.tar", gzSize: 170052171, gzSHA256: "c4a38c50a1bc5f3a1c5537f2155ab9d68f9f25eb1ed8d9ddda3db29a59bca1dd"},
		dir:     "cifar-10-batches-bin",
		train:   []string{"data_batch_1.bin", "data_batch_2.bin", "data_batch_3.bin", "data_batch_4.bin", "data_batch_5.bin"},
		test:    "test_batch.bin", meta: "batches.meta.txt", labelBytes: 1,
	},
	100: {
		name:    "CIFAR-100",
		archive: remoteFile{name: "cifar-100-binary.tar", gzSize: 168513733, gzSHA256: "58a81ae192c23a4be8b1804d68e518ed807d710a4eb253b1f2a199162a40d8ec"},
		dir:     "cifar-100-binary",
		train:   []string{"train.bin"},
		test:    "test.bin", meta: "fine_label_names.txt", labelBytes: 2,
	},
}

// LoadCIFAR reads the training (50000 images) and test (10000 images) sets
// of CIFAR-10 or CIFAR-100 (fine labels) from the binary version of the
// data set published by its authors: 32×32 RGB images, the classes named as
// the archive's metadata names them. The python version is not read (its
// batches are pickles).
func LoadCIFAR(ctx context.Context, opts CIFAROptions) (train, test *Images, err error) {
	k, ok := cifarKinds[opts.Classes]
	if !ok {
		return nil, nil, fmt.Errorf("dataset: CIFAR with %d classes: want 10 or 100", opts.Classes)
	}
	if opts.Dir == "" {
		return nil, nil, fmt.Errorf("dataset: %s: no directory given", k.name)
	}
	files, err := k.find(opts.Dir)
	if errors.Is(err, fs.ErrNotExist) && opts.Download {
		base := opts.BaseURL
		if base == "" {
			base = DefaultCIFARURL
		}
		if err = fetch(ctx, opts.Client, base, opts.Dir, []remoteFile{k.archive}, opts.Progress); err != nil {
			return nil, nil, err
		}
		files, err = k.find(opts.Dir)
	}
	if err != nil {
		return nil, nil, err
	}
	return k.read(files)
}

// find returns the files of the binary version under dir, from its archive
// or extracted.
func (k *cifarKind) find(dir string) (map[string][]byte, error) {
	archive := filepath.Join(dir, k.archive.name+".gz")
	if _, err := os.Stat(archive); err == nil {
		return k.readArchive(archive)
	}
	for _, d := range []string{filepath.Join(dir, k.dir), dir} {
		if _, err := os.Stat(filepath.Join(d, k.test)); err != nil {
			continue
		}
		files := map[string][]byte{}
		for _, name := range append([]string{k.test, k.meta}, k.train...) {
			b, err := os.ReadFile(filepath.Join(d, name))
			if err != nil {
				return nil, fmt.Errorf("dataset: %s: %w", k.name, err)
			}
			files[name] = b
		}
		return files, nil
	}
	hint := ""
	if strings.HasSuffix(k.archive.name, "binary.tar") {
		py := strings.Replace(k.archive.name, "binary", "python", 1) + ".gz"
		if _, err := os.Stat(filepath.Join(dir, py)); err == nil {
			hint = fmt.Sprintf(" (%s is the python version, whose pickles are not read)", py)
		}
	}
	return nil, fmt.Errorf("dataset: %s: neither %s nor the files of %s in %s%s; download it from %s (flag --download): %w",
		k.name, k.archive.name+".gz", k.dir, dir, hint, DefaultCIFARURL, fs.ErrNotExist)
}

// readArchive reads the files of the binary version from its .tar.gz.
func (k *cifarKind) readArchive(path string) (map[string][]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("dataset: %s: %w", k.name, err)
	}
	defer f.Close()
	zr, err := gzip.NewReader(bufio.NewReader(f))
	if err != nil {
		return nil, fmt.Errorf("dataset: %s: %s: %w", k.name, path, err)
	}
	want := map[string]bool{k.test: true, k.meta: true}
	for _, n := range k.train {
		want[n] = true
	}
	files := map[string][]byte{}
	tr := tar.NewReader(zr)
	for {
		h, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			return nil, fmt.Errorf("dataset: %s: %s: %w", k.name, path, err)
		}
		name := filepath.Base(h.Name)
		if h.Typeflag != tar.TypeReg || !want[name] || filepath.Dir(filepath.Clean(h.Name)) != k.dir {
			continue
		}
		// The largest file, CIFAR-100's train.bin, is 50000·3074 bytes.
		if h.Size > 200<<20 {
			return nil, fmt.Errorf("dataset: %s: %s: %s of %d bytes", k.name, path, h.Name, h.Size)
		}
		b := make([]byte, h.Size)
		if _, err := io.ReadFull(tr, b); err != nil {
			return nil, fmt.Errorf("dataset: %s: %s: %s: %w", k.name, path, h.Name, err)
		}
		files[name] = b
	}
	for name := range want {
		if _, ok := files[name]; !ok {
			return nil, fmt.Errorf("dataset: %s: %s has no %s/%s", k.name, path, k.dir, name)
		}
	}
	return files, nil
}

// read decodes the training and test sets from the files.
func (k *cifarKind) read(files map[string][]byte) (train, test *Images, err error) {
	var classes []string
	for line := range strings.Lines(string(files[k.meta])) {
		if line = strings.TrimSpace(line); line != "" {
			classes = append(classes, line)
		}
	}
	want := 10
	if k.labelBytes == 2 {
		want = 100
	}
	if len(classes) != want {
		return nil, nil, fmt.Errorf("dataset: %s: %s names %d classes, want %d", k.name, k.meta, len(classes), want)
	}
	var trainData []byte
	for _, n := range k.train {
		trainData = append(trainData, files[n]...)
	}
	if train, err = k.decode(strings.Join(k.train, ", "), trainData, classes); err != nil {
		return nil, nil, err
	}
	if test, err = k.decode(k.test, files[k.test], classes); err != nil {
		return nil, nil, err
	}
	return train, test, nil
}

// decode turns records into Images (NHWC).
func (k *cifarKind) decode(what string, b []byte, classes []string) (*Images, error) {
	const side, plane = 32, 32 * 32
	rec := k.labelBytes + 3*plane
	n := len(b) / rec
	if n == 0 || len(b)%rec != 0 {
		return nil, fmt.Errorf("dataset: %s: %s: %d bytes, want records of %d bytes", k.name, what, len(b), rec)
	}
	m := &Images{N: n, H: side, W: side, C: 3, Pixels: make([]uint8, n*3*plane), Labels: make([]int32, n), Classes: classes}
	for i := range n {
		r := b[i*rec : (i+1)*rec]
		y := int(r[k.labelBytes-1])
		if y >= len(classes) {
			return nil, fmt.Errorf("dataset: %s: %s: record %d: label %d of %d classes", k.name, what, i, y, len(classes))
		}
		m.Labels[i] = int32(y)
		px, dst := r[k.labelBytes:], m.Pixels[i*3*plane:(i+1)*3*plane]
		for p := range plane {
			dst[3*p], dst[3*p+1], dst[3*p+2] = px[p], px[plane+p], px[2*plane+p]
		}
	}
	return m, nil
}
