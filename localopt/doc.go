// Package localopt is flock's local-update training: workers that step
// alone for H steps and then average, instead of averaging gradients at
// every step, with the synchronization period H chosen by a schedule.
//
// # Schedules
//
// A SyncSchedule chooses H once per round, at its first step t, from the
// learning rate η_t (Gu, Lyu, Arora and Huang, 2024, "A Quadratic
// Synchronization Rule for Distributed Deep Learning", §3):
//
//	Constant{H}                  H
//	PostLocal{SwitchStep, H}     1 before SwitchStep (data parallel in effect), H after
//	Power{α, γ, Hbase}           max(Hbase, ⌊(α/η_t)^γ⌋); Hbase in the warm-up and when α = 0
//	QSR(α, Hbase)                Power{α, 2, Hbase}: the Quadratic Synchronization Rule
//
// H never passes the end of the run, and η = 0 gives the steps remaining.
// Plan lists a run's rounds without training (flock sync-plan prints them).
// QSR (Gu, Lyu, Arora, Zhang, Huang, 2024: "A Quadratic Synchronization
// Rule for Distributed Deep Learning") lets H grow as 1/η² as the learning
// rate decays: few synchronizations where local steps help
// generalization, and far less communication than data parallel.
//
// # Strategies
//
// Local (Local SGD, Local AdamW, Local LARS: the inner optimizer is the
// run's) averages the parameters — and, on request, named optimizer state
// — in one flat all-reduce when a round ends. DiLoCo all-reduces the
// pseudo-gradient θ_prev − θ_k and steps θ_prev with an outer Nesterov SGD.
// Both implement train.Strategy, train.Stateful (the round, DiLoCo's
// θ_prev and outer momentum, the accounting: resuming mid-round is exact),
// train.EvalPreparer (evaluation sees the workers' average, with batch
// norm's statistics re-estimated on training micro-batches and averaged,
// without changing the training run) and train.CommReporter (bytes under
// the ring algorithms, collectives, time blocked, the consensus distance
// at each synchronization, and what data parallel would have sent).
// The package registers both with package train ("local" and "diloco",
// train.RegisterStrategy), configured by Settings, so that
// train.NewStrategy builds them from a train.Config, as flock train does.
//
// The strategies take any dist.Comm: in-process workers (dist.NewLocal),
// processes on one host or over TCP (dist.Init under flock run, torchrun,
// srun or mpirun) run the same code and give the same numbers.
package localopt
