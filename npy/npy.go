// Package npy reads and writes NumPy's .npy array files, the format of
// numpy.save, so that Go programs and tests exchange arrays with Python:
// reading reference outputs saved from NumPy, FFCV or PyTorch (through
// tensor.numpy()) to compare flock's with, writing arrays for Python to
// check. Array's Uint8, Int64, Float32 and Float64 convert the elements.
//
// A file is the magic "\x93NUMPY", a major and minor version byte, the
// header length (u16 little-endian in version 1, u32 in versions 2 and 3),
// then the header: a Python dict literal such as
//
//	{'descr': '<f4', 'fortran_order': False, 'shape': (3, 4), }
//
// padded with spaces and ended by a newline, then the elements. The package
// handles arrays in C order whose descr is one of the little-endian (or
// byte-order-free) types b1, u1, i1, u2, i2, u4, i4, u8, i8, f2, f4 and f8.
// Anything else, a header that does not parse, or a payload whose length
// differs from Π shape · itemsize is an error; no input makes Read panic.
package npy

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"strconv"
	"strings"

	"github.com/flockml/flock/internal/float16"
)

// MaxBytes bounds the payload size Read accepts.
const MaxBytes = 1 << 34

const magic = "\x93NUMPY"

// Array is an n-dimensional array in C (row-major) order.
type Array struct {
	// DType is the NumPy type string with its byte order, such as "<f4",
	// "|u1" or "<i8".
	DType string
	// Shape holds the extents; an empty Shape is a scalar (one element).
	Shape []int
	// Data holds the elements, little-endian, len(Data) = NumElements()·ItemSize().
	Data []byte
}

// ItemSize returns the size in bytes of one element of dtype, or 0 when the
// package does not support dtype.
func ItemSize(dtype string) int {
	if len(dtype) < 3 {
		return 0
	}
	switch dtype[0] {
	case '<', '|', '=':
	default:
		return 0
	}
	switch dtype[1:] {
	case "b1", "u1", "i1":
		return 1
	case "u2", "i2", "f2":
		return 2
	case "u4", "i4", "f4":
		return 4
	case "u8", "i8", "f8":
		return 8
	}
	return 0
}

// ItemSize returns the size in bytes of one element.
func (a *Array) ItemSize() int { return ItemSize(a.DType) }

// NumElements returns Π Shape.
func (a *Array) NumElements() int {
	n := 1
	for _, d := range a.Shape {
		n *= d
	}
	return n
}

// kind returns the dtype without its byte-order character, or "" when the
// dtype is unsupported or Data does not match Shape.
func (a *Array) kind() string {
	size := a.ItemSize()
	if size == 0 || len(a.Data) != a.NumElements()*size {
		return ""
	}
	return a.DType[1:]
}

// typeError explains why accessor op cannot convert a.
func (a *Array) typeError(op string) error {
	if size := a.ItemSize(); size != 0 && len(a.Data) != a.NumElements()*size {
		return fmt.Errorf("npy: %s: %d data bytes for shape %v of %s", op, len(a.Data), a.Shape, a.DType)
	}
	return fmt.Errorf("npy: %s of a %s array", op, a.DType)
}

// Uint8 returns the elements of a u1 or b1 array (sharing Data).
func (a *Array) Uint8() ([]uint8, error) {
	if k := a.kind(); k != "u1" && k != "b1" {
		return nil, a.typeError("Uint8")
	}
	return a.Data, nil
}

// Int64 returns the elements of an integer or boolean array converted to
// int64 (u8 elements above MaxInt64 wrap).
func (a *Array) Int64() ([]int64, error) {
	n := a.NumElements()
	out := make([]int64, n)
	d := a.Data
	switch a.kind() {
	case "b1", "u1":
		for i := range out {
			out[i] = int64(d[i])
		}
	case "i1":
		for i := range out {
			out[i] = int64(int8(d[i]))
		}
	case "u2":
		for i := range out {
			out[i] = int64(binary.LittleEndian.Uint16(d[2*i:]))
		}
	case "i2":
		for i := range out {
			out[i] = int64(int16(binary.LittleEndian.Uint16(d[2*i:])))
		}
	case "u4":
		for i := range out {
			out[i] = int64(binary.LittleEndian.Uint32(d[4*i:]))
		}
	case "i4":
		for i := range out {
			out[i] = int64(int32(binary.LittleEndian.Uint32(d[4*i:])))
		}
	case "u8", "i8":
		for i := range out {
			out[i] = int64(binary.LittleEndian.Uint64(d[8*i:]))
		}
	default:
		return nil, a.typeError("Int64")
	}
	return out, nil
}

// Float32 returns the elements of an f2 or f4 array as float32.
func (a *Array) Float32() ([]float32, error) {
	n := a.NumElements()
	out := make([]float32, n)
	d := a.Data
	switch a.kind() {
	case "f2":
		for i := range out {
			out[i] = float16.ToFloat32(binary.LittleEndian.Uint16(d[2*i:]))
		}
	case "f4":
		for i := range out {
			out[i] = math.Float32frombits(binary.LittleEndian.Uint32(d[4*i:]))
		}
	default:
		return nil, a.typeError("Float32")
	}
	return out, nil
}

// Float64 returns the elements of any supported array converted to float64.
func (a *Array) Float64() ([]float64, error) {
	n := a.NumElements()
	d := a.Data
	switch a.kind() {
	case "f2", "f4":
		f, err := a.Float32()
		if err != nil {
			return nil, err
		}
		out := make([]float64, n)
		for i, v := range f {
			out[i] = float64(v)
		}
		return out, nil
	case "f8":
		out := make([]float64, n)
		for i := range out {
			out[i] = math.Float64frombits(binary.LittleEndian.Uint64(d[8*i:]))
		}
		return out, nil
	case "u8":
		out := make([]float64, n)
		for i := range out {
			out[i] = float64(binary.LittleEndian.Uint64(d[8*i:]))
		}
		return out, nil
	}
	ints, err := a.Int64()
	if err != nil {
		return nil, a.typeError("Float64")
	}
	out := make([]float64, n)
	for i, v := range ints {
		out[i] = float64(v)
	}
	return out, nil
}

// ReadFile reads the .npy file at path.
func ReadFile(path string) (*Array, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("npy: %w", err)
	}
	defer f.Close()
	a, err := Read(bufio.NewReaderSize(f, 1<<16))
	if err != nil {
		return nil, fmt.Errorf("%w (file %s)", err, path)
	}
	return a, nil
}

// Read decodes one array from r and checks that r holds nothing after it.
func Read(r io.Reader) (*Array, error) {
	var pre [10]byte
	if _, err := io.ReadFull(r, pre[:8]); err != nil {
		return nil, fmt.Errorf("npy: preamble: %w", unexpected(err))
	}
	if string(pre[:6]) != magic {
		return nil, errors.New("npy: preamble: not an .npy file (bad magic)")
	}
	major := pre[6]
	var hlen int
	switch major {
	case 1:
		if _, err := io.ReadFull(r, pre[8:10]); err != nil {
			return nil, fmt.Errorf("npy: preamble: %w", unexpected(err))
		}
		hlen = int(binary.LittleEndian.Uint16(pre[8:10]))
	case 2, 3:
		var l [4]byte
		if _, err := io.ReadFull(r, l[:]); err != nil {
			return nil, fmt.Errorf("npy: preamble: %w", unexpected(err))
		}
		n := binary.LittleEndian.Uint32(l[:])
		if n > 1<<20 {
			return nil, fmt.Errorf("npy: header: length %d too large", n)
		}
		hlen = int(n)
	default:
		return nil, fmt.Errorf("npy: preamble: unsupported version %d.%d", major, pre[7])
	}
	hdr := make([]byte, hlen)
	if _, err := io.ReadFull(r, hdr); err != nil {
		return nil, fmt.Errorf("npy: header: %w", unexpected(err))
	}
	a, err := parseHeader(string(hdr))
	if err != nil {
		return nil, fmt.Errorf("npy: header: %w", err)
	}
	size := int64(a.ItemSize())
	for _, d := range a.Shape {
		if d != 0 && size > MaxBytes/int64(d) {
			return nil, fmt.Errorf("npy: shape %v: more than %d bytes", a.Shape, int64(MaxBytes))
		}
		size *= int64(d)
	}
	a.Data, err = readExactly(r, size)
	if err != nil {
		return nil, fmt.Errorf("npy: data: %w", err)
	}
	var extra [1]byte
	if n, _ := io.ReadFull(r, extra[:]); n != 0 {
		return nil, errors.New("npy: data: trailing bytes after the array")
	}
	return a, nil
}

// readExactly reads n bytes, growing the buffer as data arrives so that a
// short input with a huge declared shape does not allocate the whole size.
func readExactly(r io.Reader, n int64) ([]byte, error) {
	const chunk = 1 << 24
	if n <= chunk {
		b := make([]byte, n)
		if _, err := io.ReadFull(r, b); err != nil {
			return nil, unexpected(err)
		}
		return b, nil
	}
	var buf bytes.Buffer
	buf.Grow(chunk)
	got, err := io.CopyN(&buf, r, n)
	if got != n {
		if err == nil || err == io.EOF {
			err = io.ErrUnexpectedEOF
		}
		return nil, err
	}
	return buf.Bytes(), nil
}

func unexpected(err error) error {
	if err == io.EOF {
		return io.ErrUnexpectedEOF
	}
	return err
}

// parseHeader parses the dict literal of a header.
func parseHeader(h string) (*Array, error) {
	p := &lit{s: strings.TrimRight(h, " \n\x00")}
	p.space()
	if !p.eat('{') {
		return nil, errors.New("want '{'")
	}
	a := &Array{}
	var seen [3]bool
	for {
		p.space()
		if p.eat('}') {
			break
		}
		key, err := p.str()
		if err != nil {
			return nil, fmt.Errorf("key: %w", err)
		}
		p.space()
		if !p.eat(':') {
			return nil, fmt.Errorf("key %q: want ':'", key)
		}
		p.space()
		switch key {
		case "descr":
			if a.DType, err = p.str(); err != nil {
				return nil, fmt.Errorf("descr: %w", err)
			}
			seen[0] = true
		case "fortran_order":
			var v bool
			switch {
			case p.word("False"):
			case p.word("True"):
				v = true
			default:
				return nil, errors.New("fortran_order: want True or False")
			}
			if v {
				return nil, errors.New("fortran_order: Fortran-order arrays are not supported")
			}
			seen[1] = true
		case "shape":
			if a.Shape, err = p.tuple(); err != nil {
				return nil, fmt.Errorf("shape: %w", err)
			}
			seen[2] = true
		default:
			return nil, fmt.Errorf("unknown key %q", key)
		}
		p.space()
		if !p.eat(',') {
			p.space()
			if !p.eat('}') {
				return nil, errors.New("want ',' or '}'")
			}
			break
		}
	}
	p.space()
	if p.i != len(p.s) {
		return nil, errors.New("text after the dict")
	}
	if !seen[0] || !seen[1] || !seen[2] {
		return nil, errors.New("missing descr, fortran_order or shape")
	}
	if a.ItemSize() == 0 {
		return nil, fmt.Errorf("unsupported dtype %q", a.DType)
	}
	if a.DType[0] == '=' {
		a.DType = "<" + a.DType[1:]
	}
	return a, nil
}

// lit scans the Python literals of a header.
type lit struct {
	s string
	i int
}

func (p *lit) space() {
	for p.i < len(p.s) && (p.s[p.i] == ' ' || p.s[p.i] == '\n' || p.s[p.i] == '\t') {
		p.i++
	}
}

func (p *lit) eat(c byte) bool {
	if p.i < len(p.s) && p.s[p.i] == c {
		p.i++
		return true
	}
	return false
}

func (p *lit) word(w string) bool {
	if strings.HasPrefix(p.s[p.i:], w) {
		p.i += len(w)
		return true
	}
	return false
}

// str reads a quoted string without escapes.
func (p *lit) str() (string, error) {
	if p.i >= len(p.s) || (p.s[p.i] != '\'' && p.s[p.i] != '"') {
		return "", errors.New("want a quoted string")
	}
	q := p.s[p.i]
	end := strings.IndexByte(p.s[p.i+1:], q)
	if end < 0 {
		return "", errors.New("unterminated string")
	}
	v := p.s[p.i+1 : p.i+1+end]
	if strings.ContainsRune(v, '\\') {
		return "", errors.New("escapes in strings are not supported")
	}
	p.i += end + 2
	return v, nil
}

// tuple reads a tuple of non-negative integers: (), (n,), (a, b, ...).
func (p *lit) tuple() ([]int, error) {
	if !p.eat('(') {
		return nil, errors.New("want '('")
	}
	dims := []int{}
	for {
		p.space()
		if p.eat(')') {
			return dims, nil
		}
		j := p.i
		for p.i < len(p.s) && p.s[p.i] >= '0' && p.s[p.i] <= '9' {
			p.i++
		}
		// Python 2 era files may write long integers as "3L".
		digits := p.s[j:p.i]
		p.eat('L')
		if digits == "" {
			return nil, errors.New("want a non-negative integer")
		}
		d, err := strconv.ParseInt(digits, 10, 64)
		if err != nil || d > MaxBytes {
			return nil, fmt.Errorf("extent %s too large", digits)
		}
		if len(dims) == 64 {
			return nil, errors.New("more than 64 dimensions")
		}
		dims = append(dims, int(d))
		p.space()
		if !p.eat(',') {
			p.space()
			if !p.eat(')') {
				return nil, errors.New("want ',' or ')'")
			}
			return dims, nil
		}
	}
}

// WriteFile writes a to path as a version 1.0 .npy file.
func WriteFile(path string, a *Array) error {
	f, err := os.Create(path)
	if err != nil {
		return fmt.Errorf("npy: %w", err)
	}
	bw := bufio.NewWriterSize(f, 1<<16)
	if err := Write(bw, a); err != nil {
		f.Close()
		return err
	}
	if err := bw.Flush(); err != nil {
		f.Close()
		return fmt.Errorf("npy: write %s: %w", path, err)
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("npy: write %s: %w", path, err)
	}
	return nil
}

// Write encodes a as NumPy does: a version 1.0 header (2.0 if the header
// needs more than 65535 bytes) padded with spaces so the data starts at a
// multiple of 64 bytes.
func Write(w io.Writer, a *Array) error {
	size := a.ItemSize()
	if size == 0 || a.DType[0] == '=' {
		return fmt.Errorf("npy: write: unsupported dtype %q", a.DType)
	}
	if len(a.Data) != a.NumElements()*size {
		return fmt.Errorf("npy: write: %d data bytes for shape %v of %s", len(a.Data), a.Shape, a.DType)
	}
	var sh strings.Builder
	sh.WriteByte('(')
	for i, d := range a.Shape {
		if d < 0 {
			return fmt.Errorf("npy: write: negative extent in shape %v", a.Shape)
		}
		if i > 0 {
			sh.WriteString(", ")
		}
		sh.WriteString(strconv.Itoa(d))
	}
	if len(a.Shape) == 1 {
		sh.WriteByte(',')
	}
	sh.WriteByte(')')
	dict := fmt.Sprintf("{'descr': '%s', 'fortran_order': False, 'shape': %s, }", a.DType, sh.String())
	pre := 10
	if len(dict)+1+pre > 65535 {
		pre = 12
	}
	total := (pre + len(dict) + 1 + 63) / 64 * 64
	hdr := make([]byte, total)
	copy(hdr, magic)
	if pre == 10 {
		hdr[6] = 1
		binary.LittleEndian.PutUint16(hdr[8:], uint16(total-pre))
	} else {
		hdr[6] = 2
		binary.LittleEndian.PutUint32(hdr[8:], uint32(total-pre))
	}
	n := copy(hdr[pre:], dict)
	for i := pre + n; i < total-1; i++ {
		hdr[i] = ' '
	}
	hdr[total-1] = '\n'
	if _, err := w.Write(hdr); err != nil {
		return fmt.Errorf("npy: write: %w", err)
	}
	if _, err := w.Write(a.Data); err != nil {
		return fmt.Errorf("npy: write: %w", err)
	}
	return nil
}
