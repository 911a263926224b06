// Package job runs a training job: the workers this process holds — one
// alone, K in-process workers over dist.NewLocal, or this process's rank of
// a world a launcher started — each a train.Trainer with the strategy its
// Config names, trained to the end or to a coordinated stop, with
// checkpoints at the stop and the first failure reported as such.
//
// It is the loop that flock train and flock experiment run, as a library:
//
//	data := job.Images{Train: trainSet, Test: testSet} // or job.OpenBeton(...)
//	res, err := job.Run(ctx, job.Spec{Config: cfg, Comms: dist.NewLocal(4),
//		Build: data.Build, StepsPerEpoch: data.StepsPerEpoch(cfg, 4), Test: true})
//
// Rank 0 evaluates, reports (Spec.OnRecord, OnProgress) and writes
// checkpoints; under a strategy whose workers' models differ
// (train.WorkerCheckpoints) every rank writes its file of the checkpoint
// set and every worker watches ctx, the strategy stopping them together at
// its next synchronization (train.StopCoordinator). Otherwise rank 0 alone
// watches ctx; on a stop it checkpoints and closes its Comm, which stops
// the others. A worker that fails closes its Comm, so that the others stop
// with an error naming it instead of waiting; Run returns the first
// failure as a *WorkerError.
//
// Around the loop: ParseDevice and Device.Open give the device a process
// trains on (cpu, cuda, cuda:N), JoinWorld the world communicator of a
// launched rank (NCCL between GPUs, TCP or shared memory otherwise);
// WriteJSONLine writes a run's RunRecord, its train.Records and its
// SummaryRecord as JSON Lines, and OpenTensorBoard its records as
// TensorBoard scalars.
package job
