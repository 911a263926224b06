package dist

import (
	"bytes"
	"testing"
)

// FuzzSHMHello feeds arbitrary bytes to the parser of a peer's
// shared-memory hello: nothing may panic, an accepted hello must re-encode
// to the bytes it came from, and any file name it carries must be one this
// package could have made.
func FuzzSHMHello(f *testing.F) {
	name, err := shmNewName()
	if err != nil {
		f.Fatal(err)
	}
	f.Add((&shmHello{id: "boot/2a", name: name, window: 1 << 20, size: 3<<20 + 4096}).marshal())
	f.Add((&shmHello{id: "boot/2a"}).marshal())
	f.Add((&shmHello{id: "x", name: "flock-1-../../../etc/passwd"}).marshal())
	f.Add([]byte("FLKS\x01\x00\xff\xff"))
	f.Fuzz(func(t *testing.T, data []byte) {
		h, err := shmReadHello(bytes.NewReader(data))
		if err != nil {
			return
		}
		if len(h.id) > shmMaxID || len(h.name) > shmMaxName {
			t.Fatalf("accepted identity of %d bytes and name of %d", len(h.id), len(h.name))
		}
		if h.name != "" && !shmValidName(h.name) {
			t.Fatalf("accepted file name %q", h.name)
		}
		if b := h.marshal(); !bytes.Equal(b, data[:len(b)]) {
			t.Fatalf("hello %+v re-encodes to %x, parsed from %x", h, b, data[:len(b)])
		}
	})
}

func TestSHMValidName(t *testing.T) {
	name, err := shmNewName()
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		ok   bool
	}{
		{name, true},
		{"flock-12-0123456789abcdef0123456789abcdef", true},
		{"flock-12-0123456789abcdef0123456789abcdeF", false},
		{"flock-12-0123456789abcdef0123456789abcde", false},
		{"flock--0123456789abcdef0123456789abcdef", false},
		{"flock-12-../0123456789abcdef0123456789ab", false},
		{"../flock-12-0123456789abcdef0123456789abcdef", false},
		{"flock-12345678901-0123456789abcdef0123456789abcdef", false},
		{"", false},
	} {
		if got := shmValidName(tc.name); got != tc.ok {
			t.Errorf("shmValidName(%q) = %v, want %v", tc.name, got, tc.ok)
		}
	}
}
