// The libibverbs calls an MRC program makes for devices, PDs and MRs, over libmrc's software
// devices. A program that links libmrc before libibverbs, or runs under `mrc exec` (LD_PRELOAD),
// gets these definitions; the static inline functions of <infiniband/verbs.h> reach the context's
// ops table (verbs_qp.cpp) or, since the context has no extended verbs, fall back to the exported
// calls defined here (ibv_query_port, ibv_reg_mr). Devices and objects that are not ours go to the
// real libibverbs (D52).
//
// Devices come from MRC_DEVICES = "NAME=ADDR[,ADDR...][@PORT][;NAME=...]" (one address per port =
// plane), read once, at the first ibv_get_device_list.
#include "api/verbs.hpp"

#include <infiniband/verbs.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <mutex>
#include <new>

#include "api/objects.hpp"

#undef ibv_query_port
#undef ibv_reg_mr
#undef ibv_reg_mr_iova

using mrc::api::fail;

namespace {

constexpr int kGidTableLen = 4;  // index 0 and 3 (OCP's benchmark default) name the plane

struct Listed {
  ibv_device ibv{};
  std::string spec;  ///< "ADDR[,ADDR...][@PORT]"
};

std::mutex g_list_mu;
std::vector<std::unique_ptr<Listed>> g_listed;  // lives as long as the process
bool g_loaded = false;
/// Our device lists that carry a real libibverbs list, which ibv_free_device_list frees.
std::vector<std::pair<ibv_device**, ibv_device**>> g_real_lists;

/// A device of the real libibverbs: it has a sysfs path, ours (MRC_DEVICES, mrc_open_device) none.
bool real_device(const ibv_device* d) {
  return d != nullptr && d->ibdev_path[0] != '\0';
}

void load_devices() {
  if (g_loaded) return;
  g_loaded = true;
  const char* env = std::getenv("MRC_DEVICES");
  if (env == nullptr) return;
  std::string_view all(env);
  while (!all.empty()) {
    const std::size_t semi = all.find(';');
    const std::string_view one = all.substr(0, semi);
    const std::size_t eq = one.find('=');
    if (eq != std::string_view::npos && eq > 0 && eq < IBV_SYSFS_NAME_MAX) {
      std::vector<std::string> addrs;
      std::uint16_t port = 0;
      if (mrc::api::parse_device_spec(one.substr(eq + 1), addrs, port)) {
        auto l = std::make_unique<Listed>();
        const std::string name(one.substr(0, eq));
        std::snprintf(l->ibv.name, sizeof l->ibv.name, "%s", name.c_str());
        std::snprintf(l->ibv.dev_name, sizeof l->ibv.dev_name, "%s", name.c_str());
        l->ibv.node_type = IBV_NODE_CA;
        l->ibv.transport_type = IBV_TRANSPORT_IB;
        l->spec = std::string(one.substr(eq + 1));
        g_listed.push_back(std::move(l));
      } else {
        std::fprintf(stderr, "libmrc: MRC_DEVICES: ignoring '%.*s'\n", static_cast<int>(one.size()),
                     one.data());
      }
    }
    if (semi == std::string_view::npos) break;
    all = all.substr(semi + 1);
  }
}

Listed* listed_of(ibv_device* d) {
  std::lock_guard<std::mutex> lk(g_list_mu);
  for (auto& l : g_listed)
    if (&l->ibv == d) return l.get();
  return nullptr;
}

mrc_device* device_or_fail(ibv_context* c) {
  mrc_device* d = mrc::api::device_of(c);
  if (d == nullptr) errno = c == nullptr ? EINVAL : EOPNOTSUPP;
  return d;
}

}  // namespace

void mrc::api::init_verbs_context(VerbsContext& v, ibv_device* dev) {
  std::memset(&v.ibv, 0, sizeof v.ibv);
  v.ibv.device = dev;
  v.ibv.cmd_fd = -1;
  v.ibv.async_fd = -1;
  v.ibv.num_comp_vectors = 1;
  pthread_mutex_init(&v.ibv.mutex, nullptr);
  v.ibv.abi_compat = nullptr;  // not an extended context: verbs_get_ctx() is NULL
  mrc::api::set_verbs_ops(v.ibv);
  v.magic = kVerbsMagic;
}

extern "C" {

ibv_device** ibv_get_device_list(int* num_devices) {
  // The software devices first, then the real libibverbs' (a machine's hardware keeps working).
  int n_real = 0;
  ibv_device** real = nullptr;
  if (auto* get = MRC_REAL_VERBS(ibv_get_device_list, "IBVERBS_1.1")) real = get(&n_real);
  if (real == nullptr) n_real = 0;
  std::lock_guard<std::mutex> lk(g_list_mu);
  load_devices();
  const std::size_t n = g_listed.size() + static_cast<std::size_t>(n_real);
  auto** list = static_cast<ibv_device**>(std::calloc(n + 1, sizeof(ibv_device*)));
  if (list == nullptr) {
    if (real != nullptr) MRC_REAL_VERBS(ibv_free_device_list, "IBVERBS_1.1")(real);
    errno = ENOMEM;
    return nullptr;
  }
  for (std::size_t i = 0; i < g_listed.size(); ++i) list[i] = &g_listed[i]->ibv;
  for (int i = 0; i < n_real; ++i) list[g_listed.size() + static_cast<std::size_t>(i)] = real[i];
  // The real list holds its devices until it is freed: it is freed with ours.
  if (real != nullptr) g_real_lists.emplace_back(list, real);
  if (num_devices) *num_devices = static_cast<int>(n);
  return list;
}

void ibv_free_device_list(ibv_device** list) {
  ibv_device** real = nullptr;
  {
    std::lock_guard<std::mutex> lk(g_list_mu);
    for (auto it = g_real_lists.begin(); it != g_real_lists.end(); ++it)
      if (it->first == list) {
        real = it->second;
        g_real_lists.erase(it);
        break;
      }
  }
  if (real != nullptr) MRC_REAL_VERBS(ibv_free_device_list, "IBVERBS_1.1")(real);
  std::free(list);
}

const char* ibv_get_device_name(ibv_device* device) {
  return device ? device->name : nullptr;
}

__be64 ibv_get_device_guid(ibv_device* device) {
  if (real_device(device))
    if (auto* real = MRC_REAL_VERBS(ibv_get_device_guid, "IBVERBS_1.1")) return real(device);
  std::uint64_t h = 1469598103934665603ull;  // FNV-1a of the name: stable per device
  for (const char* p = device ? device->name : ""; *p; ++p)
    h = (h ^ static_cast<unsigned char>(*p)) * 1099511628211ull;
  return htobe64(h);
}

ibv_context* ibv_open_device(ibv_device* device) {
  Listed* l = listed_of(device);
  if (l == nullptr && real_device(device))
    if (auto* real = MRC_REAL_VERBS(ibv_open_device, "IBVERBS_1.1")) return real(device);
  if (l == nullptr) {
    errno = device == nullptr ? EINVAL : ENODEV;
    return nullptr;
  }
  std::vector<std::string> addrs;
  mrc_device_config cfg{};
  if (!mrc::api::parse_device_spec(l->spec, addrs, cfg.udp_port)) {
    errno = EINVAL;
    return nullptr;
  }
  cfg.num_planes = static_cast<std::uint32_t>(addrs.size());
  for (std::size_t i = 0; i < addrs.size(); ++i) cfg.plane_addr[i] = addrs[i].c_str();
  cfg.name = l->ibv.name;
  mrc_device* d = mrc::api::open_device(&cfg, &l->ibv);
  return d != nullptr ? &d->vctx.ibv : nullptr;
}

int ibv_close_device(ibv_context* context) {
  if (context != nullptr && mrc::api::device_of(context) == nullptr)
    if (auto* real = MRC_REAL_VERBS(ibv_close_device, "IBVERBS_1.1")) return real(context);
  mrc_device* d = device_or_fail(context);
  if (d == nullptr) return -1;
  mrc::api::release_verbs_context(*d);
  {
    std::lock_guard<std::mutex> lk(d->mu);
    if (d->ctx != nullptr || d->pds != 0 || d->comp_channels != 0) return fail(EBUSY);
  }
  pthread_mutex_destroy(&d->vctx.ibv.mutex);
  d->vctx.magic = 0;
  delete d;
  return 0;
}

int ibv_query_device(ibv_context* context, ibv_device_attr* attr) {
  if (context != nullptr && mrc::api::device_of(context) == nullptr)
    if (auto* real = MRC_REAL_VERBS(ibv_query_device, "IBVERBS_1.1")) return real(context, attr);
  mrc_device* d = device_or_fail(context);
  if (d == nullptr || attr == nullptr) return d == nullptr ? errno : EINVAL;
  std::memset(attr, 0, sizeof *attr);
  std::snprintf(attr->fw_ver, sizeof attr->fw_ver, "mrc-sw %u.%u.%u", MRC_VENDOR_API_CURRENT_VERSION >> 24,
                (MRC_VENDOR_API_CURRENT_VERSION >> 16) & 0xFF, MRC_VENDOR_API_CURRENT_VERSION & 0xFFFF);
  attr->node_guid = ibv_get_device_guid(context->device);
  attr->sys_image_guid = attr->node_guid;
  attr->max_mr_size = ~0ull;
  attr->page_size_cap = static_cast<std::uint64_t>(sysconf(_SC_PAGESIZE));
  attr->max_qp = 1 << 16;
  attr->max_qp_wr = 1 << 20;
  attr->max_sge = 1;
  attr->max_cq = 1 << 16;
  attr->max_cqe = 1 << 20;
  attr->max_mr = 1 << 20;
  attr->max_pd = 1 << 16;
  attr->atomic_cap = IBV_ATOMIC_NONE;
  attr->max_pkeys = 1;
  attr->phys_port_cnt = static_cast<std::uint8_t>(d->ue->num_planes());
  return 0;
}

int ibv_query_port(ibv_context* context, uint8_t port_num, struct _compat_ibv_port_attr* out) {
  if (context != nullptr && mrc::api::device_of(context) == nullptr)
    if (auto* real = MRC_REAL_VERBS(ibv_query_port, "IBVERBS_1.1")) return real(context, port_num, out);
  mrc_device* d = device_or_fail(context);
  if (d == nullptr) return errno;
  if (out == nullptr || port_num == 0 || port_num > d->ue->num_planes()) return EINVAL;
  // The compat struct is ibv_port_attr up to link_layer; the caller cleared the rest.
  auto* a = reinterpret_cast<ibv_port_attr*>(out);
  // The plane as the endpoint uses it: down when its link is (netlink watch) or a controller
  // disabled it (mrc_ctl_modify_port).
  std::uint32_t up = 0;
  d->ue->execute([&](mrc::engine::Endpoint& ep) { up = ep.port_mask(); });
  const bool active = (up >> (port_num - 1)) & 1u;
  a->state = active ? IBV_PORT_ACTIVE : IBV_PORT_DOWN;
  a->max_mtu = IBV_MTU_4096;
  a->active_mtu = mrc::api::fitting_mtu(*d);
  a->gid_tbl_len = kGidTableLen;
  a->port_cap_flags = 0;
  a->max_msg_sz = 0x80000000u;
  a->pkey_tbl_len = 1;
  a->lid = 0;
  a->sm_lid = 0;
  a->lmc = 0;
  a->max_vl_num = 1;
  a->active_width = 1;             // 1X
  a->active_speed = 32;            // EDR-class lane; a software endpoint reaches far less (docs/perf.md)
  a->phys_state = active ? 5 : 3;  // LinkUp : Disabled
  a->link_layer = IBV_LINK_LAYER_ETHERNET;
  return 0;
}

int ibv_query_gid(ibv_context* context, uint8_t port_num, int index, ibv_gid* gid) {
  if (context != nullptr && mrc::api::device_of(context) == nullptr)
    if (auto* real = MRC_REAL_VERBS(ibv_query_gid, "IBVERBS_1.1")) return real(context, port_num, index, gid);
  mrc_device* d = device_or_fail(context);
  if (d == nullptr) return -1;
  if (gid == nullptr || port_num == 0 || port_num > d->ue->num_planes() || index < 0 || index >= kGidTableLen)
    return fail(EINVAL);
  std::memset(gid->raw, 0, sizeof gid->raw);
  if (index == 0 || index == 3) d->ue->config().planes[port_num - 1u].to_gid(gid->raw);
  return 0;
}

int ibv_query_pkey(ibv_context* context, uint8_t port_num, int index, __be16* pkey) {
  if (context != nullptr && mrc::api::device_of(context) == nullptr)
    if (auto* real = MRC_REAL_VERBS(ibv_query_pkey, "IBVERBS_1.1"))
      return real(context, port_num, index, pkey);
  mrc_device* d = device_or_fail(context);
  if (d == nullptr) return -1;
  if (pkey == nullptr || port_num == 0 || port_num > d->ue->num_planes() || index != 0) return fail(EINVAL);
  *pkey = htobe16(0xFFFF);
  return 0;
}

ibv_pd* ibv_alloc_pd(ibv_context* context) {
  if (context != nullptr && mrc::api::device_of(context) == nullptr)
    if (auto* real = MRC_REAL_VERBS(ibv_alloc_pd, "IBVERBS_1.1")) return real(context);
  mrc_device* d = device_or_fail(context);
  if (d == nullptr) return nullptr;
  std::lock_guard<std::mutex> lk(d->mu);
  auto* pd = new (std::nothrow) mrc_pd{};
  if (pd == nullptr) {
    errno = ENOMEM;
    return nullptr;
  }
  pd->ibv.context = context;
  pd->ibv.handle = ++d->pds;
  pd->device = d;
  pd->users = 0;
  return &pd->ibv;
}

int ibv_dealloc_pd(ibv_pd* ibvpd) {
  if (ibvpd != nullptr && mrc::api::device_of(ibvpd->context) == nullptr)
    if (auto* real = MRC_REAL_VERBS(ibv_dealloc_pd, "IBVERBS_1.1")) return real(ibvpd);
  if (ibvpd == nullptr || mrc::api::device_of(ibvpd->context) == nullptr) return EINVAL;
  mrc_pd* pd = mrc::api::pd_of(ibvpd);
  std::lock_guard<std::mutex> lk(pd->device->mu);
  if (pd->users != 0) return EBUSY;
  --pd->device->pds;
  delete pd;
  return 0;
}

ibv_mr* ibv_reg_mr_iova2(ibv_pd* ibvpd, void* addr, size_t length, uint64_t iova, unsigned int access) {
  if (ibvpd != nullptr && mrc::api::device_of(ibvpd->context) == nullptr)
    if (auto* real = MRC_REAL_VERBS(ibv_reg_mr_iova2, "IBVERBS_1.8"))
      return real(ibvpd, addr, length, iova, access);
  // Optional flags (relaxed ordering, ...) are hints: accepted and ignored.
  access &= ~static_cast<unsigned int>(IBV_ACCESS_OPTIONAL_RANGE);
  constexpr unsigned kKnown = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE;
  if (ibvpd == nullptr || mrc::api::device_of(ibvpd->context) == nullptr || addr == nullptr || length == 0 ||
      iova != reinterpret_cast<std::uintptr_t>(addr) || (access & ~kKnown) != 0 ||
      ((access & IBV_ACCESS_REMOTE_WRITE) && !(access & IBV_ACCESS_LOCAL_WRITE))) {
    errno = EINVAL;
    return nullptr;
  }
  mrc_pd* pd = mrc::api::pd_of(ibvpd);
  std::uint32_t eng_access = 0;
  if (access & IBV_ACCESS_LOCAL_WRITE) eng_access |= mrc::engine::access::kLocalWrite;
  if (access & IBV_ACCESS_REMOTE_WRITE) eng_access |= mrc::engine::access::kRemoteWrite;
  std::lock_guard<std::mutex> lk(pd->device->mu);
  const mrc::engine::MemoryRegion* region = nullptr;
  pd->device->ue->execute(
      [&](mrc::engine::Endpoint& ep) { region = ep.memory().register_region(addr, length, eng_access); });
  if (region == nullptr) {
    errno = EINVAL;
    return nullptr;
  }
  auto* mr = new MrcMrImpl{};
  mr->ibv.context = ibvpd->context;
  mr->ibv.pd = ibvpd;
  mr->ibv.addr = addr;
  mr->ibv.length = length;
  mr->ibv.handle = region->lkey;
  mr->ibv.lkey = region->lkey;
  mr->ibv.rkey = region->rkey;
  mr->pd = pd;
  ++pd->users;
  return &mr->ibv;
}

ibv_mr* ibv_reg_mr(ibv_pd* pd, void* addr, size_t length, int access) {
  if (pd != nullptr && mrc::api::device_of(pd->context) == nullptr)
    if (auto* real = MRC_REAL_VERBS(ibv_reg_mr, "IBVERBS_1.1")) return real(pd, addr, length, access);
  return ibv_reg_mr_iova2(pd, addr, length, reinterpret_cast<std::uintptr_t>(addr),
                          static_cast<unsigned int>(access));
}

ibv_mr* ibv_reg_mr_iova(ibv_pd* pd, void* addr, size_t length, uint64_t iova, int access) {
  if (pd != nullptr && mrc::api::device_of(pd->context) == nullptr)
    if (auto* real = MRC_REAL_VERBS(ibv_reg_mr_iova, "IBVERBS_1.7"))
      return real(pd, addr, length, iova, access);
  return ibv_reg_mr_iova2(pd, addr, length, iova, static_cast<unsigned int>(access));
}

int ibv_dereg_mr(ibv_mr* ibvmr) {
  if (ibvmr != nullptr && mrc::api::device_of(ibvmr->context) == nullptr)
    if (auto* real = MRC_REAL_VERBS(ibv_dereg_mr, "IBVERBS_1.1")) return real(ibvmr);
  if (ibvmr == nullptr || mrc::api::device_of(ibvmr->context) == nullptr) return EINVAL;
  auto* mr = reinterpret_cast<MrcMrImpl*>(ibvmr);
  mrc_pd* pd = mr->pd;
  std::lock_guard<std::mutex> lk(pd->device->mu);
  bool ok = false;
  pd->device->ue->execute([&](mrc::engine::Endpoint& ep) { ok = ep.memory().deregister(ibvmr->lkey); });
  if (!ok) return EINVAL;
  --pd->users;
  delete mr;
  return 0;
}

ibv_comp_channel* ibv_create_comp_channel(ibv_context* context) {
  if (context != nullptr && mrc::api::device_of(context) == nullptr)
    if (auto* real = MRC_REAL_VERBS(ibv_create_comp_channel, "IBVERBS_1.0")) return real(context);
  mrc_device* d = device_or_fail(context);
  if (d == nullptr) return nullptr;
  auto* ch = new (std::nothrow) mrc::api::VerbsChannel{};
  if (ch == nullptr) {
    errno = ENOMEM;
    return nullptr;
  }
  ch->ibv.context = context;
  // One count per fired CQ (mrc_get_cq_event reads one at a time).
  ch->ibv.fd = ::eventfd(0, EFD_CLOEXEC | EFD_SEMAPHORE);
  if (ch->ibv.fd < 0) {
    delete ch;
    return nullptr;
  }
  std::lock_guard<std::mutex> lk(d->mu);
  ++d->comp_channels;
  return &ch->ibv;
}

int ibv_destroy_comp_channel(ibv_comp_channel* channel) {
  if (channel == nullptr) return EINVAL;
  if (mrc::api::device_of(channel->context) == nullptr)
    if (auto* real = MRC_REAL_VERBS(ibv_destroy_comp_channel, "IBVERBS_1.0")) return real(channel);
  mrc_device* d = mrc::api::device_of(channel->context);
  if (d == nullptr) return EINVAL;
  if (channel->refcnt != 0) return EBUSY;
  auto* ch = reinterpret_cast<mrc::api::VerbsChannel*>(channel);
  {
    std::lock_guard<std::mutex> lk(d->mu);
    if (ch->mrc != nullptr) {  // its CQs are gone (refcnt 0): the mrc channel only shares the fd
      --ch->mrc->ctx->channels;
      delete ch->mrc;
    }
    --d->comp_channels;
  }
  ::close(channel->fd);
  delete ch;
  return 0;
}

int ibv_fork_init(void) {
  if (auto* real = MRC_REAL_VERBS(ibv_fork_init, "IBVERBS_1.1")) return real();
  return 0;
}

// libibverbs' static-provider hook (a program built with RDMA_STATIC_PROVIDERS calls it).
void ibv_static_providers(void*, ...) {}

const char* ibv_wc_status_str(ibv_wc_status status) {
  static const char* const kNames[] = {"success",
                                       "local length error",
                                       "local QP operation error",
                                       "local EE context operation error",
                                       "local protection error",
                                       "WR flushed",
                                       "memory bind operation error",
                                       "bad response error",
                                       "local access error",
                                       "remote invalid request error",
                                       "remote access error",
                                       "remote operation error",
                                       "transport retry counter exceeded",
                                       "RNR retry counter exceeded",
                                       "local RDD violation error",
                                       "remote invalid RD request",
                                       "operation aborted",
                                       "invalid EE context number",
                                       "invalid EE context state",
                                       "fatal error",
                                       "response timeout error",
                                       "general error",
                                       "tag matching error",
                                       "tag matching rendezvous incomplete"};
  const auto i = static_cast<std::size_t>(status);
  return i < sizeof kNames / sizeof kNames[0] ? kNames[i] : "unknown";
}

const char* ibv_event_type_str(ibv_event_type event) {
  static const char* const kNames[] = {"CQ error",
                                       "local work queue catastrophic error",
                                       "invalid request local work queue error",
                                       "local access violation work queue error",
                                       "communication established",
                                       "send queue drained",
                                       "path migrated",
                                       "path migration request error",
                                       "local catastrophic error",
                                       "port active",
                                       "port error",
                                       "LID change",
                                       "P_key change",
                                       "SM change",
                                       "SRQ catastrophic error",
                                       "SRQ limit reached",
                                       "last WQE reached",
                                       "client reregistration",
                                       "GID table change",
                                       "WQ fatal"};
  const auto i = static_cast<std::size_t>(event);
  return i < sizeof kNames / sizeof kNames[0] ? kNames[i] : "unknown";
}

const char* ibv_node_type_str(ibv_node_type node_type) {
  switch (node_type) {
    case IBV_NODE_CA:
      return "InfiniBand channel adapter";
    default:
      return "unknown";
  }
}

const char* ibv_port_state_str(ibv_port_state port_state) {
  static const char* const kNames[] = {"no state change (NOP)", "down", "init", "armed", "active",
                                       "active deferred"};
  const auto i = static_cast<std::size_t>(port_state);
  return i < sizeof kNames / sizeof kNames[0] ? kNames[i] : "unknown";
}

}  // extern "C"
