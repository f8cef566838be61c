// Reading a small text file whole (a scenario, a profile set, an impairment spec), or saying in
// plain words why not. A file the user names may be missing, a directory, a pipe or a device that
// never ends (/dev/zero), unreadable, or a regular file of gigabytes: read whole, the last two
// grew the process until the allocation failed (std::bad_alloc, or an abort where nothing caught
// it). Every message starts with the path; `what` names the file the caller wants, for the hint.
#pragma once
#include <sys/stat.h>

#include <cerrno>
#include <cstddef>
#include <cstdio>
#include <cstring>
#include <memory>
#include <string>
#include <string_view>

namespace mrc {

/// Whether `path` names a regular file; otherwise false and `err` says why ("PATH: ...").
inline bool check_regular_file(const std::string& path, std::string_view what, std::string& err) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) {
    const int e = errno;
    if (e == ENOENT)
      err = path + ": no such file";
    else if (e == ENOTDIR)
      err = path + ": no such file (a part of the path is not a directory)";
    else if (e == EACCES)
      err = path + ": permission denied (a directory on the path cannot be searched)";
    else
      err = path + ": cannot be read: " + std::strerror(e);
    return false;
  }
  if (S_ISDIR(st.st_mode)) {
    err = path + ": is a directory (give " + std::string(what) + ")";
    return false;
  }
  if (!S_ISREG(st.st_mode)) {
    err = path + ": is not a regular file (give " + std::string(what) + ")";
    return false;
  }
  return true;
}

/// The whole of `path` into `text` if it is a regular file of at most `limit` bytes; otherwise
/// false and `err` says why ("PATH: ...").
inline bool read_small_file(const std::string& path, std::string_view what, std::size_t limit,
                            std::string& text, std::string& err) {
  if (!check_regular_file(path, what, err)) return false;
  errno = 0;
  const std::unique_ptr<std::FILE, int (*)(std::FILE*)> f(std::fopen(path.c_str(), "rb"), &std::fclose);
  if (!f) {
    const int e = errno;
    if (e == EACCES)
      err = path + ": permission denied (the file cannot be read)";
    else
      err = path + ": cannot be read" + (e != 0 ? ": " + std::string(std::strerror(e)) : std::string());
    return false;
  }
  // The size of what was opened (the path may have been replaced since the check), and then no
  // more than the limit read, should the file grow while it is read.
  struct stat st {};
  if (::fstat(::fileno(f.get()), &st) != 0 || !S_ISREG(st.st_mode)) {
    err = path + ": is not a regular file (give " + std::string(what) + ")";
    return false;
  }
  const auto over = [&](unsigned long long bytes) {
    err = path + ": " + std::to_string(bytes) + " bytes, over the " + std::to_string(limit) +
          " such a file may have: is it the right file?";
    return false;
  };
  if (static_cast<unsigned long long>(st.st_size) > limit)
    return over(static_cast<unsigned long long>(st.st_size));
  text.assign(static_cast<std::size_t>(st.st_size), '\0');
  std::size_t n = std::fread(text.data(), 1, text.size(), f.get());
  char more[4096];
  for (std::size_t m; (m = std::fread(more, 1, sizeof more, f.get())) > 0;) {
    if (n + m > limit) return over(n + m);
    text.resize(n);
    text.append(more, m);
    n += m;
  }
  if (std::ferror(f.get())) {
    err = path + ": cannot be read (I/O error)";
    return false;
  }
  text.resize(n);
  return true;
}

}  // namespace mrc
