package bench

import (
	"strings"
	"testing"
)

func TestParsePeers(t *testing.T) {
	known := []string{ImplTorch, ImplTorch2, ImplTorch2Compile}
	for _, c := range []struct {
		list string
		want []string
		err  string
	}{
		{"", nil, ""},
		{"torch2", []string{"torch2"}, ""},
		{"torch2,torch2-compile,torch", []string{"torch2", "torch2-compile", "torch"}, ""},
		{"torch2, torch2-compile", []string{"torch2", "torch2-compile"}, ""},
		{"jax", nil, `unknown peer "jax" (peers: torch, torch2, torch2-compile)`},
		{"torch2,", nil, `unknown peer ""`},
		{"torch2,torch2", nil, `peer "torch2" given twice`},
	} {
		got, err := ParsePeers(c.list, known)
		if c.err != "" {
			if err == nil || !strings.Contains(err.Error(), c.err) {
				t.Errorf("ParsePeers(%q): error %v, want %q", c.list, err, c.err)
			}
			continue
		}
		if err != nil || strings.Join(got, ",") != strings.Join(c.want, ",") {
			t.Errorf("ParsePeers(%q) = %q, %v; want %q", c.list, got, err, c.want)
		}
	}
}
