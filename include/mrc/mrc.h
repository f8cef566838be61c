/* MRC application API. Source-compatible with OCP's mrc.h: the same functions with the same
 * signatures, structs with the same members, enums with the same values, over the libibverbs
 * types (<infiniband/verbs.h>) OCP uses. Written for this project; docs/api.md lists what this
 * implementation does differently.
 *
 * The verbs device is a software MRC endpoint (UDP, one local address per plane = port). libmrc
 * provides the libibverbs calls an MRC program makes for devices, PDs and MRs (ibv_get_device_list,
 * ibv_open_device, ibv_query_gid, ibv_alloc_pd, ibv_reg_mr, ...) over those devices, listed by the
 * environment variable MRC_DEVICES (docs/api.md); link libmrc before libibverbs. The vendor calls
 * at the end of this header open devices from a config instead, and drive progress.
 *
 * Errors: functions returning int give 0 or -1 with errno set; functions returning a pointer give
 * NULL with errno set; mrc_poll_cq gives a count or -1. Ports (planes) are 1-based. */
#ifndef _MRC_API_H_
#define _MRC_API_H_

#include <infiniband/verbs.h>
#include <stddef.h>
#include <stdint.h>

#include "mrc_api_ver.h"

#ifdef __cplusplus
extern "C" {
#endif

#define MRC_MAX_VENDOR_CFG_SIZE 128

/* MRC wire protocol versions: a device reports a bitmap, a QP asks for one bit (0 = default). */
enum mrc_protocol_version {
  MRC_PROTOCOL_VERSION_0 = 0,
  MRC_PROTOCOL_VERSION_1 = 1 << 0,
};

struct mrc_context;
struct mrc_qp_hint;
struct mrc_qp;
struct mrc_cq;
struct mrc_comp_channel;

enum mrc_device_cap {
  MRC_DEVICE_CAP_TRIM_NACK = 1 << 0,
  MRC_DEVICE_CAP_DYNAMIC_MPR = 1 << 1,
  MRC_DEVICE_CAP_SVC_TIME = 1 << 2,
};

struct mrc_device_attr {
  uint32_t mrc_protocol_version; /* bitmap of enum mrc_protocol_version */
  struct {
    uint16_t max_wimm;
    uint16_t max_wimm_dest;
  } wimm_attr;
  struct {
    uint8_t max_mpr;        /* 128-PSN units */
    uint8_t mpr_resolution; /* allocation step, 128-PSN units */
  } mpr_attr;
  struct {
    uint32_t max_qp_hint;
  } qp_attr;
  uint32_t cap; /* enum mrc_device_cap */
};

/* *supported = 1 when context is an MRC device. mrc_query_device implies API 1.0.0 semantics;
 * mcontext may be NULL. */
#if MRC_API_VER_USED >= MRC_API_VER(1, 0, 1)
int mrc_query_device_ex(struct ibv_context* context, struct mrc_context* mcontext,
                        struct mrc_device_attr* attr, int* supported);
#endif
int mrc_query_device(struct ibv_context* context, struct mrc_device_attr* attr, int* supported);

/* The library's API range and vendor API range. Callable before anything else; any pointer may
 * be NULL. */
void mrc_query_version(uint32_t* current_version, uint32_t* last_supported_version, uint32_t* vendor_version,
                       uint32_t* last_supported_vendor_version);

/* 0 in a version field: the latest. */
struct mrc_context_attr {
  uint32_t mrc_api_version_used;
  uint32_t mrc_vendor_api_version_used;
};

/* One context per device (EBUSY for a second); context_attr may be NULL. The context runs a
 * progress thread (see mrc_create_context_ex for application-driven progress). */
struct mrc_context* mrc_create_context(struct ibv_context* vcontext, struct mrc_context_attr* context_attr);
/* -1 EBUSY while CQs, QPs, channels or hints of it exist. */
int mrc_destroy_context(struct mrc_context* mrc_ctx);

int mrc_create_comp_channel(struct mrc_context* mrc_ctx, struct mrc_comp_channel** channel);
/* The fd becomes readable when an armed CQ of the channel gets a completion (an eventfd). */
int mrc_get_comp_channel_fd(struct mrc_comp_channel* channel, int* fd);
/* -1 EBUSY while CQs use it. */
int mrc_destroy_comp_channel(struct mrc_comp_channel* channel);

/* cqe: 1..2^20; comp_vector: 0; channel may be NULL. */
struct mrc_cq* mrc_create_cq(struct mrc_context* mrc_ctx, int cqe, void* cq_context,
                             struct mrc_comp_channel* channel, int comp_vector);
/* Returns the completions written (< num_entries: the CQ is drained) or -1: EINVAL, EOVERFLOW
 * (the CQ overran and lost completions). */
int mrc_poll_cq(struct mrc_cq* cq, int num_entries, struct ibv_wc* wc);
/* -1 EBUSY while QPs use it or an event of it is unacknowledged. */
int mrc_destroy_cq(struct mrc_cq* cq);

struct mrc_qp_hint_attr {
  int num_qps_per_peer;      /* QPs to the same destination at once */
  int num_send_peers;        /* destinations at once */
  int num_remote_recv_peers; /* incast degree at the target */
  uint8_t vendor_cfg[MRC_MAX_VENDOR_CFG_SIZE];
};

enum mrc_qp_hint_attr_mask {
  MRC_QP_HINT_NUM_QPS_PER_PEER = 1 << 0,
  MRC_QP_HINT_NUM_SEND_PEERS = 1 << 1,
  MRC_QP_HINT_NUM_REMOTE_RECV_PEERS = 1 << 2,
  MRC_QP_HINT_VENDOR_CFG = 1 << 31
};

struct mrc_qp_hint_init_attr {
  struct mrc_qp_hint_attr attr;
};

struct mrc_qp_hint* mrc_create_qp_hint(struct mrc_context* mrc_ctx, struct mrc_qp_hint_init_attr* init_attr);
/* -1 EBUSY while a QP uses it. */
int mrc_destroy_qp_hint(struct mrc_qp_hint* qp_hint);
int mrc_query_qp_hint(struct mrc_qp_hint* qp_hint, struct mrc_qp_hint_attr* qp_hint_attr,
                      int qp_hint_attr_mask);
int mrc_modify_qp_hint(struct mrc_qp_hint* qp_hint, struct mrc_qp_hint_attr* qp_hint_attr,
                       int qp_hint_attr_mask);

struct mrc_qp_init_attr {
  void* qp_context;
  struct mrc_cq* send_cq;
  struct mrc_cq* recv_cq;
  struct ibv_qp_cap cap; /* max_send_sge, max_recv_sge <= 1; max_inline_data = 0 */
  int sq_sig_all;
  struct ibv_pd* pd;
  uint64_t send_ops_flags; /* IBV_QP_EX_WITH_RDMA_WRITE[_WITH_IMM]; 0 = both */
  enum mrc_protocol_version protocol_version;
};

/* The QP starts in RESET. NULL + EINVAL / ENOMEM. */
struct mrc_qp* mrc_create_qp(struct mrc_context* mrc_ctx, struct mrc_qp_init_attr* mrc_qp_attr);
/* -1 EBUSY while an async event of it is unacknowledged. */
int mrc_destroy_qp(struct mrc_qp* qp);

enum mrc_qp_attr_mask {
  MRC_QP_MAX_WIMM = 1 << 0,
  MRC_QP_MAX_WIMM_DEST = 1 << 1,
  MRC_QP_MPR = 1 << 2,
  MRC_QP_MPR_DEST = 1 << 3,
  MRC_QP_TIMEOUT = 1 << 4,
  MRC_QP_EV_PROFILE_ID = 1 << 5,
  MRC_QP_CC_PROFILE_ID = 1 << 6,
  MRC_QP_HINT = 1 << 7,
  MRC_QP_RETRY_CNT = 1 << 8,
  MRC_QP_CAP = 1 << 9,
  MRC_QP_VENDOR_CFG = 1 << 31
};

enum mrc_qp_cap {
  MRC_QP_CAP_TRIM_NACK_DEST_UNSUPPORTED = 1 << 0,
  MRC_QP_CAP_DYNAMIC_MPR = 1 << 1,
  MRC_QP_CAP_SVC_TIME_DEST_UNSUPPORTED = 1 << 2
};

struct mrc_qp_attr {
  struct {
    uint8_t mpr;      /* requester window, 128-PSN units */
    uint8_t mpr_dest; /* responder window, 128-PSN units */
  } mpr;
  struct {
    uint16_t max_wimm;      /* outstanding WRITE_IMMs this QP may send */
    uint16_t max_wimm_dest; /* outstanding WRITE_IMMs this QP accepts */
  } wimm;
  uint8_t timeout; /* 1.024 us * 2^timeout, <= 24 */
  struct {
    uint64_t ev_profile_id; /* 0 = built-in default */
    uint64_t cc_profile_id; /* 0 = built-in default */
  } profile;
  struct {
    uint8_t linear_cnt; /* <= 7 */
    uint8_t exp_cnt;    /* <= 25, 25 = infinite */
  } retry;
  struct mrc_qp_hint* qp_hint;
  uint32_t cap; /* enum mrc_qp_cap */
  uint8_t vendor_cfg[MRC_MAX_VENDOR_CFG_SIZE];
};

/* Any state. A pointer may be NULL when its mask is 0 (init_attr may always be NULL). */
int mrc_query_qp(struct mrc_qp* qp, struct ibv_qp_attr* vattr, int vattr_mask, struct mrc_qp_attr* mrc_attr,
                 int mrc_attr_mask, struct mrc_qp_init_attr* init_attr);
/* RESET -> INIT -> RTR -> RTS, any -> ERR (IBV_QP_STATE), with the attributes docs/api.md lists per
 * transition. -1 EINVAL for a refused transition or attribute or a value out of range; ENOENT for
 * an unknown EV/CC profile ID. */
int mrc_modify_qp(struct mrc_qp* qp, struct ibv_qp_attr* vattr, int vattr_mask, struct mrc_qp_attr* mrc_attr,
                  int mrc_attr_mask);
int mrc_get_qpn(struct mrc_qp* qp, uint32_t* qpn);

/* From INIT on; a receive only consumes a WRITE_IMM's immediate. */
int mrc_post_recv(struct mrc_qp* qp, struct ibv_recv_wr* wr, struct ibv_recv_wr** bad_wr);
/* IBV_WR_RDMA_WRITE and IBV_WR_RDMA_WRITE_WITH_IMM, in RTS (or ERR, where they flush). -1 EINVAL /
 * ENOMEM (queue full) with *bad_wr = the first WR not posted. */
int mrc_post_send(struct mrc_qp* qp, struct ibv_send_wr* wr, struct ibv_send_wr** bad_wr);

struct mrc_async_event {
  union {
    struct mrc_cq* cq;
    struct mrc_qp* qp;
    int port_num;
  } element;
  enum ibv_event_type event_type;
};

/* Blocks until an event is there (EAGAIN when the async fd was made non-blocking). */
int mrc_get_async_event(struct mrc_context* mrc_ctx, struct mrc_async_event* event);
void mrc_ack_async_event(struct mrc_async_event* event);

/* Arms the CQ: its next completion signals the channel once. solicited_only is treated as 0. */
int mrc_req_notify_cq(struct mrc_cq* cq, int solicited_only);
int mrc_get_cq_event(struct mrc_comp_channel* channel, struct mrc_cq** cq, void** cq_context);
void mrc_ack_cq_events(struct mrc_cq* cq, unsigned int nevents);

/* ==== Vendor API of this implementation (not in OCP's mrc.h) ================================= */

#define MRC_MAX_PLANES 32

/* A software device: one local address per plane (all IPv4 or all IPv6), each bound to udp_port. */
struct mrc_device_config {
  uint32_t num_planes;                    /* 1..MRC_MAX_PLANES */
  const char* plane_addr[MRC_MAX_PLANES]; /* numeric address of plane (port) i+1 */
  uint16_t udp_port;                      /* receive port; 0 = 4791 (RoCEv2) */
  const char* ctl_socket;                 /* controller socket to serve (mrc_ctl.h); NULL = none */
  uint64_t seed;                          /* keys, EV choice; 0 = random */
  const char* name;                       /* ibv_get_device_name; NULL = "mrc_sw" */
};

/* Opens a device outside MRC_DEVICES; close it with ibv_close_device. NULL + errno: EINVAL,
 * EADDRINUSE / EADDRNOTAVAIL (cannot bind), ENOMEM. */
struct ibv_context* mrc_open_device(const struct mrc_device_config* config);
/* Same from "ADDR[,ADDR...][@PORT]" (e.g. "127.0.0.1,127.1.0.1@4791", "::1@5000"). */
struct ibv_context* mrc_open_device_str(const char* spec);
/* The device's receive UDP port. */
int mrc_query_udp_port(struct ibv_context* context, uint16_t* port);

/* A peer device: its address on every plane and its UDP port. An address vector (IBV_QP_AV) names
 * a peer by one GID; on a multi-plane device that GID must be one of a known peer's addresses,
 * made known here or by the environment variable MRC_PEERS ("ADDR[,ADDR...][@PORT][;...]"). On a
 * single-plane device an unknown GID is a peer on this device's UDP port. */
struct mrc_peer_attr {
  uint32_t num_planes; /* must equal the device's */
  union ibv_gid plane_gid[MRC_MAX_PLANES];
  uint16_t udp_port; /* 0 = this device's port */
};
int mrc_add_peer(struct ibv_context* context, const struct mrc_peer_attr* peer);

enum mrc_context_flags {
  /* No progress thread: the application calls mrc_progress() (one thread at a time); posted work
   * requests reach the wire, and completions its CQs, only during those calls and control calls. */
  MRC_CONTEXT_APP_PROGRESS = 1 << 0,
};
struct mrc_context* mrc_create_context_ex(struct ibv_context* vcontext, struct mrc_context_attr* context_attr,
                                          uint32_t flags);
/* One progress round, waiting up to timeout_ms when idle. The packets moved, or -1 EINVAL when the
 * context has a progress thread. */
int mrc_progress(struct mrc_context* ctx, int timeout_ms);
/* Readable while async events are pending (an eventfd). */
int mrc_get_async_fd(struct mrc_context* ctx, int* fd);

#ifdef __cplusplus
}
#endif

#endif /* _MRC_API_H_ */
