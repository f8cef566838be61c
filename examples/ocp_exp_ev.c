/* OCP's explicit-EV walkthrough (examples/mrc_ctl_exp_ev.md of OCP's repository) as a call
 * sequence, written for this project: the same calls in the same order, on the first device of
 * MRC_DEVICES, checked at every step.
 *
 *   ibv_get_device_list / ibv_open_device(first) / ibv_free_device_list
 *   mrc_ctl_query_device (EXP mode supported?), mrc_create_context(MRC_API_CURRENT_VERSION)
 *   STEV format 13 (16 + 16 bits): INIT -> OFFLINE with MODE and MODIFY_FIELDS, then ONLINE
 *   EV profile 1, EXP, ev_count = ev_max_count_profile (aligned): INIT -> OFFLINE with MODE, FMT_ID,
 *     COUNT, MIN_ACTIVE, EVENT_MASK and the fields the header requires for OFFLINE (MODIFY_FIELDS)
 *   one REPLACE_EV call per EV on the first unpopulated entry, value (i << 16 | i)
 *   ONLINE with STATE alone; DENY EVs 13..42 one call each while ONLINE
 *   REPLACE EVs 13..42 by (i + 128) while ONLINE if MRC_CTL_OPT_CAP_EV_PROFILE_MODIFY_ONLINE is
 *     advertised, else check that it is refused (EINVAL) and leaves the array as it was
 *   query the attributes, then the array (every value, port and state checked)
 *   SRv6 formats 14 (32 + 4 x 16 bits) and 15 (SRv6 + SRH: 12 fields), INIT -> OFFLINE -> ONLINE
 *   tear down: EV profile ONLINE -> OFFLINE -> INIT, formats ONLINE -> OFFLINE -> INIT,
 *     mrc_destroy_context, ibv_close_device
 *
 * It prints how fast the single-EV REPLACE_EV calls went (information only). Exit 0 only if every
 * step behaved. Needs MRC_DEVICES (e.g. "ocp0=127.0.88.1,127.1.88.1") and a privileged process. */
#define _POSIX_C_SOURCE 200809L
#include <errno.h>
#include <infiniband/verbs.h>
#include <mrc/mrc.h>
#include <mrc/mrc_ctl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define FAIL(...)                 \
  do {                            \
    fprintf(stderr, __VA_ARGS__); \
    fprintf(stderr, "\n");        \
    return 1;                     \
  } while (0)
#define CHECK(what, call)                                                                     \
  do {                                                                                        \
    if ((call) != 0) FAIL("%s: %s (%s)", what, strerror(errno), mrc_ctl_last_error(mrc_ctx)); \
  } while (0)

static void ev_value(struct mrc_ctl_ev* ev, uint32_t v, uint8_t port) {
  memset(ev, 0, sizeof *ev);
  memcpy(ev->val, &v, sizeof v); /* as the walkthrough does: the value's bytes as they lie in memory */
  ev->port = port;
}

static int fmt_up(struct mrc_context* mrc_ctx, uint64_t id, enum mrc_ctl_ev_fmt_mode mode,
                  struct mrc_ctl_ev_fmt_field* fields, int n) {
  struct mrc_ctl_ev_fmt_profile_attr a;
  memset(&a, 0, sizeof a);
  a.profile_state = MRC_CTL_PROFILE_OFFLINE;
  a.ev_fmt_mode = mode;
  a.ev_fmt_op.op = MRC_CTL_EV_FMT_OP_MODIFY_FIELDS;
  a.ev_fmt_op.fmt_fields = fields;
  a.ev_fmt_op.fmt_field_count = n;
  CHECK("format to OFFLINE",
        mrc_ctl_modify_ev_fmt_profile(
            mrc_ctx, id, &a,
            MRC_CTL_EV_FMT_PROFILE_STATE | MRC_CTL_EV_FMT_PROFILE_MODE | MRC_CTL_EV_FMT_PROFILE_OP));
  memset(&a, 0, sizeof a);
  a.profile_state = MRC_CTL_PROFILE_ONLINE;
  CHECK("format to ONLINE", mrc_ctl_modify_ev_fmt_profile(mrc_ctx, id, &a, MRC_CTL_EV_FMT_PROFILE_STATE));
  return 0;
}

static int fmt_state(struct mrc_context* mrc_ctx, uint64_t id, enum mrc_ctl_profile_state s) {
  struct mrc_ctl_ev_fmt_profile_attr a;
  memset(&a, 0, sizeof a);
  a.profile_state = s;
  CHECK("format state", mrc_ctl_modify_ev_fmt_profile(mrc_ctx, id, &a, MRC_CTL_EV_FMT_PROFILE_STATE));
  return 0;
}

static int ev_state(struct mrc_context* mrc_ctx, uint64_t id, enum mrc_ctl_profile_state s) {
  struct mrc_ctl_ev_profile_attr a;
  memset(&a, 0, sizeof a);
  a.profile_state = s;
  CHECK("EV profile state", mrc_ctl_modify_ev_profile(mrc_ctx, id, &a, MRC_CTL_EV_PROFILE_STATE));
  return 0;
}

static int run(struct ibv_context* ibv_ctx) {
  struct mrc_context* mrc_ctx = NULL;
  struct mrc_ctl_device_attr dev;
  if (mrc_ctl_query_device(ibv_ctx, &dev) != 0) FAIL("mrc_ctl_query_device: %s", strerror(errno));
  if (!(dev.ev.ev_mode_mask & MRC_CTL_EV_MODE_EXP)) FAIL("explicit EV mode not supported");
  const uint32_t nports = (uint32_t)__builtin_popcount(dev.phy_port_mask);
  if (nports == 0) FAIL("the device reports no port");

  struct mrc_context_attr cattr;
  memset(&cattr, 0, sizeof cattr);
  cattr.mrc_api_version_used = MRC_API_CURRENT_VERSION;
  mrc_ctx = mrc_create_context(ibv_ctx, &cattr);
  if (mrc_ctx == NULL) FAIL("mrc_create_context: %s", strerror(errno));

  struct mrc_ctl_ev_fmt_field stev[2] = {{16}, {16}};
  if (fmt_up(mrc_ctx, 13, MRC_CTL_EV_FMT_MODE_STEV, stev, 2) != 0) return 1;

  uint32_t ev_count = dev.ev.ev_max_count_profile;
  if (ev_count % dev.ev.ev_count_align != 0) ev_count -= ev_count % dev.ev.ev_count_align;
  struct mrc_ctl_ev_field fields[2] = {{16, 0, 0, 0xFFFF, 0xFFFF}, {16, 0, 0, 0xFFFF, 0xFFFF}};
  struct mrc_ctl_ev_profile_attr ev;
  memset(&ev, 0, sizeof ev);
  ev.profile_state = MRC_CTL_PROFILE_OFFLINE;
  ev.ev_mode = MRC_CTL_EV_MODE_EXP;
  ev.ev_fmt_profile_id = 13;
  ev.ev_count = ev_count;
  ev.ev_min_active = ev_count / 4;
  ev.ev_event_mask = MRC_CTL_EV_GOOD | MRC_CTL_EV_ASSUMED_BAD;
  ev.ev_fields_op.op = MRC_CTL_EV_FIELDS_OP_MODIFY_FIELDS;
  ev.ev_fields_op.fields = fields;
  ev.ev_fields_op.field_count = 2;
  CHECK("EV profile to OFFLINE",
        mrc_ctl_modify_ev_profile(mrc_ctx, 1, &ev,
                                  MRC_CTL_EV_PROFILE_STATE | MRC_CTL_EV_PROFILE_MODE |
                                      MRC_CTL_EV_PROFILE_FMT_ID | MRC_CTL_EV_PROFILE_COUNT |
                                      MRC_CTL_EV_PROFILE_MIN_ACTIVE | MRC_CTL_EV_PROFILE_EVENT_MASK |
                                      MRC_CTL_EV_PROFILE_EV_FIELDS_OP));

  /* Moving to ONLINE before every entry is populated is refused. */
  memset(&ev, 0, sizeof ev);
  ev.profile_state = MRC_CTL_PROFILE_ONLINE;
  if (mrc_ctl_modify_ev_profile(mrc_ctx, 1, &ev, MRC_CTL_EV_PROFILE_STATE) != -1 || errno != EINVAL)
    FAIL("an unpopulated explicit profile went ONLINE");

  struct timespec t0, t1;
  clock_gettime(CLOCK_MONOTONIC, &t0);
  for (uint32_t i = 0; i < ev_count; i++) {
    struct mrc_ctl_ev_op_entry e;
    memset(&e, 0, sizeof e);
    e.ev = MRC_CTL_EV_UNPOPULATED;
    ev_value(&e.ev_new, (i << 16) | i, (uint8_t)(1 + i % nports)); /* the port varies: spraying */
    e.state = MRC_CTL_EV_GOOD;
    memset(&ev, 0, sizeof ev);
    ev.ev_op.op = MRC_CTL_EV_OP_REPLACE_EV;
    ev.ev_op.entries = &e;
    ev.ev_op.entry_count = 1;
    if (mrc_ctl_modify_ev_profile(mrc_ctx, 1, &ev, MRC_CTL_EV_PROFILE_EV_OP) != 0)
      FAIL("replace EV %u: %s (%s)", i, strerror(errno), mrc_ctl_last_error(mrc_ctx));
  }
  clock_gettime(CLOCK_MONOTONIC, &t1);
  const double s = (double)(t1.tv_sec - t0.tv_sec) + (double)(t1.tv_nsec - t0.tv_nsec) * 1e-9;
  printf("%u single-EV REPLACE_EV calls: %.3f s, %.0f EVs/s\n", ev_count, s, s > 0 ? ev_count / s : 0.0);
  if (ev_state(mrc_ctx, 1, MRC_CTL_PROFILE_ONLINE) != 0) return 1;

  /* Deny EVs 13..42 while ONLINE. */
  for (uint32_t i = 13; i <= 42; i++) {
    struct mrc_ctl_ev_op_entry e;
    memset(&e, 0, sizeof e);
    ev_value(&e.ev, (i << 16) | i, (uint8_t)(1 + i % nports));
    e.state = MRC_CTL_EV_DENIED;
    memset(&ev, 0, sizeof ev);
    ev.ev_op.op = MRC_CTL_EV_OP_MODIFY_EV_STATE;
    ev.ev_op.entries = &e;
    ev.ev_op.entry_count = 1;
    CHECK("deny an EV while ONLINE", mrc_ctl_modify_ev_profile(mrc_ctx, 1, &ev, MRC_CTL_EV_PROFILE_EV_OP));
  }

  /* Replace EVs 13..42 while ONLINE: only where the device advertises it. */
  const int modify_online = (dev.opt_attr & MRC_CTL_OPT_CAP_EV_PROFILE_MODIFY_ONLINE) != 0;
  for (uint32_t i = 13; i <= 42; i++) {
    struct mrc_ctl_ev_op_entry e;
    memset(&e, 0, sizeof e);
    ev_value(&e.ev, (i << 16) | i, (uint8_t)(1 + i % nports));
    ev_value(&e.ev_new, ((i + 128) << 16) | (i + 128), (uint8_t)(1 + i % nports));
    e.state = MRC_CTL_EV_GOOD;
    memset(&ev, 0, sizeof ev);
    ev.ev_op.op = MRC_CTL_EV_OP_REPLACE_EV;
    ev.ev_op.entries = &e;
    ev.ev_op.entry_count = 1;
    const int rc = mrc_ctl_modify_ev_profile(mrc_ctx, 1, &ev, MRC_CTL_EV_PROFILE_EV_OP);
    if (modify_online && rc != 0) FAIL("replace EV %u while ONLINE: %s", i, strerror(errno));
    if (!modify_online && (rc != -1 || errno != EINVAL))
      FAIL("REPLACE_EV while ONLINE was not refused, yet MODIFY_ONLINE is not advertised");
  }

  /* Query the attributes, then the array. */
  memset(&ev, 0, sizeof ev);
  CHECK("query the EV profile",
        mrc_ctl_query_ev_profile(mrc_ctx, 1, &ev,
                                 MRC_CTL_EV_PROFILE_STATE | MRC_CTL_EV_PROFILE_MODE |
                                     MRC_CTL_EV_PROFILE_FMT_ID | MRC_CTL_EV_PROFILE_COUNT |
                                     MRC_CTL_EV_PROFILE_MIN_ACTIVE | MRC_CTL_EV_PROFILE_EVENT_MASK));
  if (ev.ev_mode != MRC_CTL_EV_MODE_EXP || ev.cur_profile_state != MRC_CTL_PROFILE_ONLINE ||
      ev.ev_fmt_profile_id != 13 || ev.ev_count != ev_count || ev.ev_min_active != ev_count / 4 ||
      ev.ev_event_mask != (MRC_CTL_EV_GOOD | MRC_CTL_EV_ASSUMED_BAD))
    FAIL("the profile's attributes are not the ones set");
  const uint32_t n = ev.ev_count;
  struct mrc_ctl_ev_op_entry* arr = calloc(n, sizeof *arr);
  if (arr == NULL) FAIL("out of memory");
  memset(&ev, 0, sizeof ev);
  ev.ev_op.op = MRC_CTL_EV_OP_QUERY_EV_ARRAY;
  ev.ev_op.entries = arr;
  ev.ev_op.entry_count = (int)n;
  if (mrc_ctl_query_ev_profile(mrc_ctx, 1, &ev, MRC_CTL_EV_PROFILE_EV_OP) != 0 ||
      ev.ev_op.entry_count != (int)n) {
    free(arr);
    FAIL("query the EV array: %s", strerror(errno));
  }
  for (uint32_t i = 0; i < n; i++) {
    const int replaced = modify_online && i >= 13 && i <= 42;
    const uint32_t v = replaced ? ((i + 128) << 16) | (i + 128) : (i << 16) | i;
    struct mrc_ctl_ev want;
    ev_value(&want, v, (uint8_t)(1 + i % nports));
    const uint32_t state = (i >= 13 && i <= 42 && !replaced) ? MRC_CTL_EV_DENIED : MRC_CTL_EV_GOOD;
    if (memcmp(arr[i].ev.val, want.val, sizeof want.val) != 0 || arr[i].ev.port != want.port ||
        (uint32_t)arr[i].state != state) {
      const unsigned port = arr[i].ev.port, got = (unsigned)arr[i].state;
      free(arr);
      FAIL("EV[%u] is not what was programmed (port %u, state %u)", i, port, got);
    }
  }
  free(arr);

  /* The SRv6 formats. */
  struct mrc_ctl_ev_fmt_field srv6[5] = {{32}, {16}, {16}, {16}, {16}};
  if (fmt_up(mrc_ctx, 14, MRC_CTL_EV_FMT_MODE_SRV6, srv6, 5) != 0) return 1;
  struct mrc_ctl_ev_fmt_field srh[12] = {{32}, {16}, {16}, {16}, {16}, {16},
                                         {16}, {32}, {16}, {16}, {16}, {16}};
  if (fmt_up(mrc_ctx, 15, MRC_CTL_EV_FMT_MODE_SRV6, srh, 12) != 0) return 1;

  /* Tear down. */
  if (ev_state(mrc_ctx, 1, MRC_CTL_PROFILE_OFFLINE) != 0 || ev_state(mrc_ctx, 1, MRC_CTL_PROFILE_INIT) != 0)
    return 1;
  for (uint64_t id = 13; id <= 15; id++)
    if (fmt_state(mrc_ctx, id, MRC_CTL_PROFILE_OFFLINE) != 0 ||
        fmt_state(mrc_ctx, id, MRC_CTL_PROFILE_INIT) != 0)
      return 1;
  if (mrc_destroy_context(mrc_ctx) != 0) FAIL("mrc_destroy_context: %s", strerror(errno));
  return 0;
}

int main(void) {
  struct ibv_device** dev_list = ibv_get_device_list(NULL);
  if (dev_list == NULL || dev_list[0] == NULL) {
    fprintf(stderr, "no device (set MRC_DEVICES)\n");
    return 1;
  }
  struct ibv_context* ibv_ctx = ibv_open_device(dev_list[0]);
  ibv_free_device_list(dev_list);
  if (ibv_ctx == NULL) {
    fprintf(stderr, "ibv_open_device: %s\n", strerror(errno));
    return 1;
  }
  const int rc = run(ibv_ctx);
  if (ibv_close_device(ibv_ctx) != 0) {
    fprintf(stderr, "ibv_close_device: %s\n", strerror(errno));
    return 1;
  }
  printf("%s\n", rc == 0 ? "ok" : "FAILED");
  return rc;
}
