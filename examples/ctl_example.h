/* Shared by the controller examples (ev_explicit, ev_generated, ev_events): the CHECK macro, and
 * run_on_local_endpoint, which opens an endpoint in this process on the given plane addresses,
 * runs the example against its controller handle, closes it, prints "ok" or "FAILED" and returns
 * the exit status. */
#ifndef MRC_CTL_EXAMPLE_H
#define MRC_CTL_EXAMPLE_H

#include <errno.h>
#include <mrc/mrc_ctl.h>
#include <stdio.h>
#include <string.h>

/* Returns 1 from the calling function, with the reason, when a controller call fails (`ctl` is
 * the context in scope; errno says why, as OCP's calls set it). */
#define CHECK(what, call)                                                               \
  do {                                                                                  \
    int rc_ = (call);                                                                   \
    if (rc_ != 0) {                                                                     \
      fprintf(stderr, "%s: %s (%s)\n", what, strerror(errno), mrc_ctl_last_error(ctl)); \
      return 1;                                                                         \
    }                                                                                   \
  } while (0)

static int run_on_local_endpoint(const char* const* planes, uint32_t num_planes,
                                 int (*run)(struct mrc_context*)) {
  struct mrc_ctl_local_attr attr;
  memset(&attr, 0, sizeof attr);
  attr.planes = planes;
  attr.num_planes = num_planes;
  struct mrc_context* ctl = mrc_ctl_open_local_context(&attr);
  if (ctl == NULL) {
    fprintf(stderr, "mrc_ctl_open_local_context: %s\n", strerror(errno));
    return 1;
  }
  const int rc = run(ctl);
  mrc_destroy_context(ctl);
  printf("%s\n", rc == 0 ? "ok" : "FAILED");
  return rc;
}

#endif
