// `sdp-train plan --calibrate`: measures what the cost model (cost_model.hpp) needs of a
// cluster, under the launcher that will run the job (mpirun over the nodes):
//   link     ping-pong between the first rank of node 0 and of node 1 over MPI: latency is
//            half the round trip of 8 bytes, bandwidth 16 MiB over its one-way time less the
//            rendezvous' latencies, and the one-way time of every size from 8 bytes to 16 MiB
//            (Network::mpi_message) (needs 2 nodes; one node leaves the link unmeasured);
//            then, as host jobs cross nodes, the steps of the hierarchical AllReduce's socket
//            ring, of the ring and of MPI_Allreduce, every rank at once, by the bytes a node or
//            rank sends in one (Network::socket_step, ring_step, flat_step);
//   intra    the node phase of the runner's own AllReduce (shared memory), every node at
//            once, 4 KiB to 64 MiB: its curve (slowest rank) for this many ranks per node;
//   convert  f32 -> fp16 -> f32 of 16 MiB on one rank: what compression adds;
//   shared core  what the runner's AllReduce costs a rank while `compute_threads` threads keep
//            its CPUs busy, as backward does: each message's extra wait, and the compute time
//            lost per byte AllReduced (SharedCoreCosts).
// Collective over the world; every rank returns the same Calibration.
#pragma once

#include "plan/plan_inputs.hpp"

namespace sdp {
class World;
}

namespace sdp::plan {

Calibration calibrate(const World& world, int compute_threads);

// The machines the world's ranks run on (collective; every rank returns the same).
Machines machines_of(const World& world);
// Where nodes share machines (machines.count < nodes): "4 nodes on 1 machine, 8 ranks on its 2
// CPU(s)"; otherwise "".
std::string shared_machines(const Machines& machines, int nodes);

}  // namespace sdp::plan
