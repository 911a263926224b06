// Package experiment runs grids of training runs and reports accuracy
// against communication.
//
// A Grid trains its Runs (each a set of flock train flags with an ID, a
// strategy and a seed) on in-process workers through job.Run, Jobs at a
// time, and appends a Record of each finished run (test accuracy after
// every epoch, H of every round, bytes, synchronizations, time) to a runs
// file, which ReadRecords reads back so that a grid started again goes on
// where it stopped. Project puts each record on P nodes of a network in the
// α–β model of package netmodel, and WriteReport writes the projected runs
// as JSON Lines, a Markdown table (mean ± standard deviation over the
// seeds) and SVG figures. StrategyRuns lists the runs of the strategies
// grid (StrategyGrid), Studies the named studies that tune each arm's
// learning rate. flock experiment is the command around it.
package experiment
