// read_small_file / check_regular_file (src/common/small_file.hpp): a file a user names is read
// whole only if it is a regular file within the caller's limit; otherwise the reason, with the
// path, and nothing read into memory.
#include "common/small_file.hpp"

#include <gtest/gtest.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <string>

namespace {

class SmallFile : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/mrc_small_file_XXXXXX";
    ASSERT_NE(::mkdtemp(tmpl), nullptr);
    dir_ = tmpl;
  }
  void TearDown() override {
    const std::string cmd = "rm -rf '" + dir_ + "'";
    EXPECT_EQ(std::system(cmd.c_str()), 0);
  }
  std::string write(const std::string& name, const std::string& text) {
    const std::string path = dir_ + "/" + name;
    std::FILE* f = std::fopen(path.c_str(), "wb");
    EXPECT_NE(f, nullptr);
    if (f) {
      EXPECT_EQ(std::fwrite(text.data(), 1, text.size(), f), text.size());
      std::fclose(f);
    }
    return path;
  }
  std::string dir_;
};

TEST_F(SmallFile, ARegularFileWithinTheLimitIsReadWhole) {
  const std::string text = std::string("a = 1\n") + std::string(5000, 'x') + "\n";
  const std::string path = write("ok.toml", text);
  std::string got, err;
  ASSERT_TRUE(mrc::read_small_file(path, "a TOML file", text.size(), got, err)) << err;
  EXPECT_EQ(got, text);
  EXPECT_TRUE(err.empty());
  const std::string empty = write("empty.toml", "");
  ASSERT_TRUE(mrc::read_small_file(empty, "a TOML file", 10, got, err)) << err;
  EXPECT_EQ(got, "");
}

TEST_F(SmallFile, OneByteOverTheLimitIsRefusedWithItsSize) {
  const std::string path = write("big.toml", std::string(101, 'y'));
  std::string got, err;
  EXPECT_FALSE(mrc::read_small_file(path, "a scenario file", 100, got, err));
  EXPECT_EQ(err, path + ": 101 bytes, over the 100 such a file may have: is it the right file?");
}

TEST_F(SmallFile, AHugeSparseFileIsRefusedBeforeAnyOfItIsRead) {
  // 64 GiB of nothing on disk: read whole it took memory until std::bad_alloc.
  const std::string path = write("huge.toml", "");
  ASSERT_EQ(::truncate(path.c_str(), 64ll << 30), 0);
  std::string got, err;
  EXPECT_FALSE(mrc::read_small_file(path, "a TOML file", 1 << 20, got, err));
  EXPECT_EQ(err, path + ": 68719476736 bytes, over the 1048576 such a file may have: is it the right file?");
  EXPECT_LT(got.capacity(), 1u << 20);
}

TEST_F(SmallFile, WhatIsNotARegularFileIsNamed) {
  std::string got, err;
  EXPECT_FALSE(mrc::read_small_file(dir_ + "/missing.toml", "a TOML file", 100, got, err));
  EXPECT_EQ(err, dir_ + "/missing.toml: no such file");
  const std::string file = write("plain", "x");
  EXPECT_FALSE(mrc::read_small_file(file + "/below", "a TOML file", 100, got, err));
  EXPECT_EQ(err, file + "/below: no such file (a part of the path is not a directory)");
  EXPECT_FALSE(mrc::read_small_file(dir_, "a TOML file", 100, got, err));
  EXPECT_EQ(err, dir_ + ": is a directory (give a TOML file)");
  // Devices and pipes may never end: refused, not read (a FIFO with no writer is not even opened,
  // which would wait for one).
  EXPECT_FALSE(mrc::read_small_file("/dev/zero", "a TOML file", 100, got, err));
  EXPECT_EQ(err, "/dev/zero: is not a regular file (give a TOML file)");
  const std::string fifo = dir_ + "/fifo";
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  EXPECT_FALSE(mrc::read_small_file(fifo, "a TOML file", 100, got, err));
  EXPECT_EQ(err, fifo + ": is not a regular file (give a TOML file)");
  EXPECT_FALSE(mrc::check_regular_file(fifo, "an htsim .cm file", err));
  EXPECT_EQ(err, fifo + ": is not a regular file (give an htsim .cm file)");
  EXPECT_TRUE(mrc::check_regular_file(file, "an htsim .cm file", err));
}

TEST_F(SmallFile, AnUnreadableFileIsNamed) {
  // Root reads any file: as root the read is made by a child that has become nobody.
  const std::string path = write("secret.toml", "a = 1\n");
  ASSERT_EQ(::chmod(path.c_str(), 0), 0);
  ASSERT_EQ(::chmod(dir_.c_str(), 0755), 0);
  const std::string want = path + ": permission denied (the file cannot be read)";
  const auto attempt = [&] {
    std::string got, err;
    return !mrc::read_small_file(path, "a TOML file", 100, got, err) && err == want;
  };
  if (::geteuid() != 0) {
    EXPECT_TRUE(attempt());
    return;
  }
  const pid_t child = ::fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    if (::setgid(65534) != 0 || ::setuid(65534) != 0) ::_exit(2);
    ::_exit(attempt() ? 0 : 1);
  }
  int status = 0;
  ASSERT_EQ(::waitpid(child, &status, 0), child);
  ASSERT_TRUE(WIFEXITED(status));
  EXPECT_EQ(WEXITSTATUS(status), 0) << "1: not refused with '" << want << "'; 2: could not become nobody";
}

}  // namespace
