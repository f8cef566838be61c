// `mrc exec -- PROGRAM ARGS`: runs an unmodified, dynamically linked libibverbs program over the
// software MRC devices of MRC_DEVICES (D53). libmrc goes first in LD_PRELOAD: its ibv_* calls, under
// the symbol versions libibverbs gives them, take the program's calls; its devices come first in
// ibv_get_device_list and everything that is not one of them reaches the real libibverbs (D52).
#include <elf.h>
#include <sys/stat.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <string>
#include <vector>

#include "installed_file.hpp"

namespace mrc::tools {

namespace {
constexpr int kExitUsage = 2;

struct ExecOptions {
  std::string devices;               ///< --devices: MRC_DEVICES
  std::string peers;                 ///< --peers: MRC_PEERS
  std::string lib;                   ///< --lib: the libmrc.so to preload
  std::vector<std::string> command;  ///< PROGRAM ARGS after `--`
};
ExecOptions g_opt;
CLI::App* g_exec = nullptr;

bool readable(const std::string& p) {
  return !p.empty() && ::access(p.c_str(), R_OK) == 0;
}

/// --lib; else $MRC_LIB; else an installed libmrc beside this executable (PREFIX/bin/mrc ->
/// PREFIX/LIBDIR/libmrc.so.N); else the build tree's copy this binary was built with.
std::string library() {
  if (!g_opt.lib.empty()) return g_opt.lib;
  return installed_file("MRC_LIB", "../" MRC_INSTALL_LIBDIR "/" MRC_LIB_SONAME, MRC_LIB_BUILD_PATH);
}

/// PROGRAM as execvp would find it.
std::string resolve(const std::string& prog) {
  if (prog.find('/') != std::string::npos) return prog;
  const char* path = std::getenv("PATH");
  std::string all = path != nullptr ? path : "/usr/local/bin:/usr/bin:/bin";
  for (std::size_t start = 0; start <= all.size();) {
    const std::size_t colon = std::min(all.find(':', start), all.size());
    const std::string dir = colon > start ? all.substr(start, colon - start) : ".";
    const std::string cand = dir + "/" + prog;
    struct stat st {};
    if (::stat(cand.c_str(), &st) == 0 && S_ISREG(st.st_mode) && ::access(cand.c_str(), X_OK) == 0)
      return cand;
    start = colon + 1;
  }
  return {};
}

/// Whether a 64-bit ELF file has a program interpreter (is dynamically linked; LD_PRELOAD acts only
/// then). Scripts and other formats are let through: their interpreter is.
bool statically_linked(const std::string& file) {
  std::ifstream in(file, std::ios::binary);
  Elf64_Ehdr eh{};
  if (!in.read(reinterpret_cast<char*>(&eh), sizeof eh) || std::memcmp(eh.e_ident, ELFMAG, SELFMAG) != 0 ||
      eh.e_ident[EI_CLASS] != ELFCLASS64)
    return false;
  for (unsigned i = 0; i < eh.e_phnum; ++i) {
    Elf64_Phdr ph{};
    in.seekg(static_cast<std::streamoff>(eh.e_phoff + i * static_cast<std::uint64_t>(eh.e_phentsize)));
    if (!in.read(reinterpret_cast<char*>(&ph), sizeof ph)) return false;
    if (ph.p_type == PT_INTERP) return false;
  }
  return true;
}
}  // namespace

CLI::App* add_exec_command(CLI::App& app) {
  g_exec = app.add_subcommand("exec",
                              "Run an unmodified libibverbs program (after --) with the software MRC devices "
                              "of MRC_DEVICES in place of hardware ones");
  g_exec->add_option("--devices", g_opt.devices,
                     "Software devices, NAME=ADDR[,ADDR...][@PORT][;...] (sets MRC_DEVICES; default: "
                     "the environment's)");
  g_exec->add_option("--peers", g_opt.peers,
                     "Peers' plane addresses, ADDR[,ADDR...][@PORT][;...] (sets MRC_PEERS): a multi-plane "
                     "device finds a peer's other planes from the one GID the program exchanges");
  g_exec->add_option("--lib", g_opt.lib,
                     "The libmrc.so to preload (default: $MRC_LIB, the installed one, "
                     "or the build tree's)");
  g_exec->add_option("command", g_opt.command, "PROGRAM [ARGS...], after --")->expected(-1);
  g_exec->prefix_command();  // without `--`: PROGRAM and the arguments after it are not ours
  return g_exec;
}

int run_exec() {
  std::vector<std::string> args = g_opt.command;
  std::vector<std::string> rest = g_exec->remaining();
  // After `mrc exec ... -- PROGRAM ARGS` CLI11 hands back the `--` itself as well: not an argument.
  if (!args.empty()) {
    const auto sep = std::find(rest.begin(), rest.end(), "--");
    if (sep != rest.end()) rest.erase(sep);
  }
  for (std::string& a : rest) args.push_back(std::move(a));
  auto usage = [](const std::string& why) {
    std::fprintf(stderr, "mrc exec: %s\nRun 'mrc exec --help' for usage.\n", why.c_str());
    return kExitUsage;
  };
  if (args.empty()) return usage("no program given (mrc exec [OPTIONS] -- PROGRAM [ARGS...])");
  if (!g_opt.devices.empty()) ::setenv("MRC_DEVICES", g_opt.devices.c_str(), 1);
  if (!g_opt.peers.empty()) ::setenv("MRC_PEERS", g_opt.peers.c_str(), 1);
  const char* devices = std::getenv("MRC_DEVICES");
  if (devices == nullptr || *devices == '\0')
    return usage("no software devices: set MRC_DEVICES or give --devices NAME=ADDR[,ADDR...]");
  const std::string lib = library();
  if (!readable(lib)) return usage("cannot read libmrc '" + lib + "' (give --lib or MRC_LIB)");
  const std::string prog = resolve(args.front());
  if (prog.empty()) {
    std::fprintf(stderr, "mrc exec: %s: command not found\n", args.front().c_str());
    return 127;
  }
  if (statically_linked(prog))
    return usage(prog + " is statically linked: LD_PRELOAD cannot put the software devices in it");
  // Ours first: the program's ibv_* calls must bind to libmrc before libibverbs.
  std::string preload = lib;
#ifdef MRC_SANITIZER_PRELOAD
  // A sanitizer build's libmrc: its runtimes must come first. The program's own allocations are not
  // ours to judge (libmrc's leaks are the API tests' business), so no leak report at its exit.
  preload = MRC_SANITIZER_PRELOAD ":" + preload;
  const char* asan = std::getenv("ASAN_OPTIONS");
  ::setenv("ASAN_OPTIONS", (std::string("detect_leaks=0:") + (asan != nullptr ? asan : "")).c_str(), 1);
#endif
  if (const char* old = std::getenv("LD_PRELOAD"); old != nullptr && *old != '\0')
    preload += std::string(":") + old;
  ::setenv("LD_PRELOAD", preload.c_str(), 1);
  std::vector<char*> argv;
  for (std::string& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  ::execv(prog.c_str(), argv.data());
  std::fprintf(stderr, "mrc exec: cannot run %s: %s\n", prog.c_str(), std::strerror(errno));
  return 126;
}

}  // namespace mrc::tools
