// `sdp-train evaluate`: a saved model — the final model.safetensors or a checkpoint — run on
// the job's test data, on any number of ranks, reporting the same [epoch]-style metric line
// as training ([eval] test_loss=... test_accuracy=...). Rank 0 reads the file and the world
// Communicator carries the weights, so the other ranks need not see the file.
#pragma once

#include <string>

#include "train/evaluation.hpp"
#include "train/job_setup.hpp"

namespace sdp {

// Collective. A file that is not a model of the job's architecture (a missing tensor, a
// shape that differs, a malformed file) is an InputError (exit 2) naming the file and tensor.
// per_class: rank 0 also prints each label's samples and accuracy, with the class names the
// model carries (an image folder's), else the test set's.
EvalResult evaluate_model_file(JobSetup& setup, const std::string& model_path, bool per_class = false);

}  // namespace sdp
