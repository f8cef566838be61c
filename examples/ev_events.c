/* EV events: a profile armed for GOOD events, an event CQ, and a state change caused by the
 * controller itself (deny an EV, then allow it again: DENIED -> GOOD is reported). Also shows
 * that the CQ never overruns: with room for one event, a second change is dropped and counted in
 * the next event's drop_count. Exit status 0 only if the events are exactly those.
 *
 *   ev_events [PLANE]     (default 127.0.94.1) */
#include <errno.h>
#include <mrc/mrc_ctl.h>
#include <stdio.h>
#include <string.h>

#include "ctl_example.h"

static int set_state(struct mrc_context* ctl, uint8_t ev_byte, uint32_t state) {
  struct mrc_ctl_ev_op_entry op;
  memset(&op, 0, sizeof op);
  op.ev.val[0] = ev_byte;
  op.ev.port = 1;
  op.state = state;
  struct mrc_ctl_ev_profile_attr a;
  memset(&a, 0, sizeof a);
  a.ev_op.op = MRC_CTL_EV_OP_MODIFY_EV_STATE;
  a.ev_op.entries = &op;
  a.ev_op.entry_count = 1;
  return mrc_ctl_modify_ev_profile(ctl, 1, &a, MRC_CTL_EV_PROFILE_EV_OP);
}

static int run(struct mrc_context* ctl) {
  struct mrc_ctl_ev_fmt_field width = {8};
  struct mrc_ctl_ev_fmt_profile_attr fmt;
  memset(&fmt, 0, sizeof fmt);
  fmt.profile_state = MRC_CTL_PROFILE_OFFLINE;
  fmt.ev_fmt_mode = MRC_CTL_EV_FMT_MODE_UDP;
  fmt.ev_fmt_op.fmt_fields = &width;
  fmt.ev_fmt_op.fmt_field_count = 1;
  CHECK("format", mrc_ctl_modify_ev_fmt_profile(ctl, 13, &fmt,
                                                MRC_CTL_EV_FMT_PROFILE_STATE | MRC_CTL_EV_FMT_PROFILE_MODE));
  fmt.profile_state = MRC_CTL_PROFILE_ONLINE;
  CHECK("format ONLINE", mrc_ctl_modify_ev_fmt_profile(
                             ctl, 13, &fmt, MRC_CTL_EV_FMT_PROFILE_STATE | MRC_CTL_EV_FMT_PROFILE_OP));
  /* Generated: 8 EVs 0x00..0x07 in the UDP source port's high byte, all on port 1. */
  struct mrc_ctl_ev_field field = {8, 0, 0, 7, 0xFF};
  struct mrc_ctl_ev_profile_attr ev;
  memset(&ev, 0, sizeof ev);
  ev.profile_state = MRC_CTL_PROFILE_OFFLINE;
  ev.ev_mode = MRC_CTL_EV_MODE_GEN;
  ev.ev_fmt_profile_id = 13;
  ev.ev_count = 8;
  ev.ev_fields_op.op = MRC_CTL_EV_FIELDS_OP_MODIFY_FIELDS;
  ev.ev_fields_op.fields = &field;
  ev.ev_fields_op.field_count = 1;
  CHECK("EV profile", mrc_ctl_modify_ev_profile(ctl, 1, &ev,
                                                MRC_CTL_EV_PROFILE_STATE | MRC_CTL_EV_PROFILE_MODE |
                                                    MRC_CTL_EV_PROFILE_FMT_ID | MRC_CTL_EV_PROFILE_COUNT |
                                                    MRC_CTL_EV_PROFILE_EV_FIELDS_OP));
  memset(&ev, 0, sizeof ev);
  ev.profile_state = MRC_CTL_PROFILE_ONLINE;
  ev.ev_min_active = 1;
  ev.ev_event_mask = MRC_CTL_EV_GOOD;
  CHECK("EV profile ONLINE",
        mrc_ctl_modify_ev_profile(
            ctl, 1, &ev,
            MRC_CTL_EV_PROFILE_STATE | MRC_CTL_EV_PROFILE_MIN_ACTIVE | MRC_CTL_EV_PROFILE_EVENT_MASK));

  struct mrc_cq* cq = mrc_ctl_create_ev_event_cq(ctl, 1, NULL, NULL, 0);
  if (cq == NULL) CHECK("create event CQ", errno);
  struct mrc_ctl_ev_event e[4];
  int bad = 0;
  /* EV 0x03: deny (not in the mask), allow (a GOOD event). */
  CHECK("deny", set_state(ctl, 0x03, MRC_CTL_EV_DENIED));
  CHECK("allow", set_state(ctl, 0x03, MRC_CTL_EV_GOOD));
  int n = mrc_ctl_poll_ev_event(cq, 4, e);
  printf("after deny + allow of EV 03: %d event(s)\n", n);
  if (n == 1)
    printf("  profile %llu EV %02x port %u -> %s, %u dropped before it\n",
           (unsigned long long)e[0].profile_id, e[0].ev.val[0], e[0].ev.port,
           e[0].state == MRC_CTL_EV_GOOD ? "GOOD" : "?", e[0].drop_count);
  bad |= n != 1 || e[0].state != MRC_CTL_EV_GOOD || e[0].ev.val[0] != 0x03 || e[0].drop_count != 0;
  /* Three GOOD events into a CQ with room for one: one kept, two counted, then reported. */
  for (uint8_t v = 4; v < 7; ++v) {
    CHECK("deny", set_state(ctl, v, MRC_CTL_EV_DENIED));
    CHECK("allow", set_state(ctl, v, MRC_CTL_EV_GOOD));
  }
  n = mrc_ctl_poll_ev_event(cq, 4, e);
  bad |= n != 1 || e[0].ev.val[0] != 0x04;
  CHECK("deny", set_state(ctl, 0x07, MRC_CTL_EV_DENIED));
  CHECK("allow", set_state(ctl, 0x07, MRC_CTL_EV_GOOD));
  n = mrc_ctl_poll_ev_event(cq, 4, e);
  printf("after an overflow: %d event(s), EV %02x, drop_count %u\n", n, n > 0 ? e[0].ev.val[0] : 0,
         n > 0 ? e[0].drop_count : 0);
  bad |= n != 1 || e[0].ev.val[0] != 0x07 || e[0].drop_count != 2;
  CHECK("destroy CQ", mrc_destroy_cq(cq));
  return bad;
}

int main(int argc, char** argv) {
  const char* planes[1] = {argc > 1 ? argv[1] : "127.0.94.1"};
  return run_on_local_endpoint(planes, 1, run);
}
