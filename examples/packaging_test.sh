#!/usr/bin/env bash
# Installs the build tree into a temporary prefix, then builds examples/wimm_pingpong.c the way a
# user would, three times: CMake find_package(mrc) with mrc::mrc (shared) and mrc::mrc_static,
# and pkg-config + cc. Runs each build.
#   packaging_test.sh BUILD_DIR EXAMPLES_DIR [EXTRA_C_FLAGS]
set -euo pipefail
build=$1 examples=$2 extra=${3:-}
extra=${extra//;/ }  # a CMake list from the caller
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
prefix=$work/prefix

cmake --install "$build" --prefix "$prefix" >/dev/null
for f in include/mrc/mrc.h include/mrc/mrc.hpp include/mrc/mrc_api_ver.h lib/libmrc.so lib/libmrc.a \
         lib/pkgconfig/mrc.pc lib/cmake/mrc/mrcConfig.cmake lib/cmake/mrc/mrcConfigVersion.cmake \
         bin/mrc bin/mrc-testbed; do
  [ -e "$prefix/$f" ] || { echo "packaging: $f not installed"; exit 1; }
done
# Built with MPI: `mrc sim`'s MPI module (loaded only under mpirun, D71) is installed where the
# installed mrc looks for it.
if [ -e "$build/src/sim/mrc_sim_mpi.so" ] && [ ! -e "$prefix/lib/mrc/mrc_sim_mpi.so" ]; then
  echo "packaging: lib/mrc/mrc_sim_mpi.so not installed"
  exit 1
fi
# The installed tools run from PATH without the source tree: `mrc testbed` finds the mrc-testbed
# installed beside it (its usage text names the script), and `mrc --version` answers.
PATH=$prefix/bin:$PATH mrc --version | grep -q '^mrc [0-9]' || { echo "packaging: installed mrc --version"; exit 1; }
tb_help=$(env -u MRC_TESTBED PATH="$prefix/bin:$PATH" mrc testbed --help 2>&1 || true)
echo "$tb_help" | grep -q 'usage: mrc-testbed' || { echo "packaging: installed mrc testbed: $tb_help"; exit 1; }
mv "$prefix/bin/mrc-testbed" "$prefix/bin/mrc-testbed.moved"
tb_help=$(MRC_TESTBED="$prefix/bin/mrc-testbed.moved" "$prefix/bin/mrc" testbed --help 2>&1 || true)
echo "$tb_help" | grep -q 'usage: mrc-testbed' || { echo "packaging: MRC_TESTBED override: $tb_help"; exit 1; }
mv "$prefix/bin/mrc-testbed.moved" "$prefix/bin/mrc-testbed"

mkdir "$work/proj"
cp "$examples/wimm_pingpong.c" "$work/proj/"
cat > "$work/proj/CMakeLists.txt" <<'CMAKE'
cmake_minimum_required(VERSION 3.16)
project(pingpong C)
find_package(mrc 0.1 REQUIRED)
add_executable(pingpong_shared wimm_pingpong.c)
target_link_libraries(pingpong_shared PRIVATE mrc::mrc)
add_executable(pingpong_static wimm_pingpong.c)
target_link_libraries(pingpong_static PRIVATE mrc::mrc_static)
foreach(t pingpong_shared pingpong_static)
  set_target_properties(${t} PROPERTIES C_STANDARD 11 C_STANDARD_REQUIRED ON C_EXTENSIONS OFF)
  target_compile_options(${t} PRIVATE -Wall -Wextra -Werror)
endforeach()
CMAKE
cmake -S "$work/proj" -B "$work/proj/build" -G Ninja -DCMAKE_PREFIX_PATH="$prefix" -DCMAKE_C_FLAGS="$extra" \
      -DCMAKE_EXE_LINKER_FLAGS="$extra" >/dev/null
cmake --build "$work/proj/build" >/dev/null
"$work/proj/build/pingpong_shared" -n 50 -a 127.0.85.1 -b 127.0.85.2
"$work/proj/build/pingpong_static" -n 50 -a 127.0.85.3 -b 127.0.85.4

export PKG_CONFIG_PATH=$prefix/lib/pkgconfig
# shellcheck disable=SC2046,SC2086
cc -std=c11 -Wall -Wextra -Werror $extra "$examples/wimm_pingpong.c" $(pkg-config --cflags --libs mrc) \
   -Wl,-rpath,"$(pkg-config --variable=libdir mrc)" -o "$work/pingpong_pc"
"$work/pingpong_pc" -n 50 -a 127.0.85.5 -b 127.0.85.6
echo "packaging: find_package (shared, static) and pkg-config builds ran"
