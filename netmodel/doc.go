// Package netmodel projects the communication time of distributed training
// onto a network described by the α–β (latency–bandwidth) model of Hockney
// (1994): sending a message of n bytes over one link costs
//
//	T(n) = α + n/β
//
// where α is the latency in seconds and β the bandwidth in bytes per
// second. Links are full duplex (a node sends and receives at once at β
// each way) and a node drives one link at a time. The costs of the
// patterns that flock's strategies repeat, for p nodes and a message of n
// bytes (the model, or the part of it that a step sends):
//
// Ring all-reduce (Patarasuk and Yuan, 2009), a reduce-scatter and an
// all-gather of p−1 steps each, every step moving n/p bytes between ring
// neighbours:
//
//	T_ring(p, n) = 2(p−1)·α + 2(p−1)/p · n/β
//
// Recursive halving and doubling all-reduce (Thakur, Rabenseifner and
// Gropp, 2005), for p a power of two (⌈log₂ p⌉ rounds otherwise): the same
// bytes in 2·log₂ p latency terms:
//
//	T_hd(p, n) = 2⌈log₂ p⌉·α + 2(p−1)/p · n/β
//
// Neighbour exchange (decentralized SGD, gossip): a node sends its n-byte
// model to each of its d out-neighbours one after another and receives
// theirs meanwhile over the duplex link:
//
//	T_nbr(d, n) = d·(α + n/β)
//
// so d = ⌈log₂ p⌉ on the static exponential graph, 1 on the one-peer
// exponential graph and 2 on the ring, whatever p.
//
// Pairwise exchange (Swarm SGD): two nodes swap their n-byte models at
// once:
//
//	T_pair(n) = α + n/β
//
// A run is projected by Project: its steps take the compute time of one
// step each, and every synchronization adds its pattern's cost; nothing
// overlaps. A strategy that overlaps communication with computation (Swarm
// SGD's non-blocking interactions) therefore costs at most that.
//
// Presets names networks: 10gbe (10 Gb Ethernet in one data centre: α =
// 25 µs, β = 1.25 GB/s), ib100 (100 Gb/s InfiniBand: α = 2 µs, β =
// 12.5 GB/s), wan (between cloud regions: α = 40 ms, β = 125 MB/s,
// 1 Gb/s) and nvlink (the GPUs of one node joined by NVLink switches:
// α = 5 µs, β = 200 GB/s, below an A100's 300 GB/s per direction), the
// inner level of a two-level run.
package netmodel
