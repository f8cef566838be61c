/* Walks one MRC QP through RESET -> INIT -> RTR -> RTS -> ERR, querying it on the way and showing
 * the transitions and attributes mrc_modify_qp refuses. The QP is connected to itself (its own
 * address and QPN), so no second endpoint is needed. Exit status 0 only if every step behaved as
 * the API says.
 *
 *   qp_lifecycle [DEVICE]      (default "127.0.0.1"; mrc_open_device_str's form) */
#include <errno.h>
#include <mrc/mrc.h>
#include <stdio.h>
#include <string.h>

static int failures;

static const char* state_name(enum ibv_qp_state s) {
  static const char* const names[] = {"RESET", "INIT", "RTR", "RTS", "SQD", "SQE", "ERR", "UNKNOWN"};
  return (unsigned)s < sizeof names / sizeof names[0] ? names[s] : "?";
}

/* A modify that must succeed. */
static void expect_ok(const char* what, int rc) {
  printf("  %-52s %s\n", what, rc == 0 ? "ok" : strerror(errno));
  if (rc != 0) ++failures;
}

/* A modify that must be refused with `want`. */
static void expect_refused(const char* what, int rc, int want) {
  const int got = rc == 0 ? 0 : errno;
  printf("  %-52s refused: %s\n", what, rc == 0 ? "NO (accepted!)" : strerror(got));
  if (rc == 0 || got != want) ++failures;
}

static void show(struct mrc_qp* qp, enum ibv_qp_state want) {
  struct ibv_qp_attr v;
  struct mrc_qp_attr m;
  struct mrc_qp_init_attr ia;
  if (mrc_query_qp(qp, &v, IBV_QP_STATE, &m, MRC_QP_MPR | MRC_QP_MAX_WIMM, &ia) != 0) {
    printf("  query_qp failed: %s\n", strerror(errno));
    ++failures;
    return;
  }
  printf("state %s (mpr %u/%u, max_wimm %u/%u, sq_psn 0x%x, rq_psn 0x%x, max_send_wr %u)\n",
         state_name(v.qp_state), m.mpr.mpr, m.mpr.mpr_dest, m.wimm.max_wimm, m.wimm.max_wimm_dest, v.sq_psn,
         v.rq_psn, ia.cap.max_send_wr);
  if (v.qp_state != want) ++failures;
}

/* This device's planes as a peer: its GID on every port and its UDP port. */
static void ibv_device_attr_fill(struct ibv_context* dev, struct mrc_peer_attr* self, uint16_t port) {
  struct ibv_device_attr va;
  uint32_t p;
  memset(self, 0, sizeof *self);
  if (ibv_query_device(dev, &va) != 0) return;
  self->num_planes = va.phys_port_cnt;
  for (p = 0; p < self->num_planes; ++p) ibv_query_gid(dev, (uint8_t)(p + 1), 0, &self->plane_gid[p]);
  self->udp_port = port;
}

int main(int argc, char** argv) {
  const char* spec = argc > 1 ? argv[1] : "127.0.0.1";
  struct ibv_context* dev = mrc_open_device_str(spec);
  struct mrc_context* ctx;
  struct ibv_pd* pd;
  struct mrc_cq* cq;
  struct mrc_qp* qp;
  struct mrc_qp_init_attr ia;
  struct ibv_qp_attr v;
  struct mrc_qp_attr m;
  struct ibv_send_wr wr, *bad = NULL;
  uint32_t qpn, ver;
  uint16_t port;
  const uint32_t init_mask = IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_ACCESS_FLAGS;
  const uint32_t rtr_mask = IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN | IBV_QP_RQ_PSN;
  struct mrc_device_attr da;

  mrc_query_version(&ver, NULL, NULL, NULL);
  printf("MRC API %u.%u.%u\n", ver >> MRC_API_VER_MAJOR_OFFSET, (ver >> MRC_API_VER_MINOR_OFFSET) & 0xFFu,
         ver & 0xFFFFu);
  if (!dev) {
    fprintf(stderr, "qp_lifecycle: cannot open device %s: %s\n", spec, strerror(errno));
    return 1;
  }
  ctx = mrc_create_context(dev, NULL);
  pd = ibv_alloc_pd(dev);
  cq = ctx ? mrc_create_cq(ctx, 16, NULL, NULL, 0) : NULL;
  if (!ctx || !pd || !cq || mrc_query_device(dev, &da, NULL) != 0 || mrc_query_udp_port(dev, &port) != 0) {
    fprintf(stderr, "qp_lifecycle: setup failed: %s\n", strerror(errno));
    return 1;
  }
  memset(&ia, 0, sizeof ia);
  ia.send_cq = cq;
  ia.recv_cq = cq;
  ia.pd = pd;
  ia.cap.max_send_wr = 8;
  ia.cap.max_recv_wr = 8;
  qp = mrc_create_qp(ctx, &ia);
  if (!qp || mrc_get_qpn(qp, &qpn) != 0) {
    fprintf(stderr, "qp_lifecycle: create_qp failed: %s\n", strerror(errno));
    return 1;
  }
  printf("QP 0x%x created: ", qpn);
  show(qp, IBV_QPS_RESET);

  memset(&v, 0, sizeof v);
  memset(&m, 0, sizeof m);
  printf("RESET -> INIT\n");
  v.qp_state = IBV_QPS_RTR;
  expect_refused("RESET -> RTR (skips INIT)", mrc_modify_qp(qp, &v, IBV_QP_STATE, NULL, 0), EINVAL);
  v.qp_state = IBV_QPS_INIT;
  v.qp_access_flags = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE;
  v.port_num = 0;
  expect_refused("INIT with IBV_QP_PORT 0 (ports are 1-based)",
                 mrc_modify_qp(qp, &v, init_mask | IBV_QP_PORT, &m,
                               MRC_QP_HINT | MRC_QP_EV_PROFILE_ID | MRC_QP_CC_PROFILE_ID),
                 EINVAL);
  v.port_num = 1; /* accepted (OCP's benchmark passes it); an MRC QP uses every port */
  expect_refused("INIT with IBV_QP_MIN_RNR_TIMER (unsupported)",
                 mrc_modify_qp(qp, &v, init_mask | IBV_QP_MIN_RNR_TIMER, &m, MRC_QP_HINT), EINVAL);
  m.profile.ev_profile_id = 12345;
  expect_refused(
      "INIT with an unknown EV profile",
      mrc_modify_qp(qp, &v, init_mask, &m, MRC_QP_HINT | MRC_QP_EV_PROFILE_ID | MRC_QP_CC_PROFILE_ID),
      ENOENT);
  m.profile.ev_profile_id = 0;
  expect_ok("INIT with profiles 0/0 (defaults), no hint",
            mrc_modify_qp(qp, &v, init_mask, &m, MRC_QP_HINT | MRC_QP_EV_PROFILE_ID | MRC_QP_CC_PROFILE_ID));
  show(qp, IBV_QPS_INIT);

  printf("INIT -> RTR\n");
  v.qp_state = IBV_QPS_RTR;
  v.path_mtu = IBV_MTU_4096;
  v.dest_qp_num = qpn; /* connected to itself */
  v.rq_psn = 0x100;
  /* The AV names the peer (here: this device) by one GID; its other planes and its UDP port are
   * made known with mrc_add_peer (or MRC_PEERS). */
  {
    struct mrc_peer_attr self;
    ibv_device_attr_fill(dev, &self, port);
    expect_ok("mrc_add_peer (this device's planes)", mrc_add_peer(dev, &self));
    v.ah_attr.is_global = 1;
    v.ah_attr.port_num = 1;
    v.ah_attr.grh.dgid = self.plane_gid[0];
  }
  m.mpr.mpr_dest = 8;
  m.wimm.max_wimm_dest = 32;
  expect_refused("RTR without IBV_QP_DEST_QPN",
                 mrc_modify_qp(qp, &v, rtr_mask & ~IBV_QP_DEST_QPN, &m, MRC_QP_MAX_WIMM_DEST | MRC_QP_CAP),
                 EINVAL);
  expect_refused("RTR with IBV_QP_MIN_RNR_TIMER (unsupported)",
                 mrc_modify_qp(qp, &v, rtr_mask | IBV_QP_MIN_RNR_TIMER, &m,
                               MRC_QP_MAX_WIMM_DEST | MRC_QP_MPR_DEST | MRC_QP_CAP),
                 EINVAL);
  expect_refused("RTR with MRC_QP_RETRY_CNT (belongs to RTS)",
                 mrc_modify_qp(qp, &v, rtr_mask, &m,
                               MRC_QP_MAX_WIMM_DEST | MRC_QP_MPR_DEST | MRC_QP_CAP | MRC_QP_RETRY_CNT),
                 EINVAL);
  expect_ok("RTR", mrc_modify_qp(qp, &v, rtr_mask, &m, MRC_QP_MAX_WIMM_DEST | MRC_QP_MPR_DEST | MRC_QP_CAP));
  show(qp, IBV_QPS_RTR);

  printf("RTR -> RTS\n");
  v.qp_state = IBV_QPS_RTS;
  v.sq_psn = 0x100;
  m.mpr.mpr = 4;
  m.wimm.max_wimm = 16;
  m.retry.linear_cnt = 7;
  m.retry.exp_cnt = 25;
  m.timeout = 30;
  expect_refused("RTS with timeout 30 (max 24)",
                 mrc_modify_qp(qp, &v, IBV_QP_STATE | IBV_QP_SQ_PSN, &m,
                               MRC_QP_MAX_WIMM | MRC_QP_MPR | MRC_QP_RETRY_CNT | MRC_QP_TIMEOUT),
                 EINVAL);
  m.timeout = 14;
  expect_ok("RTS", mrc_modify_qp(qp, &v, IBV_QP_STATE | IBV_QP_SQ_PSN, &m,
                                 MRC_QP_MAX_WIMM | MRC_QP_MPR | MRC_QP_RETRY_CNT | MRC_QP_TIMEOUT));
  show(qp, IBV_QPS_RTS);

  memset(&wr, 0, sizeof wr);
  wr.opcode = IBV_WR_SEND;
  expect_refused("post_send IBV_WR_SEND (MRC: WRITE and WRITE_IMM only)", mrc_post_send(qp, &wr, &bad),
                 EINVAL);
  if (bad != &wr) ++failures;

  printf("RTS -> ERR\n");
  v.qp_state = IBV_QPS_INIT;
  expect_refused("RTS -> INIT (backwards)", mrc_modify_qp(qp, &v, IBV_QP_STATE, NULL, 0), EINVAL);
  v.qp_state = IBV_QPS_ERR;
  expect_ok("ERR", mrc_modify_qp(qp, &v, IBV_QP_STATE, NULL, 0));
  show(qp, IBV_QPS_ERR);

  if (mrc_destroy_qp(qp) || mrc_destroy_cq(cq) || ibv_dealloc_pd(pd) || mrc_destroy_context(ctx) ||
      ibv_close_device(dev)) {
    fprintf(stderr, "qp_lifecycle: teardown failed: %s\n", strerror(errno));
    return 1;
  }
  printf("%s\n", failures == 0 ? "qp_lifecycle: all steps as expected" : "qp_lifecycle: UNEXPECTED RESULTS");
  return failures == 0 ? 0 : 1;
}
