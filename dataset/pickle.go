package dataset

import (
	"bytes"
	"errors"
	"fmt"
	"math"
	"unicode/utf8"
)

// This file decodes the Python pickles of CIFAR's python version: a small,
// restricted pickle machine that knows the opcodes of protocols 2 to 5
// which dicts of strings, bytes, ints, lists and numpy uint8 arrays use, and
// builds no object but those. Any other global (the way a pickle calls
// code) is an error. Every length read from the stream is checked against
// the bytes left, so a corrupt pickle cannot make it allocate more than it
// holds.

// pyTuple is a Python tuple.
type pyTuple []any

// pyList is a Python list; a pointer, as APPEND changes the list that the
// memo may also hold.
type pyList struct{ items []any }

// pyDict is a Python dict in insertion order.
type pyDict struct{ keys, vals []any }

// pyGlobal is one of the allowed globals, a callable for REDUCE.
type pyGlobal struct{ module, name string }

// pyDtype is a numpy dtype; only uint8 ("u1") is made.
type pyDtype struct{ str string }

// pyArray is a numpy uint8 array in C order: shape and data, set by BUILD
// after numpy's _reconstruct or at once by _frombuffer.
type pyArray struct {
	shape []int
	data  []byte
	built bool
}

// get returns the value of the key, a str or bytes key alike.
func (d *pyDict) get(key string) (any, bool) {
	for i, k := range d.keys {
		switch k := k.(type) {
		case string:
			if k == key {
				return d.vals[i], true
			}
		case []byte:
			if string(k) == key {
				return d.vals[i], true
			}
		}
	}
	return nil, false
}

// pyMark marks the stack for the opcodes that take the items above a MARK.
type pyMark struct{}

// allowedGlobals are the only globals a pickle may name.
var allowedGlobals = map[pyGlobal]bool{
	{"numpy.core.multiarray", "_reconstruct"}:  true,
	{"numpy._core.multiarray", "_reconstruct"}: true,
	{"numpy.core.numeric", "_frombuffer"}:      true,
	{"numpy._core.numeric", "_frombuffer"}:     true,
	{"numpy", "ndarray"}:                       true,
	{"numpy", "dtype"}:                         true,
	{"_codecs", "encode"}:                      true,
}

// unpickle decodes one pickle. Its errors are wrapped by its callers, who
// name the file.
func unpickle(b []byte) (any, error) {
	u := unpickler{b: b, memo: map[uint32]any{}}
	v, err := u.run()
	if err != nil {
		return nil, fmt.Errorf("pickle: at byte %d: %w", u.pos, err)
	}
	return v, nil
}

type unpickler struct {
	b     []byte
	pos   int
	stack []any
	memo  map[uint32]any
	made  int // bytes made by _codecs.encode
}

var errTruncated = errors.New("truncated")

// next returns the next n bytes.
func (u *unpickler) next(n uint64) ([]byte, error) {
	if n > uint64(len(u.b)-u.pos) {
		return nil, fmt.Errorf("%w: %d bytes wanted, %d left", errTruncated, n, len(u.b)-u.pos)
	}
	s := u.b[u.pos : u.pos+int(n)]
	u.pos += int(n)
	return s, nil
}

// uint reads an n-byte little-endian unsigned integer.
func (u *unpickler) uint(n int) (uint64, error) {
	s, err := u.next(uint64(n))
	if err != nil {
		return 0, err
	}
	var v uint64
	for i := n - 1; i >= 0; i-- {
		v = v<<8 | uint64(s[i])
	}
	return v, nil
}

// counted reads an n-byte length, then that many bytes.
func (u *unpickler) counted(n int) ([]byte, error) {
	l, err := u.uint(n)
	if err != nil {
		return nil, err
	}
	return u.next(l)
}

// line reads up to a newline (GLOBAL's arguments).
func (u *unpickler) line() (string, error) {
	i := bytes.IndexByte(u.b[u.pos:], '\n')
	if i < 0 {
		return "", errTruncated
	}
	s := string(u.b[u.pos : u.pos+i])
	u.pos += i + 1
	return s, nil
}

func (u *unpickler) push(v any) { u.stack = append(u.stack, v) }

func (u *unpickler) pop() (any, error) {
	if len(u.stack) == 0 {
		return nil, errors.New("stack empty")
	}
	v := u.stack[len(u.stack)-1]
	if _, ok := v.(pyMark); ok {
		return nil, errors.New("mark where a value was wanted")
	}
	u.stack = u.stack[:len(u.stack)-1]
	return v, nil
}

func (u *unpickler) top() (any, error) {
	if len(u.stack) == 0 {
		return nil, errors.New("stack empty")
	}
	v := u.stack[len(u.stack)-1]
	if _, ok := v.(pyMark); ok {
		return nil, errors.New("mark where a value was wanted")
	}
	return v, nil
}

// popMark pops the items above the topmost mark, and the mark.
func (u *unpickler) popMark() ([]any, error) {
	for i := len(u.stack) - 1; i >= 0; i-- {
		if _, ok := u.stack[i].(pyMark); ok {
			items := append([]any(nil), u.stack[i+1:]...)
			u.stack = u.stack[:i]
			return items, nil
		}
	}
	return nil, errors.New("no mark")
}

// popN pops n values as a tuple.
func (u *unpickler) popN(n int) (pyTuple, error) {
	t := make(pyTuple, n)
	for i := n - 1; i >= 0; i-- {
		v, err := u.pop()
		if err != nil {
			return nil, err
		}
		t[i] = v
	}
	return t, nil
}

func (u *unpickler) global(module, name string) error {
	g := pyGlobal{module, name}
	if !allowedGlobals[g] {
		return fmt.Errorf("global %s.%s is not allowed", module, name)
	}
	u.push(g)
	return nil
}

func (u *unpickler) run() (any, error) {
	for {
		op, err := u.next(1)
		if err != nil {
			return nil, err
		}
		switch op[0] {
		case 0x80: // PROTO
			p, err := u.uint(1)
			if err != nil {
				return nil, err
			}
			if p < 2 || p > 5 {
				return nil, fmt.Errorf("protocol %d: want 2 to 5", p)
			}
		case 0x95: // FRAME: a length the bytes that follow must hold
			n, err := u.uint(8)
			if err != nil {
				return nil, err
			}
			if n > uint64(len(u.b)-u.pos) {
				return nil, fmt.Errorf("%w: frame of %d bytes, %d left", errTruncated, n, len(u.b)-u.pos)
			}
		case '.': // STOP
			v, err := u.pop()
			if err != nil {
				return nil, err
			}
			return v, nil
		case '(': // MARK
			u.push(pyMark{})
		case '0': // POP
			if _, err := u.pop(); err != nil {
				return nil, err
			}
		case '1': // POP_MARK
			if _, err := u.popMark(); err != nil {
				return nil, err
			}
		case '2': // DUP
			v, err := u.top()
			if err != nil {
				return nil, err
			}
			u.push(v)
		case 'N':
			u.push(nil)
		case 0x88:
			u.push(true)
		case 0x89:
			u.push(false)
		case 'K', 'M': // BININT1, BININT2
			n := 1
			if op[0] == 'M' {
				n = 2
			}
			v, err := u.uint(n)
			if err != nil {
				return nil, err
			}
			u.push(int64(v))
		case 'J': // BININT
			v, err := u.uint(4)
			if err != nil {
				return nil, err
			}
			u.push(int64(int32(uint32(v))))
		case 0x8a: // LONG1: two's complement, little-endian
			n, err := u.uint(1)
			if err != nil {
				return nil, err
			}
			if n > 8 {
				return nil, fmt.Errorf("integer of %d bytes", n)
			}
			v, err := u.uint(int(n))
			if err != nil {
				return nil, err
			}
			if n > 0 && n < 8 && v&(1<<(8*n-1)) != 0 {
				v |= math.MaxUint64 << (8 * n)
			}
			u.push(int64(v))
		case 'T', 'U', 'B', 'C', 0x8e, 0x96: // BINSTRING, SHORT_BINSTRING, BINBYTES, SHORT_BINBYTES, BINBYTES8, BYTEARRAY8
			n := map[byte]int{'T': 4, 'U': 1, 'B': 4, 'C': 1, 0x8e: 8, 0x96: 8}[op[0]]
			s, err := u.counted(n)
			if err != nil {
				return nil, err
			}
			u.push(s)
		case 'X', 0x8c, 0x8d: // BINUNICODE, SHORT_BINUNICODE, BINUNICODE8
			n := map[byte]int{'X': 4, 0x8c: 1, 0x8d: 8}[op[0]]
			s, err := u.counted(n)
			if err != nil {
				return nil, err
			}
			u.push(string(s))
		case ')':
			u.push(pyTuple{})
		case 't': // TUPLE
			items, err := u.popMark()
			if err != nil {
				return nil, err
			}
			u.push(pyTuple(items))
		case 0x85, 0x86, 0x87: // TUPLE1, TUPLE2, TUPLE3
			t, err := u.popN(int(op[0]-0x85) + 1)
			if err != nil {
				return nil, err
			}
			u.push(t)
		case ']':
			u.push(&pyList{})
		case 'l': // LIST
			items, err := u.popMark()
			if err != nil {
				return nil, err
			}
			u.push(&pyList{items: items})
		case 'a', 'e': // APPEND, APPENDS
			var items []any
			if op[0] == 'a' {
				v, err := u.pop()
				if err != nil {
					return nil, err
				}
				items = []any{v}
			} else if items, err = u.popMark(); err != nil {
				return nil, err
			}
			v, err := u.top()
			if err != nil {
				return nil, err
			}
			l, ok := v.(*pyList)
			if !ok {
				return nil, fmt.Errorf("append to %T", v)
			}
			l.items = append(l.items, items...)
		case '}':
			u.push(&pyDict{})
		case 'd', 's', 'u': // DICT, SETITEM, SETITEMS
			var items []any
			if op[0] == 's' {
				t, err := u.popN(2)
				if err != nil {
					return nil, err
				}
				items = t
			} else if items, err = u.popMark(); err != nil {
				return nil, err
			}
			if len(items)%2 != 0 {
				return nil, errors.New("odd number of dict items")
			}
			var d *pyDict
			if op[0] == 'd' {
				d = &pyDict{}
				u.push(d)
			} else {
				v, err := u.top()
				if err != nil {
					return nil, err
				}
				var ok bool
				if d, ok = v.(*pyDict); !ok {
					return nil, fmt.Errorf("set item of %T", v)
				}
			}
			for i := 0; i < len(items); i += 2 {
				switch items[i].(type) {
				case string, []byte, int64:
				default:
					return nil, fmt.Errorf("dict key of type %T", items[i])
				}
				d.keys, d.vals = append(d.keys, items[i]), append(d.vals, items[i+1])
			}
		case 'q', 'r', 0x94: // BINPUT, LONG_BINPUT, MEMOIZE
			var i uint64
			switch op[0] {
			case 'q':
				i, err = u.uint(1)
			case 'r':
				i, err = u.uint(4)
			default:
				i = uint64(len(u.memo))
			}
			if err != nil {
				return nil, err
			}
			v, err := u.top()
			if err != nil {
				return nil, err
			}
			u.memo[uint32(i)] = v
		case 'h', 'j': // BINGET, LONG_BINGET
			n := 1
			if op[0] == 'j' {
				n = 4
			}
			i, err := u.uint(n)
			if err != nil {
				return nil, err
			}
			v, ok := u.memo[uint32(i)]
			if !ok {
				return nil, fmt.Errorf("memo %d not set", i)
			}
			u.push(v)
		case 'c': // GLOBAL
			module, err := u.line()
			if err != nil {
				return nil, err
			}
			name, err := u.line()
			if err != nil {
				return nil, err
			}
			if err := u.global(module, name); err != nil {
				return nil, err
			}
		case 0x93: // STACK_GLOBAL
			t, err := u.popN(2)
			if err != nil {
				return nil, err
			}
			module, ok1 := t[0].(string)
			name, ok2 := t[1].(string)
			if !ok1 || !ok2 {
				return nil, fmt.Errorf("global named by %T and %T", t[0], t[1])
			}
			if err := u.global(module, name); err != nil {
				return nil, err
			}
		case 'R': // REDUCE
			t, err := u.popN(2)
			if err != nil {
				return nil, err
			}
			g, ok := t[0].(pyGlobal)
			args, ok2 := t[1].(pyTuple)
			if !ok || !ok2 {
				return nil, fmt.Errorf("call of %T with %T", t[0], t[1])
			}
			v, err := u.call(g, args)
			if err != nil {
				return nil, err
			}
			u.push(v)
		case 'b': // BUILD
			state, err := u.pop()
			if err != nil {
				return nil, err
			}
			v, err := u.top()
			if err != nil {
				return nil, err
			}
			if err := build(v, state); err != nil {
				return nil, err
			}
		default:
			return nil, fmt.Errorf("opcode 0x%02x not read", op[0])
		}
	}
}

// call calls an allowed global with its arguments.
func (u *unpickler) call(g pyGlobal, args pyTuple) (any, error) {
	switch g.name {
	case "_reconstruct": // (ndarray, shape, dtype char): an empty array BUILD fills
		if len(args) != 3 || args[0] != (pyGlobal{"numpy", "ndarray"}) {
			return nil, fmt.Errorf("%s.%s of other than an ndarray", g.module, g.name)
		}
		return &pyArray{}, nil
	case "dtype": // (str, align, copy)
		if len(args) < 1 || pyStr(args[0]) != "u1" {
			return nil, errors.New("numpy.dtype other than uint8 (u1)")
		}
		return &pyDtype{"u1"}, nil
	case "encode": // (str, "latin1"): how protocol 2 writes bytes from Python 3
		if len(args) != 2 {
			return nil, fmt.Errorf("_codecs.encode with %d arguments", len(args))
		}
		s, ok := args[0].(string)
		if enc := pyStr(args[1]); !ok || enc != "latin1" && enc != "latin-1" {
			return nil, fmt.Errorf("_codecs.encode of %T to %q: want a str to latin1", args[0], enc)
		}
		// The same str may be encoded many times: bound what all of them
		// make by the pickle's size.
		if u.made += len(s); u.made > len(u.b) {
			return nil, errors.New("_codecs.encode makes more bytes than the pickle holds")
		}
		b := make([]byte, 0, len(s))
		for len(s) > 0 {
			r, n := utf8.DecodeRuneInString(s)
			if r == utf8.RuneError && n == 1 || r > 0xff {
				return nil, fmt.Errorf("_codecs.encode: %q is not latin1", s[:n])
			}
			b, s = append(b, byte(r)), s[n:]
		}
		return b, nil
	case "_frombuffer": // (buffer, dtype, shape, order)
		if len(args) != 4 {
			return nil, fmt.Errorf("%s.%s with %d arguments", g.module, g.name, len(args))
		}
		data, ok := args[0].([]byte)
		if !ok {
			return nil, fmt.Errorf("%s.%s of %T", g.module, g.name, args[0])
		}
		if _, ok := args[1].(*pyDtype); !ok {
			return nil, fmt.Errorf("%s.%s with dtype %T", g.module, g.name, args[1])
		}
		a := &pyArray{}
		return a, a.set(args[2], data, pyStr(args[3]) == "F")
	}
	return nil, fmt.Errorf("%s.%s is not callable", g.module, g.name)
}

// pyStr returns a str or bytes value as a string ("" for others).
func pyStr(v any) string {
	switch v := v.(type) {
	case string:
		return v
	case []byte:
		return string(v)
	}
	return ""
}

// build sets the state of a dtype (checked only for its form) or an array:
// (version, shape, dtype, is_fortran, data).
func build(v, state any) error {
	t, ok := state.(pyTuple)
	switch v := v.(type) {
	case *pyDtype:
		if !ok || len(t) < 2 {
			return fmt.Errorf("dtype state %T", state)
		}
		return nil
	case *pyArray:
		if !ok || len(t) != 5 {
			return fmt.Errorf("ndarray state %T of %d items", state, len(t))
		}
		if v.built {
			return errors.New("ndarray built twice")
		}
		if _, ok := t[2].(*pyDtype); !ok {
			return fmt.Errorf("ndarray of dtype %T", t[2])
		}
		data, ok := t[4].([]byte)
		if !ok {
			return fmt.Errorf("ndarray data of %T", t[4])
		}
		return v.set(t[1], data, t[3] == true || t[3] == int64(1))
	}
	return fmt.Errorf("BUILD of %T", v)
}

// set gives a the shape and data, whose size must match.
func (a *pyArray) set(shape any, data []byte, fortran bool) error {
	t, ok := shape.(pyTuple)
	if !ok {
		return fmt.Errorf("ndarray shape %T", shape)
	}
	size := 1
	var dims []int
	for _, d := range t {
		n, ok := d.(int64)
		if !ok || n < 0 || n > math.MaxInt32 || n != 0 && size > math.MaxInt/int(n) {
			return fmt.Errorf("ndarray shape of %d items, not all sizes", len(t))
		}
		size *= int(n)
		dims = append(dims, int(n))
	}
	if size != len(data) {
		return fmt.Errorf("ndarray of shape %v with %d bytes", dims, len(data))
	}
	if fortran && len(dims) > 1 {
		return fmt.Errorf("ndarray of shape %v in Fortran order", dims)
	}
	a.shape, a.data, a.built = dims, data, true
	return nil
}
