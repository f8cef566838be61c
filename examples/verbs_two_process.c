/* Two processes, each with its own MRC_DEVICES, connected the way an OCP MRC program connects:
 * ibv_get_device_list / ibv_open_device by name, mrc_query_device, mrc_create_context,
 * ibv_alloc_pd, ibv_reg_mr (with relaxed ordering), CQs and a QP, ibv_query_gid at GID index 3,
 * the verbs attribute masks of a verbs program (INIT with PKEY_INDEX | PORT | ACCESS_FLAGS, RTR with
 * AV | DEST_QPN | RQ_PSN | PATH_MTU, RTS with SQ_PSN | TIMEOUT | RETRY_CNT | RNR_RETRY and no MRC
 * attribute at all), RDMA WRITEs and a closing WRITE_WITH_IMM. The parent is the receiver and checks
 * every byte. Connection data goes over a pipe pair (a program of its own would use TCP).
 *
 * Usage: verbs_two_process [RECEIVER_ADDR SENDER_ADDR]   (default 127.0.95.1 127.0.95.2) */
#define _POSIX_C_SOURCE 200809L
#include <arpa/inet.h>
#include <errno.h>
#include <infiniband/verbs.h>
#include <mrc/mrc.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#define SIZE (256 * 1024)
#define WRITES 64

struct wire {
  uint32_t qpn;
  uint32_t rkey;
  uint64_t vaddr;
  union ibv_gid gid;
  uint32_t psn;
};

static int fail(const char* who, const char* what) {
  fprintf(stderr, "%s: %s: %s\n", who, what, strerror(errno));
  return 1;
}

static int full_io(int fd, void* buf, size_t len, int out) {
  uint8_t* p = buf;
  while (len > 0) {
    const ssize_t n = out ? write(fd, p, len) : read(fd, p, len);
    if (n <= 0) return -1;
    p += n;
    len -= (size_t)n;
  }
  return 0;
}

static int wait_one(struct mrc_cq* cq, struct ibv_wc* wc) {
  int n;
  do n = mrc_poll_cq(cq, 1, wc);
  while (n == 0);
  return n == 1 && wc->status == IBV_WC_SUCCESS ? 0 : -1;
}

/* One side: sender = 1 writes, sender = 0 receives and verifies. */
static int side(const char* who, int sender, int rd, int wr) {
  int ndev = 0;
  struct ibv_device** list = ibv_get_device_list(&ndev);
  if (list == NULL || ndev < 1) return fail(who, "ibv_get_device_list");
  struct ibv_device* dev = NULL;
  for (int i = 0; i < ndev; ++i)
    if (strcmp(ibv_get_device_name(list[i]), "mrc0") == 0) dev = list[i];
  if (dev == NULL) return fail(who, "device mrc0 not listed");
  struct ibv_context* vctx = ibv_open_device(dev);
  if (vctx == NULL) return fail(who, "ibv_open_device");
  struct mrc_device_attr da;
  int supported = 0;
  if (mrc_query_device(vctx, &da, &supported) != 0 || !supported) return fail(who, "mrc_query_device");
  struct ibv_port_attr pa;
  if (ibv_query_port(vctx, 1, &pa) != 0 || pa.state != IBV_PORT_ACTIVE) return fail(who, "ibv_query_port");
  struct mrc_context_attr ca = {.mrc_api_version_used = MRC_API_CURRENT_VERSION};
  struct mrc_context* ctx = mrc_create_context(vctx, &ca);
  if (ctx == NULL) return fail(who, "mrc_create_context");
  struct ibv_pd* pd = ibv_alloc_pd(vctx);
  if (pd == NULL) return fail(who, "ibv_alloc_pd");
  struct mrc_cq* scq = mrc_create_cq(ctx, 256, NULL, NULL, 0);
  struct mrc_cq* rcq = mrc_create_cq(ctx, 256, NULL, NULL, 0);
  if (scq == NULL || rcq == NULL) return fail(who, "mrc_create_cq");
  struct mrc_qp_init_attr ia;
  memset(&ia, 0, sizeof ia);
  ia.send_cq = scq;
  ia.recv_cq = rcq;
  ia.pd = pd;
  ia.cap.max_send_wr = 128;
  ia.cap.max_recv_wr = 4;
  ia.cap.max_send_sge = 1;
  ia.cap.max_recv_sge = 1;
  struct mrc_qp* qp = mrc_create_qp(ctx, &ia);
  if (qp == NULL) return fail(who, "mrc_create_qp");
  uint8_t* buf = calloc(1, SIZE);
  if (buf == NULL) return fail(who, "calloc");
  struct ibv_mr* mr = ibv_reg_mr(
      pd, buf, SIZE, IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_RELAXED_ORDERING);
  if (mr == NULL) return fail(who, "ibv_reg_mr");

  struct ibv_qp_attr v;
  struct mrc_qp_attr m;
  memset(&v, 0, sizeof v);
  memset(&m, 0, sizeof m);
  v.qp_state = IBV_QPS_INIT;
  v.pkey_index = 0;
  v.port_num = 1;
  v.qp_access_flags = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE;
  if (mrc_modify_qp(qp, &v, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS, &m, 0))
    return fail(who, "INIT");

  struct wire me, peer;
  memset(&me, 0, sizeof me);
  if (mrc_get_qpn(qp, &me.qpn) || ibv_query_gid(vctx, 1, 3, &me.gid)) return fail(who, "qpn / gid 3");
  me.rkey = mr->rkey;
  me.vaddr = (uintptr_t)buf;
  me.psn = sender ? 0x123456u : 0xABCDEFu;
  if (full_io(wr, &me, sizeof me, 1) || full_io(rd, &peer, sizeof peer, 0)) return fail(who, "exchange");

  memset(&v, 0, sizeof v);
  v.qp_state = IBV_QPS_RTR;
  v.path_mtu = IBV_MTU_4096;
  v.ah_attr.is_global = 1;
  v.ah_attr.grh.dgid = peer.gid;
  v.ah_attr.grh.sgid_index = 3;
  v.ah_attr.port_num = 1;
  v.dest_qp_num = peer.qpn;
  v.rq_psn = peer.psn;
  if (mrc_modify_qp(qp, &v, IBV_QP_STATE | IBV_QP_AV | IBV_QP_DEST_QPN | IBV_QP_RQ_PSN | IBV_QP_PATH_MTU, &m,
                    0))
    return fail(who, "RTR");
  memset(&v, 0, sizeof v);
  v.qp_state = IBV_QPS_RTS;
  v.sq_psn = me.psn;
  v.timeout = 7;
  v.retry_cnt = 14;
  v.rnr_retry = 14;
  if (mrc_modify_qp(
          qp, &v, IBV_QP_STATE | IBV_QP_SQ_PSN | IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY | IBV_QP_TIMEOUT, &m, 0))
    return fail(who, "RTS");

  struct ibv_wc wc;
  int rc = 0;
  if (!sender) {
    struct ibv_recv_wr rwr, *rbad = NULL;
    memset(&rwr, 0, sizeof rwr);
    rwr.wr_id = 0x1000;
    if (mrc_post_recv(qp, &rwr, &rbad)) return fail(who, "mrc_post_recv");
    const char ready = 1;
    if (full_io(wr, (void*)&ready, 1, 1)) return fail(who, "ready");
    if (wait_one(rcq, &wc) || wc.opcode != IBV_WC_RECV_RDMA_WITH_IMM || ntohl(wc.imm_data) != SIZE)
      return fail(who, "WRITE_WITH_IMM completion");
    for (size_t i = 0; i < SIZE; ++i)
      if (buf[i] != (uint8_t)(i * 7 + 3)) {
        fprintf(stderr, "%s: byte %zu is 0x%02x\n", who, i, buf[i]);
        rc = 1;
        break;
      }
    printf("%s: %d KiB in %d WRITEs + WRITE_WITH_IMM received, every byte checked: %s\n", who, SIZE / 1024,
           WRITES, rc ? "MISMATCH" : "ok");
  } else {
    char ready = 0;
    if (full_io(rd, &ready, 1, 0)) return fail(who, "ready");
    for (size_t i = 0; i < SIZE; ++i) buf[i] = (uint8_t)(i * 7 + 3);
    const uint32_t chunk = SIZE / WRITES;
    for (int i = 0; i <= WRITES; ++i) {
      const int last = i == WRITES;
      struct ibv_sge sge = {.addr = (uintptr_t)buf + (last ? 0 : (uint64_t)i * chunk),
                            .length = last ? 8 : chunk,
                            .lkey = mr->lkey};
      struct ibv_send_wr swr, *bad = NULL;
      memset(&swr, 0, sizeof swr);
      swr.wr_id = (uint64_t)i;
      swr.sg_list = &sge;
      swr.num_sge = 1;
      swr.opcode = last ? IBV_WR_RDMA_WRITE_WITH_IMM : IBV_WR_RDMA_WRITE;
      swr.send_flags = IBV_SEND_SIGNALED;
      if (last) swr.imm_data = htonl(SIZE);
      swr.wr.rdma.remote_addr = peer.vaddr + (last ? 0 : (uint64_t)i * chunk);
      swr.wr.rdma.rkey = peer.rkey;
      if (mrc_post_send(qp, &swr, &bad)) return fail(who, "mrc_post_send");
      if (wait_one(scq, &wc)) {
        fprintf(stderr, "%s: send completion: %s\n", who, ibv_wc_status_str(wc.status));
        return 1;
      }
    }
  }
  const char done = 1;
  char other = 0;
  if (full_io(wr, (void*)&done, 1, 1) || full_io(rd, &other, 1, 0)) return fail(who, "done");
  if (mrc_destroy_qp(qp) || mrc_destroy_cq(scq) || mrc_destroy_cq(rcq)) return fail(who, "destroy QP/CQ");
  if (ibv_dereg_mr(mr) || ibv_dealloc_pd(pd) || mrc_destroy_context(ctx) || ibv_close_device(vctx))
    return fail(who, "close");
  ibv_free_device_list(list);
  free(buf);
  return rc;
}

int main(int argc, char** argv) {
  const char* raddr = argc > 2 ? argv[1] : "127.0.95.1";
  const char* saddr = argc > 2 ? argv[2] : "127.0.95.2";
  char env[128];
  int to_child[2], to_parent[2];
  if (pipe(to_child) || pipe(to_parent)) return fail("main", "pipe");
  const pid_t pid = fork();
  if (pid < 0) return fail("main", "fork");
  if (pid == 0) {  // the sender, with a device of its own
    snprintf(env, sizeof env, "mrc0=%s", saddr);
    setenv("MRC_DEVICES", env, 1);
    _exit(side("sender", 1, to_child[0], to_parent[1]));
  }
  snprintf(env, sizeof env, "mrc0=%s", raddr);
  setenv("MRC_DEVICES", env, 1);
  int rc = side("receiver", 0, to_parent[0], to_child[1]);
  close(to_child[1]);  // a failed receiver must not leave the sender waiting
  int status = 0;
  if (waitpid(pid, &status, 0) != pid || !WIFEXITED(status) || WEXITSTATUS(status) != 0) rc = 1;
  printf("%s\n", rc == 0 ? "ok" : "FAILED");
  return rc;
}
