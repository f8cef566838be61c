# Runs one golden scenario and compares its JSON with the expected file (see CMakeLists.txt).
execute_process(COMMAND ${MRC} sim ${SCENARIO} --json --stable --no-progress --threads ${THREADS}
                OUTPUT_VARIABLE out ERROR_VARIABLE err RESULT_VARIABLE rc)
if(NOT rc EQUAL 0 AND NOT rc EQUAL 3)  # 3: some connections failed or did not finish (reported)
  message(FATAL_ERROR "mrc sim ${SCENARIO} exited with ${rc}: ${err}")
endif()
file(READ ${EXPECTED} expected)
if(NOT out STREQUAL expected)
  get_filename_component(base ${EXPECTED} NAME)
  file(WRITE ${CMAKE_CURRENT_BINARY_DIR}/actual_${THREADS}_${base} "${out}")
  message(FATAL_ERROR "mrc sim ${SCENARIO} --threads ${THREADS}: output differs from ${EXPECTED} (actual "
                      "written to ${CMAKE_CURRENT_BINARY_DIR}/actual_${THREADS}_${base}; diff them)")
endif()
