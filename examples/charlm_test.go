package examples

import (
	"regexp"
	"strconv"
	"testing"
)

// TestCharLM runs the module in charlm/, a character-level transformer
// defined in the example and trained with flock as a library by 4
// in-process workers under Local AdamW with QSR, for 3 epochs: the
// validation loss falls by more than 1.5 nats a character, the workers
// synchronize (less often than they step) and end with identical
// parameters, and the trained model writes a sample.
func TestCharLM(t *testing.T) {
	run := exampleRunner(t, "charlm")
	out, err := run("--epochs", "3", "--sample", "40")
	if err != nil {
		t.Fatalf("go run: %v\n%s", err, out)
	}
	number := func(pattern string) float64 {
		m := regexp.MustCompile(pattern).FindStringSubmatch(out)
		if m == nil {
			t.Fatalf("no %q in the output:\n%s", pattern, out)
		}
		v, err := strconv.ParseFloat(m[1], 64)
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
	start := number(`validation loss at the start: ([0-9.]+)`)
	final := number(`final validation loss: ([0-9.]+)`)
	steps := number(`after ([0-9]+) steps`)
	syncs := number(`synchronizations: ([0-9]+)`)
	if !(final < start-1.5) {
		t.Errorf("validation loss %v from %v: want it 1.5 nats a character lower", final, start)
	}
	if !(syncs > 0 && syncs < steps) {
		t.Errorf("%v synchronizations in %v steps", syncs, steps)
	}
	if !regexp.MustCompile(`workers identical after the last synchronization: true`).MatchString(out) ||
		!regexp.MustCompile(`(?s)sample:\n.{32}\|.{40}`).MatchString(out) {
		t.Errorf("the workers differ, or no sample of 40 characters:\n%s", out)
	}
}
