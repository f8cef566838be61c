// mrc: command-line front end of the MRC transport (one binary, one subcommand per tool).
//
// Exit status, the same for every subcommand (docs/cli.md lists what each one adds):
//   0  success;  1  the run failed (data mismatch, peer lost, ...);  2  bad usage or bad input
//   (an option, an argument or a file), reported before anything runs.
#include <CLI/CLI.hpp>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <string>

#include "demo.hpp"
#include "io/oob.hpp"
#include "mrc/mrc_api_ver.h"
#include "mrc/mrc_ctl.h"

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
// `mrc decode` (decode.cpp): MRC packets (pcap or hex) as JSON.
CLI::App* add_decode_command(CLI::App& app);
int run_decode();
// `mrc exec` (exec.cpp): an unmodified verbs program over the software devices.
CLI::App* add_exec_command(CLI::App& app);
int run_exec();

namespace {
constexpr int kExitUsage = 2;

std::string version_text() {
  char buf[512];
  std::snprintf(
      buf, sizeof buf,
      "mrc %s\n"
      "wire: MRC 1.0 headers over RoCEv2-style UDP (layouts per docs/wire-format.md), UDP port 4791\n"
      "application API (mrc.h): %u.%u.%u\n"
      "controller API (mrc_ctl.h): %u.%u.%u\n"
      "out-of-band setup protocol (mrc perf): %u",  // CLI11 adds the final newline
      MRC_PROJECT_VERSION, MRC_API_VER_MAJOR(MRC_API_VER_CURRENT), MRC_API_VER_MINOR(MRC_API_VER_CURRENT),
      MRC_API_VER_SUB(MRC_API_VER_CURRENT), MRC_CTL_API_VER_MAJOR, MRC_CTL_API_VER_MINOR,
      MRC_CTL_API_VER_PATCH, io::kOobVersion);
  return buf;
}
}  // namespace
}  // namespace mrc::tools

int main(int argc, char** argv) {
  CLI::App app{"mrc: tools for the Multipath Reliable Connection (MRC) transport", "mrc"};
  app.require_subcommand(1);
  app.set_version_flag("-V,--version", mrc::tools::version_text());
  app.footer(
      "Run 'mrc SUBCOMMAND --help' for a subcommand's options.\n"
      "Exit status: 0 success, 1 the run failed, 2 bad usage or input (see docs/cli.md).");

  mrc::tools::DemoOptions demo_opt;
  CLI::App* demo = mrc::tools::add_demo_command(app, demo_opt);
  CLI::App* perf = mrc::tools::add_perf_command(app);
  CLI::App* sim = mrc::tools::add_sim_command(app);
  CLI::App* testbed = mrc::tools::add_testbed_command(app);
  CLI::App* ctl = mrc::tools::add_ctl_command(app);
  CLI::App* decode = mrc::tools::add_decode_command(app);
  CLI::App* exec = mrc::tools::add_exec_command(app);
  CLI::App* help =
      app.add_subcommand("help", "Print this help (or 'mrc help SUBCOMMAND' for one subcommand's)");
  std::string help_about;
  help->add_option("subcommand", help_about, "Subcommand to describe");

  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForAllHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForVersion& e) {
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    // CLI11 exits with its own codes (104-114); one documented code for every usage error instead.
    std::string what = e.what();
    std::string path = "mrc";  // the deepest subcommand reached, e.g. "mrc ctl apply"
    const CLI::App* where = &app;
    for (bool deeper = true; deeper;) {
      deeper = false;
      for (const CLI::App* sub : where->get_subcommands()) {
        where = sub;
        path += " " + sub->get_name();
        deeper = true;
        break;
      }
    }
    if (where == &app && argc > 1 && argv[1][0] != '-')
      what = std::string("unknown subcommand '") + argv[1] +
             "' (one of: demo, perf, sim, ctl, testbed, decode, exec, help)";
    else if (where == &app && dynamic_cast<const CLI::RequiredError*>(&e) != nullptr)
      what = "a subcommand is required (one of: demo, perf, sim, ctl, testbed, decode, exec, help)";
    std::fprintf(stderr, "mrc: %s\nRun '%s --help' for usage.\n", what.c_str(), path.c_str());
    return mrc::tools::kExitUsage;
  }
  if (help->parsed()) {
    if (help_about.empty()) {
      // app.help() would describe the selected subcommand (`help` itself), not the program.
      std::printf("%s", app.get_formatter()->make_help(&app, "mrc", CLI::AppFormatMode::Normal).c_str());
      return 0;
    }
    for (const CLI::App* sub : app.get_subcommands({}))
      if (sub->get_name() == help_about && sub != help) {
        std::printf("%s", sub->help().c_str());
        return 0;
      }
    std::fprintf(stderr,
                 "mrc: unknown subcommand '%s' (one of: demo, perf, sim, ctl, testbed, decode, exec, help)\n",
                 help_about.c_str());
    return mrc::tools::kExitUsage;
  }
  int rc = 0;
  if (demo->parsed()) rc = mrc::tools::run_demo(demo_opt);
  if (perf->parsed()) rc = mrc::tools::run_perf();
  if (sim->parsed()) rc = mrc::tools::run_sim();
  if (testbed->parsed()) rc = mrc::tools::run_testbed();
  if (ctl->parsed()) rc = mrc::tools::run_ctl();
  if (decode->parsed()) rc = mrc::tools::run_decode();
  if (exec->parsed()) rc = mrc::tools::run_exec();
  // Output that could not be written (a full disk, /dev/full) is a failure, not a success with the
  // results lost: the last of it is written here, and an earlier failed write leaves the error set.
  errno = 0;
  if (std::fflush(stdout) != 0 || std::ferror(stdout)) {
    std::fprintf(stderr, "mrc: cannot write to standard output%s%s\n", errno != 0 ? ": " : "",
                 errno != 0 ? std::strerror(errno) : "");
    return rc != 0 ? rc : 1;
  }
  return rc;
}
