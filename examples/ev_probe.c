/* EV probes between two endpoints of this process on loopback: endpoint B knows A as a peer, A's
 * controller probes B on each of its ports with a few EVs and prints the round-trip times.
 * Exit status 0 only if every probe was answered with an RTT above zero.
 *
 *   ev_probe [A1 A2 B1 B2]     (default 127.0.93.1 127.1.93.1 127.0.93.2 127.1.93.2) */
#include <arpa/inet.h>
#include <errno.h>
#include <mrc/mrc_ctl.h>
#include <stdio.h>
#include <string.h>

enum { kPerPort = 4 };

int main(int argc, char** argv) {
  const int args = argc > 4;
  const char* a_planes[2] = {args ? argv[1] : "127.0.93.1", args ? argv[2] : "127.1.93.1"};
  const char* b_planes[2] = {args ? argv[3] : "127.0.93.2", args ? argv[4] : "127.1.93.2"};
  char a_spec[128];
  snprintf(a_spec, sizeof a_spec, "%s,%s", a_planes[0], a_planes[1]);
  const char* b_peers[1] = {a_spec};

  struct mrc_ctl_local_attr attr;
  memset(&attr, 0, sizeof attr);
  attr.planes = a_planes;
  attr.num_planes = 2;
  struct mrc_context* a = mrc_ctl_open_local_context(&attr);
  attr.planes = b_planes;
  attr.peers = b_peers;
  attr.num_peers = 1;
  struct mrc_context* b = mrc_ctl_open_local_context(&attr);
  if (a == NULL || b == NULL) {
    fprintf(stderr, "mrc_ctl_open_local: %s\n", strerror(errno));
    if (a != NULL) mrc_destroy_context(a); /* each opened context is closed, even on the way out */
    if (b != NULL) mrc_destroy_context(b);
    return 1;
  }
  struct mrc_ctl_device_attr dev;
  if (mrc_ctl_query_device_ex(NULL, a, &dev, NULL) != 0 || !(dev.opt_attr & MRC_CTL_OPT_CAP_EP_OP_EV_PROBE)) {
    fprintf(stderr, "no EV probes here\n");
    mrc_destroy_context(b);
    mrc_destroy_context(a);
    return 1;
  }

  struct mrc_ctl_ep_req req[2 * kPerPort];
  struct mrc_ctl_ep_rsp rsp[2 * kPerPort];
  memset(req, 0, sizeof req);
  for (int i = 0; i < 2 * kPerPort; ++i) {
    const int port = 1 + i / kPerPort;
    req[i].req_id = (uint16_t)(100 + i);
    /* RoCEv2 GID of an IPv4 address: ::ffff:a.b.c.d; B's address on the probe's port. */
    req[i].dgid.raw[10] = req[i].dgid.raw[11] = 0xFF;
    inet_pton(AF_INET, b_planes[port - 1], req[i].dgid.raw + 12);
    req[i].ev_fmt_mode = MRC_CTL_EV_FMT_MODE_STEV;
    req[i].req_ev.val[0] = 0x12; /* STEV value 0x1234000i: big-endian bytes */
    req[i].req_ev.val[1] = 0x34;
    req[i].req_ev.val[3] = (uint8_t)i;
    req[i].req_ev.port = (uint8_t)port;
  }
  int n = 0;
  const int rc =
      mrc_ctl_ep_batch_send_wait(a, 0, MRC_CTL_EP_OP_EV_PROBE, req, 2 * kPerPort, 2000000000u, rsp, &n);
  int bad = rc != 0 || n != 2 * kPerPort;
  if (rc != 0) fprintf(stderr, "probe: %s (%s)\n", strerror(errno), mrc_ctl_last_error(a));
  for (int i = 0; i < n; ++i) {
    printf("probe %u on port %u: rtt %.2f us%s\n", rsp[i].req_id, rsp[i].port, (double)rsp[i].rtt / 1e3,
           rsp[i].adj_svc_time ? " (responder service time removed)" : "");
    bad |= rsp[i].rtt == 0;
  }
  mrc_destroy_context(b);
  mrc_destroy_context(a);
  printf("%s\n", bad ? "FAILED" : "ok");
  return bad;
}
