// Where `mrc` finds a file it runs or loads (libmrc for `mrc exec`, mrc-testbed, the MPI module):
// the path an environment variable names; else an installed copy at a path relative to the
// directory of this executable (PREFIX/bin/); else the build tree's copy this binary was built with.
#pragma once

#include <unistd.h>

#include <cstdlib>
#include <string>

namespace mrc::tools {

inline std::string installed_file(const char* env_var, const std::string& from_bin_dir, const char* built) {
  if (const char* env = std::getenv(env_var); env != nullptr && *env != '\0') return env;
  char self[4096];
  if (const ssize_t n = ::readlink("/proc/self/exe", self, sizeof self - 1); n > 0) {
    std::string path(self, static_cast<std::size_t>(n));
    path.resize(path.rfind('/') + 1);
    path += from_bin_dir;
    if (::access(path.c_str(), R_OK) == 0) return path;
  }
  return built;
}

}  // namespace mrc::tools
