package localopt_test

import (
	"fmt"

	"github.com/flockml/flock/localopt"
	"github.com/flockml/flock/optim"
)

// The rounds of QSR on a cosine schedule: H = Hbase in the warm-up, then
// growing as (α/η)² while the learning rate decays.
func ExamplePlan() {
	lr := optim.Schedule{Base: 0.1, Decay: optim.Cosine, WarmupSteps: 10, TotalSteps: 110}
	rounds := localopt.Plan(localopt.QSR(0.2, 2), lr, 110)
	fmt.Println(len(rounds), "synchronizations:", localopt.FormatRounds(rounds))
	// Output:
	// 17 synchronizations: 0:2 2:2 4:2 6:2 8:2 10:4 14:4 18:4 22:4 26:4 30:4 34:5 39:6 45:7 52:10 62:18 80:30
}
