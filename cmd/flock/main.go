// Command flock trains image models.
//
// Usage:
//
//	flock <command> [flags]
//
// The commands are:
//
//	train    train a model on Fashion-MNIST (see flock train --help)
//	run      start the ranks of a distributed job (see flock run --help)
//	bench    measure flock against its peers (see flock bench --help)
//	convert  write a data set as an FFCV .beton file
//	experiment  run a grid of training runs and report accuracy against communication
//	sync-plan  print the rounds of a local-update synchronization rule
//	topology   print a decentralized topology's weights and spectral gap
//	doctor   report the GPUs, CUDA driver and libraries found
//	plot     draw runs' loss, accuracy, H and bytes sent from their JSON Lines
//	help     show the help of a command
//
// Exit status: 0 on success, 1 when the work failed (missing data, an I/O
// error), 2 for a usage error (unknown command or flag, a bad value), 130
// when interrupted.
package main

import (
	"fmt"
	"io"
	"os"
	"strings"
)

// Exit statuses.
const (
	exitOK          = 0
	exitFailure     = 1
	exitUsage       = 2
	exitInterrupted = 130
)

// command is a subcommand of flock.
type command struct {
	name    string
	summary string
	run     func(args []string, stdout, stderr io.Writer) int
	help    func(w io.Writer)
}

// extraCommands are the commands that files of this package add from
// their init functions, listed after the core ones in the order added.
var extraCommands []command

func commands() []command {
	return append([]command{
		{"train", "train a model on Fashion-MNIST", runTrain, trainHelp},
		{"run", "start the ranks of a distributed job (like torchrun)", runLaunch, launchHelp},
		{"bench", "measure flock against its peers", runBench, benchHelp},
	}, extraCommands...)
}

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

// run executes the command line args and returns the exit status.
func run(args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		usage(stderr)
		return exitUsage
	}
	name := args[0]
	switch name {
	case "-h", "-help", "--help":
		usage(stdout)
		return exitOK
	case "help":
		if len(args) == 1 {
			usage(stdout)
			return exitOK
		}
		if c, ok := lookup(args[1]); ok {
			c.help(stdout)
			return exitOK
		}
		fmt.Fprintf(stderr, "flock help: unknown command %q (commands: %s)\n", args[1], commandNames())
		return exitUsage
	}
	if c, ok := lookup(name); ok {
		return c.run(args[1:], stdout, stderr)
	}
	if strings.HasPrefix(name, "-") {
		fmt.Fprintf(stderr, "flock: flag %s before a command; run 'flock --help' for usage\n", name)
	} else {
		fmt.Fprintf(stderr, "flock: unknown command %q (commands: %s); run 'flock --help' for usage\n", name, commandNames())
	}
	return exitUsage
}

func lookup(name string) (command, bool) {
	for _, c := range commands() {
		if c.name == name {
			return c, true
		}
	}
	return command{}, false
}

func commandNames() string {
	var names []string
	for _, c := range commands() {
		names = append(names, c.name)
	}
	return strings.Join(names, ", ")
}

func usage(w io.Writer) {
	fmt.Fprint(w, `flock trains image models (a Go deep-learning engine).

Usage:
  flock <command> [flags]

Commands:
`)
	for _, c := range commands() {
		fmt.Fprintf(w, "  %-8s %s\n", c.name, c.summary)
	}
	fmt.Fprint(w, `  help     show the help of a command

Run 'flock help <command>' or 'flock <command> --help' for its flags.
Exit status: 0 success, 1 failure, 2 usage error, 130 interrupted.
`)
}
