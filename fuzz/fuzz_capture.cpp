// libFuzzer target for the capture reader (src/io/capture_reader.cpp, what `mrc decode` reads): any bytes,
// read as a classic pcap or as text of hex packets.
//
// Each input is read twice: from a string stream, and from a stream buffer that hands its bytes
// out a few at a time (1 to 7, as a pipe might). The packets found (number, bytes, whether they
// came with IP/UDP layers) and the error must be the same: what the reader finds must not depend on
// how its input arrives. Packet numbers must rise; every packet's bytes are copied (ASan checks
// that they lie inside what was read). Any mismatch aborts.
#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <istream>
#include <sstream>
#include <streambuf>
#include <string>
#include <vector>

#include "io/capture_reader.hpp"

namespace {

using mrc::io::capture::Bytes;
using mrc::io::capture::Udp;

struct Found {
  std::vector<std::size_t> numbers;
  std::vector<Bytes> packets;
  std::vector<bool> with_udp;
  std::string error;
  bool operator==(const Found&) const = default;
};

class Trickle : public std::streambuf {
 public:
  Trickle(const std::uint8_t* data, std::size_t size) : data_(data), size_(size) {}

 protected:
  int_type underflow() override {
    if (pos_ >= size_) return traits_type::eof();
    const std::size_t k = std::min<std::size_t>(1 + (pos_ * 5 + size_) % 7, size_ - pos_);
    buf_.assign(data_ + pos_, data_ + pos_ + k);
    pos_ += k;
    setg(buf_.data(), buf_.data(), buf_.data() + k);
    return traits_type::to_int_type(buf_[0]);
  }

 private:
  const std::uint8_t* data_;
  std::size_t size_, pos_ = 0;
  std::string buf_;
};

Found read_all(std::istream& in) {
  static const std::uint32_t kPorts[] = {4791, 4971};
  Found f;
  f.error = mrc::io::capture::read_input(in, kPorts, [&](std::size_t n, auto mrc, const Udp* udp) {
    if (!f.numbers.empty() && n <= f.numbers.back()) {
      std::fprintf(stderr, "fuzz_capture: packet number %zu after %zu\n", n, f.numbers.back());
      std::abort();
    }
    f.numbers.push_back(n);
    f.packets.emplace_back(mrc.begin(), mrc.end());
    f.with_udp.push_back(udp != nullptr);
  });
  return f;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  std::istringstream whole(std::string(reinterpret_cast<const char*>(data), size));
  const Found a = read_all(whole);
  Trickle t(data, size);
  std::istream trickled(&t);
  const Found b = read_all(trickled);
  if (!(a == b)) {
    std::fprintf(stderr, "fuzz_capture: read whole: %zu packets, '%s'; a few bytes at a time: %zu, '%s'\n",
                 a.packets.size(), a.error.c_str(), b.packets.size(), b.error.c_str());
    std::abort();
  }
  return 0;
}
