/* MRC controller API: EV format, EV and CC profiles, port admin, EV events and endpoint
 * operations (EV probes, port-status updates) of one MRC endpoint.
 *
 * Follows the OCP mrc_ctl.h as described in docs/protocol.md §7; every difference is listed in
 * docs/api.md, "Controller API (mrc_ctl.h)". The main ones:
 *   - the handle is a struct mrc_ctl_context opened on an endpoint's control socket
 *     (mrc_ctl_open) or on an in-process endpoint (mrc_ctl_open_local), not an ibv_context;
 *   - EV values are big-endian byte strings: an STEV/UDP EV's first 4 bytes are its 32-bit value;
 *   - every function returns 0 or a positive errno value, except mrc_ctl_poll_ev_event
 *     (count or a NEGATIVE errno, as in OCP) and the open/create functions (NULL, errno set).
 *
 * Privilege: modifying anything (profiles, ports, EV states), EV event CQs and endpoint
 * operations need a privileged handle (uid 0 or CAP_NET_ADMIN: the peer of the control socket,
 * or this process for a local endpoint); an unprivileged handle gets EPERM for those and may
 * query. */
#ifndef MRC_MRC_CTL_H
#define MRC_MRC_CTL_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* ---- Versions ---------------------------------------------------------------------------- */

#define MRC_CTL_API_VER_MAJOR 1
#define MRC_CTL_API_VER_MINOR 0
#define MRC_CTL_API_VER_PATCH 1
#define MRC_CTL_API_VER ((MRC_CTL_API_VER_MAJOR << 16) | (MRC_CTL_API_VER_MINOR << 8) | MRC_CTL_API_VER_PATCH)

/* The four version words: API major, minor, patch and the implementation's own version. */
int mrc_ctl_query_version(uint32_t* major, uint32_t* minor, uint32_t* patch, uint32_t* impl);

/* ---- Handle ------------------------------------------------------------------------------ */

struct mrc_ctl_context;

/* Connects to the control socket (a UNIX socket path) of an endpoint process. NULL + errno. */
struct mrc_ctl_context* mrc_ctl_open(const char* socket_path);

/* Flags of struct mrc_ctl_local_attr. */
#define MRC_CTL_LOCAL_UNPRIVILEGED (1u << 0) /* act as an unprivileged handle (tests) */

/* An endpoint inside this process: one UDP plane per address, its own progress thread. */
struct mrc_ctl_local_attr {
  const char* const* planes; /* local address of each plane ("127.0.0.1", "fd00::1") */
  uint32_t num_planes;
  uint16_t udp_port; /* receive port of this endpoint and of every peer; 0 = 4791 */
  uint32_t flags;
  /* Peers whose probes this endpoint answers: each "addr1,addr2,..." (one address per plane).
   * A probe's dgid names the peer's address on the probe's port. */
  const char* const* peers;
  uint32_t num_peers;
};
struct mrc_ctl_context* mrc_ctl_open_local(const struct mrc_ctl_local_attr* attr);

/* EBUSY while event CQs created on this handle still exist. */
int mrc_ctl_close(struct mrc_ctl_context* ctx);

/* Why the last call on this handle failed, in words ("" after a success). */
const char* mrc_ctl_last_error(const struct mrc_ctl_context* ctx);

/* ---- Device query ------------------------------------------------------------------------ */

#define MRC_CTL_PROTOCOL_VERSION_1 (1u << 0)

/* opt_attr bits */
#define MRC_CTL_OPT_CAP_EV_PROFILE_MODIFY_ONLINE (1u << 0)
#define MRC_CTL_OPT_CAP_CC_PROFILE_MODIFY_ONLINE (1u << 1)
#define MRC_CTL_OPT_CAP_EV_EVENT (1u << 2)
#define MRC_CTL_OPT_CAP_EV_EXPLICIT_RANGE (1u << 3)
#define MRC_CTL_OPT_CAP_EV_EVENT_PRECISE_DROP_CNT (1u << 4)
#define MRC_CTL_OPT_CAP_EP_OP_EV_PROBE (1u << 5)

struct mrc_ctl_device_attr {
  uint32_t mrc_ctl_protocol_version; /* MRC_CTL_PROTOCOL_VERSION_* bits */
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
    const char* const* algorithms; /* NULL-terminated, static: do not free */
  } cc;
  uint64_t phy_port_mask; /* bit N = port N (1-based) */
  uint64_t opt_attr;      /* MRC_CTL_OPT_CAP_* */
};

int mrc_ctl_query_device(struct mrc_ctl_context* ctx, struct mrc_ctl_device_attr* attr);

/* `supported` (may be NULL) receives which attr groups were filled. */
#define MRC_CTL_DEVICE_ATTR_EV (1u << 0)
#define MRC_CTL_DEVICE_ATTR_CC (1u << 1)
#define MRC_CTL_DEVICE_ATTR_PORTS (1u << 2)
#define MRC_CTL_DEVICE_ATTR_OPT (1u << 3)
int mrc_ctl_query_device_ex(struct mrc_ctl_context* ctx, struct mrc_ctl_device_attr* attr,
                            uint32_t* supported);

/* ---- Port admin -------------------------------------------------------------------------- */

enum mrc_ctl_port_admin_state { MRC_CTL_PORT_ADMIN_DISABLED = 0, MRC_CTL_PORT_ADMIN_ENABLED = 1 };
#define MRC_CTL_PORT_ADMIN_STATE (1u << 0)

struct mrc_ctl_port_attr {
  enum mrc_ctl_port_admin_state port_admin_state;
};

/* port is 1-based. A disabled port carries no traffic and peers are told (port-status update). */
int mrc_ctl_query_port(struct mrc_ctl_context* ctx, uint8_t port, struct mrc_ctl_port_attr* attr,
                       uint32_t attr_mask);
int mrc_ctl_modify_port(struct mrc_ctl_context* ctx, uint8_t port, const struct mrc_ctl_port_attr* attr,
                        uint32_t attr_mask);

/* Extension: packet counters of a port (1-based). */
struct mrc_ctl_port_counters {
  uint64_t tx_packets;
  uint64_t rx_packets;
  uint64_t tx_dropped; /* the kernel refused */
  uint64_t rx_ecn_ce;
  uint64_t rx_trimmed;
};
int mrc_ctl_query_port_counters(struct mrc_ctl_context* ctx, uint8_t port, struct mrc_ctl_port_counters* out);

/* ---- Profiles ---------------------------------------------------------------------------- */

enum mrc_ctl_profile_state {
  MRC_CTL_PROFILE_INIT = 0,
  MRC_CTL_PROFILE_OFFLINE = 1,
  MRC_CTL_PROFILE_ONLINE = 2
};

/* Extension: the IDs of the profiles that exist (EV and CC lists include the built-in 0).
 * *count: in the room in ids, out the number of IDs (E2BIG when ids is too small). */
enum mrc_ctl_profile_kind { MRC_CTL_PROFILE_KIND_EV_FMT, MRC_CTL_PROFILE_KIND_EV, MRC_CTL_PROFILE_KIND_CC };
int mrc_ctl_list_profiles(struct mrc_ctl_context* ctx, enum mrc_ctl_profile_kind kind, uint64_t* ids,
                          uint32_t* count);

/* ---- EV format profiles ------------------------------------------------------------------ */

enum mrc_ctl_ev_fmt_mode {
  MRC_CTL_EV_FMT_MODE_STEV = 1 << 0, /* 32 bits: UDP source port (bytes 0-1) + flow label (2-3) */
  MRC_CTL_EV_FMT_MODE_SRV6 = 1 << 1, /* 256 bits: SRv6 destination (0-15) + SRH segment (16-31) */
  MRC_CTL_EV_FMT_MODE_UDP = 1 << 2,  /* 16 bits: UDP source port (bytes 0-1) */
};

#define MRC_CTL_EV_FMT_PROFILE_STATE (1u << 0)
#define MRC_CTL_EV_FMT_PROFILE_CUR_STATE (1u << 1)
#define MRC_CTL_EV_FMT_PROFILE_MODE (1u << 2)
#define MRC_CTL_EV_FMT_PROFILE_MODIFY_FIELDS (1u << 3)
#define MRC_CTL_EV_FMT_PROFILE_QUERY_FIELDS (1u << 4)

struct mrc_ctl_ev_fmt_field {
  uint32_t width; /* bits, 1..32 */
};

struct mrc_ctl_ev_fmt_profile_attr {
  enum mrc_ctl_profile_state profile_state;     /* requested state (STATE) */
  enum mrc_ctl_profile_state cur_profile_state; /* reported (CUR_STATE) */
  enum mrc_ctl_ev_fmt_mode ev_fmt_mode;
  struct {
    struct mrc_ctl_ev_fmt_field* fmt_fields;
    uint32_t fmt_field_count; /* in: array length; out (QUERY_FIELDS): fields, or needed on E2BIG */
  } ev_fmt_op;
};

int mrc_ctl_modify_ev_fmt_profile(struct mrc_ctl_context* ctx, uint64_t ev_fmt_profile_id,
                                  struct mrc_ctl_ev_fmt_profile_attr* attr, uint32_t attr_mask);
int mrc_ctl_query_ev_fmt_profile(struct mrc_ctl_context* ctx, uint64_t ev_fmt_profile_id,
                                 struct mrc_ctl_ev_fmt_profile_attr* attr, uint32_t attr_mask);

/* ---- EVs --------------------------------------------------------------------------------- */

#define MRC_CTL_EV_MAX_BYTES 32
#define MRC_CTL_MAX_VENDOR_CFG_SIZE 128

/* Big-endian byte string. STEV/UDP: bytes 0-3; SRv6: bytes 0-15 destination address, 16-31
 * single-segment SRH address. */
typedef uint8_t mrc_ctl_ev_t[MRC_CTL_EV_MAX_BYTES];

struct mrc_ctl_ev {
  mrc_ctl_ev_t val;
  uint8_t port; /* 1-based; 0 with an all-zero value = unpopulated */
};

/* EV states (bits, for masks too). SKIP is internal to the transport and reads as GOOD. */
#define MRC_CTL_EV_GOOD (1u << 0)
#define MRC_CTL_EV_ASSUMED_BAD (1u << 1)
#define MRC_CTL_EV_DENIED (1u << 2)
#define MRC_CTL_EV_UNKNOWN (1u << 31)

/* ---- EV profiles ------------------------------------------------------------------------- */

enum mrc_ctl_ev_mode {
  MRC_CTL_EV_MODE_AUTO = 1 << 0, /* the transport picks EVs (every port) */
  MRC_CTL_EV_MODE_EXP = 1 << 1,  /* explicit array, filled with REPLACE_EV */
  MRC_CTL_EV_MODE_GEN = 1 << 2,  /* generated from the fields (docs/decisions.md D32) */
};

#define MRC_CTL_EV_PROFILE_STATE (1u << 0)
#define MRC_CTL_EV_PROFILE_CUR_STATE (1u << 1)
#define MRC_CTL_EV_PROFILE_MODE (1u << 2)
#define MRC_CTL_EV_PROFILE_FMT_ID (1u << 3)
#define MRC_CTL_EV_PROFILE_COUNT (1u << 4)
#define MRC_CTL_EV_PROFILE_MIN_ACTIVE (1u << 5)
#define MRC_CTL_EV_PROFILE_EVENT_MASK (1u << 6)
#define MRC_CTL_EV_PROFILE_EV_OP (1u << 7)
#define MRC_CTL_EV_PROFILE_EV_FIELDS_OP (1u << 8)
#define MRC_CTL_EV_PROFILE_VENDOR_CFG (1u << 31)

struct mrc_ctl_ev_field {
  uint32_t width;
  uint32_t init_val;
  uint32_t min_val;
  uint32_t max_val;
  uint32_t mask;
};

enum mrc_ctl_ev_op_type {
  MRC_CTL_EV_OP_REPLACE_EV,
  MRC_CTL_EV_OP_MODIFY_EV_STATE,
  MRC_CTL_EV_OP_QUERY_EV_STATE,
  MRC_CTL_EV_OP_QUERY_EV_ARRAY,
};
#define MRC_CTL_EV_OP_F_ALL_COPIES (1u << 0)

/* ev values are raw EVs (before expansion); QUERY_EV_ARRAY produces raw EVs too. */
struct mrc_ctl_ev_op_entry {
  struct mrc_ctl_ev ev;
  struct mrc_ctl_ev ev_new;
  uint32_t state; /* MRC_CTL_EV_* */
  uint32_t flags; /* MRC_CTL_EV_OP_F_* */
};

enum mrc_ctl_ev_fields_op_type { MRC_CTL_EV_FIELDS_OP_MODIFY, MRC_CTL_EV_FIELDS_OP_QUERY };

struct mrc_ctl_ev_profile_attr {
  enum mrc_ctl_profile_state profile_state;
  enum mrc_ctl_profile_state cur_profile_state;
  enum mrc_ctl_ev_mode ev_mode;
  uint64_t ev_fmt_profile_id;
  uint32_t ev_count; /* query: the aligned count in use */
  uint32_t ev_min_active;
  uint32_t ev_event_mask; /* MRC_CTL_EV_GOOD | MRC_CTL_EV_ASSUMED_BAD */
  struct {
    enum mrc_ctl_ev_op_type op;
    struct mrc_ctl_ev_op_entry* entries;
    uint32_t num_entries; /* in: entries (QUERY_EV_ARRAY: array length); out: needed on E2BIG */
    uint32_t num_done;    /* out: entries processed (a batch stops at the first failure) */
  } ev_op;
  struct {
    enum mrc_ctl_ev_fields_op_type op;
    struct mrc_ctl_ev_field* fields;
    uint32_t field_count; /* in: array length; out (QUERY): fields, or needed on E2BIG */
  } ev_fields_op;
  uint8_t vendor_cfg[MRC_CTL_MAX_VENDOR_CFG_SIZE];
  uint32_t vendor_cfg_len;
};

int mrc_ctl_modify_ev_profile(struct mrc_ctl_context* ctx, uint64_t ev_profile_id,
                              struct mrc_ctl_ev_profile_attr* attr, uint32_t attr_mask);
int mrc_ctl_query_ev_profile(struct mrc_ctl_context* ctx, uint64_t ev_profile_id,
                             struct mrc_ctl_ev_profile_attr* attr, uint32_t attr_mask);

/* ---- CC profiles ------------------------------------------------------------------------- */

#define MRC_CTL_CC_PROFILE_STATE (1u << 0)
#define MRC_CTL_CC_PROFILE_CUR_STATE (1u << 1)
#define MRC_CTL_CC_PROFILE_ALGORITHM (1u << 2)
#define MRC_CTL_CC_PROFILE_CONFIG (1u << 3)

/* "uet-1.0-nscc" configuration (docs/protocol.md §8.2); times in ns, sizes in bytes. */
struct mrc_ctl_cc_nscc_cfg {
  uint32_t base_rtt;
  uint32_t target_delay;
  uint32_t max_cwnd;
  float gamma;
  float max_md_jump;
  float fi;       /* bytes */
  float fi_scale; /* dimensionless */
  float eta;      /* bytes */
  uint8_t qa_gate;
  uint32_t qa_threshold;
  uint32_t adjust_bytes_threshold;
  uint32_t adjust_period_threshold;
  uint8_t disable_qa;
};

struct mrc_ctl_cc_profile_attr {
  enum mrc_ctl_profile_state profile_state;
  enum mrc_ctl_profile_state cur_profile_state;
  const char* algorithm; /* one of algorithms[] or NULL (no CC); query: static string or NULL */
  void* cc_config;       /* struct mrc_ctl_cc_nscc_cfg */
  uint32_t cc_config_len;
};

int mrc_ctl_modify_cc_profile(struct mrc_ctl_context* ctx, uint64_t cc_profile_id,
                              struct mrc_ctl_cc_profile_attr* attr, uint32_t attr_mask);
int mrc_ctl_query_cc_profile(struct mrc_ctl_context* ctx, uint64_t cc_profile_id,
                             struct mrc_ctl_cc_profile_attr* attr, uint32_t attr_mask);

/* ---- EV events --------------------------------------------------------------------------- */

struct mrc_ctl_ev_event_cq;

struct mrc_ctl_ev_event {
  uint64_t profile_id;
  struct mrc_ctl_ev ev; /* raw EV as in the profile's array */
  uint32_t drop_count;  /* events lost between the previous event and this one (precise) */
  uint32_t state;       /* MRC_CTL_EV_GOOD or MRC_CTL_EV_ASSUMED_BAD */
};

/* cqe events fit; the CQ never overruns: later events are dropped and counted. channel must be
 * NULL and comp_vector 0 (no completion channels). NULL + errno. */
struct mrc_ctl_ev_event_cq* mrc_ctl_create_ev_event_cq(struct mrc_ctl_context* ctx, int cqe, void* cq_context,
                                                       void* channel, int comp_vector);
int mrc_ctl_destroy_ev_event_cq(struct mrc_ctl_ev_event_cq* cq);
void* mrc_ctl_ev_event_cq_context(const struct mrc_ctl_ev_event_cq* cq);

/* Returns the number of events written (0..num_entries) or a NEGATIVE errno. */
int mrc_ctl_poll_ev_event(struct mrc_ctl_ev_event_cq* cq, int num_entries, struct mrc_ctl_ev_event* ev);

/* ---- Endpoint operations ----------------------------------------------------------------- */

enum mrc_ctl_ep_op_type { MRC_CTL_EP_OP_EV_PROBE, MRC_CTL_EP_OP_PORT_STATUS_UPDATE };

/* RoCEv2 GIDs: IPv6 addresses, IPv4 as ::ffff:a.b.c.d. */
struct mrc_ctl_ep_req {
  uint16_t req_id;  /* unique among outstanding requests */
  uint8_t sgid[16]; /* all zero = any local address */
  uint8_t dgid[16];
  uint32_t ev_fmt_mode;     /* enum mrc_ctl_ev_fmt_mode of req_ev */
  struct mrc_ctl_ev req_ev; /* expanded EV (wire form) and port */
  union {
    struct {
      uint64_t port_status; /* must equal the endpoint's usable ports (bit N = port N) */
    } port_status_update;
  } op;
};

struct mrc_ctl_ep_rsp {
  uint16_t req_id;
  uint8_t port; /* 1-based port the response arrived on */
  uint64_t rtt; /* ns, responder service time removed when adj_svc_time */
  uint8_t adj_svc_time;
};

/* Sends num_req requests of one type and waits up to rsp_timeout_ns for their responses,
 * written in arrival order to rsp[0 .. *num_rsp). ETIMEDOUT when some did not answer (the
 * responses that did arrive are still returned). Port-status updates are not answered. */
int mrc_ctl_ep_batch_send_wait(struct mrc_ctl_context* ctx, uint8_t req_tc, enum mrc_ctl_ep_op_type op_type,
                               const struct mrc_ctl_ep_req* req, uint32_t num_req, uint64_t rsp_timeout_ns,
                               struct mrc_ctl_ep_rsp* rsp, uint32_t* num_rsp);

#ifdef __cplusplus
}
#endif

#endif /* MRC_MRC_CTL_H */
