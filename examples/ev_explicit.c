/* Builds an explicit EV profile through the controller API and brings it ONLINE: an STEV format
 * (16 + 16 bits), EVs replaced into the unpopulated array spread over both ports, then the array
 * queried back with the E2BIG sizing protocol. Exit status 0 only if every step behaved.
 *
 *   ev_explicit [PLANE1 PLANE2]     (default 127.0.91.1 127.1.91.1) */
#include <errno.h>
#include <mrc/mrc_ctl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ctl_example.h"

enum { kCount = 8 };

static int run(struct mrc_context* ctl) {
  struct mrc_ctl_ev_fmt_field widths[2] = {{16}, {16}};
  struct mrc_ctl_ev_fmt_profile_attr fmt;
  memset(&fmt, 0, sizeof fmt);
  fmt.profile_state = MRC_CTL_PROFILE_OFFLINE;
  fmt.ev_fmt_mode = MRC_CTL_EV_FMT_MODE_STEV;
  fmt.ev_fmt_op.fmt_fields = widths;
  fmt.ev_fmt_op.fmt_field_count = 2;
  CHECK("format to OFFLINE", mrc_ctl_modify_ev_fmt_profile(
                                 ctl, 13, &fmt, MRC_CTL_EV_FMT_PROFILE_STATE | MRC_CTL_EV_FMT_PROFILE_MODE));
  fmt.profile_state = MRC_CTL_PROFILE_ONLINE;
  CHECK("format to ONLINE", mrc_ctl_modify_ev_fmt_profile(
                                ctl, 13, &fmt, MRC_CTL_EV_FMT_PROFILE_STATE | MRC_CTL_EV_FMT_PROFILE_OP));

  /* Explicit EVs go through fields too: two full 16-bit fields copy the raw EV as it is. */
  struct mrc_ctl_ev_field fields[2] = {{16, 0, 0, 0xFFFF, 0xFFFF}, {16, 0, 0, 0xFFFF, 0xFFFF}};
  struct mrc_ctl_ev_profile_attr ev;
  memset(&ev, 0, sizeof ev);
  ev.profile_state = MRC_CTL_PROFILE_OFFLINE;
  ev.ev_mode = MRC_CTL_EV_MODE_EXP;
  ev.ev_fmt_profile_id = 13;
  ev.ev_count = kCount;
  ev.ev_fields_op.op = MRC_CTL_EV_FIELDS_OP_MODIFY_FIELDS;
  ev.ev_fields_op.fields = fields;
  ev.ev_fields_op.field_count = 2;
  CHECK("EV profile to OFFLINE",
        mrc_ctl_modify_ev_profile(ctl, 1, &ev,
                                  MRC_CTL_EV_PROFILE_STATE | MRC_CTL_EV_PROFILE_MODE |
                                      MRC_CTL_EV_PROFILE_FMT_ID | MRC_CTL_EV_PROFILE_COUNT |
                                      MRC_CTL_EV_PROFILE_EV_FIELDS_OP));

  /* Replace every unpopulated entry; EV values are big-endian bytes, the port must vary. */
  struct mrc_ctl_ev_op_entry ops[kCount];
  memset(ops, 0, sizeof ops);
  for (int i = 0; i < kCount; ++i) {
    const unsigned v = 0x100u + (unsigned)i;
    ops[i].ev_new.val[0] = (uint8_t)(v >> 8);
    ops[i].ev_new.val[1] = (uint8_t)v;
    ops[i].ev_new.val[2] = (uint8_t)(v >> 8);
    ops[i].ev_new.val[3] = (uint8_t)v;
    ops[i].ev_new.port = (uint8_t)(1 + i % 2);
    ops[i].state = MRC_CTL_EV_GOOD;
  }
  memset(&ev, 0, sizeof ev);
  ev.ev_op.op = MRC_CTL_EV_OP_REPLACE_EV;
  ev.ev_op.entries = ops;
  ev.ev_op.entry_count = kCount;
  CHECK("replace EVs", mrc_ctl_modify_ev_profile(ctl, 1, &ev, MRC_CTL_EV_PROFILE_EV_OP));

  memset(&ev, 0, sizeof ev);
  ev.profile_state = MRC_CTL_PROFILE_ONLINE;
  ev.ev_min_active = 2;
  ev.ev_event_mask = MRC_CTL_EV_GOOD | MRC_CTL_EV_ASSUMED_BAD;
  CHECK("EV profile to ONLINE",
        mrc_ctl_modify_ev_profile(
            ctl, 1, &ev,
            MRC_CTL_EV_PROFILE_STATE | MRC_CTL_EV_PROFILE_MIN_ACTIVE | MRC_CTL_EV_PROFILE_EVENT_MASK));

  /* Query the array: first with no room to learn its size (E2BIG), then for real. */
  memset(&ev, 0, sizeof ev);
  ev.ev_op.op = MRC_CTL_EV_OP_QUERY_EV_ARRAY;
  int rc = mrc_ctl_query_ev_profile(ctl, 1, &ev, MRC_CTL_EV_PROFILE_EV_OP);
  if (rc != -1 || errno != E2BIG || ev.ev_op.entry_count != (int)kCount) {
    fprintf(stderr, "sizing query: %s, %d entries\n", strerror(errno), ev.ev_op.entry_count);
    return 1;
  }
  struct mrc_ctl_ev_op_entry* arr = calloc((size_t)ev.ev_op.entry_count, sizeof *arr);
  if (arr == NULL) return 1;
  ev.ev_op.entries = arr;
  rc = mrc_ctl_query_ev_profile(ctl, 1, &ev, MRC_CTL_EV_PROFILE_EV_OP | MRC_CTL_EV_PROFILE_CUR_STATE);
  if (rc != 0) {
    free(arr);
    CHECK("query EV array", rc);
  }
  printf("EV profile 1: %s, %u EVs\n",
         ev.cur_profile_state == MRC_CTL_PROFILE_ONLINE ? "ONLINE" : "not ONLINE",
         (unsigned)ev.ev_op.entry_count);
  int bad = ev.cur_profile_state != MRC_CTL_PROFILE_ONLINE;
  for (unsigned i = 0; i < (unsigned)ev.ev_op.entry_count; ++i) {
    printf("  EV %u: %02x%02x%02x%02x port %u\n", i, arr[i].ev.val[0], arr[i].ev.val[1], arr[i].ev.val[2],
           arr[i].ev.val[3], arr[i].ev.port);
    if (memcmp(arr[i].ev.val, ops[i].ev_new.val, MRC_CTL_EV_MAX_BYTES) != 0 ||
        arr[i].ev.port != ops[i].ev_new.port)
      bad = 1;
  }
  free(arr);
  return bad;
}

int main(int argc, char** argv) {
  const char* planes[2] = {argc > 2 ? argv[1] : "127.0.91.1", argc > 2 ? argv[2] : "127.1.91.1"};
  return run_on_local_endpoint(planes, 2, run);
}
