// Interruptions (README, "Checkpoints and interruptions"): SIGTERM (a spot reclaim, `docker stop`, Slurm, mpirun passing
// on its own SIGTERM) or SIGINT (Ctrl-C) asks the run to stop at the next step boundary, where
// every rank agrees on it (the flag rides on the per-step loss allreduce), rank 0 writes a
// checkpoint and every rank exits 0. A second signal ends the process at once with the
// shell's status for it: 128 + signal number (143 for SIGTERM, 130 for SIGINT).
//
// Only async-signal-safe work happens in the handler (a flag, write(2), _exit).
#pragma once

namespace sdp {

// Installs the handlers for SIGTERM and SIGINT (idempotent).
void install_interruption_handlers();
// True once a signal arrived (since the handlers were installed).
bool interruption_requested();
// The first signal's number (0 if none).
int interruption_signal();

}  // namespace sdp
