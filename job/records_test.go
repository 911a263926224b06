package job_test

import (
	"bytes"
	"encoding/json"
	"math"
	"testing"
	"time"

	"github.com/flockml/flock/dataset"
	"github.com/flockml/flock/job"
	"github.com/flockml/flock/train"
)

// TestWriteJSONLine checks the encoding of the JSON Lines records: as
// encoding/json's, but with NaN and ±Inf as null, nested values included.
func TestWriteJSONLine(t *testing.T) {
	nan, inf := math.NaN(), math.Inf(1)
	for _, tt := range []struct {
		v    any
		want string
	}{
		{train.Record{Kind: "train", Step: 3, Loss: nan, LR: 0.5, Acc: 0.25, ImagesPerSec: inf, Comm: &train.CommStats{Sent: 7, Consensus: math.Inf(-1)}},
			`{"kind":"train","step":3,"epoch":0,"lr":0.5,"loss":null,"acc":0.25,"img_per_s":null,"elapsed_s":0,"comm":{"bytes_sent":7,"bytes_received":0,"collectives":0,"blocked_s":0,"syncs":0,"setup_bytes":0,"eval_bytes":0,"dp_bytes":0,"consensus":null}}`},
		{struct {
			A *float64 `json:"a,omitempty"`
			B float32  `json:"b"`
			C []int    `json:"c"`
			d int
			E string `json:"-"`
		}{&nan, 1e-7, []int{1}, 0, "x"}, `{"a":null,"b":1e-7,"c":[1]}`},
	} {
		var b bytes.Buffer
		if err := job.WriteJSONLine(&b, tt.v); err != nil {
			t.Fatal(err)
		}
		if got := b.String(); got != tt.want+"\n" {
			t.Errorf("got  %s\nwant %s", got, tt.want)
		}
		if tt.want != "" {
			var m map[string]any
			if err := json.Unmarshal(b.Bytes(), &m); err != nil {
				t.Errorf("%s: %v", b.String(), err)
			}
		}
	}
}

// TestRunRecord checks what the first record says of the data: the images
// trained on, and those held out for validation instead of a test set.
func TestRunRecord(t *testing.T) {
	t.Parallel()
	data := job.Images{Train: &dataset.Images{N: 1000}, Test: &dataset.Images{N: 200}, Label: "some images"}
	cfg := train.DefaultConfig()
	cfg.TrainImages = 600
	r := job.NewRunRecord(cfg, 4, "cpu", "Local SGD", data)
	if r.Kind != "run" || r.World != 4 || r.Device != "cpu" || r.Strategy != "Local SGD" || r.Seed != cfg.Seed || r.Data != "some images" ||
		r.TrainImages != 600 || r.TestImages != 200 || r.ValImages != 0 || r.Version == "" || r.Go == "" {
		t.Errorf("run record %+v: want 4 workers on the cpu, 600 training and 200 test images", r)
	}
	cfg.ValImages = 100
	r = job.NewRunRecord(cfg, 1, "cpu", "", data)
	if r.TrainImages != 600 || r.TestImages != 0 || r.ValImages != 100 {
		t.Errorf("with 100 held out: %d training, %d test, %d validation images; want 600, 0, 100", r.TrainImages, r.TestImages, r.ValImages)
	}
}

// TestSummaryRecord checks the last record: the test figures only after
// an evaluation, and the saving of a run that communicates.
func TestSummaryRecord(t *testing.T) {
	t.Parallel()
	s := train.Summary{Epochs: 2, Steps: 20, Wall: 3 * time.Second, TrainLoss: 0.5, TestLoss: 0.25, TestAcc: 0.75}
	var b bytes.Buffer
	if err := job.WriteJSONLine(&b, job.NewSummaryRecord(s)); err != nil {
		t.Fatal(err)
	}
	want := `{"kind":"summary","epochs":2,"steps":20,"wall_s":3,"img_per_s":0,"train_loss":0.5,"train_acc":0,"data_wait_s":0}` + "\n"
	if b.String() != want {
		t.Errorf("not evaluated:\ngot  %swant %s", b.String(), want)
	}
	s.Evaluated, s.Comm = true, &train.CommStats{Sent: 100, DataParallelBytes: 400}
	r := job.NewSummaryRecord(s)
	if r.TestLoss == nil || *r.TestLoss != 0.25 || r.TestAcc == nil || *r.TestAcc != 0.75 || r.Saving != 4 {
		t.Errorf("evaluated, communicating: %+v, want test loss 0.25, accuracy 0.75 and a saving of 4", r)
	}
}
