#include "nn/residual_block.hpp"

#include <iterator>

#include "nn/batchnorm2d.hpp"
#include "nn/conv2d.hpp"
#include "nn/layer_profile.hpp"
#include "nn/pad_shortcut.hpp"

namespace sdp::nn {

ResidualBlock::ResidualBlock(Context& ctx, std::string name)
    : Layer(ctx, std::move(name)),
      add_(Add::create(ctx)),
      relu_(ReLU::create(ctx, name_ + ".relu")),
      sum_grads_(Add::create(ctx)),
      add_name_(name_ + ".add"),
      sum_grads_name_(name_ + ".grad_sum") {}

void ResidualBlock::init_parameters(std::mt19937_64& rng) {
  for (auto& l : branch_) l->init_parameters(rng);
  for (auto& l : shortcut_) l->init_parameters(rng);
}

void ResidualBlock::set_needs_input_grad(bool value) {
  Layer::set_needs_input_grad(value);
  if (!branch_.empty()) branch_.front()->set_needs_input_grad(value);
  if (!shortcut_.empty()) shortcut_.front()->set_needs_input_grad(value);
}

bool ResidualBlock::has_parameters() const {
  for (const auto& l : branch_)
    if (l->has_parameters()) return true;
  for (const auto& l : shortcut_)
    if (l->has_parameters()) return true;
  return false;
}

TensorDesc ResidualBlock::configure(const TensorDesc& src, bool training) {
  input_grad_gated_ = output_grad_gated_ = false;  // the model pairs blocks after configuring them
  grad_sum_fused_ = false;
  TensorDesc branch = src, shortcut = src;
  for (auto& l : branch_) branch = l->configure(branch, training);
  for (auto& l : shortcut_) shortcut = l->configure(shortcut, training);
  if (ctx_.batchnorm_folding.requested) fold_batchnorms();
  fused_ = nullptr;
  if (auto* bn = branch_.empty() ? nullptr : dynamic_cast<BatchNorm2d*>(branch_.back().get());
      bn != nullptr && bn->fuse_residual_add_relu(shortcut)) {
    fused_ = bn;
    if (training && ctx_.batchnorm_folding.with_residual) fold_residual_batchnorm();
    if (training && needs_input_grad_ && ctx_.grad_sum_fusion.requested) fuse_grad_sum();
    if (training && needs_input_grad_ && !grad_sum_fused_) sum_grads_->configure(src, src, AddOutput::kGradient);
    return branch;
  }
  // The branch's last output is read only by the sum, and the sum only by the ReLU: both
  // run in place over that output when the branch's backward does not read it (BN's
  // does not), which saves two activations per block.
  const bool in_place = !branch_.empty() && !branch_.back()->backward_reads_output();
  relu_->set_in_place(true);
  relu_fused_ = add_->set_relu_fused(true);
  const TensorDesc sum =
      add_->configure(branch, shortcut, in_place ? AddOutput::kInPlace : AddOutput::kActivation);
  const TensorDesc out = relu_->configure(sum, training);
  if (training && needs_input_grad_) sum_grads_->configure(src, src, AddOutput::kGradient);
  return out;
}

void ResidualBlock::fold_batchnorms() {
  for (std::size_t i = 1; i + 1 < branch_.size(); ++i) {
    auto* bn = dynamic_cast<BatchNorm2d*>(branch_[i].get());
    if (bn == nullptr) continue;
    const std::string why = bn->fold_between(*branch_[i - 1], *branch_[i + 1]);
    if (why.empty())
      ++ctx_.batchnorm_folding.folded;
    else
      ctx_.batchnorm_folding.refused.push_back(bn->name() + ": " + why);
  }
}

void ResidualBlock::fold_residual_batchnorm() {
  if (branch_.size() < 2) return;
  Context::BatchNormFolding& folding = ctx_.batchnorm_folding;
  if (const std::string why = fused_->fold_with_residual_after(*branch_[branch_.size() - 2]); !why.empty()) {
    folding.refused_with_residual.push_back(fused_->name() + ": " + why);
    return;
  }
  ++folding.folded_with_residual;
  // A projection shortcut (convolution, BatchNorm): its BatchNorm into the last one's pass.
  auto* shortcut_bn = shortcut_.size() == 2 ? dynamic_cast<BatchNorm2d*>(shortcut_[1].get()) : nullptr;
  if (shortcut_bn == nullptr) return;
  if (const std::string why = shortcut_bn->fold_into_residual_of(*shortcut_[0], *fused_); !why.empty())
    folding.refused_shortcuts.push_back(shortcut_bn->name() + ": " + why);
  else
    ++folding.folded_shortcuts;
}

void ResidualBlock::fuse_grad_sum() {
  auto* conv = branch_.empty() ? nullptr : dynamic_cast<Conv2d*>(branch_.front().get());
  const std::string why = conv == nullptr ? "the branch does not start with a convolution" : conv->add_to_input_grad();
  grad_sum_fused_ = why.empty();
  if (grad_sum_fused_)
    ++ctx_.grad_sum_fusion.fused;
  else
    ctx_.grad_sum_fusion.refused.push_back(name_ + ": " + why);
}

bool ResidualBlock::set_input_grad_relu_gated(bool gated) {
  // The convolution's epilogue adds the two terms as they are: no gate in it.
  input_grad_gated_ = gated && needs_input_grad_ && !grad_sum_fused_ && sum_grads_->gates_by_relu_output();
  return input_grad_gated_;
}

const TensorRef& ResidualBlock::forward(const TensorRef& src) {
  input_ = &src;
  if (fused_ != nullptr) return forward_fused(src);
  const TensorRef* b = &src;
  for (auto& l : branch_) b = &l->run_forward(*b);
  const TensorRef* s = &src;
  for (auto& l : shortcut_) s = &l->run_forward(*s);
  const TensorRef& sum = timed(ctx_.profile, add_.get(), add_name_, "add", Pass::kForward,
                               [&]() -> const TensorRef& { return add_->forward(*b, *s); });
  return relu_fused_ ? relu_->forward_applied(sum) : relu_->run_forward(sum);
}

const TensorRef& ResidualBlock::backward(const TensorRef& diff_dst) {
  if (fused_ != nullptr) return backward_fused(diff_dst);
  const TensorRef& d_sum = output_grad_gated_ ? diff_dst : relu_->run_backward(diff_dst);
  const TensorRef* ds = &timed(ctx_.profile, add_.get(), add_name_, "add", Pass::kBackward,
                               [&]() -> const TensorRef& { return add_->backward_b(d_sum); });
  for (auto it = shortcut_.rbegin(); it != shortcut_.rend(); ++it) ds = &(*it)->run_backward(*ds);
  const TensorRef* db = &add_->backward_a(d_sum);
  for (auto it = branch_.rbegin(); it != branch_.rend(); ++it) db = &(*it)->run_backward(*db);
  if (!needs_input_grad_) return empty_;
  return sum_input_grads(*db, *ds);
}

// The shortcut runs first: its output is the sum's other term, which the last BatchNorm adds.
const TensorRef& ResidualBlock::forward_fused(const TensorRef& src) {
  const TensorRef* s = &src;
  for (auto& l : shortcut_) s = &l->run_forward(*s);
  fused_->set_residual(*s);
  const TensorRef* b = &src;
  for (auto& l : branch_) b = &l->run_forward(*b);
  return *b;
}

// The fused BatchNorm's backward gives both terms' gradients; it reports its parameters'
// only after the shortcut has reported its own (reverse registration order).
const TensorRef& ResidualBlock::backward_fused(const TensorRef& diff_dst) {
  const TensorRef* db = &branch_.back()->run_backward(diff_dst);
  const TensorRef* ds = &fused_->residual_grad();
  for (auto it = shortcut_.rbegin(); it != shortcut_.rend(); ++it) ds = &(*it)->run_backward(*ds);
  fused_->report_grads_ready();
  // The branch's first convolution adds the shortcut's term in its input gradient pass.
  if (grad_sum_fused_) static_cast<Conv2d&>(*branch_.front()).set_input_grad_addend(*ds);
  for (auto it = std::next(branch_.rbegin()); it != branch_.rend(); ++it) db = &(*it)->run_backward(*db);
  if (!needs_input_grad_) return empty_;
  return grad_sum_fused_ ? *db : sum_input_grads(*db, *ds);
}

const TensorRef& ResidualBlock::sum_input_grads(const TensorRef& db, const TensorRef& ds) {
  return timed(ctx_.profile, sum_grads_.get(), sum_grads_name_, "add", Pass::kBackward, [&]() -> const TensorRef& {
    return input_grad_gated_ ? sum_grads_->forward_gated(db, ds, *input_) : sum_grads_->forward(db, ds);
  });
}

// The sum, reading the block's input too when gated (which keeps it alive until then).
GradientPlan::Buffer* ResidualBlock::plan_sum_input_grads(GradientPlan& plan, GradientPlan::Buffer* db,
                                                          GradientPlan::Buffer* ds) {
  if (input_grad_gated_) plan.read(planned_input_);
  return sum_grads_->plan_forward(plan, db, ds);
}

// Exactly forward()'s (or forward_fused's) sequence.
GradientPlan::Buffer* ResidualBlock::plan_forward(GradientPlan& plan, GradientPlan::Buffer* src) {
  planned_input_ = src;
  if (fused_ != nullptr) {  // the shortcut first: its output is the fused BatchNorm's z
    GradientPlan::Buffer* s = src;
    for (auto& l : shortcut_) s = l->plan_forward(plan, s);
    fused_->set_planned_residual(s);
    GradientPlan::Buffer* b = src;
    for (auto& l : branch_) b = l->plan_forward(plan, b);
    return b;
  }
  GradientPlan::Buffer* b = src;
  for (auto& l : branch_) b = l->plan_forward(plan, b);
  GradientPlan::Buffer* s = src;
  for (auto& l : shortcut_) s = l->plan_forward(plan, s);
  return relu_->plan_forward(plan, add_->plan_forward(plan, b, s));
}

// Exactly backward()'s sequence. d_sum is read by the shortcut (through backward_b) and
// again by the branch's last layer, so it stays alive across the whole shortcut backward;
// the shortcut's result stays alive across the whole branch until the sum reads it.
GradientPlan::Buffer* ResidualBlock::plan_backward(GradientPlan& plan,
                                                   GradientPlan::Buffer* diff_dst) {
  if (fused_ != nullptr) {  // backward_fused's sequence; the BatchNorm writes z's gradient too
    GradientPlan::Buffer* db = branch_.back()->plan_backward(plan, diff_dst);
    GradientPlan::Buffer* ds = fused_->planned_residual_grad();
    for (auto it = shortcut_.rbegin(); it != shortcut_.rend(); ++it) ds = (*it)->plan_backward(plan, ds);
    if (grad_sum_fused_) static_cast<Conv2d&>(*branch_.front()).set_planned_input_grad_addend(ds);
    for (auto it = std::next(branch_.rbegin()); it != branch_.rend(); ++it) db = (*it)->plan_backward(plan, db);
    if (!needs_input_grad_) return nullptr;
    return grad_sum_fused_ ? db : plan_sum_input_grads(plan, db, ds);
  }
  GradientPlan::Buffer* d_sum = output_grad_gated_ ? diff_dst : relu_->plan_backward(plan, diff_dst);
  GradientPlan::Buffer* ds = add_->plan_backward_b(plan, d_sum);
  for (auto it = shortcut_.rbegin(); it != shortcut_.rend(); ++it)
    ds = (*it)->plan_backward(plan, ds);
  GradientPlan::Buffer* db = d_sum;  // backward_a hands diff_dst through
  for (auto it = branch_.rbegin(); it != branch_.rend(); ++it) db = (*it)->plan_backward(plan, db);
  if (!needs_input_grad_) return nullptr;
  return plan_sum_input_grads(plan, db, ds);
}

namespace {
Conv2dOptions conv(int in, int out, int kernel, int stride) {
  Conv2dOptions o;
  o.in_channels = in;
  o.out_channels = out;
  o.kernel = kernel;
  o.stride = stride;
  o.padding = kernel / 2;
  return o;
}
BatchNorm2dOptions bn(int channels, bool fuse_relu, float gamma_init = 1.0f) {
  BatchNorm2dOptions o;
  o.channels = channels;
  o.fuse_relu = fuse_relu;
  o.gamma_init = gamma_init;
  return o;
}
}  // namespace

std::unique_ptr<ResidualBlock> make_basic_block(Context& ctx, const std::string& name,
                                                int in_channels, int planes, int stride,
                                                ShortcutKind shortcut, bool zero_init_residual) {
  auto block = std::make_unique<ResidualBlock>(ctx, name);
  block->add_branch<Conv2d>("conv1", conv(in_channels, planes, 3, stride));
  block->add_branch<BatchNorm2d>("bn1", bn(planes, /*fuse_relu=*/true));
  block->add_branch<Conv2d>("conv2", conv(planes, planes, 3, 1));
  block->add_branch<BatchNorm2d>("bn2", bn(planes, false, zero_init_residual ? 0.0f : 1.0f));
  if (stride != 1 || in_channels != planes) {
    if (shortcut == ShortcutKind::kPad) {
      block->add_shortcut<PadShortcut>("shortcut", in_channels, planes, stride);
    } else {
      block->add_shortcut<Conv2d>("downsample.0", conv(in_channels, planes, 1, stride));
      block->add_shortcut<BatchNorm2d>("downsample.1", bn(planes, false));
    }
  }
  return block;
}

std::unique_ptr<ResidualBlock> make_bottleneck_block(Context& ctx, const std::string& name,
                                                     int in_channels, int planes, int stride,
                                                     bool zero_init_residual) {
  const int out_channels = planes * 4;
  auto block = std::make_unique<ResidualBlock>(ctx, name);
  block->add_branch<Conv2d>("conv1", conv(in_channels, planes, 1, 1));
  block->add_branch<BatchNorm2d>("bn1", bn(planes, true));
  block->add_branch<Conv2d>("conv2", conv(planes, planes, 3, stride));
  block->add_branch<BatchNorm2d>("bn2", bn(planes, true));
  block->add_branch<Conv2d>("conv3", conv(planes, out_channels, 1, 1));
  block->add_branch<BatchNorm2d>("bn3", bn(out_channels, false, zero_init_residual ? 0.0f : 1.0f));
  if (stride != 1 || in_channels != out_channels) {
    block->add_shortcut<Conv2d>("downsample.0", conv(in_channels, out_channels, 1, stride));
    block->add_shortcut<BatchNorm2d>("downsample.1", bn(out_channels, false));
  }
  return block;
}

}  // namespace sdp::nn
