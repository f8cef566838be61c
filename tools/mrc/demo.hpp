// `mrc demo`: one large RDMA WRITE sprayed over an in-memory multi-plane network, with a plane
// failing half way through.
#pragma once
#include <cstdint>

namespace CLI {
class App;
}

namespace mrc::tools {

struct DemoOptions {
  std::uint64_t size = 64ull << 20;  ///< bytes to write
  std::uint32_t planes = 4;
  std::uint32_t paths = 16;  ///< per plane
  double loss = 0.01;        ///< per-path random loss probability
  std::uint64_t seed = 1;
  bool no_failure = false;
  bool json = false;
};

/// Registers the subcommand; its options are written into `opt` when parsed.
CLI::App* add_demo_command(CLI::App& app, DemoOptions& opt);

/// Runs the demo and prints its report; returns the process exit code.
int run_demo(const DemoOptions& opt);

}  // namespace mrc::tools
