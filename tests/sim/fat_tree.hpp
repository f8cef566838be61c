// The smallest htsim-style fat tree (k = 4: 16 hosts), shared by the fabric-level tests.
#pragma once
#include "sim/topology.hpp"

namespace mrc::sim::test {

inline Topology fat4() {
  FatTreeConfig c;
  c.k = 4;
  return make_fat_tree(c);
}

}  // namespace mrc::sim::test
