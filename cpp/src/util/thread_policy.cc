#include "util/thread_policy.h"

#if defined(__linux__)
#include <pthread.h>
#include <sched.h>
#endif

namespace shardfeed {

void UseBatchScheduling() {
#if defined(__linux__)
  sched_param param{};
  param.sched_priority = 0;
  (void)pthread_setschedparam(pthread_self(), SCHED_BATCH, &param);
#endif
}

}  // namespace shardfeed
