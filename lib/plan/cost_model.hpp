// The cost model of `sdp-train plan` (docs/records/plan-record.md, "The model"): what one
// AllReduce costs under each algorithm of distributed/allreduce.hpp, and what a training step
// costs once its buckets overlap the backward pass as distributed/gradient_reducer.hpp runs them.
//
// AllReduce of S bytes on N nodes of r ranks (n = N r), link bandwidth B (bytes/s, each way,
// per node) and latency a (one message, one way, software included), intra-node curve I(S)
// (the node's reduce-scatter + allgather of S bytes among its r ranks, measured):
//   ring          our ring over all n ranks, laid out node by node: 2(n-1) steps of S/n each;
//                 each step waits for its slowest edge, an inter-node one:
//                 2(n-1) (a + S / (n B)), or host jobs' measured steps (Network::ring_step)
//   flat          MPI_Allreduce: Open MPI's tuned component picks recursive doubling for small
//                 buffers and a ring for large ones; the model takes the cheaper of
//                 ceil(log2 n) (a + S/B) and the ring's cost (host jobs: Open MPI's rule, and
//                 its ring's measured steps, Network::flat_step)
//   hierarchical  I(S) + the r rings of S/r over N nodes, all sharing each node's link:
//                 I(S) + 2(N-1) a + 2(N-1)/N S / B, or host jobs' measured socket ring steps
//   auto          what AllreduceAlgorithm "auto" runs: flat under 256 KiB across nodes,
//                 otherwise hierarchical when r > 1 or the gradients are a host job's (in
//                 node-shared memory, which the hierarchical node phase reads), else flat
// Compression (fp16/bf16) halves the bytes that cross nodes and adds two passes over S
// (cast down, cast back) at the node's conversion rate. On one node every algorithm costs
// I(S): the node phase is all there is.
#pragma once

#include <array>
#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "config/choices.hpp"
#include "distributed/gradient_reducer.hpp"

namespace sdp::plan {

// Seconds as a function of bytes, from measured points (bytes ascending): interpolated
// linearly between points, extended beyond the last at the last segment's bandwidth and
// below the first at the first point's time (latency-bound).
class Curve {
 public:
  Curve() = default;
  explicit Curve(std::vector<std::pair<double, double>> points);
  bool empty() const { return points_.empty(); }
  double at(double bytes) const;
  const std::vector<std::pair<double, double>>& points() const { return points_; }

 private:
  std::vector<std::pair<double, double>> points_;
};

// Measured by the calibration with every CPU of the ranks busy computing: what each message
// waits beyond the link's latency (the thread's wake-up on a busy core), and, per algorithm
// (flat, ring, hierarchical), the compute time the communication takes from the rank per byte
// AllReduced (the kernel's network stack, MPI's polling, the sums, the copies) and the share
// of the link's rate a bulk AllReduce still reaches (MPI progresses only while its thread
// runs). Not measured: the plan takes no bucket to overlap backward there.
struct SharedCoreCosts {
  bool measured = false;
  double latency_s = 0;
  std::map<AllreduceKind, double> s_per_byte;
  std::map<AllreduceKind, double> link_share;
  // The compute lost per byte for the algorithm a bucket runs (kAuto resolved); 0 where not
  // measured.
  double cost(AllreduceKind ran) const;
};

// Times by message size that a calibration measured, with the link they were measured on: a
// network that differs from it (a busy core's later messages, a lower share of the link)
// adds the difference.
struct MeasuredTimes {
  Curve curve;
  double latency_s = 0, bytes_per_s = 0;
  bool empty() const { return curve.empty() || bytes_per_s <= 0; }
};

struct Network {
  double link_bytes_per_s = 0;  // B: one node's link, each way
  double latency_s = 0;         // a: one message one way
  Curve intra;                  // I(S) among ranks_per_node ranks; empty: intra_bytes_per_s
  int intra_ranks = 1;          // the ranks per node the curve was measured with
  double intra_bytes_per_s = 5e9;  // assumed node bandwidth when no curve fits (r != intra_ranks)
  double convert_bytes_per_s = 4e9;  // f32 <-> 16-bit casts, one rank
  // Messages crossing nodes through MPI (host jobs' flat and ring): above this size Open MPI's
  // TCP transport sends by rendezvous, a round trip (2a) before the data; 0: no rendezvous
  // (NCCL, the socket ring). Its default eager limit is 64 KiB.
  double rendezvous_above_bytes = 0;
  // Host jobs: the gradients live in node-shared memory (DataParallel), where the runner's
  // auto takes hierarchical even with one rank per node (AutoAllreduce::choose).
  bool host_gradients = false;
  // Host jobs: one MPI message across nodes, one way, by its size, as the calibration measured
  // it. It holds what a + m/B and the rendezvous' 2a leave out: on a long link TCP's window
  // spreads a message of some hundred KB over more round trips. Empty: the formula.
  MeasuredTimes mpi_message;
  // One message of m bytes across nodes, its bytes included: its latency (a rendezvous' round
  // trip above the eager limit) and m / B, or the measured curve where there is one and it is
  // slower (plus what this network adds over the one it was measured on: on_busy_cores' later
  // messages and slower link).
  double crossing_seconds(double m) const;
  // Host jobs: one step of the hierarchical AllReduce's inter-node socket ring (socket_ring.hpp)
  // by the bytes each node sends in it, as the calibration measured it (every local rank's
  // ring at once, as the job runs them). It holds what a + m/B leaves out: both directions of
  // a link busy at once, TCP's window. Empty: the formula.
  MeasuredTimes socket_step;
  // Host jobs: one step of the ring and of the flat algorithm (MPI_Allreduce from
  // kMpiAllreduceRingFromBytes on, counted as a ring's steps whichever algorithm Open MPI takes)
  // over all the ranks, by the bytes each rank sends in it, as the calibration measured them (a
  // whole AllReduce of every rank at once over 2(n-1)). Each step sends and receives at once,
  // loading both directions of every link, where the one-way message curve loads one; flat's
  // also holds MPI's polling. The message curve stays the floor (mpi_step_seconds). Empty: the
  // message curve.
  MeasuredTimes ring_step, flat_step;
  // `curve` as measured on this network's latency and link as they are.
  MeasuredTimes measured_here(Curve curve) const { return {std::move(curve), latency_s, link_bytes_per_s}; }
  // One step of the inter-node socket ring, m bytes per node: a + m/B, or the measured curve
  // where there is one and it is slower (plus what this network adds, as crossing_seconds).
  double socket_step_seconds(double m) const;
  // One step of `kind`'s ring (kRing, or kFlat in its ring), m bytes per rank: the measured
  // steps where there are some and they are slower than crossing_seconds(m), else that.
  double mpi_step_seconds(AllreduceKind kind, double m) const;
  // A CPU rank whose compute threads fill its CPUs shares them with its communication thread:
  // what that costs, as the calibration measured it.
  SharedCoreCosts shared_core;
  // This network as a bucket of `ran` sees it while backward computes on its thread's cores:
  // each message shared_core.latency_s later, the link at its shared_core.link_share.
  Network on_busy_cores(AllreduceKind ran) const;
};

// Every MeasuredTimes of a Network, by its key in a calibration file (plan_inputs.cpp): the one
// list that writing, reading, taking and dropping a calibration's measured link go through.
using MeasuredTimesField = std::pair<const char*, MeasuredTimes Network::*>;
inline constexpr std::array<MeasuredTimesField, 4> kMeasuredLinkTimes = {{{"mpi_message", &Network::mpi_message},
                                                                          {"socket_step", &Network::socket_step},
                                                                          {"ring_step", &Network::ring_step},
                                                                          {"flat_step", &Network::flat_step}}};

// Open MPI's fixed rule for MPI_Allreduce (coll tuned): recursive doubling below this many
// bytes, a ring above. Host jobs' flat algorithm is that MPI_Allreduce.
constexpr double kMpiAllreduceRingFromBytes = 10000;
// Open MPI's TCP eager limit (btl_tcp_eager_limit): Network::rendezvous_above_bytes of host jobs.
constexpr double kMpiTcpEagerBytes = 64 * 1024;

struct Topology {
  int nodes = 1;
  int ranks_per_node = 1;
  int ranks() const { return nodes * ranks_per_node; }
};

// The intra-node phase for r ranks: the curve when it was measured for r ranks, else the
// ring's 2(r-1)/r S over the node's bandwidth; 0 for one rank.
double intra_node_seconds(double bytes, int ranks_per_node, const Network& network);

// One AllReduce of `bytes` (f32 gradients) under `algorithm` (kAuto resolved as the runner
// does) and `compression` (kAuto and kNone: none).
double allreduce_seconds(AllreduceKind algorithm, Compression compression, double bytes, const Topology& topology,
                         const Network& network);
// What kAuto runs for this buffer on this topology (allreduce.cpp's rule); `host_gradients`:
// Network::host_gradients.
AllreduceKind resolve_auto(double bytes, const Topology& topology, bool host_gradients = false);

// One rank's step as measured on one machine (train/layer_bench.hpp's gradient timeline).
struct ComputeProfile {
  std::string model, precision, device, measured_on;
  int64_t batch_per_rank = 0;
  double forward_s = 0;    // input staging, forward and loss
  double backward_s = 0;   // from the end of forward to the last gradient
  double optimizer_s = 0;  // the update
  int64_t arena_elements = 0, element_size = 4;
  std::vector<ParamExtent> params;      // registration order
  std::vector<double> ready_s;          // per param: when backward produced its gradient, from backward's start
};

// One bucket's AllReduce: its time, and what each of its bytes takes from backward while
// backward computes on the cores the communication thread shares (SharedCoreCosts::cost).
struct BucketCost {
  double seconds = 0;
  double core_s_per_byte = 0;
};
using BucketCosts = std::function<BucketCost(double bytes, bool core_busy)>;

struct StepPrediction {
  double step_s = 0;     // forward + backward + stolen + exposed + optimizer + fixed
  double comm_s = 0;     // the buckets' AllReduce time, summed
  double exposed_s = 0;  // communication the backward pass did not hide
  double fixed_s = 0;    // per-step agreement (loss and non-finite flag)
  double stolen_s = 0;   // backward's compute lengthened by communication on its cores (kSharedCore)
  int buckets = 0;
};

// How a rank's communication thread runs beside backward (which_overlap):
//   kOwnCore         on a core of its own (a GPU job: the device computes; a CPU rank whose
//                    threads leave a CPU free): buckets start as they become ready;
//   kSharedCore      on the compute's cores, with their costs calibrated (SharedCoreCosts):
//                    buckets start as they become ready, a message sent while backward runs
//                    waits shared_core.latency_s more, and each byte AllReduced then lengthens
//                    backward by shared_core.cost(the bucket's algorithm);
//   kAfterBackward   on the compute's cores, costs unknown: every bucket waits for backward's end.
enum class Overlap { kOwnCore, kSharedCore, kAfterBackward };
const char* to_string(Overlap overlap);

// The reducer's schedule: bucket k (plan_buckets) is ready when its last parameter is; the
// communication thread runs buckets one at a time in order, each starting at
// max(its ready time, the previous bucket's end). `bucket_cost(bytes, core_busy)` is one
// bucket's AllReduce, `core_busy` when it starts while backward computes on the cores the
// thread shares (kSharedCore); `fixed_s` is added once per step. kSharedCore lengthens
// backward by the bucket's core_s_per_byte for each byte AllReduced while it runs, its ready
// times in proportion. kAfterBackward runs every bucket after backward, all of it exposed.
StepPrediction predict_step(const ComputeProfile& compute, double bucket_mb, const BucketCosts& bucket_cost,
                            double fixed_s, Overlap overlap = Overlap::kOwnCore);

// Whether a rank's communication thread has a core of its own while backward computes: on a
// GPU (the device computes, the host's cores are free), or on the CPU when the rank's compute
// threads leave one of its CPUs free. A CPU rank whose threads fill its CPUs (the default:
// threads = its share of the machine's CPUs) shares them with it.
bool communication_overlaps_backward(bool gpu, int compute_threads, int rank_cpus);
// The schedule a rank's communication runs on: kOwnCore when communication_overlaps_backward,
// else kSharedCore where the calibration measured the shared cores' costs, else kAfterBackward.
Overlap which_overlap(bool gpu, int compute_threads, int rank_cpus, const Network& network);

}  // namespace sdp::plan
