#include "distributed/reduce_kernels.hpp"

#include <mutex>

#include "distributed/mpi_check.hpp"
#include "distributed/reduce_kernels_isa.hpp"

namespace sdp {

void add_scale_into(DType dtype, void* dst, const void* src, int64_t count, float scale) {
  reduce_kernels().add_scale_into(dtype, dst, src, count, scale);
}

void add_into(DType dtype, void* dst, const void* src, int64_t count) {
  reduce_kernels().add_scale_into(dtype, dst, src, count, 1.0f);
}

void scale_in_place(DType dtype, void* data, int64_t count, float scale) {
  if (scale == 1.0f) return;
  reduce_kernels().scale_in_place(dtype, data, count, scale);
}

void convert_from_f32(DType dtype, void* dst, const float* src, int64_t count, float scale) {
  reduce_kernels().convert_from_f32(dtype, dst, src, count, scale);
}

void convert_to_f32(DType dtype, float* dst, const void* src, int64_t count, float scale) {
  reduce_kernels().convert_to_f32(dtype, dst, src, count, scale);
}

namespace {

void sum_half(void* in, void* inout, int* len, MPI_Datatype*) { add_into(DType::kF16, inout, in, *len); }
void sum_bfloat16(void* in, void* inout, int* len, MPI_Datatype*) { add_into(DType::kBF16, inout, in, *len); }

MPI_Op g_half_sum = MPI_OP_NULL, g_bf16_sum = MPI_OP_NULL;
std::once_flag g_ops_once;

void create_ops() {
  // Commutative: lets MPI pick the same algorithms it uses for MPI_SUM. The ops live until
  // MPI_Finalize frees them with the rest of MPI's state.
  SDP_MPI_CHECK(MPI_Op_create(&sum_half, 1, &g_half_sum));
  SDP_MPI_CHECK(MPI_Op_create(&sum_bfloat16, 1, &g_bf16_sum));
}

}  // namespace

MPI_Datatype mpi_datatype(DType dtype) { return dtype == DType::kF32 ? MPI_FLOAT : MPI_UINT16_T; }

MPI_Op mpi_sum_op(DType dtype) {
  if (dtype == DType::kF32) return MPI_SUM;
  std::call_once(g_ops_once, create_ops);
  return dtype == DType::kF16 ? g_half_sum : g_bf16_sum;
}

}  // namespace sdp
