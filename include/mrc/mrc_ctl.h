/* MRC controller API: EV-format, EV and CC profiles, port admin, EV events and endpoint operations
 * (EV probes, port-status updates). Source-compatible with OCP's mrc_ctl.h: the same functions
 * and signatures on struct mrc_context / struct ibv_context, the same structs, enums and values,
 * 0 or -1 with errno set. Written for this project; docs/api.md lists what this implementation
 * does differently.
 *
 * A controller works on an mrc_context: the application's own (mrc_create_context on an open
 * device, whose endpoint and profiles it then controls), or one opened on another process's
 * control socket (mrc_ctl_open_context, an extension at the end of this header). EV values are
 * big-endian byte strings: an STEV/UDP EV's first 4 bytes hold its 32-bit value, an SRv6 EV's
 * bytes 0-15 the destination and 16-31 the SRH segment.
 *
 * Privilege: modifying anything, EV event CQs and endpoint operations need uid 0 or CAP_NET_ADMIN
 * (the peer of the control socket, or this process); others get EPERM and may query. */
#ifndef _MRC_CTL_API_H_
#define _MRC_CTL_API_H_

#include <infiniband/verbs.h>
#include <stdint.h>

#include "mrc.h"
#include "mrc_ctl_api_ver.h"

#ifdef __cplusplus
extern "C" {
#endif

#define MRC_CTL_MAX_VENDOR_CFG_SIZE 128

#define MRC_CTL_EV_UNPOPULATED ((struct mrc_ctl_ev){.val = {0}, .port = 0})

#define MRC_CTL_EV_MAX_BYTES 32

enum mrc_ctl_protocol_version {
  MRC_CTL_PROTOCOL_VERSION_0 = 0,
  MRC_CTL_PROTOCOL_VERSION_1 = 1 << 0,
};

enum mrc_ctl_profile_state {
  MRC_CTL_PROFILE_INIT,
  MRC_CTL_PROFILE_OFFLINE,
  MRC_CTL_PROFILE_ONLINE,
};

/* ---- device ---------------------------------------------------------------------------------- */

enum mrc_ctl_attr_opt {
  MRC_CTL_OPT_CAP_EV_PROFILE_MODIFY_ONLINE = 1 << 0,
  MRC_CTL_OPT_CAP_CC_PROFILE_MODIFY_ONLINE = 1 << 1,
  MRC_CTL_OPT_CAP_EV_EVENT = 1 << 2,
  MRC_CTL_OPT_CAP_EV_EXPLICIT_RANGE = 1 << 3,
  MRC_CTL_OPT_CAP_EV_EVENT_PRECISE_DROP_CNT = 1 << 4,
  MRC_CTL_OPT_CAP_EP_OP_EV_PROBE = 1 << 5
};

struct mrc_ctl_device_attr {
  uint32_t mrc_ctl_protocol_version; /* bitmap of enum mrc_ctl_protocol_version */
  struct {
    uint32_t ev_max_fmt_profiles;
    uint32_t ev_max_profiles;
    uint32_t ev_max_count;         /* EVs across all profiles */
    uint32_t ev_free_count;        /* of which not yet used */
    uint32_t ev_max_count_profile; /* per profile, also the longest explicit array */
    uint32_t ev_count_align;       /* explicit arrays are a multiple of this */
    uint32_t ev_max_width;         /* valid consecutive bits of an expanded EV */
    uint32_t ev_fmt_mode_mask;     /* enum mrc_ctl_ev_fmt_mode bits */
    uint32_t ev_mode_mask;         /* enum mrc_ctl_ev_mode bits */
    uint32_t ev_op_max_entries;    /* EV op entries per call; 0 = no cap */
  } ev;
  struct {
    uint32_t cc_max_profiles;
    const char** algorithms; /* NULL-terminated, static: do not free */
  } cc;
  uint32_t phy_port_mask; /* bit N = port N (1-based) */
  uint32_t opt_attr;      /* enum mrc_ctl_attr_opt */
};

/* context may be NULL when mcontext is given (a controller context has no verbs device). */
#if MRC_CTL_API_VER_USED >= MRC_CTL_API_VER(1, 0, 1)
int mrc_ctl_query_device_ex(struct ibv_context* context, struct mrc_context* mcontext,
                            struct mrc_ctl_device_attr* ctl_attr, int* supported);
#endif
int mrc_ctl_query_device(struct ibv_context* context, struct mrc_ctl_device_attr* ctl_attr);

void mrc_ctl_query_version(uint32_t* current_version, uint32_t* last_supported_version,
                           uint32_t* vendor_version, uint32_t* last_supported_vendor_version);

/* ---- port admin ------------------------------------------------------------------------------ */

enum mrc_ctl_port_admin_state {
  MRC_CTL_PORT_ADMIN_DISABLED = 0,
  MRC_CTL_PORT_ADMIN_ENABLED = 1,
};

enum mrc_ctl_port_attr_mask {
  MRC_CTL_PORT_ADMIN_STATE = 1 << 0,
};

struct mrc_ctl_port_attr {
  enum mrc_ctl_port_admin_state port_admin_state;
};

/* port_num is 1-based. A disabled port carries no traffic and peers are told. */
int mrc_ctl_query_port(struct mrc_context* context, uint8_t port_num, struct mrc_ctl_port_attr* attr,
                       int attr_mask);
int mrc_ctl_modify_port(struct mrc_context* context, uint8_t port_num, struct mrc_ctl_port_attr* attr,
                        int attr_mask);

/* ---- EV format profiles ---------------------------------------------------------------------- */

enum mrc_ctl_ev_fmt_mode {
  MRC_CTL_EV_FMT_MODE_STEV = 1 << 0, /* 32 bits: UDP source port (bytes 0-1) + flow label (2-3) */
  MRC_CTL_EV_FMT_MODE_SRV6 = 1 << 1, /* 256 bits: SRv6 destination (0-15) + SRH segment (16-31) */
  MRC_CTL_EV_FMT_MODE_UDP = 1 << 2,  /* 16 bits: UDP source port (bytes 0-1) */
};

enum mrc_ctl_ev_fmt_op {
  MRC_CTL_EV_FMT_OP_MODIFY_FIELDS,
  MRC_CTL_EV_FMT_OP_QUERY_FIELDS,
};

enum mrc_ctl_ev_fmt_profile_attr_mask {
  MRC_CTL_EV_FMT_PROFILE_STATE = 1 << 0,
  MRC_CTL_EV_FMT_PROFILE_CUR_STATE = 1 << 1,
  MRC_CTL_EV_FMT_PROFILE_MODE = 1 << 2,
  MRC_CTL_EV_FMT_PROFILE_OP = 1 << 3,
  MRC_CTL_EV_FMT_VENDOR_CFG = 1 << 31,
};

struct mrc_ctl_ev_fmt_field {
  uint8_t width; /* bits, 1..32 */
};

struct mrc_ctl_ev_fmt_profile_attr {
  enum mrc_ctl_profile_state profile_state;     /* requested (STATE) */
  enum mrc_ctl_profile_state cur_profile_state; /* reported */
  enum mrc_ctl_ev_fmt_mode ev_fmt_mode;
  struct {
    enum mrc_ctl_ev_fmt_op op;
    struct mrc_ctl_ev_fmt_field* fmt_fields;
    int fmt_field_count; /* in: array length; out (QUERY_FIELDS): fields, or needed on E2BIG */
  } ev_fmt_op;
  uint8_t vendor_cfg[MRC_CTL_MAX_VENDOR_CFG_SIZE];
};

int mrc_ctl_modify_ev_fmt_profile(struct mrc_context* mrc_ctx, uint64_t ev_fmt_profile_id,
                                  struct mrc_ctl_ev_fmt_profile_attr* attr, int attr_mask);
int mrc_ctl_query_ev_fmt_profile(struct mrc_context* mrc_ctx, uint64_t ev_fmt_profile_id,
                                 struct mrc_ctl_ev_fmt_profile_attr* attr, int attr_mask);

/* ---- EVs ------------------------------------------------------------------------------------- */

typedef uint8_t mrc_ctl_ev_t[MRC_CTL_EV_MAX_BYTES];

struct mrc_ctl_ev {
  mrc_ctl_ev_t val;
  uint8_t port; /* 1-based; 0 with an all-zero value = unpopulated */
};

enum mrc_ctl_ev_state {
  MRC_CTL_EV_GOOD = 1 << 0,
  MRC_CTL_EV_ASSUMED_BAD = 1 << 1,
  MRC_CTL_EV_DENIED = 1 << 2,
  MRC_CTL_EV_UNKNOWN = 1 << 31
};

/* ---- EV profiles ----------------------------------------------------------------------------- */

enum mrc_ctl_ev_mode {
  MRC_CTL_EV_MODE_AUTO = 1 << 0, /* the transport picks EVs */
  MRC_CTL_EV_MODE_EXP = 1 << 1,  /* explicit array, filled with REPLACE_EV */
  MRC_CTL_EV_MODE_GEN = 1 << 2,  /* generated from the fields (docs/decisions.md D32) */
};

enum mrc_ctl_ev_op {
  MRC_CTL_EV_OP_REPLACE_EV,
  MRC_CTL_EV_OP_MODIFY_EV_STATE,
  MRC_CTL_EV_OP_QUERY_EV_STATE,
  MRC_CTL_EV_OP_QUERY_EV_ARRAY,
};

enum mrc_ctl_ev_fields_op {
  MRC_CTL_EV_FIELDS_OP_MODIFY_FIELDS,
  MRC_CTL_EV_FIELDS_OP_QUERY_FIELDS,
};

enum mrc_ctl_ev_profile_attr_mask {
  MRC_CTL_EV_PROFILE_STATE = 1 << 0,
  MRC_CTL_EV_PROFILE_CUR_STATE = 1 << 1,
  MRC_CTL_EV_PROFILE_MODE = 1 << 2,
  MRC_CTL_EV_PROFILE_FMT_ID = 1 << 3,
  MRC_CTL_EV_PROFILE_COUNT = 1 << 4,
  MRC_CTL_EV_PROFILE_MIN_ACTIVE = 1 << 5,
  MRC_CTL_EV_PROFILE_EVENT_MASK = 1 << 6,
  MRC_CTL_EV_PROFILE_EV_OP = 1 << 7,
  MRC_CTL_EV_PROFILE_EV_FIELDS_OP = 1 << 8,
  MRC_CTL_EV_PROFILE_VENDOR_CFG = 1 << 31,
};

struct mrc_ctl_ev_field {
  uint32_t width;
  uint32_t init_val;
  uint32_t min_val;
  uint32_t max_val;
  uint32_t mask;
};

enum mrc_ctl_ev_op_flags {
  MRC_CTL_EV_OP_F_ALL_COPIES = 1 << 0,
};

/* ev values are raw EVs (before expansion); QUERY_EV_ARRAY produces raw EVs too. */
struct mrc_ctl_ev_op_entry {
  struct mrc_ctl_ev ev;
  struct mrc_ctl_ev ev_new;
  enum mrc_ctl_ev_state state;
  uint32_t flags; /* enum mrc_ctl_ev_op_flags */
};

struct mrc_ctl_ev_profile_attr {
  enum mrc_ctl_profile_state profile_state;
  enum mrc_ctl_profile_state cur_profile_state;
  enum mrc_ctl_ev_mode ev_mode;
  uint64_t ev_fmt_profile_id;
  uint32_t ev_count; /* query: the aligned count in use */
  uint32_t ev_min_active;
  int ev_event_mask; /* MRC_CTL_EV_GOOD | MRC_CTL_EV_ASSUMED_BAD */
  struct {
    enum mrc_ctl_ev_op op;
    struct mrc_ctl_ev_op_entry* entries;
    int entry_count; /* in: entries (QUERY_EV_ARRAY: array length); out: needed on E2BIG */
  } ev_op;
  struct {
    enum mrc_ctl_ev_fields_op op;
    struct mrc_ctl_ev_field* fields;
    int field_count; /* in: array length; out (QUERY_FIELDS): fields, or needed on E2BIG */
  } ev_fields_op;
  uint8_t vendor_cfg[MRC_CTL_MAX_VENDOR_CFG_SIZE];
};

int mrc_ctl_modify_ev_profile(struct mrc_context* mrc_ctx, uint64_t ev_profile_id,
                              struct mrc_ctl_ev_profile_attr* attr, int attr_mask);
int mrc_ctl_query_ev_profile(struct mrc_context* mrc_ctx, uint64_t ev_profile_id,
                             struct mrc_ctl_ev_profile_attr* attr, int attr_mask);

/* ---- CC profiles ----------------------------------------------------------------------------- */

enum mrc_ctl_cc_profile_attr_mask {
  MRC_CTL_CC_PROFILE_STATE = 1 << 0,
  MRC_CTL_CC_PROFILE_CUR_STATE = 1 << 1,
  MRC_CTL_CC_PROFILE_ALGORITHM = 1 << 2,
  MRC_CTL_CC_PROFILE_CONFIG = 1 << 3,
  MRC_CTL_CC_PROFILE_VENDOR_CFG = 1 << 31,
};

struct mrc_ctl_cc_profile_attr {
  enum mrc_ctl_profile_state profile_state;
  enum mrc_ctl_profile_state cur_profile_state;
  const char* algorithm; /* one of algorithms[] or NULL (no CC); query: static string or NULL */
  /* struct mrc_ctl_cc_nscc_cfg. Query: filled in when non-NULL, else pointed at the context's
   * copy (valid until the next query on it). */
  const void* cc_config;
  uint8_t vendor_cfg[MRC_CTL_MAX_VENDOR_CFG_SIZE];
};

/* "uet-1.0-nscc" configuration (docs/protocol.md §8.2); times in ns, sizes in bytes. */
struct mrc_ctl_cc_nscc_cfg {
  uint8_t disable_qa;
  uint32_t adjust_bytes_threshold;
  uint32_t adjust_period_threshold;
  uint32_t base_rtt;
  float eta; /* bytes */
  float fi;  /* bytes */
  float fi_scale;
  float gamma;
  float max_md_jump;
  uint32_t max_cwnd;
  uint8_t qa_gate;
  uint32_t qa_threshold;
  uint32_t target_delay;
};

int mrc_ctl_modify_cc_profile(struct mrc_context* mrc_ctx, uint64_t cc_profile_id,
                              struct mrc_ctl_cc_profile_attr* attr, int attr_mask);
int mrc_ctl_query_cc_profile(struct mrc_context* mrc_ctx, uint64_t cc_profile_id,
                             struct mrc_ctl_cc_profile_attr* attr, int attr_mask);

/* ---- EV events ------------------------------------------------------------------------------- */

struct mrc_ctl_ev_event {
  uint64_t profile_id;
  struct mrc_ctl_ev ev; /* raw EV as in the profile's array */
  uint32_t drop_count;  /* events lost between the previous event and this one (precise) */
#if MRC_CTL_API_VER_USED >= MRC_CTL_API_VER(1, 0, 1)
  enum mrc_ctl_ev_state state; /* MRC_CTL_EV_GOOD or MRC_CTL_EV_ASSUMED_BAD */
#endif
};

/* cqe events fit; the CQ never overruns: later events are dropped and counted. channel must be
 * NULL and comp_vector 0. Destroy with mrc_destroy_cq. */
struct mrc_cq* mrc_ctl_create_ev_event_cq(struct mrc_context* mrc_ctx, int cqe, void* cq_context,
                                          struct mrc_comp_channel* channel, int comp_vector);
/* The number of events written (0..num_entries) or a NEGATIVE errno. */
int mrc_ctl_poll_ev_event(struct mrc_cq* ev_cq, int num_entries, struct mrc_ctl_ev_event* ev_event);

/* ---- endpoint operations --------------------------------------------------------------------- */

enum mrc_ctl_ep_op_type { MRC_CTL_EP_OP_EV_PROBE, MRC_CTL_EP_OP_PORT_STATUS_UPDATE };

/* RoCEv2 GIDs: IPv6 addresses, IPv4 as ::ffff:a.b.c.d. */
struct mrc_ctl_ep_req {
  uint16_t req_id;    /* unique among outstanding requests */
  union ibv_gid sgid; /* all zero = any local address */
  union ibv_gid dgid;
  enum mrc_ctl_ev_fmt_mode ev_fmt_mode; /* of req_ev */
  struct mrc_ctl_ev req_ev;             /* expanded EV (wire form) and port */
  union {
    struct {
      uint32_t port_status; /* must equal the endpoint's usable ports (bit N = port N) */
    } port_status_update;
  } op;
};

struct mrc_ctl_ep_rsp {
  uint16_t req_id;
  uint8_t port;     /* 1-based port the response arrived on */
  unsigned int rtt; /* ns, responder service time removed when adj_svc_time */
  uint8_t adj_svc_time;
};

/* Sends num_req requests of one type and waits up to rsp_timeout ns for their responses, written
 * in arrival order to rsp[0 .. *num_rsp). -1 ETIMEDOUT when some did not answer (the responses
 * that arrived are still returned). Port-status updates are not answered. */
int mrc_ctl_ep_batch_send_wait(struct mrc_context* mrc_ctx, uint8_t req_tc, enum mrc_ctl_ep_op_type op_type,
                               struct mrc_ctl_ep_req* req, int num_req, uint32_t rsp_timeout,
                               struct mrc_ctl_ep_rsp* rsp, int* num_rsp);

/* ==== Extensions of this implementation (not in OCP's mrc_ctl.h) ============================= */

/* A controller context on another process's control socket (mrc_device_config.ctl_socket, `mrc
 * perf --ctl-socket`). It has no verbs device: only the mrc_ctl_* calls work on it. Destroy with
 * mrc_destroy_context. NULL + errno. A call on it fails with ETIMEDOUT when the endpoint does not
 * answer within $MRC_CTL_TIMEOUT seconds (10 by default; a value not in 0.001-86400 fails the
 * open with EINVAL), EPROTO when the socket is not an MRC control socket, EIO when it closed;
 * after any of those the context's calls fail (EIO): open a new one. */
struct mrc_context* mrc_ctl_open_context(const char* socket_path);

#define MRC_CTL_LOCAL_UNPRIVILEGED (1u << 0) /* act as an unprivileged controller (tests) */

/* A controller context on an endpoint of its own inside this process (one UDP plane per address,
 * its own progress thread), e.g. to send EV probes. */
struct mrc_ctl_local_attr {
  const char* const* planes; /* local address of each plane ("127.0.0.1", "fd00::1") */
  uint32_t num_planes;
  uint16_t udp_port; /* receive port of this endpoint and of every peer; 0 = 4791 */
  uint32_t flags;
  /* Peers whose probes this endpoint answers: each "addr1,addr2,..." (one address per plane). */
  const char* const* peers;
  uint32_t num_peers;
};
struct mrc_context* mrc_ctl_open_local_context(const struct mrc_ctl_local_attr* attr);

/* Why the last mrc_ctl_* call on this context failed, in words ("" after a success). */
const char* mrc_ctl_last_error(const struct mrc_context* mrc_ctx);

/* The IDs of the profiles that exist (EV and CC lists include the built-in 0). *count: in the room
 * in ids, out the number of IDs (-1 E2BIG when ids is too small). */
enum mrc_ctl_profile_kind { MRC_CTL_PROFILE_KIND_EV_FMT, MRC_CTL_PROFILE_KIND_EV, MRC_CTL_PROFILE_KIND_CC };
int mrc_ctl_list_profiles(struct mrc_context* mrc_ctx, enum mrc_ctl_profile_kind kind, uint64_t* ids,
                          uint32_t* count);

/* Packet counters of a port (1-based). */
struct mrc_ctl_port_counters {
  uint64_t tx_packets;
  uint64_t rx_packets;
  uint64_t tx_dropped; /* the kernel refused */
  uint64_t rx_ecn_ce;
  uint64_t rx_trimmed;
};
int mrc_ctl_query_port_counters(struct mrc_context* mrc_ctx, uint8_t port_num,
                                struct mrc_ctl_port_counters* out);

#ifdef __cplusplus
}
#endif

#endif /* _MRC_CTL_API_H_ */
