# `mrc sim` command-line overrides (seed, variant selection, output paths) and the progress line,
# on the golden perm_faults scenario (seed 3; variants 'MRC 16 EV/plane', 'MRC 1 EV/plane', 'RoCE+PFC').
set(perm_faults ${PROJECT_SOURCE_DIR}/scenarios/golden/perm_faults.toml)
mrc_cli_test(NAME sim_variant_by_index EXIT 0 MATCH "\"variant\": \"MRC 1 EV/plane\"" NOT "RoCE\\+PFC|MRC 16 EV"
             ARGS sim ${perm_faults} --variant 2 --json --stable --no-progress)
mrc_cli_test(NAME sim_variant_by_label EXIT 0 MATCH "\"variant\": \"RoCE\\+PFC\"" NOT "\"transport\": \"mrc\""
             ARGS sim ${perm_faults} --variant RoCE+PFC --json --stable --no-progress)
mrc_cli_test(NAME sim_variant_unknown EXIT 2
             MATCH "--variant: no variant 'zzz' \\(the scenario has 1 'MRC 16 EV/plane', 2 'MRC 1 EV/plane', 3 'RoCE\\+PFC'\\)"
             ARGS sim ${perm_faults} --variant zzz)
mrc_cli_test(NAME sim_variant_zero EXIT 2 MATCH "--variant: no variant '0'" ARGS sim ${perm_faults} --variant 0)
mrc_cli_test(NAME sim_seed_negative EXIT 2
             MATCH "--seed: must be an integer in \\[0, 18446744073709551615\\], got '-1'" ARGS sim ${perm_faults} --seed -1)
mrc_cli_test(NAME sim_seed_not_a_number EXIT 2 MATCH "--seed: must be an integer .*got 'abc'"
             ARGS sim ${perm_faults} --seed abc)
# Forced onto a pipe, the progress line reports simulated time, events and an ETA, and ends "done".
mrc_cli_test(NAME sim_progress_line EXIT 0
             MATCH "RoCE\\+PFC \\[#* *\\] +[0-9]+% bytes  sim [0-9.]+ us  events [0-9.]+ M \\([0-9.]+ M/s\\)  flows [0-9]+/16  wall [0-9.]+ s  ETA done"
             ARGS sim ${perm_faults} --variant 3 --progress --json --stable)
# --seed 3 (the file's own) reproduces the golden output byte for byte, --seed 4 changes it; --json-out
# writes the [output] JSON where it is told.
add_test(NAME cli_sim_seed_and_json_out
         COMMAND ${CMAKE_COMMAND} -DMRC=$<TARGET_FILE:mrc> -DSCENARIO=${perm_faults}
                 -DEXPECTED=${PROJECT_SOURCE_DIR}/tests/sim_golden/perm_faults.json
                 -DOUT=${CMAKE_CURRENT_BINARY_DIR}/sim_json_out -P ${CMAKE_CURRENT_SOURCE_DIR}/fixtures/sim_overrides.cmake)
set_tests_properties(cli_sim_seed_and_json_out PROPERTIES LABELS cli TIMEOUT 120)
# An output path that cannot be written is refused before the run (no progress line: nothing ran),
# with the reason; a writable one is left as it was found (see cli_sim_seed_and_json_out).
mrc_cli_test(NAME sim_json_out_unwritable EXIT 2
             MATCH "mrc sim: cannot write /nonexistent-mrc-dir/x.json: No such file or directory" NOT "bytes  sim"
             ARGS sim ${perm_faults} --variant 2 --progress --json-out /nonexistent-mrc-dir/x.json)
mrc_cli_test(NAME sim_csv_out_a_directory EXIT 2 MATCH "mrc sim: cannot write /: Is a directory" NOT "bytes  sim"
             ARGS sim ${perm_faults} --variant 2 --progress --csv-out /)
# --threads / --partitions (parallel runs, D55): checked like every integer; byte-identical output is
# the golden tests' job (tests/sim_golden, --threads 2).
mrc_cli_test(NAME sim_threads_zero EXIT 2 MATCH "--threads: must be an integer in \\[1, 256\\], got '0'"
             ARGS sim ${perm_faults} --threads 0)
mrc_cli_test(NAME sim_partitions_too_many EXIT 2 MATCH "--partitions: must be an integer in \\[1, 256\\], got '257'"
             ARGS sim ${perm_faults} --partitions 257)
mrc_cli_test(NAME sim_threads_with_more_partitions EXIT 0 MATCH "\"variant\": \"MRC 1 EV/plane\""
             ARGS sim ${perm_faults} --variant 2 --threads 2 --partitions 5 --json --stable --no-progress)
# Started by a launcher (mpirun sets OMPI_COMM_WORLD_SIZE) but built without MPI: refused, with what to
# do, instead of every process running the whole simulation. (With MPI the golden tests run under
# mpirun: tests/sim_golden.)
if(NOT TARGET mrc_sim_mpi)
  mrc_cli_test(NAME sim_mpi_not_built EXIT 1
               MATCH "mrc sim: started as one of 2 processes \\(mpirun\\?\\), but this mrc was built without MPI"
               ARGS sim ${perm_faults} --no-progress)
  set_tests_properties(cli_sim_mpi_not_built PROPERTIES ENVIRONMENT OMPI_COMM_WORLD_SIZE=2)
endif()
# --heap (D70, D72): one of two words; a tuned run prints the same results as a plain one, large
# (threads_bench: 512 hosts, 1,024 QPs) or small (perm_faults: three variants, RoCE among them).
mrc_cli_test(NAME sim_heap_unknown EXIT 2 MATCH "--heap: huge not in \\{tuned,plain\\}"
             ARGS sim ${perm_faults} --heap huge)
add_test(NAME cli_sim_heap_same_results
         COMMAND ${CMAKE_COMMAND} -DMRC=$<TARGET_FILE:mrc> -DSCENARIO=${PROJECT_SOURCE_DIR}/scenarios/threads_bench.toml
                 -P ${CMAKE_CURRENT_SOURCE_DIR}/fixtures/sim_heap.cmake)
set_tests_properties(cli_sim_heap_same_results PROPERTIES LABELS cli TIMEOUT 300)
add_test(NAME cli_sim_heap_same_results_small
         COMMAND ${CMAKE_COMMAND} -DMRC=$<TARGET_FILE:mrc> -DSCENARIO=${perm_faults}
                 -P ${CMAKE_CURRENT_SOURCE_DIR}/fixtures/sim_heap.cmake)
set_tests_properties(cli_sim_heap_same_results_small PROPERTIES LABELS cli TIMEOUT 300)
add_test(NAME cli_sim_buffers_not_resident
         COMMAND ${CMAKE_COMMAND} -DMRC=$<TARGET_FILE:mrc> -DDIR=${CMAKE_CURRENT_BINARY_DIR}/sim_buffers
                 -P ${CMAKE_CURRENT_SOURCE_DIR}/fixtures/sim_buffers.cmake)
set_tests_properties(cli_sim_buffers_not_resident PROPERTIES LABELS cli TIMEOUT 300)
# With MPI, the module is loaded only under a launcher (D71); a file that is not the module gives a
# clear error, not a crash.
if(TARGET mrc_sim_mpi)
  mrc_cli_test(NAME sim_mpi_module_not_a_module EXIT 1
               MATCH "mrc sim: started as one of 2 processes \\(mpirun\\?\\), but MPI did not start: cannot load .*perm_faults.toml"
               ARGS sim ${perm_faults} --no-progress)
  set_tests_properties(cli_sim_mpi_module_not_a_module PROPERTIES ENVIRONMENT "OMPI_COMM_WORLD_SIZE=2;MRC_SIM_MPI=${perm_faults}")
endif()

# Results that cannot be written (a full disk: /dev/full) fail the run with the reason: they were
# lost while the run exited 0.
mrc_cli_test(NAME sim_json_out_full_disk EXIT 1 MATCH "mrc sim: cannot write /dev/full: No space left on device"
             ARGS sim --no-progress --json-out /dev/full ${perm_faults})
add_test(NAME cli_sim_stdout_full_disk
         COMMAND sh -c "\"$0\" sim --no-progress \"$1\" > /dev/full 2> \"$2\"; rc=$?; cat \"$2\"; [ $rc -eq 1 ] &&
                        grep -q 'mrc: cannot write to standard output: No space left on device' \"$2\""
                 $<TARGET_FILE:mrc> ${perm_faults} ${CMAKE_CURRENT_BINARY_DIR}/sim_stdout_full.err)
set_tests_properties(cli_sim_stdout_full_disk PROPERTIES LABELS cli TIMEOUT 60)
