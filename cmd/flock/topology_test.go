package main

import (
	"bytes"
	"encoding/json"
	"math"
	"strings"
	"testing"
)

// TestTopology checks flock topology's ρ against package gossip's, its
// matrix, list and JSON forms, and its refusal of bad flags.
func TestTopology(t *testing.T) {
	for _, c := range []struct {
		args []string
		want []string
	}{
		{[]string{"--kind", "exp", "--n", "16"}, []string{"static exponential graph, 16 nodes, τ = 4", "   0  0.200 0.200 0.200     · 0.200     ·", "degrees: in 4, out 4\n", "ρ = ‖W − 11ᵀ/n‖₂ = 0.6000\n"}},
		{[]string{"--kind", "exp", "--n", "32"}, []string{"node   in  out   self", "   0    5    5 0.1667  1 (0.1667) 2 (0.1667) 4 (0.1667) 8 (0.1667) 16 (0.1667)\n", "= 0.6667\n"}},
		{[]string{"--kind", "ring", "--n", "8"}, []string{"ring, 8 nodes", "degrees: in 2, out 2\n", "= 0.8047\n"}},
		{[]string{"--kind", "mesh", "--n", "6"}, []string{"2-D mesh 2×3", "degrees: in 2 to 3, out 2 to 3\n"}},
		{[]string{"--kind", "one-peer-exp", "--n", "8", "--iter", "2"}, []string{"W(2)", "   0  0.500     ·     ·     · 0.500", "ρ of one period, W(4)⋯W(2) = 0.0000\n"}},
		{[]string{"--kind", "full", "--n", "40"}, []string{"1 (0.0250)", "… 31 more\n", "degrees: in 39, out 39\n", "= 0.0000\n"}},
		{[]string{"--kind", "matching", "--base", "ring", "--n", "4", "--seed", "9", "--iter", "5"}, []string{"random matchings of the ring, 4 nodes (seed 9)", "degrees: in 1, out 1\n", "= 1.0000\n"}},
	} {
		var stdout, stderr bytes.Buffer
		if code := run(append([]string{"topology"}, c.args...), &stdout, &stderr); code != exitOK {
			t.Fatalf("%v: exit %d: %s", c.args, code, stderr.String())
		}
		for _, w := range c.want {
			if !strings.Contains(stdout.String(), w) {
				t.Errorf("%v: output lacks %q:\n%s", c.args, w, stdout.String())
			}
		}
	}

	var stdout, stderr bytes.Buffer
	if code := run([]string{"topology", "--kind", "ring", "--n", "16", "--json"}, &stdout, &stderr); code != exitOK {
		t.Fatalf("--json: exit %d: %s", code, stderr.String())
	}
	var rec topologyRecord
	if err := json.Unmarshal(stdout.Bytes(), &rec); err != nil || strings.Count(stdout.String(), "\n") != 1 {
		t.Fatalf("--json: %v in %q", err, stdout.String())
	}
	if math.Abs(rec.Rho-0.9493) > 5e-5 || rec.N != 16 || len(rec.Nodes) != 16 || rec.RhoPeriod != nil {
		t.Errorf("--json: ρ %v, n %d, %d nodes, period ρ %v", rec.Rho, rec.N, len(rec.Nodes), rec.RhoPeriod)
	}
	if nd := rec.Nodes[0]; math.Abs(nd.Self-1.0/3) > 1e-15 || len(nd.In) != 2 || nd.In[0].Node != 1 || nd.In[1].Node != 15 {
		t.Errorf("--json: node 0 = %+v", nd)
	}

	for _, bad := range [][]string{
		{"--kind", "star"}, {"--n", "0"}, {"--n", "-3"}, {"--n", "5000"}, {"--n", "x"}, {"--iter", "-1"},
		{"--kind", "ring", "--seed", "3"}, {"--kind", "exp", "--base", "ring"},
		{"--kind", "matching", "--base", "mesh"}, {"--kind", "matching", "--base", "one-peer-exp"},
		{"--bogus"}, {"extra"},
	} {
		stdout.Reset()
		stderr.Reset()
		code := run(append([]string{"topology"}, bad...), &stdout, &stderr)
		if code != exitUsage || strings.Count(stderr.String(), "\n") != 1 || !strings.HasPrefix(stderr.String(), "flock topology: ") || stdout.Len() != 0 {
			t.Errorf("%v: exit %d, stderr %q, stdout %q", bad, code, stderr.String(), stdout.String())
		}
	}
	stdout.Reset()
	if code := run([]string{"topology", "--help"}, &stdout, &stderr); code != exitOK || !strings.Contains(stdout.String(), "Usage: flock topology") {
		t.Errorf("--help: exit %d, %q", code, stdout.String())
	}
}
