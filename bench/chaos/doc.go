// Package chaos runs flock jobs as real processes and injects faults into
// them at random moments drawn from a seed, then checks what a team that
// runs flock on a cluster relies on.
//
// A trial starts a job of one strategy (dp, Local SGD with QSR, DiLoCo,
// DmSGD, Swarm, JointSpar) under flock run, with two or three ranks on
// loopback (shared memory or TCP) or two ranks in two network namespaces
// joined by a veth pair, and strikes it once:
//
//   - kill-step: SIGKILL of a random rank between steps;
//   - kill-sync: rank 0's peers frozen (SIGSTOP) until rank 0 waits for
//     them, then rank 0 killed there and the peers let go;
//   - kill-checkpoint: a rank frozen while its checkpoint's temporary file
//     exists, then killed (checkpoints every step for this fault);
//   - sigterm: SIGTERM to flock run, as a scheduler ending the job;
//   - sigstop: a rank frozen for longer than the job's timeout;
//   - disk-full: the checkpoint directory, a 12 MiB tmpfs, filled up;
//   - loss, partition, reorder, slow, delay: on the veth link, for a
//     while, nftables rules that drop a share of the packets or all of
//     them; a share of the packets held in a slow htb queue, so that they
//     arrive late and out of order; the whole link capped at a few Mbit/s;
//     and (where the kernel has tc's netem) latency with jitter and
//     reordering.
//
// After the fault it checks:
//
//   - no process outlives its bound (the job's timeout and grace plus
//     three times an uninterrupted run) and no rank outlives its flock run;
//   - the job finishes, or fails with a log line that names the fault
//     (the killed rank, the interruption, the silent peer, the full disk);
//   - the checkpoint is the newest complete one seen before the fault or a
//     newer complete one: a set's manifest names only files that exist, and
//     no step of a complete checkpoint is lost;
//   - resumed from it (restarted when there is none), the job gives the
//     losses and accuracies of every later step, the final test loss and
//     accuracy, and the bytes and synchronizations of an uninterrupted run
//     of the same layout, bit for bit (Swarm, whose results depend on its
//     workers' timing, only has to finish). A job that finished despite the
//     fault must equal the uninterrupted run as a whole. Data parallel and
//     JointSpar check at every start that the ranks hold the same model.
//
// The faults on network namespaces, mounts, queues and nftables need root,
// ip, tc and nft (Debian's iproute2 and nftables); a kind that cannot be injected on a
// machine is reported with the reason, not counted. Run measures the time
// from each fault to the first log line naming it (detect) and to the
// first step of the resumed job (recover), and Report.WriteMarkdown turns
// the trials into the table in the README.
package chaos
