// The CTR models of the SageMaker DeepFM sample (docs/ctr.md), on the CPU:
//   logit = bias + sum_f w[id_f] x_f                                (lr: this alone)
//         + 0.5 sum_k ((sum_f v[id_f,k] x_f)^2 - sum_f (v[id_f,k] x_f)^2)   (fm: + this)
//         + out(MLP(concat_f v[id_f] x_f))                           (deepfm: + this)
// The MLP is Linear -> ReLU [-> BatchNorm] -> Dropout per hidden layer (the sample's
// fully_connected, batch_norm_layer and dropout), then a Linear to one unit, on oneDNN's sgemm. The table is one [rows, 1 + K] array, each row [w | v] (HugeCTR's packing); its
// gradient is sparse (ctr/sparse_rows.hpp). The dense parameters (bias, MLP) live in one flat
// array so that one allreduce and one optimizer pass cover them.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/tensor.hpp"
#include "ctr/sparse_rows.hpp"
#include "ctr/table_shard.hpp"

namespace sdp {

enum class CtrModelKind { kDeepFm, kFm, kLr };

struct CtrModelShape {
  CtrModelKind kind = CtrModelKind::kDeepFm;
  int fields = 0;
  int64_t rows = 0;
  int embedding_size = 8;
  std::vector<int> hidden;  // deepfm only
  float dropout = 0.0f;     // drop probability after each hidden layer (training)
  bool batch_norm = false;  // deepfm: BatchNorm after each hidden layer's ReLU
  float batch_norm_decay = 0.9f;  // running statistics: r = decay r + (1 - decay) batch

  int k() const { return kind == CtrModelKind::kLr ? 0 : embedding_size; }
  int width() const { return k() + 1; }
};

// "deepfm", "fm", "lr"; std::invalid_argument otherwise.
CtrModelKind ctr_model_kind(const std::string& name);

// One dense parameter inside the flat array.
struct DenseSegment {
  std::string name;            // its safetensors name (model.safetensors, checkpoints)
  std::vector<int64_t> shape;  // PyTorch's layout: Linear weights [out, in]
  int64_t offset = 0;
  int64_t size = 0;
  bool decays = false;  // model.l2 applies (weights; not biases)
};

// A batch as the model reads it: B samples of F (id, value) pairs.
struct CtrBatch {
  int64_t size = 0;
  const int64_t* ids = nullptr;     // B * F
  const float* values = nullptr;    // B * F
  const float* labels = nullptr;    // B
  const int64_t* samples = nullptr; // B: each sample's index in the data set (its dropout masks)
};

class CtrModel {
 public:
  // Initialized as the sample does: the table Glorot-normal, the MLP's weights Glorot-uniform,
  // biases 0; from `seed` alone, so every rank builds the same model. The table holds the rows
  // of `shard`, each initialized as the whole table's row of the same id.
  CtrModel(const CtrModelShape& shape, uint64_t seed, TableShard shard = {});

  const CtrModelShape& shape() const { return shape_; }
  const TableShard& shard() const { return shard_; }
  std::vector<float>& table() { return table_; }
  const std::vector<float>& table() const { return table_; }
  std::vector<float>& dense() { return dense_; }
  const std::vector<float>& dense() const { return dense_; }
  const std::vector<DenseSegment>& segments() const { return segments_; }

  // Where forward and backward read the batch's rows: the table (nullptr, the default; ids are
  // table rows) or `rows` (a sharded table's rows fetched for the step; ids index them).
  void read_rows_from(const float* rows) { lookup_ = rows; }

  // Forward over `batch`: prob[b] for each sample; returns the sum of the log losses (labels
  // given) or 0. Training applies dropout, keyed by (seed, step, sample, unit), the same on any
  // number of ranks, and keeps what backward needs.
  double forward(const CtrBatch& batch, bool training, int64_t step, float* prob);
  // Gradients of scale * (the last training forward's summed loss): the dense ones into
  // `dense_grad` (overwritten, dense().size()), the table's rows added to `table_grad`
  // pair by pair in batch order.
  void backward(const CtrBatch& batch, float scale, std::vector<float>& dense_grad, RowAccumulator& table_grad);

  // The tensors of model.safetensors, under the names a PyTorch DeepFM of the same shape uses:
  // bias, first_order.weight [rows, 1], embedding.weight [rows, K], mlp.{i}.weight/bias,
  // output.weight/bias (copies). A shard's table tensors hold its rows (shard().rows()).
  // Without `table`: the dense parameters and buffers alone.
  std::vector<NamedTensor> named_tensors(bool table = true) const;
  // The table as it is held, "table" [rows of the shard, 1 + K] (each row w then v), a view of
  // the live array (not a copy), valid until the next step: a checkpoint part's rows.
  NamedTensor table_view();
  // Loads what named_tensors() wrote; InputError naming `what` on a missing or misshapen tensor.
  // Without `table`: the dense parameters and buffers alone (the table's rows loaded through
  // table_view()).
  void load(const std::vector<NamedTensor>& tensors, const std::string& what, bool table = true);

  // Multiply-adds of one sample's MLP forward (for the plan's math line and the GEMM figures).
  int64_t mlp_flops_per_sample() const;

  // The MLP's matrix products so far (forward and backward, training and evaluation): their
  // seconds and floating-point operations, so the trainer can say how near the sgemm peak
  // they run.
  struct GemmTally {
    double seconds = 0;
    double flops = 0;
  };
  const GemmTally& gemm_tally() const { return gemm_tally_; }

  // BatchNorm (shape().batch_norm): the last training forward's batch means and variances, every
  // layer's in turn; the trainer averages them over the ranks and hands the result to
  // update_running_stats, so that every replica keeps the same running statistics.
  const std::vector<float>& batch_stats() const { return batch_stats_; }
  void update_running_stats(const float* averaged_batch_stats);

 private:
  void mlp_forward(int64_t batch, bool training, int64_t step, const int64_t* samples);
  void mlp_backward(int64_t batch, const float* dout, std::vector<float>& dense_grad);
  // nn::cpu_sgemm, timed into gemm_tally_.
  void gemm(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, const float* a, int64_t lda, const float* b,
            int64_t ldb, float* c, int64_t ldc);
  // o: the Linear's output without its bias, replaced by BatchNorm(ReLU(o + bias)).
  void batch_norm_forward(size_t layer, int64_t batch, int64_t width, bool training, float* o, const float* bias);
  void batch_norm_backward(size_t layer, int64_t batch, int64_t width, float* d, std::vector<float>& dense_grad);

  CtrModelShape shape_;
  uint64_t seed_;
  TableShard shard_;
  const float* lookup_ = nullptr;  // read_rows_from()
  std::vector<float> table_;
  std::vector<float> dense_;
  std::vector<DenseSegment> segments_;
  int64_t bias_offset_ = 0;
  std::vector<int64_t> weight_offsets_, bias_offsets_;  // hidden layers, then the output layer

  // Kept from the last forward (resized, never shrunk).
  std::vector<float> first_, deep_, sums_, logit_, dlogit_, prob_;
  std::vector<std::vector<float>> acts_;   // acts_[l]: hidden layer l's output (its input: deep_ or acts_[l-1])
  std::vector<std::vector<float>> masks_;  // each hidden layer's ReLU and dropout factor
  std::vector<uint64_t> row_keys_;         // a layer's dropout key per sample
  std::vector<int32_t> pairs_per_slot_;    // backward: the batch's pairs of each table-gradient slot
  std::vector<uint32_t> slot_bounds_;      // backward: each thread's slots
  std::vector<float> dacts_a_, dacts_b_, ddeep_;
  // BatchNorm: gamma/beta offsets in dense_, running mean/var per layer, and from the last
  // training forward the ReLU outputs, normalized values, 1/sqrt(var + eps) and batch stats.
  std::vector<int64_t> bn_offsets_;
  std::vector<std::vector<float>> running_mean_, running_var_;
  std::vector<std::vector<float>> relu_out_, normalized_, inv_std_;
  std::vector<float> batch_stats_;
  GemmTally gemm_tally_;
};

}  // namespace sdp
