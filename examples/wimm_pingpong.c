/* WRITE_WITH_IMM ping-pong between two MRC contexts of one process (two software endpoints on
 * loopback addresses). Side A writes a message into B's buffer with the iteration number as the
 * immediate; B checks the immediate and every byte, then writes the message back to A the same
 * way. Prints the mean round-trip time. Exit status 0 only if every message verified.
 *
 *   wimm_pingpong [-n ITERS] [-s BYTES] [-a DEVICE_A] [-b DEVICE_B]
 *
 * DEVICE is mrc_open_device_str's form: one address per plane, e.g. "127.0.0.1,127.1.0.1". */
#define _POSIX_C_SOURCE 200809L
#include <arpa/inet.h>
#include <errno.h>
#include <mrc/mrc.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

struct side {
  struct ibv_context* dev;
  struct mrc_context* ctx;
  struct ibv_pd* pd;
  struct mrc_cq* cq;
  struct mrc_qp* qp;
  struct ibv_mr* mr;
  unsigned char* buf;
  uint32_t num_planes;
};

/* What the two sides exchange out of band (in one process: a struct copy). */
struct conn_info {
  uint32_t qpn;
  uint32_t psn;
  uint32_t rkey;
  uint64_t addr;
  uint16_t udp_port;
  uint32_t num_planes;
  union ibv_gid gid[MRC_MAX_PLANES];
};

/* Byte i of message `imm`; pings (salt 0) and pongs (salt 1) differ, so a pong that never arrived
 * cannot pass for one that did. */
static unsigned char pattern(uint32_t imm, size_t i, unsigned salt) {
  return (unsigned char)(imm * 131u + i + salt * 77u);
}

static int fail(const char* what) {
  fprintf(stderr, "wimm_pingpong: %s: %s\n", what, strerror(errno));
  return -1;
}

static int open_side(struct side* s, const char* spec, size_t size) {
  struct mrc_device_attr attr;
  struct mrc_qp_init_attr ia;
  memset(s, 0, sizeof *s);
  s->dev = mrc_open_device_str(spec);
  if (!s->dev) return fail(spec);
  if (mrc_query_device(s->dev, &attr, NULL)) return fail("query_device");
  {
    struct ibv_device_attr va;
    if (ibv_query_device(s->dev, &va)) return fail("ibv_query_device");
    s->num_planes = va.phys_port_cnt;
  }
  s->ctx = mrc_create_context(s->dev, NULL);
  if (!s->ctx) return fail("create_context");
  s->pd = ibv_alloc_pd(s->dev);
  if (!s->pd) return fail("alloc_pd");
  s->buf = calloc(1, size);
  if (!s->buf) return fail("calloc");
  s->mr = ibv_reg_mr(s->pd, s->buf, size, IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE);
  if (!s->mr) return fail("reg_mr");
  s->cq = mrc_create_cq(s->ctx, 64, NULL, NULL, 0);
  if (!s->cq) return fail("create_cq");
  memset(&ia, 0, sizeof ia);
  ia.send_cq = s->cq;
  ia.recv_cq = s->cq;
  ia.pd = s->pd;
  ia.cap.max_send_wr = 16;
  ia.cap.max_recv_wr = 16;
  ia.cap.max_send_sge = 1;
  ia.send_ops_flags = IBV_QP_EX_WITH_RDMA_WRITE_WITH_IMM;
  ia.protocol_version = MRC_PROTOCOL_VERSION_1;
  s->qp = mrc_create_qp(s->ctx, &ia);
  if (!s->qp) return fail("create_qp");
  return 0;
}

static int local_info(struct side* s, uint32_t psn, struct conn_info* out) {
  uint32_t p;
  memset(out, 0, sizeof *out);
  if (mrc_get_qpn(s->qp, &out->qpn) || mrc_query_udp_port(s->dev, &out->udp_port)) return fail("get_qpn");
  out->psn = psn;
  out->rkey = s->mr->rkey;
  out->addr = (uint64_t)(uintptr_t)s->buf;
  out->num_planes = s->num_planes;
  for (p = 0; p < s->num_planes; ++p)
    if (ibv_query_gid(s->dev, (uint8_t)(p + 1), 0, &out->gid[p])) return fail("query_gid");
  return 0;
}

/* RESET -> INIT -> RTR -> RTS toward `remote`, with the attributes each transition requires. */
static int connect_qp(struct side* s, uint32_t my_psn, const struct conn_info* remote) {
  struct ibv_qp_attr v;
  struct mrc_qp_attr m;
  uint32_t p;
  memset(&v, 0, sizeof v);
  memset(&m, 0, sizeof m);
  v.qp_state = IBV_QPS_INIT;
  v.pkey_index = 0;
  v.qp_access_flags = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE;
  m.qp_hint = NULL;
  m.profile.ev_profile_id = 0; /* built-in defaults */
  m.profile.cc_profile_id = 0;
  if (mrc_modify_qp(s->qp, &v, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_ACCESS_FLAGS, &m,
                    MRC_QP_HINT | MRC_QP_EV_PROFILE_ID | MRC_QP_CC_PROFILE_ID))
    return fail("modify to INIT");

  v.qp_state = IBV_QPS_RTR;
  v.path_mtu = IBV_MTU_4096;
  v.dest_qp_num = remote->qpn;
  v.rq_psn = remote->psn;
  v.ah_attr.is_global = 1;
  v.ah_attr.grh.dgid = remote->gid[0];
  v.ah_attr.port_num = 1;
  {
    /* The AV names the peer by one GID: make its other planes and its UDP port known. */
    struct mrc_peer_attr peer;
    memset(&peer, 0, sizeof peer);
    peer.num_planes = remote->num_planes;
    for (p = 0; p < remote->num_planes; ++p) peer.plane_gid[p] = remote->gid[p];
    peer.udp_port = remote->udp_port;
    if (mrc_add_peer(s->dev, &peer)) return fail("mrc_add_peer");
  }
  m.mpr.mpr_dest = 8;
  m.wimm.max_wimm_dest = 16;
  m.cap = 0;
  if (mrc_modify_qp(s->qp, &v, IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN | IBV_QP_RQ_PSN,
                    &m, MRC_QP_MAX_WIMM_DEST | MRC_QP_MPR_DEST | MRC_QP_CAP))
    return fail("modify to RTR");

  v.qp_state = IBV_QPS_RTS;
  v.sq_psn = my_psn;
  m.mpr.mpr = 8;
  m.wimm.max_wimm = 16;
  m.retry.linear_cnt = 7;
  m.retry.exp_cnt = 25;
  m.timeout = 14; /* 16.8 ms: loopback RTTs include scheduling delays */
  if (mrc_modify_qp(s->qp, &v, IBV_QP_STATE | IBV_QP_SQ_PSN, &m,
                    MRC_QP_MAX_WIMM | MRC_QP_MPR | MRC_QP_RETRY_CNT | MRC_QP_TIMEOUT))
    return fail("modify to RTS");
  return 0;
}

static int post_recv(struct side* s, uint64_t id) {
  struct ibv_recv_wr wr, *bad = NULL;
  memset(&wr, 0, sizeof wr);
  wr.wr_id = id;
  if (mrc_post_recv(s->qp, &wr, &bad)) return fail("post_recv");
  return 0;
}

static int post_write_imm(struct side* s, const struct conn_info* remote, size_t size, uint32_t imm) {
  struct ibv_sge sge;
  struct ibv_send_wr wr, *bad = NULL;
  sge.addr = (uint64_t)(uintptr_t)s->buf;
  sge.length = (uint32_t)size;
  sge.lkey = s->mr->lkey;
  memset(&wr, 0, sizeof wr);
  wr.wr_id = imm;
  wr.sg_list = &sge;
  wr.num_sge = 1;
  wr.opcode = IBV_WR_RDMA_WRITE_WITH_IMM;
  wr.send_flags = IBV_SEND_SIGNALED;
  wr.imm_data = htonl(imm);
  wr.wr.rdma.remote_addr = remote->addr;
  wr.wr.rdma.rkey = remote->rkey;
  if (mrc_post_send(s->qp, &wr, &bad)) return fail("post_send");
  return 0;
}

/* Waits for this side's send completion and the WRITE_IMM it receives; checks imm and data. */
static int await(struct side* s, size_t size, uint32_t imm, unsigned salt) {
  int got_send = 0, got_recv = 0;
  size_t i;
  while (!got_send || !got_recv) {
    struct ibv_wc wc[4];
    int k, n = mrc_poll_cq(s->cq, 4, wc);
    if (n < 0) return fail("poll_cq");
    for (k = 0; k < n; ++k) {
      if (wc[k].status != IBV_WC_SUCCESS) {
        fprintf(stderr, "wimm_pingpong: completion error: %s\n", ibv_wc_status_str(wc[k].status));
        return -1;
      }
      if (wc[k].opcode == IBV_WC_RECV_RDMA_WITH_IMM) {
        if (!(wc[k].wc_flags & IBV_WC_WITH_IMM) || ntohl(wc[k].imm_data) != imm || wc[k].byte_len != size) {
          fprintf(stderr, "wimm_pingpong: wrong immediate %u (want %u) or length %u\n", ntohl(wc[k].imm_data),
                  imm, wc[k].byte_len);
          return -1;
        }
        got_recv = 1;
      } else {
        got_send = 1;
      }
    }
  }
  for (i = 0; i < size; ++i) {
    if (s->buf[i] != pattern(imm, i, salt)) {
      fprintf(stderr, "wimm_pingpong: byte %zu of message %u differs\n", i, imm);
      return -1;
    }
  }
  return 0;
}

static void close_side(struct side* s) {
  if (s->qp) mrc_destroy_qp(s->qp);
  if (s->cq) mrc_destroy_cq(s->cq);
  if (s->mr) ibv_dereg_mr(s->mr);
  if (s->pd) ibv_dealloc_pd(s->pd);
  if (s->ctx) mrc_destroy_context(s->ctx);
  if (s->dev) ibv_close_device(s->dev);
  free(s->buf);
}

static double now_us(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec * 1e6 + (double)ts.tv_nsec / 1e3;
}

int main(int argc, char** argv) {
  const char *spec_a = "127.0.0.1", *spec_b = "127.0.0.2";
  unsigned long iters = 1000, size = 4096;
  struct side a, b;
  struct conn_info ia, ib;
  double t0, t1;
  unsigned long it;
  size_t i;
  int opt, rc = 1;
  memset(&a, 0, sizeof a);
  memset(&b, 0, sizeof b);
  while ((opt = getopt(argc, argv, "n:s:a:b:")) != -1) {
    switch (opt) {
      case 'n':
        iters = strtoul(optarg, NULL, 10);
        break;
      case 's':
        size = strtoul(optarg, NULL, 10);
        break;
      case 'a':
        spec_a = optarg;
        break;
      case 'b':
        spec_b = optarg;
        break;
      default:
        fprintf(stderr, "usage: %s [-n ITERS] [-s BYTES] [-a DEVICE_A] [-b DEVICE_B]\n", argv[0]);
        return 2;
    }
  }
  if (iters == 0 || size == 0 || size > (1ul << 24)) {
    fprintf(stderr, "wimm_pingpong: need ITERS >= 1 and 1 <= BYTES <= 16 MiB\n");
    return 2;
  }
  if (open_side(&a, spec_a, size) || open_side(&b, spec_b, size)) goto out;
  if (local_info(&a, 0x1000, &ia) || local_info(&b, 0xABCDE, &ib)) goto out;
  if (connect_qp(&a, ia.psn, &ib) || connect_qp(&b, ib.psn, &ia)) goto out;

  t0 = now_us();
  for (it = 0; it < iters; ++it) {
    const uint32_t imm = (uint32_t)it;
    if (post_recv(&a, it) || post_recv(&b, it)) goto out;
    for (i = 0; i < size; ++i) a.buf[i] = pattern(imm, i, 0);
    if (post_write_imm(&a, &ib, size, imm)) goto out;
    /* B: the ping arrives; its own send completion comes with the pong below. */
    for (;;) {
      struct ibv_wc wc;
      int n = mrc_poll_cq(b.cq, 1, &wc);
      if (n < 0) {
        fail("poll_cq");
        goto out;
      }
      if (n == 0) continue;
      if (wc.status != IBV_WC_SUCCESS || wc.opcode != IBV_WC_RECV_RDMA_WITH_IMM ||
          ntohl(wc.imm_data) != imm) {
        fprintf(stderr, "wimm_pingpong: B got status %s opcode %d imm %u, want imm %u\n",
                ibv_wc_status_str(wc.status), (int)wc.opcode, ntohl(wc.imm_data), imm);
        goto out;
      }
      break;
    }
    for (i = 0; i < size; ++i) {
      if (b.buf[i] != pattern(imm, i, 0)) {
        fprintf(stderr, "wimm_pingpong: byte %zu of ping %u differs\n", i, imm);
        goto out;
      }
    }
    for (i = 0; i < size; ++i) b.buf[i] = pattern(imm, i, 1);
    if (post_write_imm(&b, &ia, size, imm)) goto out;
    if (await(&a, size, imm, 1)) goto out;
    /* B's pong send completion. */
    for (;;) {
      struct ibv_wc wc;
      int n = mrc_poll_cq(b.cq, 1, &wc);
      if (n < 0 || (n == 1 && wc.status != IBV_WC_SUCCESS)) {
        fprintf(stderr, "wimm_pingpong: B's send failed\n");
        goto out;
      }
      if (n == 1) break;
    }
  }
  t1 = now_us();
  printf("wimm_pingpong: %lu round trips of %lu bytes verified, mean RTT %.1f us\n", iters, size,
         (t1 - t0) / (double)iters);
  rc = 0;
out:
  close_side(&a);
  close_side(&b);
  return rc;
}
