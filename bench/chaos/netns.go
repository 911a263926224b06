package chaos

import (
	"fmt"
	"os"
	"os/exec"
	"strings"
)

// network is a pair of network namespaces joined by a veth pair: node i
// of a job runs in ns[i] with address addr[i]. Faults are nftables rules,
// htb queues and (where the kernel has it) a netem queue on node 0's side
// of the link; nothing outside the two namespaces is touched.
type network struct {
	ns    [2]string
	dev   [2]string
	addr  [2]string
	netem bool // the kernel has the netem queueing discipline
}

// run runs a command, returning its combined output in the error.
func run(argv ...string) error {
	out, err := exec.Command(argv[0], argv[1:]...).CombinedOutput()
	if err != nil {
		return fmt.Errorf("%s: %w: %s", strings.Join(argv, " "), err, strings.TrimSpace(string(out)))
	}
	return nil
}

// newNetwork makes the two namespaces and their link. tag makes the names
// unique to this suite (at most 8 characters).
func newNetwork(tag string) (*network, error) {
	if os.Geteuid() != 0 {
		return nil, fmt.Errorf("network namespaces need root")
	}
	for _, tool := range []string{"ip", "nft"} {
		if _, err := exec.LookPath(tool); err != nil {
			return nil, fmt.Errorf("%s not found (Debian: iproute2, nftables)", tool)
		}
	}
	n := &network{
		ns:   [2]string{"flock-chaos-" + tag + "-0", "flock-chaos-" + tag + "-1"},
		dev:  [2]string{"fc" + tag + "a", "fc" + tag + "b"},
		addr: [2]string{"10.213.0.1", "10.213.0.2"},
	}
	steps := [][]string{
		{"ip", "netns", "add", n.ns[0]},
		{"ip", "netns", "add", n.ns[1]},
		{"ip", "link", "add", n.dev[0], "netns", n.ns[0], "type", "veth", "peer", "name", n.dev[1], "netns", n.ns[1]},
	}
	for i := range 2 {
		steps = append(steps,
			[]string{"ip", "-n", n.ns[i], "addr", "add", n.addr[i] + "/24", "dev", n.dev[i]},
			[]string{"ip", "-n", n.ns[i], "link", "set", n.dev[i], "up"},
			[]string{"ip", "-n", n.ns[i], "link", "set", "lo", "up"},
		)
	}
	for _, s := range steps {
		if err := run(s...); err != nil {
			n.close()
			return nil, err
		}
	}
	// A rule that matches nothing proves nftables works in the namespace.
	if err := n.nft("add table inet chaos_probe", "delete table inet chaos_probe"); err != nil {
		n.close()
		return nil, err
	}
	n.netem = run("ip", "netns", "exec", n.ns[0], "tc", "qdisc", "add", "dev", n.dev[0], "root", "netem", "delay", "1ms") == nil
	if n.netem {
		run("ip", "netns", "exec", n.ns[0], "tc", "qdisc", "del", "dev", n.dev[0], "root")
	}
	return n, nil
}

// nft runs nftables commands in node 0's namespace.
func (n *network) nft(cmds ...string) error {
	for _, c := range cmds {
		argv := append([]string{"ip", "netns", "exec", n.ns[0], "nft"}, strings.Fields(c)...)
		if err := run(argv...); err != nil {
			return err
		}
	}
	return nil
}

// drop makes node 0's link drop a share of its packets, in per mille, in
// both directions (1000: a partition).
func (n *network) drop(perMille int) error {
	match := fmt.Sprintf("numgen random mod 1000 < %d", perMille)
	if perMille >= 1000 {
		match = ""
	}
	return n.nft(
		"add table inet chaos",
		"add chain inet chaos in { type filter hook input priority 0 ; }",
		"add chain inet chaos out { type filter hook output priority 0 ; }",
		fmt.Sprintf("add rule inet chaos in iifname %s %s drop", n.dev[0], match),
		fmt.Sprintf("add rule inet chaos out oifname %s %s drop", n.dev[0], match),
	)
}

// shape sends a share of node 0's outgoing packets, in per cent, through
// a queue drained at rateKbit kbit/s (an htb class chosen by an nftables
// rule), the rest at full speed: the queued packets arrive late and out of
// order. At 100 every packet goes through the queue: a slow link.
func (n *network) shape(pct, rateKbit int) error {
	tc := func(args ...string) error {
		return run(append([]string{"ip", "netns", "exec", n.ns[0], "tc"}, args...)...)
	}
	rate := fmt.Sprintf("%dkbit", rateKbit)
	if err := tc("qdisc", "add", "dev", n.dev[0], "root", "handle", "1:", "htb", "default", "10", "r2q", "100000"); err != nil {
		return err
	}
	if err := tc("class", "add", "dev", n.dev[0], "parent", "1:", "classid", "1:10", "htb", "rate", "10gbit"); err != nil {
		return err
	}
	if err := tc("class", "add", "dev", n.dev[0], "parent", "1:", "classid", "1:20", "htb", "rate", rate, "ceil", rate); err != nil {
		return err
	}
	match := fmt.Sprintf("numgen random mod 100 < %d", pct)
	if pct >= 100 {
		match = ""
	}
	return n.nft(
		"add table inet chaos",
		"add chain inet chaos out { type filter hook output priority 0 ; }",
		fmt.Sprintf("add rule inet chaos out oifname %s %s meta priority set 1:20", n.dev[0], match),
	)
}

// delay puts a netem queue on node 0's side: latency with jitter, and a
// share of packets sent at once, out of order.
func (n *network) delay(ms, jitterMs, reorderPct int) error {
	return run("ip", "netns", "exec", n.ns[0], "tc", "qdisc", "add", "dev", n.dev[0], "root", "netem",
		"delay", fmt.Sprintf("%dms", ms), fmt.Sprintf("%dms", jitterMs),
		"reorder", fmt.Sprintf("%d%%", reorderPct), "50%")
}

// heal removes every fault from the link (what is not there is no error).
func (n *network) heal() {
	run("ip", "netns", "exec", n.ns[0], "nft", "delete", "table", "inet", "chaos")
	run("ip", "netns", "exec", n.ns[0], "tc", "qdisc", "del", "dev", n.dev[0], "root")
}

// close removes the namespaces (and with them the link).
func (n *network) close() {
	for _, ns := range n.ns {
		run("ip", "netns", "del", ns)
	}
}

// exec returns argv run inside node i's namespace.
func (n *network) exec(i int, argv []string) []string {
	return append([]string{"ip", "netns", "exec", n.ns[i]}, argv...)
}
