package dataset

import (
	"bytes"
	"context"
	"encoding/binary"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

// cifarPixel and cifarLabel are testdata/gen_cifar_python.py's pixel and
// label: the value of image g's channel c at position p, and its class.
func cifarPixel(g, c, p int) uint8 { return uint8(uint32(uint64(g*3072+c*1024+p)*2654435761) >> 13) }

func cifarLabel(g, classes int) uint8 { return uint8((g*7 + 3) % classes) }

// pythonSet returns the images first to first+n-1 that
// gen_cifar_python.py writes.
func pythonSet(classes, first, n int) cifarSet {
	lb := cifarKinds[classes].labelBytes
	s := cifarSet{pixels: make([]uint8, n*3072)}
	for i := range n {
		for c := range 3 {
			for p := range 1024 {
				s.pixels[i*3072+3*p+c] = cifarPixel(first+i, c, p)
			}
		}
		l := make([]uint8, lb)
		l[lb-1] = cifarLabel(first+i, classes)
		s.labels = append(s.labels, l)
	}
	return s
}

// pythonSets are the training and test sets of gen_cifar_python.py.
func pythonSets(classes int) (train, test cifarSet) {
	n := map[int]int{10: 5, 100: 3}[classes]
	return pythonSet(classes, 0, n), pythonSet(classes, 1000, 2)
}

// binaryReference loads the binary version of the same images as the
// python version that gen_cifar_python.py writes.
func binaryReference(t *testing.T, classes int) (train, test *Images) {
	t.Helper()
	k := cifarKinds[classes]
	trs, tes := pythonSets(classes)
	dir := t.TempDir()
	for n, b := range cifarFiles(k, trs, tes) {
		if err := os.WriteFile(filepath.Join(dir, n), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	train, test, err := LoadCIFAR(context.Background(), CIFAROptions{Classes: classes, Dir: dir})
	if err != nil {
		t.Fatal(err)
	}
	checkCIFAR(t, k.name+" binary training set", train, trs, classes)
	checkCIFAR(t, k.name+" binary test set", test, tes, classes)
	return train, test
}

// checkPython loads the python version in dir and compares it with the
// binary version of the same images.
func checkPython(t *testing.T, what string, classes int, dir string, wantTrain, wantTest *Images) {
	t.Helper()
	train, test, err := LoadCIFAR(context.Background(), CIFAROptions{Classes: classes, Dir: dir})
	if err != nil {
		t.Fatalf("%s: %v", what, err)
	}
	if !reflect.DeepEqual(train, wantTrain) {
		t.Errorf("%s: training set differs from the binary version's", what)
	}
	if !reflect.DeepEqual(test, wantTest) {
		t.Errorf("%s: test set differs from the binary version's", what)
	}
}

// cifarFixtures are the committed python versions, by classes.
var cifarFixtures = map[int]string{10: "py2", 100: "p5-str"}

// TestLoadCIFARPython reads the committed python versions (CIFAR-10 pickled
// as Python 2 wrote the published archive, CIFAR-100 with Python 3's
// protocol 5), from their archives and extracted, and checks that they give
// the same Images as the binary version of the same images.
func TestLoadCIFARPython(t *testing.T) {
	for classes, style := range cifarFixtures {
		k := cifarKinds[classes]
		wantTrain, wantTest := binaryReference(t, classes)
		dir := filepath.Join("testdata", "cifar-python", style)
		checkPython(t, k.name+" "+style+" archive", classes, dir, wantTrain, wantTest)

		names := append([]string{k.py.test, k.py.meta}, k.py.train...)
		files, err := k.readArchive(filepath.Join(dir, k.py.archive), k.py.dir, names)
		if err != nil {
			t.Fatal(err)
		}
		extracted, flat := t.TempDir(), t.TempDir()
		os.Mkdir(filepath.Join(extracted, k.py.dir), 0o755)
		for n, b := range files {
			os.WriteFile(filepath.Join(extracted, k.py.dir, n), b, 0o644)
			os.WriteFile(filepath.Join(flat, n), b, 0o644)
		}
		checkPython(t, k.name+" "+style+" extracted", classes, extracted, wantTrain, wantTest)
		checkPython(t, k.name+" "+style+" files", classes, flat, wantTrain, wantTest)
	}
}

// TestLoadCIFARPythonGenerated has Debian's Python with numpy write the
// python version in every style (Python 2's, and protocols 2 to 5 with bytes
// or str keys) and checks each against the binary version.
func TestLoadCIFARPythonGenerated(t *testing.T) {
	const python = "/usr/bin/python3"
	if exec.Command(python, "-c", "import numpy").Run() != nil {
		t.Skip(python + " with numpy not found")
	}
	out := t.TempDir()
	if b, err := exec.Command(python, filepath.Join("testdata", "gen_cifar_python.py"), out).CombinedOutput(); err != nil {
		t.Fatalf("gen_cifar_python.py: %v\n%s", err, b)
	}
	styles, err := os.ReadDir(out)
	if err != nil || len(styles) != 9 {
		t.Fatalf("gen_cifar_python.py wrote %d styles (%v), want 9", len(styles), err)
	}
	for _, classes := range []int{10, 100} {
		wantTrain, wantTest := binaryReference(t, classes)
		for _, s := range styles {
			checkPython(t, cifarKinds[classes].name+" "+s.Name(), classes, filepath.Join(out, s.Name()), wantTrain, wantTest)
		}
	}
}

// pickleBatch writes a CIFAR batch as Python 3's protocol 4 does, with str
// keys: data, an n×3072 uint8 array, and labels.
func pickleBatch(labelKey string, data []byte, labels []int) []byte {
	var b bytes.Buffer
	str := func(s string) { b.WriteByte(0x8c); b.WriteByte(byte(len(s))); b.WriteString(s) }
	b.WriteString("\x80\x04}(")
	str("data")
	b.WriteString("cnumpy.core.multiarray\n_reconstruct\ncnumpy\nndarray\nK\x00\x85C\x01b\x87R(K\x01")
	b.WriteString("J")
	binary.Write(&b, binary.LittleEndian, int32(len(data)/3072))
	b.WriteString("M\x00\x0c\x86")
	b.WriteString("cnumpy\ndtype\n")
	str("u1")
	b.WriteString("\x89\x88\x87R(K\x03")
	str("|")
	b.WriteString("NNNJ\xff\xff\xff\xffJ\xff\xff\xff\xffK\x00tb\x89B")
	binary.Write(&b, binary.LittleEndian, uint32(len(data)))
	b.Write(data)
	b.WriteString("tb")
	str(labelKey)
	b.WriteString("](")
	for _, l := range labels {
		b.WriteByte('J')
		binary.Write(&b, binary.LittleEndian, int32(l))
	}
	b.WriteString("eu.")
	return b.Bytes()
}

// TestLoadCIFARPythonErrors checks the errors of malformed pickles.
func TestLoadCIFARPythonErrors(t *testing.T) {
	k := cifarKinds[10]
	fixture, err := k.readArchive(filepath.Join("testdata", "cifar-python", "py2", k.py.archive), k.py.dir,
		append([]string{k.py.test, k.py.meta}, k.py.train...))
	if err != nil {
		t.Fatal(err)
	}
	px := make([]byte, 2*3072)
	for _, c := range []struct {
		name, file string
		b          []byte
		want       string
	}{
		{"label", "test_batch", pickleBatch("labels", px, []int{3, 10}), "test_batch: image 1: label 10 of 10 classes"},
		{"negative label", "test_batch", pickleBatch("labels", px, []int{-1, 0}), "image 0: label -1 of 10 classes"},
		{"labels", "test_batch", pickleBatch("labels", px, []int{3}), "labels is not a list of the 2 images' labels"},
		{"label key", "test_batch", pickleBatch("fine_labels", px, []int{3, 4}), "labels is not a list"},
		{"data", "test_batch", pickleBatch("labels", px[:3072*2-1], []int{3, 4}), "test_batch: pickle: at byte 6276: ndarray of shape [1 3072] with 6143 bytes"},
		{"not a dict", "data_batch_2", []byte("\x80\x02]."), "data_batch_2 holds a *dataset.pyList, want a dict"},
		{"meta", "batches.meta", []byte("\x80\x02}."), "batches.meta names 0 classes (label_names), want 10"},
		{"global", "data_batch_1", []byte("\x80\x02cos\nsystem\n(U\x02lstR."), "global os.system is not allowed"},
	} {
		dir := t.TempDir()
		for n, b := range fixture {
			if n == c.file {
				b = c.b
			}
			os.WriteFile(filepath.Join(dir, n), b, 0o644)
		}
		_, _, err := LoadCIFAR(context.Background(), CIFAROptions{Classes: 10, Dir: dir})
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: error %v, want one containing %q", c.name, err, c.want)
		}
	}
}

// TestUnpickle checks values and the errors of pickles the decoder refuses.
func TestUnpickle(t *testing.T) {
	v, err := unpickle([]byte("\x80\x02(K\x05M\x00\x01J\xfe\xff\xff\xff\x8a\x02\x00\x80\x8a\x00\x88\x89N\x8c\x01aU\x01bl."))
	if err != nil {
		t.Fatal(err)
	}
	want := []any{int64(5), int64(256), int64(-2), int64(-32768), int64(0), true, false, nil, "a", []byte("b")}
	if l, ok := v.(*pyList); !ok || !reflect.DeepEqual(l.items, want) {
		t.Errorf("unpickle: %#v, want a list of %#v", v, want)
	}
	v, err = unpickle(pickleBatch("labels", []byte(strings.Repeat("x", 3072)), []int{7}))
	if err != nil {
		t.Fatal(err)
	}
	d := v.(*pyDict)
	if a, _ := d.get("data"); a == nil || a.(*pyArray).shape[0] != 1 || len(a.(*pyArray).data) != 3072 {
		t.Errorf("unpickle: data %#v, want a 1×3072 array", a)
	}

	// A str reused many times as _codecs.encode's argument.
	reuse := "\x80\x02c_codecs\nencode\nq\x00X\x00\x01\x00\x00" + strings.Repeat("a", 256) + "q\x01" +
		strings.Repeat("h\x00h\x01U\x06latin1\x86R0", 40) + "N."
	huge := func(op string) string {
		return "\x80\x04" + op + string(binary.LittleEndian.AppendUint64(nil, 1<<62))
	}
	for _, c := range []struct{ name, b, want string }{
		{"global", "\x80\x02cos\nsystem\n(U\x02lstR.", "global os.system is not allowed"},
		{"stack global", "\x80\x04\x8c\x08builtins\x8c\x04eval\x93.", "global builtins.eval is not allowed"},
		{"protocol", "\x80\x01N.", "protocol 1: want 2 to 5"},
		{"opcode", "\x80\x02S'a'\n.", "opcode 0x53 not read"},
		{"bytes length", huge("\x8e"), "truncated: 4611686018427387904 bytes wanted"},
		{"str length", huge("\x8d"), "truncated: 4611686018427387904 bytes wanted"},
		{"frame", huge("\x95"), "truncated: frame of 4611686018427387904 bytes"},
		{"binbytes", "\x80\x03B\xff\xff\xff\x7f", "truncated: 2147483647 bytes wanted"},
		{"memo", "\x80\x02h\x07.", "memo 7 not set"},
		{"no stop", "\x80\x02N", "truncated"},
		{"empty stack", "\x80\x02.", "stack empty"},
		{"mark", "\x80\x02(.", "mark where a value was wanted"},
		{"append", "\x80\x02}K\x01a.", "append to *dataset.pyDict"},
		{"encode", reuse, "makes more bytes than the pickle holds"},
		{"latin1", "\x80\x02c_codecs\nencode\nX\x02\x00\x00\x00\xc4\x80U\x06latin1\x86R.", `"Ā" is not latin1`},
		{"dtype", "\x80\x02cnumpy\ndtype\nU\x02f4\x85R.", "numpy.dtype other than uint8"},
		{"shape", "\x80\x04\x8c\x12numpy.core.numeric\x8c\x0b_frombuffer\x93(C\x03abc\x8c\x05numpy\x8c\x05dtype\x93\x8c\x02u1\x85RK\x02K\x02\x86\x8c\x01CtR.", "ndarray of shape [2 2] with 3 bytes"},
		{"overflow", "\x80\x04\x8c\x12numpy.core.numeric\x8c\x0b_frombuffer\x93(C\x00\x8c\x05numpy\x8c\x05dtype\x93\x8c\x02u1\x85R(J\xff\xff\xff\x7fJ\xff\xff\xff\x7fJ\xff\xff\xff\x7fJ\xff\xff\xff\x7ft\x8c\x01CtR.", "ndarray shape of 4 items"},
		{"fortran", "\x80\x04\x8c\x12numpy.core.numeric\x8c\x0b_frombuffer\x93(C\x04abcd\x8c\x05numpy\x8c\x05dtype\x93\x8c\x02u1\x85RK\x02K\x02\x86\x8c\x01FtR.", "Fortran order"},
	} {
		_, err := unpickle([]byte(c.b))
		if err == nil || !strings.Contains(err.Error(), c.want) || !strings.HasPrefix(err.Error(), "pickle: ") {
			t.Errorf("%s: error %v, want one containing %q", c.name, err, c.want)
		}
	}
}

// FuzzPickle checks that no input makes the decoder, or the reading of a
// CIFAR batch from what it decodes, panic or hang.
func FuzzPickle(f *testing.F) {
	for classes, style := range cifarFixtures {
		k := cifarKinds[classes]
		files, err := k.readArchive(filepath.Join("testdata", "cifar-python", style, k.py.archive), k.py.dir, []string{k.py.test, k.py.meta})
		if err != nil {
			f.Fatal(err)
		}
		f.Add(files[k.py.test])
		f.Add(files[k.py.meta])
	}
	f.Add(pickleBatch("labels", make([]byte, 3072), []int{1}))
	f.Add([]byte("\x80\x02(K\x05M\x00\x01J\xfe\xff\xff\xff\x8a\x02\x00\x80\x88\x89Nl."))
	f.Add([]byte("\x80\x02c_codecs\nencode\nX\x01\x00\x00\x00aU\x06latin1\x86R."))
	classes := make([]string, 10)
	f.Fuzz(func(t *testing.T, b []byte) {
		v, err := unpickle(b)
		if err != nil {
			return
		}
		if _, ok := v.(*pyDict); ok {
			cifarKinds[10].decodePython([]string{"x"}, map[string][]byte{"x": b}, classes)
		}
	})
}
