// The one-line error a failing job leaves behind: printed on stderr as
// "sdp-train: error: <message>", and on SageMaker also written to /opt/ml/output/failure, whose
// text SageMaker shows as the training job's FailureReason (docs/sagemaker.md). Every place that
// ends the job with an error reports it here (main, the agreement's one-rank abort, the watchdog).
#pragma once

#include <string>

namespace sdp {

// The failure file of this job ("" = none, off SageMaker); set once at start-up.
void set_failure_file(const std::string& path);

// Prints the error line and writes it to the failure file unless this job wrote one already:
// the first error is the cause, while ranks that fail after it (a lost peer) say less. The file
// appears whole or not at all (written aside, then linked into place), so concurrent writers,
// other threads or ranks of the host, cannot interleave or replace it. Thread-safe.
void report_job_error(const std::string& message);

}  // namespace sdp
