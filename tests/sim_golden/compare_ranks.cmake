# Runs a scenario as a distributed run (LAUNCH: the mpirun command line up to the program, a CMake
# list joined with '|') and compares its `--json --stable` output byte for byte with EXPECTED (a golden file) or,
# without EXPECTED, with the output of the same scenario run as one process (see CMakeLists.txt).
string(REPLACE "|" ";" LAUNCH "${LAUNCH}")
set(args sim ${SCENARIO} --json --stable --no-progress)
execute_process(COMMAND ${LAUNCH} ${MRC} ${args} OUTPUT_VARIABLE out ERROR_VARIABLE err RESULT_VARIABLE rc)
if(NOT rc EQUAL 0 AND NOT rc EQUAL 3)  # 3: some connections failed or did not finish (reported)
  message(FATAL_ERROR "${LAUNCH} mrc sim ${SCENARIO} exited with ${rc}: ${err}")
endif()
if(DEFINED EXPECTED)
  file(READ ${EXPECTED} expected)
else()
  execute_process(COMMAND ${MRC} ${args} OUTPUT_VARIABLE expected ERROR_VARIABLE err1 RESULT_VARIABLE rc1)
  if(NOT rc1 EQUAL rc)
    message(FATAL_ERROR "mrc sim ${SCENARIO} exited with ${rc1} as one process, ${rc} distributed: ${err1}")
  endif()
endif()
if(NOT out STREQUAL expected)
  get_filename_component(base ${SCENARIO} NAME_WE)
  file(WRITE ${CMAKE_CURRENT_BINARY_DIR}/actual_ranks_${base}.json "${out}")
  file(WRITE ${CMAKE_CURRENT_BINARY_DIR}/expected_ranks_${base}.json "${expected}")
  message(FATAL_ERROR "${LAUNCH} mrc sim ${SCENARIO}: output differs from one process (both written to "
                      "${CMAKE_CURRENT_BINARY_DIR}/{actual,expected}_ranks_${base}.json; diff them)")
endif()
