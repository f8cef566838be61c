/* A generated EV profile: STEV tiers of 8 + 4 + 4 bits (T0 has 180 uplinks, so its values stop at
 * 179). The implementation enumerates the tuples (last field fastest) and spreads them over the
 * ports; this shows the resulting count and the first EVs. With full masks and no fixed bits the
 * expanded EV equals the raw EV. Exit status 0 only if the count and the order are as expected.
 *
 *   ev_generated [PLANE1 PLANE2]     (default 127.0.92.1 127.1.92.1) */
#include <errno.h>
#include <mrc/mrc_ctl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ctl_example.h"

static int run(struct mrc_context* ctl) {
  struct mrc_ctl_device_attr dev;
  CHECK("query device", mrc_ctl_query_device_ex(NULL, ctl, &dev, NULL));
  struct mrc_ctl_ev_fmt_field widths[3] = {{8}, {4}, {4}};
  struct mrc_ctl_ev_fmt_profile_attr fmt;
  memset(&fmt, 0, sizeof fmt);
  fmt.profile_state = MRC_CTL_PROFILE_OFFLINE;
  fmt.ev_fmt_mode = MRC_CTL_EV_FMT_MODE_STEV;
  fmt.ev_fmt_op.fmt_fields = widths;
  fmt.ev_fmt_op.fmt_field_count = 3;
  CHECK("format to OFFLINE", mrc_ctl_modify_ev_fmt_profile(
                                 ctl, 14, &fmt, MRC_CTL_EV_FMT_PROFILE_STATE | MRC_CTL_EV_FMT_PROFILE_MODE));
  fmt.profile_state = MRC_CTL_PROFILE_ONLINE;
  CHECK("format to ONLINE", mrc_ctl_modify_ev_fmt_profile(
                                ctl, 14, &fmt, MRC_CTL_EV_FMT_PROFILE_STATE | MRC_CTL_EV_FMT_PROFILE_OP));
  struct mrc_ctl_ev_field fields[3] = {{8, 0, 0, 179, 0xFF}, {4, 0, 0, 15, 0xF}, {4, 0, 0, 15, 0xF}};
  /* Ask for every tuple (180 * 16 * 16), clipped to what one profile may hold. */
  unsigned want = 180u * 16u * 16u;
  if (want > dev.ev.ev_max_count_profile) want = dev.ev.ev_max_count_profile;
  if (dev.ev.ev_count_align > 1) want -= want % dev.ev.ev_count_align;
  struct mrc_ctl_ev_profile_attr ev;
  memset(&ev, 0, sizeof ev);
  ev.profile_state = MRC_CTL_PROFILE_OFFLINE;
  ev.ev_mode = MRC_CTL_EV_MODE_GEN;
  ev.ev_fmt_profile_id = 14;
  ev.ev_count = want;
  ev.ev_fields_op.op = MRC_CTL_EV_FIELDS_OP_MODIFY_FIELDS;
  ev.ev_fields_op.fields = fields;
  ev.ev_fields_op.field_count = 3;
  CHECK("EV profile to OFFLINE",
        mrc_ctl_modify_ev_profile(ctl, 2, &ev,
                                  MRC_CTL_EV_PROFILE_STATE | MRC_CTL_EV_PROFILE_MODE |
                                      MRC_CTL_EV_PROFILE_FMT_ID | MRC_CTL_EV_PROFILE_COUNT |
                                      MRC_CTL_EV_PROFILE_EV_FIELDS_OP));
  memset(&ev, 0, sizeof ev);
  ev.profile_state = MRC_CTL_PROFILE_ONLINE;
  ev.ev_min_active = 16;
  ev.ev_event_mask = MRC_CTL_EV_ASSUMED_BAD;
  CHECK("EV profile to ONLINE",
        mrc_ctl_modify_ev_profile(
            ctl, 2, &ev,
            MRC_CTL_EV_PROFILE_STATE | MRC_CTL_EV_PROFILE_MIN_ACTIVE | MRC_CTL_EV_PROFILE_EVENT_MASK));
  memset(&ev, 0, sizeof ev);
  CHECK("query count", mrc_ctl_query_ev_profile(ctl, 2, &ev, MRC_CTL_EV_PROFILE_COUNT));
  printf("generated EV profile 2: %u EVs (asked for %u)\n", ev.ev_count, want);
  struct mrc_ctl_ev_op_entry* arr = calloc(ev.ev_count, sizeof *arr);
  if (arr == NULL) return 1;
  ev.ev_op.op = MRC_CTL_EV_OP_QUERY_EV_ARRAY;
  ev.ev_op.entries = arr;
  ev.ev_op.entry_count = ev.ev_count;
  const int rc = mrc_ctl_query_ev_profile(ctl, 2, &ev, MRC_CTL_EV_PROFILE_EV_OP);
  if (rc != 0) {
    free(arr);
    CHECK("query EV array", rc);
  }
  for (int i = 0; i < 5 && i < ev.ev_op.entry_count; ++i)
    printf("  EV %u: T0 %3u T1 %2u T2 %2u (bytes %02x %02x) port %u\n", i, arr[i].ev.val[0],
           arr[i].ev.val[1] >> 4, arr[i].ev.val[1] & 15u, arr[i].ev.val[0], arr[i].ev.val[1], arr[i].ev.port);
  /* Tuple 45,914 is (T0 179, T1 5, T2 10): bytes B3 5A (docs/protocol.md §7.5 example 3). */
  const unsigned k = 179u * 256u + 5u * 16u + 10u;
  int bad = ev.ev_op.entry_count != (int)want;
  if ((int)k < ev.ev_op.entry_count) {
    printf("  EV %u: bytes %02x %02x\n", k, arr[k].ev.val[0], arr[k].ev.val[1]);
    bad |= arr[k].ev.val[0] != 0xB3 || arr[k].ev.val[1] != 0x5A;
  }
  free(arr);
  return bad;
}

int main(int argc, char** argv) {
  const char* planes[2] = {argc > 2 ? argv[1] : "127.0.92.1", argc > 2 ? argv[2] : "127.1.92.1"};
  return run_on_local_endpoint(planes, 2, run);
}
