// Interruptions (docs/guides/failures.md): SIGTERM (a spot reclaim, `docker stop`, Slurm,
// mpirun passing on its own SIGTERM) or SIGINT (Ctrl-C) asks the run to stop at the next
// step boundary, where every rank agrees on it (the flag rides on the per-step loss allreduce), rank 0 writes a
// checkpoint and every rank exits 0. A second signal ends the process at once with the
// shell's status for it: 128 + signal number (143 for SIGTERM, 130 for SIGINT).
//
// No handler runs on a compute thread: the signals are blocked in every thread from the
// start of a training process (block_interruption_signals, before MPI, OpenMP or any thread of
// ours exists, so all inherit the mask) and one watcher thread takes them with sigwait. A
// handler runs on whichever thread the signal lands on, in the middle of a oneDNN kernel too,
// and runs stopped that way sometimes crashed in their next step with a corrupted heap.
#pragma once

namespace sdp {

// Blocks SIGTERM and SIGINT in the calling thread and every thread it starts later. Call at the
// start of main(), before any thread exists, in a process that will train.
void block_interruption_signals();
// Starts the watcher thread that takes SIGTERM and SIGINT (idempotent). Signals that arrived
// since block_interruption_signals() are taken at once.
void install_interruption_handlers();
// True once a signal arrived (since the watcher started).
bool interruption_requested();
// The first signal's number (0 if none).
int interruption_signal();

}  // namespace sdp
