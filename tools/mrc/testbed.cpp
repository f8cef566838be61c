// `mrc testbed`: the multi-plane test network of Linux network namespaces. The fabric is built by
// tools/testbed/mrc-testbed (ip, nft, tc); this subcommand hands its arguments to that script, so
// `mrc testbed up ...` and `tools/testbed/mrc-testbed up ...` are the same command.
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "installed_file.hpp"

namespace mrc::tools {

namespace {
CLI::App* g_testbed = nullptr;
}

CLI::App* add_testbed_command(CLI::App& app) {
  g_testbed = app.add_subcommand("testbed",
                                 "Multi-plane test network of network namespaces (up/down/show/counters/"
                                 "fault/exec; `mrc testbed --help` lists the script's commands)");
  g_testbed->prefix_command();  // every argument, --help included, belongs to the script
  g_testbed->set_help_flag();
  return g_testbed;
}

/// The script to run: $MRC_TESTBED if set; else an mrc-testbed beside this executable (an installed
/// `mrc`, bin/mrc next to bin/mrc-testbed); else the source tree's copy this binary was built from.
std::string testbed_script() {
  return installed_file("MRC_TESTBED", "mrc-testbed", MRC_TESTBED_SCRIPT);
}

int run_testbed() {
  const std::string script = testbed_script();
  std::vector<std::string> args = g_testbed->remaining();
  std::vector<char*> argv;
  std::string bash = "bash";
  argv.push_back(bash.data());
  std::string path = script;
  argv.push_back(path.data());
  for (std::string& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  execvp("bash", argv.data());
  std::fprintf(stderr, "mrc testbed: cannot run %s: %s\n", script.c_str(), std::strerror(errno));
  return 127;
}

}  // namespace mrc::tools
