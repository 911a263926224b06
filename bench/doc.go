// Package bench measures flock against its peers.
//
// # Training-step throughput
//
// A TrainStep holds one of the registered models (package nn/models), an
// SGD optimiser with momentum 0.9 and one fixed batch of random 28×28×1
// float32 images with random labels. Each Run is one training step —
// forward pass, mean cross-entropy, backward pass, optimiser step, gradients
// cleared (PyTorch's zero_grad(set_to_none=True)) — and releases every
// tensor it made, so the buffer pool serves all steps after the first.
// Reusing one batch removes data loading from the measurement: the figure
// is the engine's compute throughput,
//
//	images/s = batch · steps / elapsed seconds
//
// over the timed steps that follow the warm-up steps. MeasureTrainStep
// makes one such measurement; the Go benchmarks (go test ./bench -bench
// TrainStep) report the same figure as img/s.
//
// # Peers
//
// bench/peers/torch_train.py trains the same networks (same layer order,
// so the same parameter names) with the same step in PyTorch, and
// bench/peers/compare_train.py alternates flock's command
// (bench/cmd/trainstep) and the PyTorch script run by run, writing JSON
// Lines and a Markdown table of medians, ranges and pairwise ratios to
// bench/results/. The method is that of the project's BENCHMARKS.md: both
// in one run, alternating, the peer at its best setup.
//
// Debian's PyTorch 1.13 is the peer "torch". Today's peers — PyTorch 2
// eager and under torch.compile (ImplTorch2, ImplTorch2Compile), FFCV's
// Loader (ImplFFCV) and torchft's LocalSGD and DiLoCo (ImplTorchFT) — run
// in a virtual environment that bench/peers/setup.sh installs, pinned, and
// that package internal/peers finds; bench/peers/measure.sh re-measures
// every table that has such a peer.
//
// # Results
//
// The comparisons behind flock bench (RunAllReduce, RunGemm,
// RunLoaderComparison, RunModelComparison, RunStrategy) yield their
// measurements one by one and as a slice; the Summarize functions reduce
// them to medians, ranges and round-by-round ratios over the measured
// rounds. A run's results — MachineRecord (the command, the machine, its
// load, and the configuration's MachineSettings), the measurements and the
// summaries — are saved by the Write method of AllReduceResults,
// GemmResults, LoaderResults, ModelResults or StrategyResults as JSON Lines
// and a Markdown report, NAME_<date>.jsonl and NAME_<date>.md, the files
// of bench/results/.
package bench
