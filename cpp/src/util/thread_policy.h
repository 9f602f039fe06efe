// How the engine's worker threads are scheduled (internal).
#pragma once

namespace shardfeed {

// Puts the calling thread in Linux's SCHED_BATCH policy (same share of the
// CPU, same nice value): a batch thread that wakes up never preempts the
// thread running on its CPU.  Without it, a worker woken by the training
// loop's next() took that thread's CPU for a whole assembly (about 3 ms on
// bench_core's batches) before next() could return: a wait of 3 ms in every
// few steps although the batch was ready.  A no-op elsewhere, or if refused.
void UseBatchScheduling();

}  // namespace shardfeed
