// Package train is flock's training loop: a model, a data set, an
// optimizer with a learning-rate schedule, and a Strategy that decides how
// workers cooperate, with evaluation, metrics, checkpoints and exact resume.
//
// # A run
//
// A Config names everything that changes a run's numbers: the model (a
// name of package nn/models), epochs, batch size, optimizer (SGD with
// Nesterov momentum, AdamW, LARS), learning rate, warm-up and decay, weight
// decay, label smoothing and the seed. New builds the model for the images
// it is given (their size and number of classes), the optimizer over the
// model's named parameters, the schedule over Epochs·StepsPerEpoch steps
// and a shuffling dataset.Loader; Run trains. Options hold what does not
// change the numbers: the strategy, callbacks for records and progress,
// the checkpoint path.
//
// NewWithData takes the batches from any Data instead: ImagesData over
// images in memory, or a .beton file streamed through package ffcv's
// Loader (ffcv.ImageStream), whose workers decode and augment the batches
// ahead while a step runs. Data's order and augmentations are functions of
// the position alone, so a resumed run seeks to its position and continues
// exactly. Each record says how long the steps waited for their batches
// (Record.DataWait).
//
// NewModule trains a model of the caller's — any nn.Layer — on any Task
// (Classification, Regression or one's own: a loss, an evaluation loss,
// an accuracy where it means something) over any Batches (TensorData
// holds samples of any shape in memory), with the same optimizers,
// schedules, strategies and checkpoints. Config.Device places the model,
// its optimizer state and the batches of New's loaders.
//
// One step, at step s of the run (counting from 0):
//
//	batch ← loader at (epoch, batch) = (s / StepsPerEpoch, s mod StepsPerEpoch)
//	η ← schedule.LR(s);  optimizer.SetLR(η)
//	loss ← task.Loss(model(batch.X), batch.Y);  loss.Backward()
//	strategy.AfterBackward                 (gradients final)
//	optimizer.Step()
//	strategy.AfterStep                     (parameters updated)
//	optimizer.ZeroGrad()
//
// and every tensor the step made (the batch, the outputs, the loss, the
// gradients) is released before the next, so memory stays flat.
//
// # Strategies
//
// A Strategy sees the run through a StepContext: the named parameters and
// their gradients, the optimizer, the schedule (any step's rate, for rules
// that look ahead), the run's random generator, the step, its position and
// its learning rate. SingleWorker does nothing; DataParallel averages the
// gradients over a dist.Comm (all-reduce of gradient buckets fired by
// autograd's OnGradReady hooks, registered in Setup and awaited in
// AfterBackward), so that K workers with batch b train as one with batch
// K·b; local SGD and QSR (average the parameters in AfterStep when the
// period — chosen from the next step's rate — ends) and gossip (mix with
// neighbours in AfterStep) plug in as strategies; Options.Rank and World
// shard the data among workers. A strategy with state implements Stateful
// to be checkpointed.
//
// Strategies are registered by their packages (RegisterStrategy: a
// StrategyKind with its settings, which define its flags and its JSON in a
// Config, and its constructor), and built from a Config by NewStrategy;
// what a run needs of one it asks through interfaces (WorkerCheckpoints,
// StopCoordinator, IndependentWorkers, EvalPreparer, CommReporter), never
// by its name. What they share is here: FlatParams lays the parameters out
// in one buffer on the Comm's device, CommAccount keeps the accounting
// (checkpointed), the pending consensus distance and the collectives under
// the default timeout, and averages the workers' models for evaluation;
// ConsensusSample measures the consensus distance the same way for all.
//
// # Metrics
//
// Every Config.LogEvery steps and at the end of each epoch the Trainer
// emits a training Record (mean loss and accuracy per image since the last
// one, throughput, learning rate, elapsed time); after every
// Config.EvalEvery-th epoch and after the last it evaluates on the test
// set, in evaluation mode and without recording gradients, and emits an
// evaluation Record. Records marshal as one JSON object each, for JSON
// Lines logs.
//
// # Checkpoints
//
// SaveCheckpoint writes one safetensors file, atomically (a temporary
// file, synced, renamed over the old one): the model's state dict, the
// optimizer's state, a Stateful strategy's state, and metadata holding the
// Config, the step and data position, the random generator's state and the
// metric accumulators. LoadCheckpoint into a Trainer built from the same
// Config continues the run bit for bit: its records and weights are those
// of a run never interrupted. A checkpoint of another model, or of another
// batch size or data set, is refused with an error saying which.
package train
