// Package plot draws training runs from their logs: the training loss,
// the test accuracy, the synchronization period H and the bytes sent,
// against the step, one line per run, as one SVG figure of four panels
// (flock plot).
//
// # Reading
//
// Read and ReadFiles take the logs flock writes as JSON Lines. The output
// of flock train --json is one Run: the first record (kind "run") gives
// its strategy, the training records (kind "train") the loss and the
// bytes sent, the evaluations ("eval") the test accuracy, the
// synchronizations ("sync") H. A grid's runs file (flock experiment's
// runs.jsonl, each line a "record": "run") gives a Run per line: its
// test accuracy after each epoch, placed at the epoch's last step, its
// rounds' H, and what a worker sent in all, at its last step; such a file
// has no losses.
//
// Logs are read as untrusted input: a line that is not JSON, not an object
// of either format or cut short is an error that names the file and the
// line; values written as null (NaN or infinite, a diverged run's loss)
// are left out of the curves.
//
// # Drawing
//
// WriteSVG lays the four panels out two by two, each run in the same
// colour and dashes in all of them, with a legend naming the runs (Label:
// the file's name and the strategy) to their right.
package plot
