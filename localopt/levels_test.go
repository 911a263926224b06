package localopt_test

import (
	"path/filepath"
	"testing"

	"github.com/flockml/flock/dist"
	"github.com/flockml/flock/localopt"
	"github.com/flockml/flock/nn/nntest"
	"github.com/flockml/flock/train"
)

func twoLevel(kind string, sched localopt.SyncSchedule, nodeSize, innerH int) func(dist.Comm) train.Strategy {
	return withOptions(kind, localopt.Options{Schedule: sched, NodeSize: nodeSize, InnerH: innerH})
}

// TestTwoLevels runs 4 workers in 2 nodes, averaging inside each node
// every step and across all every 4: between rounds the workers of a node
// hold the same bits and the nodes differ, after a round all agree, and
// the accounting splits the levels (a node's all-reduce of 2 workers sends
// the model's bytes once).
func TestTwoLevels(t *testing.T) {
	data := bands(96, 1, 8, 8, 21)
	cfg := smallConfig()
	for _, kind := range []string{"local", "diloco"} {
		t.Run(kind, func(t *testing.T) {
			runs := runK(t, cfg, data, nil, 4, twoLevel(kind, localopt.Constant{H: 4}, 2, 1), 0, "")
			var rounds, inner int
			for i, s := range runs[0].snaps {
				same := func(a, b int) bool { return nntest.Equal(runs[a].snaps[i].params, runs[b].snaps[i].params) }
				switch {
				case s.synced:
					rounds++
					if !same(0, 1) || !same(0, 2) || !same(0, 3) {
						t.Fatalf("step %d: the workers differ after a round", s.step)
					}
				default:
					inner++
					if !same(0, 1) || !same(2, 3) {
						t.Fatalf("step %d: the workers of a node differ after its synchronization", s.step)
					}
					if same(0, 2) {
						t.Fatalf("step %d: the nodes agree between rounds", s.step)
					}
				}
			}
			st := runs[0].stats
			if st.Syncs != int64(rounds) || st.InnerSyncs != int64(inner) {
				t.Errorf("%d and %d synchronizations counted, %d rounds and %d node synchronizations seen", st.Syncs, st.InnerSyncs, rounds, inner)
			}
			params := 0
			for _, v := range runs[0].final {
				params += len(v)
			}
			if want := int64(inner) * 4 * int64(params); st.InnerSent != want {
				t.Errorf("the node level sent %d bytes, want %d (%d synchronizations of %d parameters)", st.InnerSent, want, inner, params)
			}
			one := runK(t, cfg, data, nil, 4, twoLevel(kind, localopt.Constant{H: 4}, 0, 0), 0, "")
			if got := st.Sent - st.InnerSent; got != one[0].stats.Sent {
				t.Errorf("the world level sent %d bytes, a one-level run %d", got, one[0].stats.Sent)
			}
		})
	}
}

// TestTwoLevelsOneNode: one node of all the workers averaging every step
// is Local SGD with H = 1.
func TestTwoLevelsOneNode(t *testing.T) {
	data := bands(96, 1, 8, 8, 22)
	cfg := smallConfig()
	levels := runK(t, cfg, data, nil, 2, twoLevel("local", localopt.Constant{H: 1000}, 2, 1), 0, "")
	flat := runK(t, cfg, data, nil, 2, local(localopt.Constant{H: 1}), 0, "")
	if d := nntest.MaxDiff(levels[0].final, flat[0].final); d > 1e-6 {
		t.Errorf("one node averaging every step ends %.3g from Local SGD with H = 1", d)
	}
}

// TestTwoLevelsResume: a two-level run stopped mid-round resumes to the
// uninterrupted run's parameters and counts.
func TestTwoLevelsResume(t *testing.T) {
	data := bands(96, 1, 8, 8, 23)
	cfg := smallConfig()
	ckpt := filepath.Join(t.TempDir(), "run.ckpt")
	mk := twoLevel("local", localopt.QSR(0.04, 3), 2, 2)
	whole := runK(t, cfg, data, nil, 4, mk, 0, "")
	parts := runK(t, cfg, data, nil, 4, mk, 7, ckpt)
	for r := range 4 {
		if !nntest.Equal(whole[r].final, parts[r].final) {
			t.Errorf("rank %d: final parameters differ after resuming", r)
		}
	}
	a, b := whole[0].stats, parts[0].stats
	if a.Sent != b.Sent || a.InnerSent != b.InnerSent || a.Syncs != b.Syncs || a.InnerSyncs != b.InnerSyncs {
		t.Errorf("resumed run: %+v, uninterrupted %+v", b, a)
	}
}
