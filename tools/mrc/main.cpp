// mrc: command-line front end of the MRC transport (one binary, one subcommand per tool).
#include <CLI/CLI.hpp>

#include "demo.hpp"

int main(int argc, char** argv) {
  CLI::App app{"mrc: tools for the Multipath Reliable Connection (MRC) transport", "mrc"};
  app.require_subcommand(1);

  mrc::tools::DemoOptions demo_opt;
  CLI::App* demo = mrc::tools::add_demo_command(app, demo_opt);

  CLI11_PARSE(app, argc, argv);
  if (demo->parsed()) return mrc::tools::run_demo(demo_opt);
  return 0;
}
