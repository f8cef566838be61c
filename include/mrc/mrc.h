/* MRC application API: a C ABI shaped after OCP mrc.h, over the software MRC endpoint (UDP).
 *
 * Porting from OCP mrc.h + libibverbs is mechanical: ibv_* types, opcodes, flags and masks keep
 * their members and values with an MRC_ / mrc_ prefix (struct ibv_send_wr -> struct mrc_send_wr,
 * IBV_WR_RDMA_WRITE -> MRC_WR_RDMA_WRITE, IBV_QP_STATE -> MRC_IB_QP_STATE, struct ibv_qp_attr ->
 * struct mrc_ib_qp_attr). Since there is no verbs device, the few libibverbs calls an MRC program
 * needs (open a device, PD, MR, GID) are provided here too. docs/api.md lists every difference.
 *
 * Errors: functions returning int give 0 or -1 with errno set; functions returning a pointer give
 * NULL with errno set; mrc_poll_cq gives a count or -1.
 *
 * Ports (planes) are 1-based at this API, as in verbs. */
#ifndef MRC_MRC_H
#define MRC_MRC_H

#include <stddef.h>
#include <stdint.h>

#include "mrc/mrc_api_ver.h"

#ifdef __cplusplus
extern "C" {
#endif

#define MRC_MAX_PLANES 32

/* ---- versions ---------------------------------------------------------------------------- */

enum mrc_protocol_version {
  MRC_PROTOCOL_VERSION_0 = 0, /* provider default */
  MRC_PROTOCOL_VERSION_1 = 1 << 0,
};

/* The library's supported API range and vendor API range. Callable before anything else; any
 * pointer may be NULL. */
void mrc_query_version(uint32_t* current, uint32_t* last_supported, uint32_t* vendor_current,
                       uint32_t* vendor_last_supported);

/* ---- device (vendor API: stands in for ibv_open_device) ----------------------------------- */

struct mrc_device;
struct mrc_context;
struct mrc_pd;
struct mrc_comp_channel;
struct mrc_cq;
struct mrc_qp;
struct mrc_qp_hint;

/* A device is one software MRC endpoint: one local address per plane (all IPv4 or all IPv6),
 * bound to udp_port on each. */
struct mrc_device_config {
  uint32_t num_planes;                    /* 1..MRC_MAX_PLANES */
  const char* plane_addr[MRC_MAX_PLANES]; /* numeric address of plane i+1 */
  uint16_t udp_port;                      /* receive port; 0 = 4791 (RoCEv2) */
  const char* ctl_socket;                 /* controller socket path (mrc_ctl.h); NULL = none */
  uint64_t seed;                          /* keys, EV choice; 0 = random */
};

/* Opens a device from a config. NULL + errno: EINVAL (bad config), EADDRINUSE / EADDRNOTAVAIL
 * (cannot bind), ENOMEM. */
struct mrc_device* mrc_open_device(const struct mrc_device_config* config);
/* Opens a device from a string "ADDR[,ADDR...][@PORT]" (one address per plane, e.g.
 * "127.0.0.1,127.0.0.2@4791"; IPv6 addresses as written, e.g. "::1@5000"). spec == NULL reads
 * the environment variable MRC_DEVICE. */
struct mrc_device* mrc_open_device_str(const char* spec);
/* 0, or -1 EBUSY while a context or PD of it exists, EINVAL for NULL. */
int mrc_close_device(struct mrc_device* device);

/* GID of plane port_num (1-based), index 0 only: the plane's address, IPv4 as ::ffff:a.b.c.d. */
union mrc_gid {
  uint8_t raw[16];
  struct {
    uint64_t subnet_prefix;
    uint64_t interface_id;
  } global;
};
int mrc_query_gid(struct mrc_device* device, uint8_t port_num, int index, union mrc_gid* gid);
/* The device's receive UDP port (peers put it in mrc_ah_attr.udp_dport). */
int mrc_query_udp_port(struct mrc_device* device, uint16_t* port);

/* ---- device attributes -------------------------------------------------------------------- */

enum mrc_device_cap {
  MRC_DEVICE_CAP_TRIM_NACK = 1 << 0,
  MRC_DEVICE_CAP_DYNAMIC_MPR = 1 << 1,
  MRC_DEVICE_CAP_SVC_TIME = 1 << 2,
};

struct mrc_device_attr {
  uint32_t protocol; /* bitmap of enum mrc_protocol_version */
  struct {
    uint16_t max_wimm;
    uint16_t max_wimm_dest;
  } wimm_attr;
  struct {
    uint8_t max_mpr;         /* in mpr_resolution units */
    uint16_t mpr_resolution; /* PSNs per MPR unit (128) */
  } mpr_attr;
  struct {
    uint32_t max_qp_hint;
  } qp_attr;
  uint64_t cap; /* enum mrc_device_cap */
  /* Ours (no verbs device to ask): */
  uint32_t num_ports; /* planes */
  uint32_t max_qp_wr;
  uint32_t max_sge;
  uint32_t max_cqe;
};

/* *supported = 1: the device speaks MRC (always, here). Implies API 1.0.0 semantics. */
int mrc_query_device(struct mrc_device* device, struct mrc_device_attr* attr, int* supported);
/* Same, context-aware (API >= 1.0.1). ctx may be NULL. */
int mrc_query_device_ex(struct mrc_device* device, struct mrc_context* ctx, struct mrc_device_attr* attr,
                        int* supported);

/* ---- protection domains and memory regions (vendor API: stand in for ibv_*) --------------- */

enum mrc_access_flags {
  MRC_ACCESS_LOCAL_WRITE = 1 << 0,
  MRC_ACCESS_REMOTE_WRITE = 1 << 1,
  MRC_ACCESS_REMOTE_READ = 1 << 2,   /* refused: MRC has no READ */
  MRC_ACCESS_REMOTE_ATOMIC = 1 << 3, /* refused: MRC has no atomics */
};

struct mrc_mr {
  struct mrc_device* device;
  struct mrc_pd* pd;
  void* addr;
  size_t length;
  uint32_t handle;
  uint32_t lkey; /* random, non-zero */
  uint32_t rkey; /* random, non-zero */
};

struct mrc_pd* mrc_alloc_pd(struct mrc_device* device);
/* -1 EBUSY while an MR or QP uses it. */
int mrc_dealloc_pd(struct mrc_pd* pd);
/* access: LOCAL_WRITE and/or REMOTE_WRITE (REMOTE_WRITE needs LOCAL_WRITE, as in verbs). NULL +
 * EINVAL for a NULL/empty buffer or other flags. */
struct mrc_mr* mrc_reg_mr(struct mrc_pd* pd, void* addr, size_t length, int access);
int mrc_dereg_mr(struct mrc_mr* mr);

/* ---- context ------------------------------------------------------------------------------ */

enum mrc_context_flags {
  /* No progress thread: the application calls mrc_progress(); then all calls on this context
   * and its device must come from one thread at a time. */
  MRC_CONTEXT_APP_PROGRESS = 1 << 0,
};

struct mrc_context_attr {
  uint32_t mrc_api_version_used;        /* 0 = latest */
  uint32_t mrc_vendor_api_version_used; /* 0 = latest */
  uint32_t flags;                       /* enum mrc_context_flags (ours) */
};

/* One context per device (EBUSY for a second). attr may be NULL. */
struct mrc_context* mrc_create_context(struct mrc_device* device, const struct mrc_context_attr* attr);
/* -1 EBUSY while CQs, QPs, channels or hints of it exist. */
int mrc_destroy_context(struct mrc_context* ctx);
/* Application-driven progress: one round (receive, timers, transmit, completions), waiting up to
 * timeout_ms (0 = do not wait) when idle. Returns the packets moved, or -1 EINVAL when the context
 * has a progress thread. */
int mrc_progress(struct mrc_context* ctx, int timeout_ms);

/* ---- completion channels and CQs ------------------------------------------------------------ */

int mrc_create_comp_channel(struct mrc_context* ctx, struct mrc_comp_channel** channel);
/* The fd becomes readable when an armed CQ of the channel gets a completion (an eventfd). */
int mrc_get_comp_channel_fd(struct mrc_comp_channel* channel, int* fd);
/* -1 EBUSY while CQs use it. */
int mrc_destroy_comp_channel(struct mrc_comp_channel* channel);

/* cqe: 1..max_cqe; comp_vector: 0; channel may be NULL. */
struct mrc_cq* mrc_create_cq(struct mrc_context* ctx, int cqe, void* cq_context,
                             struct mrc_comp_channel* channel, int comp_vector);
/* -1 EBUSY while QPs use it or a mrc_get_cq_event of it is unacked. */
int mrc_destroy_cq(struct mrc_cq* cq);

enum mrc_wc_status {
  MRC_WC_SUCCESS,
  MRC_WC_LOC_LEN_ERR,
  MRC_WC_LOC_QP_OP_ERR,
  MRC_WC_LOC_EEC_OP_ERR,
  MRC_WC_LOC_PROT_ERR,
  MRC_WC_WR_FLUSH_ERR,
  MRC_WC_MW_BIND_ERR,
  MRC_WC_BAD_RESP_ERR,
  MRC_WC_LOC_ACCESS_ERR,
  MRC_WC_REM_INV_REQ_ERR,
  MRC_WC_REM_ACCESS_ERR,
  MRC_WC_REM_OP_ERR,
  MRC_WC_RETRY_EXC_ERR,
  MRC_WC_RNR_RETRY_EXC_ERR,
  MRC_WC_LOC_RDD_VIOL_ERR,
  MRC_WC_REM_INV_RD_REQ_ERR,
  MRC_WC_REM_ABORT_ERR,
  MRC_WC_INV_EECN_ERR,
  MRC_WC_INV_EEC_STATE_ERR,
  MRC_WC_FATAL_ERR,
  MRC_WC_RESP_TIMEOUT_ERR,
  MRC_WC_GENERAL_ERR,
};
const char* mrc_wc_status_str(enum mrc_wc_status status);

enum mrc_wc_opcode {
  MRC_WC_SEND,
  MRC_WC_RDMA_WRITE,
  MRC_WC_RDMA_READ,
  MRC_WC_COMP_SWAP,
  MRC_WC_FETCH_ADD,
  MRC_WC_BIND_MW,
  MRC_WC_LOCAL_INV,
  MRC_WC_RECV = 1 << 7,
  MRC_WC_RECV_RDMA_WITH_IMM,
};

enum mrc_wc_flags {
  MRC_WC_GRH = 1 << 0,
  MRC_WC_WITH_IMM = 1 << 1,
};

struct mrc_wc {
  uint64_t wr_id;
  enum mrc_wc_status status;
  enum mrc_wc_opcode opcode;
  uint32_t vendor_err;
  uint32_t byte_len;
  union {
    uint32_t imm_data; /* network byte order, as in verbs */
    uint32_t invalidated_rkey;
  };
  uint32_t qp_num;
  uint32_t src_qp;
  unsigned int wc_flags;
  uint16_t pkey_index;
  uint16_t slid;
  uint8_t sl;
  uint8_t dlid_path_bits;
};

/* Returns the number of completions written (< num_entries: the CQ is drained), or -1:
 * EINVAL (bad arguments), EOVERFLOW (the CQ overran: completions were lost; destroy it). */
int mrc_poll_cq(struct mrc_cq* cq, int num_entries, struct mrc_wc* wc);
/* Arms the CQ: the next completion signals its channel once. solicited_only is accepted and
 * treated as 0 (MRC has no solicited events). -1 EINVAL without a channel. */
int mrc_req_notify_cq(struct mrc_cq* cq, int solicited_only);
/* Blocks until an armed CQ of the channel fired (or fails with EAGAIN when the fd was made
 * non-blocking). Every event must be acknowledged with mrc_ack_cq_events. */
int mrc_get_cq_event(struct mrc_comp_channel* channel, struct mrc_cq** cq, void** cq_context);
void mrc_ack_cq_events(struct mrc_cq* cq, unsigned int nevents);

/* ---- QP hints -------------------------------------------------------------------------------- */

#define MRC_QP_HINT_NUM_QPS_PER_PEER (1u << 0)
#define MRC_QP_HINT_NUM_SEND_PEERS (1u << 1)
#define MRC_QP_HINT_NUM_REMOTE_RECV_PEERS (1u << 2)
#define MRC_QP_HINT_VENDOR_CFG (1u << 31)

struct mrc_qp_hint_attr {
  uint32_t num_qps_per_peer;      /* QPs to the same destination concurrently */
  uint32_t num_send_peers;        /* distinct destinations concurrently */
  uint32_t num_remote_recv_peers; /* incast degree seen by the target */
  uint8_t vendor_cfg[128];
};

struct mrc_qp_hint* mrc_create_qp_hint(struct mrc_context* ctx, const struct mrc_qp_hint_attr* init_attr);
int mrc_query_qp_hint(struct mrc_qp_hint* hint, struct mrc_qp_hint_attr* attr, uint32_t attr_mask);
int mrc_modify_qp_hint(struct mrc_qp_hint* hint, const struct mrc_qp_hint_attr* attr, uint32_t attr_mask);
/* -1 EBUSY while a QP uses it. */
int mrc_destroy_qp_hint(struct mrc_qp_hint* hint);

/* ---- QPs ------------------------------------------------------------------------------------- */

enum mrc_qp_state {
  MRC_QPS_RESET,
  MRC_QPS_INIT,
  MRC_QPS_RTR,
  MRC_QPS_RTS,
  MRC_QPS_SQD,
  MRC_QPS_SQE,
  MRC_QPS_ERR,
  MRC_QPS_UNKNOWN,
};

enum mrc_mtu {
  MRC_MTU_256 = 1,
  MRC_MTU_512 = 2,
  MRC_MTU_1024 = 3,
  MRC_MTU_2048 = 4,
  MRC_MTU_4096 = 5,
};

enum mrc_mig_state { MRC_MIG_MIGRATED, MRC_MIG_REARM, MRC_MIG_ARMED };

/* IB attribute mask bits (values of enum ibv_qp_attr_mask). */
#define MRC_IB_QP_STATE (1u << 0)
#define MRC_IB_QP_CUR_STATE (1u << 1)
#define MRC_IB_QP_EN_SQD_ASYNC_NOTIFY (1u << 2)
#define MRC_IB_QP_ACCESS_FLAGS (1u << 3)
#define MRC_IB_QP_PKEY_INDEX (1u << 4)
#define MRC_IB_QP_PORT (1u << 5)
#define MRC_IB_QP_QKEY (1u << 6)
#define MRC_IB_QP_AV (1u << 7)
#define MRC_IB_QP_PATH_MTU (1u << 8)
#define MRC_IB_QP_TIMEOUT (1u << 9)
#define MRC_IB_QP_RETRY_CNT (1u << 10)
#define MRC_IB_QP_RNR_RETRY (1u << 11)
#define MRC_IB_QP_RQ_PSN (1u << 12)
#define MRC_IB_QP_MAX_QP_RD_ATOMIC (1u << 13)
#define MRC_IB_QP_ALT_PATH (1u << 14)
#define MRC_IB_QP_MIN_RNR_TIMER (1u << 15)
#define MRC_IB_QP_SQ_PSN (1u << 16)
#define MRC_IB_QP_MAX_DEST_RD_ATOMIC (1u << 17)
#define MRC_IB_QP_PATH_MIG_STATE (1u << 18)
#define MRC_IB_QP_CAP (1u << 19)
#define MRC_IB_QP_DEST_QPN (1u << 20)
#define MRC_IB_QP_RATE_LIMIT (1u << 25)

/* MRC attribute mask bits. */
#define MRC_QP_MAX_WIMM (1u << 0)
#define MRC_QP_MAX_WIMM_DEST (1u << 1)
#define MRC_QP_MPR (1u << 2)
#define MRC_QP_MPR_DEST (1u << 3)
#define MRC_QP_TIMEOUT (1u << 4)
#define MRC_QP_EV_PROFILE_ID (1u << 5)
#define MRC_QP_CC_PROFILE_ID (1u << 6)
#define MRC_QP_HINT (1u << 7)
#define MRC_QP_RETRY_CNT (1u << 8)
#define MRC_QP_CAP (1u << 9)
#define MRC_QP_VENDOR_CFG (1u << 31)

/* QP capability bits (mrc_qp_attr.cap). */
#define MRC_QP_CAP_TRIM_NACK_DEST_UNSUPPORTED (1u << 0)
#define MRC_QP_CAP_DYNAMIC_MPR (1u << 1)
#define MRC_QP_CAP_SVC_TIME_DEST_UNSUPPORTED (1u << 2)

struct mrc_global_route {
  union mrc_gid dgid;
  uint32_t flow_label;
  uint8_t sgid_index;
  uint8_t hop_limit;
  uint8_t traffic_class;
};

struct mrc_ah_attr {
  struct mrc_global_route grh;
  uint16_t dlid;
  uint8_t sl;
  uint8_t src_path_bits;
  uint8_t static_rate;
  uint8_t is_global;
  uint8_t port_num;
  /* Ours: the peer is an address per plane. num_planes == 0 means a single-plane device whose
   * peer is grh.dgid; otherwise num_planes must equal the device's and plane_dgid[i] is the
   * peer's GID on plane i+1 (grh.dgid is then ignored). */
  uint8_t num_planes;
  uint16_t udp_dport; /* the peer's receive port; 0 = 4791 */
  union mrc_gid plane_dgid[MRC_MAX_PLANES];
};

struct mrc_qp_cap {
  uint32_t max_send_wr;
  uint32_t max_recv_wr;
  uint32_t max_send_sge;
  uint32_t max_recv_sge;
  uint32_t max_inline_data;
};

/* Members of struct ibv_qp_attr. */
struct mrc_ib_qp_attr {
  enum mrc_qp_state qp_state;
  enum mrc_qp_state cur_qp_state;
  enum mrc_mtu path_mtu;
  enum mrc_mig_state path_mig_state;
  uint32_t qkey;
  uint32_t rq_psn;
  uint32_t sq_psn;
  uint32_t dest_qp_num;
  unsigned int qp_access_flags;
  struct mrc_qp_cap cap;
  struct mrc_ah_attr ah_attr;
  struct mrc_ah_attr alt_ah_attr;
  uint16_t pkey_index;
  uint16_t alt_pkey_index;
  uint8_t en_sqd_async_notify;
  uint8_t sq_draining;
  uint8_t max_rd_atomic;
  uint8_t max_dest_rd_atomic;
  uint8_t min_rnr_timer;
  uint8_t port_num;
  uint8_t timeout;
  uint8_t retry_cnt;
  uint8_t rnr_retry;
  uint8_t alt_port_num;
  uint8_t alt_timeout;
  uint32_t rate_limit;
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
  uint8_t timeout; /* 1.024 us * 2^timeout, <= 24; 0 = wait forever */
  struct {
    uint64_t ev_profile_id; /* 0 = built-in default */
    uint64_t cc_profile_id; /* 0 = built-in default */
  } profile;
  struct {
    uint8_t linear_cnt; /* <= 7 */
    uint8_t exp_cnt;    /* <= 25, 25 = infinite */
  } retry;
  struct mrc_qp_hint* qp_hint;
  uint32_t cap; /* MRC_QP_CAP_* */
  uint8_t vendor_cfg[128];
};

#define MRC_QP_EX_WITH_RDMA_WRITE (1ull << 0)
#define MRC_QP_EX_WITH_RDMA_WRITE_WITH_IMM (1ull << 1)

struct mrc_qp_init_attr {
  void* qp_context;
  struct mrc_cq* send_cq;
  struct mrc_cq* recv_cq;
  struct mrc_qp_cap cap; /* max_send_sge, max_recv_sge <= 1; max_inline_data = 0 */
  int sq_sig_all;
  struct mrc_pd* pd;
  uint64_t send_ops_flags;   /* MRC_QP_EX_WITH_*; 0 = both */
  uint32_t protocol_version; /* one enum mrc_protocol_version bit, or 0 */
};

/* The QP starts in RESET. NULL + EINVAL / ENOMEM. */
struct mrc_qp* mrc_create_qp(struct mrc_context* ctx, const struct mrc_qp_init_attr* init_attr);
/* -1 EBUSY while an async event of it is unacked. */
int mrc_destroy_qp(struct mrc_qp* qp);
/* Any state. Each pointer may be NULL when its mask is 0 (init_attr may always be NULL). */
int mrc_query_qp(struct mrc_qp* qp, struct mrc_ib_qp_attr* vattr, uint32_t vmask, struct mrc_qp_attr* mattr,
                 uint32_t mmask, struct mrc_qp_init_attr* init_attr);
/* State transitions RESET -> INIT -> RTR -> RTS, any -> ERR, with the attributes docs/api.md
 * lists per transition. -1 EINVAL for a refused transition, a missing required attribute, an
 * attribute not allowed at this transition or not supported, or a value out of range; ENOENT
 * for an unknown EV/CC profile ID. */
int mrc_modify_qp(struct mrc_qp* qp, const struct mrc_ib_qp_attr* vattr, uint32_t vmask,
                  const struct mrc_qp_attr* mattr, uint32_t mmask);
int mrc_get_qpn(struct mrc_qp* qp, uint32_t* qpn);

/* ---- work requests --------------------------------------------------------------------------- */

enum mrc_wr_opcode {
  MRC_WR_RDMA_WRITE,
  MRC_WR_RDMA_WRITE_WITH_IMM,
  MRC_WR_SEND,
  MRC_WR_SEND_WITH_IMM,
  MRC_WR_RDMA_READ,
  MRC_WR_ATOMIC_CMP_AND_SWP,
  MRC_WR_ATOMIC_FETCH_AND_ADD,
};

enum mrc_send_flags {
  MRC_SEND_FENCE = 1 << 0,
  MRC_SEND_SIGNALED = 1 << 1,
  MRC_SEND_SOLICITED = 1 << 2,
  MRC_SEND_INLINE = 1 << 3, /* refused */
};

struct mrc_sge {
  uint64_t addr;
  uint32_t length;
  uint32_t lkey;
};

struct mrc_send_wr {
  uint64_t wr_id;
  struct mrc_send_wr* next;
  struct mrc_sge* sg_list;
  int num_sge; /* 0 or 1 */
  enum mrc_wr_opcode opcode;
  unsigned int send_flags;
  uint32_t imm_data; /* network byte order, as in verbs */
  union {
    struct {
      uint64_t remote_addr;
      uint32_t rkey;
    } rdma;
  } wr;
};

struct mrc_recv_wr {
  uint64_t wr_id;
  struct mrc_recv_wr* next;
  struct mrc_sge* sg_list; /* ignored: a receive only consumes a WRITE_IMM's immediate */
  int num_sge;             /* 0 or 1 */
};

/* RDMA_WRITE and RDMA_WRITE_WITH_IMM only, in RTS (or ERR, where they flush). On error: -1 with
 * errno (EINVAL: bad opcode / SGE count / flags / state; ENOMEM: queue full) and *bad_wr = the
 * first WR not posted. */
int mrc_post_send(struct mrc_qp* qp, struct mrc_send_wr* wr, struct mrc_send_wr** bad_wr);
/* From INIT on. Same error convention. */
int mrc_post_recv(struct mrc_qp* qp, struct mrc_recv_wr* wr, struct mrc_recv_wr** bad_wr);

/* ---- asynchronous events ----------------------------------------------------------------------- */

enum mrc_event_type {
  MRC_EVENT_CQ_ERR,
  MRC_EVENT_QP_FATAL,
  MRC_EVENT_QP_REQ_ERR,
  MRC_EVENT_QP_ACCESS_ERR,
  MRC_EVENT_COMM_EST,
  MRC_EVENT_SQ_DRAINED,
  MRC_EVENT_PATH_MIG,
  MRC_EVENT_PATH_MIG_ERR,
  MRC_EVENT_DEVICE_FATAL,
  MRC_EVENT_PORT_ACTIVE,
  MRC_EVENT_PORT_ERR,
};
const char* mrc_event_type_str(enum mrc_event_type type);

struct mrc_async_event {
  union {
    struct mrc_cq* cq;
    struct mrc_qp* qp;
    int port_num;
  } element;
  enum mrc_event_type event_type;
};

/* Blocks until an event is there (or fails with EAGAIN when the async fd is non-blocking). */
int mrc_get_async_event(struct mrc_context* ctx, struct mrc_async_event* event);
void mrc_ack_async_event(struct mrc_async_event* event);
/* Readable while async events are pending (an eventfd; ibv_context.async_fd). */
int mrc_get_async_fd(struct mrc_context* ctx, int* fd);

#ifdef __cplusplus
}
#endif

#endif /* MRC_MRC_H */
