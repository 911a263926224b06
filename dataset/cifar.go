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
	// (cifar-10-batches-bin, cifar-100-binary) or that directory's files,
	// or the same of the python version (cifar-10-python.tar.gz,
	// cifar-100-python.tar.gz; cifar-10-batches-py, cifar-100-python);
	// downloads (of the binary version) go there.
	Dir string
	// Download fetches the archive from BaseURL into Dir when Dir has
	// neither it nor its files.
	Download bool
	// BaseURL is where to download from (DefaultCIFARURL when empty).
	BaseURL string
	// Progress receives download progress (nothing when nil).
	Progress io.Writer
	// Client makes the download requests (when nil, a client that gives up
	// on a mirror it cannot reach within 15 seconds).
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
	py         cifarPython
}

// cifarPython describes the python version of one CIFAR data set: pickled
// dicts whose data is a uint8 array of N×3072 (each row an image as the
// binary version stores it) and whose labels key lists the classes; the
// meta pickle's names key lists the class names.
type cifarPython struct {
	archive, dir  string
	train         []string
	test, meta    string
	labels, names string
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
		py: cifarPython{
			archive: "cifar-10-python.tar.gz", dir: "cifar-10-batches-py",
			train: []string{"data_batch_1", "data_batch_2", "data_batch_3", "data_batch_4", "data_batch_5"},
			test:  "test_batch", meta: "batches.meta", labels: "labels", names: "label_names",
		},
	},
	100: {
		name:    "CIFAR-100",
		archive: remoteFile{name: "cifar-100-binary.tar", gzSize: 168513733, gzSHA256: "58a81ae192c23a4be8b1804d68e518ed807d710a4eb253b1f2a199162a40d8ec"},
		dir:     "cifar-100-binary",
		train:   []string{"train.bin"},
		test:    "test.bin", meta: "fine_label_names.txt", labelBytes: 2,
		py: cifarPython{
			archive: "cifar-100-python.tar.gz", dir: "cifar-100-python",
			train: []string{"train"}, test: "test", meta: "meta", labels: "fine_labels", names: "fine_label_names",
		},
	},
}

// LoadCIFAR reads the training (50000 images) and test (10000 images) sets
// of CIFAR-10 or CIFAR-100 (fine labels) from the binary or the python
// version of the data set published by its authors: 32×32 RGB images, the
// classes named as the archive's metadata names them. The python version's
// pickles are read by a decoder that knows only their contents (dicts of
// strings, ints, lists and numpy uint8 arrays) and runs no code.
func LoadCIFAR(ctx context.Context, opts CIFAROptions) (train, test *Images, err error) {
	k, ok := cifarKinds[opts.Classes]
	if !ok {
		return nil, nil, fmt.Errorf("dataset: CIFAR with %d classes: want 10 or 100", opts.Classes)
	}
	if opts.Dir == "" {
		return nil, nil, fmt.Errorf("dataset: %s: no directory given", k.name)
	}
	files, python, err := k.find(opts.Dir)
	if errors.Is(err, fs.ErrNotExist) && opts.Download {
		base := opts.BaseURL
		if base == "" {
			base = DefaultCIFARURL
		}
		if err = fetch(ctx, opts.Client, base, opts.Dir, []remoteFile{k.archive}, opts.Progress); err != nil {
			return nil, nil, err
		}
		files, python, err = k.find(opts.Dir)
	}
	if err != nil {
		return nil, nil, err
	}
	if python {
		return k.readPython(files)
	}
	return k.read(files)
}

// find returns the files of the binary version under dir, from its archive
// or extracted, or else those of the python version (python is then true).
func (k *cifarKind) find(dir string) (files map[string][]byte, python bool, err error) {
	for _, v := range []struct {
		archive, dir string
		names        []string
	}{
		{k.archive.name + ".gz", k.dir, append([]string{k.test, k.meta}, k.train...)},
		{k.py.archive, k.py.dir, append([]string{k.py.test, k.py.meta}, k.py.train...)},
	} {
		python = v.dir == k.py.dir
		archive := filepath.Join(dir, v.archive)
		if _, err := os.Stat(archive); err == nil {
			files, err := k.readArchive(archive, v.dir, v.names)
			return files, python, err
		}
		for _, d := range []string{filepath.Join(dir, v.dir), dir} {
			if _, err := os.Stat(filepath.Join(d, v.names[0])); err != nil {
				continue
			}
			files := map[string][]byte{}
			for _, name := range v.names {
				b, err := os.ReadFile(filepath.Join(d, name))
				if err != nil {
					return nil, false, fmt.Errorf("dataset: %s: %w", k.name, err)
				}
				files[name] = b
			}
			return files, python, nil
		}
	}
	return nil, false, fmt.Errorf("dataset: %s: neither %s, %s nor the files of %s or %s in %s; download it from %s (flag --download): %w",
		k.name, k.archive.name+".gz", k.py.archive, k.dir, k.py.dir, dir, DefaultCIFARURL, fs.ErrNotExist)
}

// readArchive reads the named files of the directory top of a .tar.gz.
func (k *cifarKind) readArchive(path, top string, names []string) (map[string][]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("dataset: %s: %w", k.name, err)
	}
	defer f.Close()
	zr, err := gzip.NewReader(bufio.NewReader(f))
	if err != nil {
		return nil, fmt.Errorf("dataset: %s: %s: %w", k.name, path, err)
	}
	want := map[string]bool{}
	for _, n := range names {
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
		if h.Typeflag != tar.TypeReg || !want[name] || filepath.Dir(filepath.Clean(h.Name)) != top {
			continue
		}
		// The largest files, CIFAR-100's train.bin and train, are about
		// 50000·3074 bytes.
		if h.Size > 200<<20 {
			return nil, fmt.Errorf("dataset: %s: %s: %s of %d bytes", k.name, path, h.Name, h.Size)
		}
		b := make([]byte, h.Size)
		if _, err := io.ReadFull(tr, b); err != nil {
			return nil, fmt.Errorf("dataset: %s: %s: %s: %w", k.name, path, h.Name, err)
		}
		files[name] = b
	}
	for _, name := range names {
		if _, ok := files[name]; !ok {
			return nil, fmt.Errorf("dataset: %s: %s has no %s/%s", k.name, path, top, name)
		}
	}
	return files, nil
}

// classes is the number of classes of k.
func (k *cifarKind) classes() int {
	if k.labelBytes == 2 {
		return 100
	}
	return 10
}

// read decodes the training and test sets from the files.
func (k *cifarKind) read(files map[string][]byte) (train, test *Images, err error) {
	var classes []string
	for line := range strings.Lines(string(files[k.meta])) {
		if line = strings.TrimSpace(line); line != "" {
			classes = append(classes, line)
		}
	}
	if want := k.classes(); len(classes) != want {
		return nil, nil, fmt.Errorf("dataset: %s: %s names %d classes, want %d", k.name, k.meta, len(classes), k.classes())
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
		planesToHWC(m.Pixels[i*3*plane:(i+1)*3*plane], r[k.labelBytes:])
	}
	return m, nil
}

// planesToHWC turns an image of 32×32 pixels stored as red, green and blue
// planes into dst, the pixels one after the other.
func planesToHWC(dst, px []uint8) {
	const plane = 32 * 32
	for p := range plane {
		dst[3*p], dst[3*p+1], dst[3*p+2] = px[p], px[plane+p], px[2*plane+p]
	}
}

// readPython decodes the training and test sets from the pickles of the
// python version.
func (k *cifarKind) readPython(files map[string][]byte) (train, test *Images, err error) {
	meta, err := k.pyDict(k.py.meta, files[k.py.meta])
	if err != nil {
		return nil, nil, err
	}
	var classes []string
	if v, _ := meta.get(k.py.names); v != nil {
		l, ok := v.(*pyList)
		if !ok {
			return nil, nil, fmt.Errorf("dataset: %s: %s: %s is a %T, want a list", k.name, k.py.meta, k.py.names, v)
		}
		for _, c := range l.items {
			switch c := c.(type) {
			case string:
				classes = append(classes, c)
			case []byte:
				classes = append(classes, string(c))
			default:
				return nil, nil, fmt.Errorf("dataset: %s: %s: %s holds a %T, want strings", k.name, k.py.meta, k.py.names, c)
			}
		}
	}
	if len(classes) != k.classes() {
		return nil, nil, fmt.Errorf("dataset: %s: %s names %d classes (%s), want %d", k.name, k.py.meta, len(classes), k.py.names, k.classes())
	}
	if train, err = k.decodePython(k.py.train, files, classes); err != nil {
		return nil, nil, err
	}
	if test, err = k.decodePython([]string{k.py.test}, files, classes); err != nil {
		return nil, nil, err
	}
	return train, test, nil
}

// pyDict unpickles a file that must hold a dict.
func (k *cifarKind) pyDict(name string, b []byte) (*pyDict, error) {
	v, err := unpickle(b)
	if err != nil {
		return nil, fmt.Errorf("dataset: %s: %s: %w", k.name, name, err)
	}
	d, ok := v.(*pyDict)
	if !ok {
		return nil, fmt.Errorf("dataset: %s: %s holds a %T, want a dict", k.name, name, v)
	}
	return d, nil
}

// decodePython turns the batches of the named pickles into Images (NHWC).
func (k *cifarKind) decodePython(names []string, files map[string][]byte, classes []string) (*Images, error) {
	const side, size = 32, 32 * 32 * 3
	type batch struct {
		pixels []byte
		labels []any
	}
	var batches []batch
	n := 0
	for _, name := range names {
		d, err := k.pyDict(name, files[name])
		if err != nil {
			return nil, err
		}
		v, _ := d.get("data")
		a, ok := v.(*pyArray)
		if !ok || !a.built || len(a.shape) != 2 || a.shape[1] != size {
			return nil, fmt.Errorf("dataset: %s: %s: data is not a uint8 array of N×%d", k.name, name, size)
		}
		v, _ = d.get(k.py.labels)
		l, ok := v.(*pyList)
		if !ok || len(l.items) != a.shape[0] {
			return nil, fmt.Errorf("dataset: %s: %s: %s is not a list of the %d images' labels", k.name, name, k.py.labels, a.shape[0])
		}
		batches = append(batches, batch{a.data, l.items})
		n += a.shape[0]
	}
	if n == 0 {
		return nil, fmt.Errorf("dataset: %s: %s: no images", k.name, strings.Join(names, ", "))
	}
	m := &Images{N: n, H: side, W: side, C: 3, Pixels: make([]uint8, n*size), Labels: make([]int32, n), Classes: classes}
	i := 0
	for bi, b := range batches {
		for j, y := range b.labels {
			c, ok := y.(int64)
			if !ok {
				return nil, fmt.Errorf("dataset: %s: %s: image %d: label of type %T", k.name, names[bi], j, y)
			}
			if c < 0 || c >= int64(len(classes)) {
				return nil, fmt.Errorf("dataset: %s: %s: image %d: label %d of %d classes", k.name, names[bi], j, c, len(classes))
			}
			m.Labels[i] = int32(c)
			planesToHWC(m.Pixels[i*size:(i+1)*size], b.pixels[j*size:(j+1)*size])
			i++
		}
	}
	return m, nil
}
