package localopt_test

import (
	"math"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/flockml/flock/dist"
	"github.com/flockml/flock/localopt"
	"github.com/flockml/flock/nn"
	"github.com/flockml/flock/nn/nntest"
	"github.com/flockml/flock/tensor"
	"github.com/flockml/flock/train"
)

func streamed(sched localopt.SyncSchedule, fragments, overlap int) func(dist.Comm) train.Strategy {
	return withOptions("local", localopt.Options{Schedule: sched, Fragments: fragments, Overlap: overlap})
}

// flatTrace wraps a strategy and records every worker's parameters, end to
// end in state-dict order, before and after each AfterStep.
type flatTrace struct {
	train.Strategy
	before, after [][]float32
}

func flatten(ps []nn.NamedParameter) []float32 {
	var out []float32
	for _, p := range ps {
		out = append(out, p.Param.Value.Float32s()...)
	}
	return out
}

func (f *flatTrace) AfterStep(s *train.StepContext) error {
	f.before = append(f.before, flatten(s.Params))
	err := f.Strategy.AfterStep(s)
	f.after = append(f.after, flatten(s.Params))
	return err
}

func (f *flatTrace) CommStats() train.CommStats { return f.Strategy.(train.CommReporter).CommStats() }

// TestStreamMergeRule checks streaming synchronization's schedule and
// merge against the rule computed here: with P = 2 fragments and H = 4,
// fragment 0 is launched after step 2 of each round and fragment 1 after
// step 4 (in the last round, cut to 2 steps, after steps 1 and 2); with
// an overlap of 1 each is merged one step later, or at once after the
// run's last step, as θ ← mean_k θ_k(launch) + (θ(merge) − θ(launch)) on
// its elements; nothing else changes.
func TestStreamMergeRule(t *testing.T) {
	data := bands(96, 1, 8, 8, 31)
	cfg := smallConfig()
	cfg.Momentum, cfg.Nesterov = 0, false
	const k, h, p, overlap = 2, 4, 2, 1
	traces := make([]*flatTrace, k)
	var mu sync.Mutex
	mk := func(c dist.Comm) train.Strategy {
		tr := &flatTrace{Strategy: streamed(localopt.Constant{H: h}, p, overlap)(c)}
		mu.Lock()
		traces[c.Rank()] = tr
		mu.Unlock()
		return tr
	}
	runK(t, cfg, data, nil, k, mk, 0, "")
	n := len(traces[0].after[0])
	steps := len(traces[0].after)
	// launched[t] is the fragment launched after step t (0-based).
	type frag struct{ lo, hi int }
	launched := map[int]frag{}
	for start := 0; start < steps; start += h {
		hr := min(h, steps-start)
		for q := range p {
			at := start + (hr*(q+1)+p-1)/p - 1
			f := launched[at]
			if f.hi == 0 {
				f.lo = q * n / p
			}
			f.hi = (q + 1) * n / p
			launched[at] = f
		}
	}
	merges := 0
	for step := range steps {
		want := make([][]float32, k)
		for r := range k {
			want[r] = append([]float32(nil), traces[r].before[step]...)
		}
		// The fragment launched overlap steps ago merges now.
		if f, ok := launched[step-overlap]; ok {
			merges++
			for r := range k {
				for i := f.lo; i < f.hi; i++ {
					var mean float64
					for q := range k {
						mean += float64(traces[q].after[step-overlap][i])
					}
					want[r][i] = float32(mean/k + float64(traces[r].before[step][i]) - float64(traces[r].after[step-overlap][i]))
				}
			}
		}
		// After the last step, one launched now merges at once.
		if f, ok := launched[step]; ok && step == steps-1 {
			merges++
			for r := range k {
				for i := f.lo; i < f.hi; i++ {
					var mean float64
					for q := range k {
						mean += float64(traces[q].before[step][i])
					}
					want[r][i] = float32(mean / k)
				}
			}
		}
		for r := range k {
			for i, a := range traces[r].after[step] {
				if d := math.Abs(float64(a - want[r][i])); d > 1e-6*(1+math.Abs(float64(want[r][i]))) {
					t.Fatalf("after step %d, rank %d, element %d of %d: %v, want %v", step+1, r, i, n, a, want[r][i])
				}
			}
		}
	}
	if merges != len(launched) || merges != 2*(steps/h)+2 {
		t.Errorf("%d merges, %d launches in %d steps, want %d", merges, len(launched), steps, 2*(steps/h)+2)
	}
}

// TestStreamBytes checks that P fragments send a P-th of the model per
// synchronization, P times as often, and count the time in flight.
func TestStreamBytes(t *testing.T) {
	data := bands(96, 1, 8, 8, 32)
	cfg := smallConfig()
	// 18 steps: 6 rounds of 3, a fragment synchronized after each step.
	whole := runK(t, cfg, data, nil, 2, local(localopt.Constant{H: 3}), 0, "")[0].stats
	st := runK(t, cfg, data, nil, 2, streamed(localopt.Constant{H: 3}, 3, 1), 0, "")[0].stats
	if st.Syncs != 3*whole.Syncs || st.Syncs != 18 {
		t.Errorf("%d synchronizations with 3 fragments, %d whole: want 18, 3×", st.Syncs, whole.Syncs)
	}
	per, perWhole := float64(st.Sent)/float64(st.Syncs), float64(whole.Sent)/float64(whole.Syncs)
	if r := perWhole / per; math.Abs(r-3) > 0.01 {
		t.Errorf("bytes per synchronization %.0f, whole %.0f: ratio %.3f, want ≈ 3", per, perWhole, r)
	}
	if math.Abs(float64(st.Sent)/float64(whole.Sent)-1) > 0.01 {
		t.Errorf("sent %d with fragments, %d whole: want about the same", st.Sent, whole.Sent)
	}
	if h := st.Hidden(); st.SyncSeconds <= 0 || st.SyncWaited > st.Blocked+1e-9 || h < 0 || h > 1 {
		t.Errorf("sync %vs, waited %vs, blocked %vs: want time in flight, the wait within the blocked time", st.SyncSeconds, st.SyncWaited, st.Blocked)
	}
}

// TestStreamResume stops a streamed run while a fragment's all-reduce is
// in flight and resumes it: the parameters, records and counts are the
// uninterrupted run's; evaluating mid-flight changes nothing of training.
func TestStreamResume(t *testing.T) {
	data := bands(96, 1, 8, 8, 33)
	test := bands(40, 1, 8, 8, 34)
	cfg := smallConfig()
	mk := streamed(localopt.QSR(0.04, 3), 3, 2)
	ckpt := filepath.Join(t.TempDir(), "run.ckpt")
	whole := runK(t, cfg, data, test, 2, mk, 0, "")
	parts := runK(t, cfg, data, test, 2, mk, 7, ckpt)
	quiet := runK(t, cfg, data, nil, 2, mk, 0, "")
	for r := range 2 {
		if !nntest.Equal(whole[r].final, parts[r].final) {
			t.Errorf("rank %d: final parameters differ after resuming", r)
		}
		if !nntest.Equal(whole[r].final, quiet[r].final) {
			t.Errorf("rank %d: evaluating changed the trajectory", r)
		}
	}
	a, b := whole[0].stats, parts[0].stats
	if a.Sent != b.Sent || a.Syncs != b.Syncs || a.Consensus != b.Consensus {
		t.Errorf("resumed run: %+v, uninterrupted %+v", b, a)
	}
	if len(whole[0].records) != len(parts[0].records) {
		t.Fatalf("%d records, resumed run %d", len(whole[0].records), len(parts[0].records))
	}
	for i, ra := range whole[0].records {
		rb := parts[0].records[i]
		if ra.Kind != rb.Kind || ra.Step != rb.Step || ra.Loss != rb.Loss || ra.Acc != rb.Acc {
			t.Errorf("record %d: %+v, resumed %+v", i, ra, rb)
		}
	}
}

// TestStreamStateMismatch refuses the state of a streamed run in a run
// that is not streamed, and the other way round.
func TestStreamStateMismatch(t *testing.T) {
	data := bands(96, 1, 8, 8, 35)
	cfg := smallConfig()
	for name, pair := range map[string][2]func(dist.Comm) train.Strategy{
		"streamed then whole": {streamed(localopt.Constant{H: 4}, 2, 1), local(localopt.Constant{H: 4})},
		"whole then streamed": {local(localopt.Constant{H: 4}), streamed(localopt.Constant{H: 4}, 2, 1)},
		"other fragments":     {streamed(localopt.Constant{H: 4}, 2, 1), streamed(localopt.Constant{H: 4}, 3, 1)},
	} {
		t.Run(name, func(t *testing.T) {
			var first train.Strategy
			var mu sync.Mutex
			runK(t, cfg, data, nil, 2, func(c dist.Comm) train.Strategy {
				s := pair[0](c)
				mu.Lock()
				if c.Rank() == 0 {
					first = s
				}
				mu.Unlock()
				return s
			}, 0, "")
			_, sc := first.(train.Stateful).State()
			err := pair[1](dist.NewLocal(1)[0]).(train.Stateful).LoadState(map[string]*tensor.Tensor{}, sc)
			if err == nil || !strings.Contains(err.Error(), "streaming") {
				t.Errorf("err %v, want one naming streaming synchronization", err)
			}
		})
	}
}

// TestStreamSettings refuses streaming where it does not apply.
func TestStreamSettings(t *testing.T) {
	for _, c := range []struct {
		kind string
		set  func(s *localopt.Settings)
		want string
	}{
		{"local", func(s *localopt.Settings) { s.Overlap = 1; s.SyncBits = 8 }, "drop sync-bits"},
		{"local", func(s *localopt.Settings) { s.Fragments = -1 }, "want ≥ 0"},
	} {
		s := localopt.DefaultSettings()
		c.set(s)
		if err := s.Validate(c.kind); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s %+v: err %v, want %q", c.kind, *s, err, c.want)
		}
	}
	for _, kind := range []string{"local", "diloco"} {
		s := localopt.DefaultSettings()
		s.Fragments, s.Overlap = 4, 2
		if err := s.Validate(kind); err != nil {
			t.Errorf("%s, 4 fragments, overlap 2: %v", kind, err)
		}
	}
}

func streamedDiLoCo(sched localopt.SyncSchedule, fragments, overlap int, outer localopt.OuterOptions) func(dist.Comm) train.Strategy {
	return func(c dist.Comm) train.Strategy {
		d, err := localopt.NewDiLoCo(c, localopt.Options{Schedule: sched, BNBatches: 2, Fragments: fragments, Overlap: overlap}, outer)
		if err != nil {
			panic(err)
		}
		return d
	}
}

// TestStreamDiLoCo checks streamed DiLoCo: with an outer SGD of rate 1 and
// no momentum each fragment's outer step puts the workers' mean in
// θ_prev, which is streamed Local SGD (up to rounding); with the default
// outer Nesterov SGD it differs from it, and a run stopped with a
// fragment in flight resumes bit for bit.
func TestStreamDiLoCo(t *testing.T) {
	data := bands(96, 1, 8, 8, 36)
	cfg := smallConfig()
	sched := localopt.QSR(0.04, 3)
	loc := runK(t, cfg, data, nil, 2, streamed(sched, 3, 1), 0, "")
	plain := runK(t, cfg, data, nil, 2, streamedDiLoCo(sched, 3, 1, localopt.OuterOptions{LR: 1}), 0, "")
	outer := runK(t, cfg, data, nil, 2, streamedDiLoCo(sched, 3, 1, localopt.DefaultOuter()), 0, "")
	for r := range 2 {
		for name, want := range loc[r].final {
			got := plain[r].final[name]
			for i := range want {
				if d := math.Abs(float64(got[i] - want[i])); d > 1e-5*(1+math.Abs(float64(want[i]))) {
					t.Fatalf("rank %d %s[%d]: DiLoCo with outer lr 1 %v, Local %v", r, name, i, got[i], want[i])
				}
			}
		}
		if nntest.Equal(outer[r].final, loc[r].final) {
			t.Errorf("rank %d: the outer Nesterov step changed nothing", r)
		}
	}
	if plain[0].stats.Syncs != loc[0].stats.Syncs || plain[0].stats.Sent != loc[0].stats.Sent {
		t.Errorf("DiLoCo sent %d bytes in %d syncs, Local %d in %d", plain[0].stats.Sent, plain[0].stats.Syncs, loc[0].stats.Sent, loc[0].stats.Syncs)
	}
	ckpt := filepath.Join(t.TempDir(), "run.ckpt")
	mk := streamedDiLoCo(sched, 3, 2, localopt.DefaultOuter())
	parts := runK(t, cfg, data, nil, 2, mk, 7, ckpt)
	whole := runK(t, cfg, data, nil, 2, mk, 0, "")
	for r := range 2 {
		if !nntest.Equal(whole[r].final, parts[r].final) {
			t.Errorf("rank %d: final parameters differ after resuming", r)
		}
	}
}
