// Package launch starts the ranks of a distributed job on one node, like
// torchrun: the command flock run is a thin layer over Run.
//
// # Ranks and their environment
//
// A job has NNodes·NProc ranks; each node runs its launcher with the same
// NProc and NNodes and its own NodeRank, and the launcher starts the node's
// NProc processes of one program. Every process finds its place in the job
// in torchrun's variables (RANK, WORLD_SIZE, LOCAL_RANK, LOCAL_WORLD_SIZE,
// MASTER_ADDR, MASTER_PORT), which dist.EnvFromOS reads, and the job's
// secret in FLOCK_JOB_TOKEN, which authenticates every connection of the
// job. On one node the launcher makes a secret up when the environment has
// none; several nodes must share one, so the user supplies it.
//
// # Output
//
// The ranks' standard output and error go to the launcher's, line by line,
// each line prefixed with "[rank] "; lines of different ranks never mix.
// The ranks' standard input is empty.
//
// # Stopping
//
// Each rank runs in its own process group. A signal the launcher forwards
// (SIGINT, SIGTERM) goes to every rank's group. When a rank fails, the
// others get SIGTERM, and SIGKILL after a grace period, so that a job whose
// rank died never hangs; the launcher returns the failed rank's status.
// When the launcher itself dies, even by SIGKILL, Linux and FreeBSD send
// each rank SIGTERM (a parent-death signal), so that no rank outlives it.
package launch
