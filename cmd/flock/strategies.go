package main

// The strategies flock train offers: each package registers its own with
// package train (train.RegisterStrategy), with its settings and flags.
import (
	_ "github.com/flockml/flock/gossip"   // dmsgd, swarm
	_ "github.com/flockml/flock/localopt" // local, diloco
	_ "github.com/flockml/flock/sparse"   // jointspar
)
