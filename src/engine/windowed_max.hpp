// WindowedMax: the largest sample seen within the last `window` of time, kept in constant space
// (Kathleen Nichols' windowed min/max estimator, as BBR uses for its bandwidth filter). It holds
// the best sample and the best of two later sub-windows, so when the best one ages out the
// next-best recent sample takes over instead of the estimate collapsing to the newest sample.
#pragma once
#include "common/time.hpp"

namespace mrc::engine {

class WindowedMax {
 public:
  /// A sample `v` taken at `now`; samples older than `window` stop counting.
  void update(Time now, Duration v, Duration window) {
    const Entry e{now, v};
    // A new maximum, or nothing within the window at all: the sample is the whole estimate.
    if (v >= s_[0].v || now - s_[2].t > window) {
      s_[0] = s_[1] = s_[2] = e;
      return;
    }
    if (v >= s_[1].v)
      s_[1] = s_[2] = e;
    else if (v >= s_[2].v)
      s_[2] = e;
    const Duration age = now - s_[0].t;
    if (age > window) {
      // The best sample expired: the second and third move up, the new one is third. The new
      // best may have expired too.
      s_[0] = s_[1];
      s_[1] = s_[2];
      s_[2] = e;
      if (now - s_[0].t > window) {
        s_[0] = s_[1];
        s_[1] = s_[2];
        s_[2] = e;
      }
    } else if (s_[1].t == s_[0].t && age > window / 4) {
      // A quarter window passed with no second choice: take one from this sub-window.
      s_[1] = s_[2] = e;
    } else if (s_[2].t == s_[1].t && age > window / 2) {
      s_[2] = e;
    }
  }
  Duration get() const { return s_[0].v; }
  void reset() { s_[0] = s_[1] = s_[2] = Entry{}; }

 private:
  struct Entry {
    Time t = 0;
    Duration v = 0;
  };
  Entry s_[3];
};

}  // namespace mrc::engine
