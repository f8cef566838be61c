// mrc: command-line front end of the MRC transport (one binary, one subcommand per tool).
#include <CLI/CLI.hpp>

#include "demo.hpp"

namespace mrc::tools {
// `mrc perf` (perf.cpp): registers its options; run_perf() runs the parsed command.
CLI::App* add_perf_command(CLI::App& app);
int run_perf();
// `mrc sim` (sim.cpp): packet-level fabric scenarios.
CLI::App* add_sim_command(CLI::App& app);
int run_sim();
// `mrc testbed` (testbed.cpp): the netns fabric script.
CLI::App* add_testbed_command(CLI::App& app);
int run_testbed();
// `mrc ctl` (ctl.cpp): the controller API on the command line.
CLI::App* add_ctl_command(CLI::App& app);
int run_ctl();
}  // namespace mrc::tools

int main(int argc, char** argv) {
  CLI::App app{"mrc: tools for the Multipath Reliable Connection (MRC) transport", "mrc"};
  app.require_subcommand(1);

  mrc::tools::DemoOptions demo_opt;
  CLI::App* demo = mrc::tools::add_demo_command(app, demo_opt);
  CLI::App* perf = mrc::tools::add_perf_command(app);
  CLI::App* sim = mrc::tools::add_sim_command(app);
  CLI::App* testbed = mrc::tools::add_testbed_command(app);
  CLI::App* ctl = mrc::tools::add_ctl_command(app);

  CLI11_PARSE(app, argc, argv);
  if (demo->parsed()) return mrc::tools::run_demo(demo_opt);
  if (perf->parsed()) return mrc::tools::run_perf();
  if (sim->parsed()) return mrc::tools::run_sim();
  if (testbed->parsed()) return mrc::tools::run_testbed();
  if (ctl->parsed()) return mrc::tools::run_ctl();
  return 0;
}
