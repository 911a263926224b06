package main

import (
	"bytes"
	"strings"
	"testing"
)

func TestChaosUsage(t *testing.T) {
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"--faults", "meteor"}, `unknown fault "meteor"`},
		{[]string{"--strategies", "dp,sgd"}, `unknown strategy "sgd"`},
		{[]string{"--timeout", "0s"}, "--timeout > 0"},
		{[]string{"extra"}, `unexpected argument "extra"`},
	} {
		var stdout, stderr bytes.Buffer
		if code := runChaos(c.args, &stdout, &stderr); code != exitUsage || !strings.Contains(stderr.String(), c.want) {
			t.Errorf("flock chaos %v: status %d, %q; want %d and %q", c.args, code, stderr.String(), exitUsage, c.want)
		}
	}
}
