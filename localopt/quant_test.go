package localopt_test

import (
	"fmt"
	"path/filepath"
	"strings"
	"testing"

	"github.com/flockml/flock/dist"
	"github.com/flockml/flock/localopt"
	"github.com/flockml/flock/nn/nntest"
	"github.com/flockml/flock/train"
)

// withOptions makes Local SGD ("local") or DiLoCo with the default outer
// optimizer over opt.
func withOptions(kind string, opt localopt.Options) func(dist.Comm) train.Strategy {
	if opt.BNBatches == 0 {
		opt.BNBatches = 2
	}
	return func(c dist.Comm) train.Strategy {
		var (
			s   train.Strategy
			err error
		)
		if kind == "local" {
			s, err = localopt.NewLocal(c, opt)
		} else {
			s, err = localopt.NewDiLoCo(c, opt, localopt.DefaultOuter())
		}
		if err != nil {
			panic(err)
		}
		return s
	}
}

func quantized(kind string, sched localopt.SyncSchedule, q train.Quantization) func(dist.Comm) train.Strategy {
	return withOptions(kind, localopt.Options{Schedule: sched, Quantization: q})
}

// TestQuantizedSync runs Local SGD and DiLoCo with 8- and 4-bit
// synchronizations: after each the workers hold bit-identical parameters,
// the run stays near the float32 one (nearer at 8 bits), and each
// synchronization sends about 4/(bits/8 + 4/64) times fewer bytes.
func TestQuantizedSync(t *testing.T) {
	data := bands(96, 1, 8, 8, 11)
	cfg := smallConfig()
	sched := localopt.Constant{H: 3}
	for _, kind := range []string{"local", "diloco"} {
		full := runK(t, cfg, data, nil, 3, quantized(kind, sched, train.Quantization{}), 0, "")
		var prevDiff float64
		for _, q := range []train.Quantization{{Bits: 4, ErrorFeedback: true}, {Bits: 4}, {Bits: 8}} {
			t.Run(fmt.Sprintf("%s/%d bits/feedback %v", kind, q.Bits, q.ErrorFeedback), func(t *testing.T) {
				runs := runK(t, cfg, data, nil, 3, quantized(kind, sched, q), 0, "")
				for i, s := range runs[0].snaps {
					for r := 1; r < 3; r++ {
						if s.synced && !nntest.Equal(s.params, runs[r].snaps[i].params) {
							t.Fatalf("step %d: rank %d differs from rank 0 after a synchronization", s.step, r)
						}
					}
				}
				diff := nntest.MaxDiff(full[0].final, runs[0].final)
				t.Logf("largest difference from the float32 run: %.3g", diff)
				if diff == 0 || diff > 0.05 {
					t.Errorf("final parameters %.3g from the float32 run's: want a small difference, not none", diff)
				}
				if q.Bits == 8 && !q.ErrorFeedback && diff >= prevDiff {
					t.Errorf("8 bits end %.3g from the float32 run, 4 bits %.3g: want 8 bits nearer", diff, prevDiff)
				}
				prevDiff = diff
				a, b := full[0].stats, runs[0].stats
				if a.Syncs != b.Syncs {
					t.Fatalf("%d synchronizations, float32 %d", b.Syncs, a.Syncs)
				}
				want := 4 / (float64(q.Bits)/8 + 4.0/train.DefaultQuantBlock)
				if got := float64(a.Sent) / float64(b.Sent); got < 0.9*want || got > want {
					t.Errorf("sent %d bytes, float32 %d: %.2f× fewer, want about %.2f×", b.Sent, a.Sent, got, want)
				}
			})
		}
	}
}

// TestQuantizedResume: a run with quantized synchronizations and error
// feedback stopped mid-round resumes to the uninterrupted run's
// parameters bit for bit.
func TestQuantizedResume(t *testing.T) {
	data := bands(96, 1, 8, 8, 12)
	test := bands(40, 1, 8, 8, 13)
	q := train.Quantization{Bits: 8, ErrorFeedback: true}
	for _, kind := range []string{"local", "diloco"} {
		t.Run(kind, func(t *testing.T) {
			cfg := smallConfig()
			ckpt := filepath.Join(t.TempDir(), "run.ckpt")
			mk := quantized(kind, localopt.Constant{H: 4}, q)
			whole := runK(t, cfg, data, test, 2, mk, 0, "")
			parts := runK(t, cfg, data, test, 2, mk, 7, ckpt)
			for r := range 2 {
				if !nntest.Equal(whole[r].final, parts[r].final) {
					t.Errorf("rank %d: final parameters differ after resuming", r)
				}
			}
			if whole[0].stats.Sent != parts[0].stats.Sent || whole[0].stats.Syncs != parts[0].stats.Syncs {
				t.Errorf("resumed run sent %d bytes in %d syncs, uninterrupted %d in %d", parts[0].stats.Sent, parts[0].stats.Syncs, whole[0].stats.Sent, whole[0].stats.Syncs)
			}
		})
	}
}

// TestQuantizationStateMismatch: a checkpoint's strategy state written
// under one quantization is refused by a strategy under another, or under
// none, and the reverse (the check is the core's, DiLoCo's too).
func TestQuantizationStateMismatch(t *testing.T) {
	sched := localopt.Constant{H: 2}
	for _, c := range []struct{ from, to train.Quantization }{
		{train.Quantization{Bits: 8}, train.Quantization{Bits: 4}},
		{train.Quantization{Bits: 8}, train.Quantization{}},
		{train.Quantization{}, train.Quantization{Bits: 8}},
	} {
		comm := dist.NewLocal(1)[0]
		from := quantized("local", sched, c.from)(comm).(train.Stateful)
		to := quantized("local", sched, c.to)(comm).(train.Stateful)
		ts, sc := from.State()
		sc["round.h"] = "2" // as after Setup
		if err := to.LoadState(ts, sc); err == nil || !strings.Contains(err.Error(), "quantization") {
			t.Errorf("state written with %+v loaded under %+v: %v, want an error naming the quantization", c.from, c.to, err)
		}
	}
}
