# `mrc exec`: refusals before anything runs (exit 2), a missing program (127), and the program's
# own exit status and environment (libmrc first in LD_PRELOAD, MRC_DEVICES / MRC_PEERS set).
mrc_cli_test(NAME exec_no_program EXIT 2 MATCH "no program given" ARGS exec --devices mrc0=127.0.0.1)
mrc_cli_test(NAME exec_no_devices EXIT 2 MATCH "no software devices: set MRC_DEVICES" ARGS exec -- true)
mrc_cli_test(NAME exec_bad_lib EXIT 2 MATCH "cannot read libmrc '/nonexistent/libmrc.so'"
             ARGS exec --devices mrc0=127.0.0.1 --lib /nonexistent/libmrc.so -- true)
mrc_cli_test(NAME exec_static EXIT 2 MATCH "ldconfig is statically linked"
             ARGS exec --devices mrc0=127.0.0.1 -- /sbin/ldconfig -p)
mrc_cli_test(NAME exec_not_found EXIT 127 MATCH "no-such-program-17: command not found"
             ARGS exec --devices mrc0=127.0.0.1 -- no-such-program-17)
mrc_cli_test(NAME exec_status EXIT 3 MATCH "^mrc0=127.0.0.1 10.0.0.1,10.0.0.2 /.*libmrc\\.so[.0-9]*$"
             ARGS exec --devices mrc0=127.0.0.1 --peers 10.0.0.1,10.0.0.2 --
                  sh -c "echo $MRC_DEVICES $MRC_PEERS $LD_PRELOAD && exit 3")
mrc_cli_test(NAME exec_ibv_devices EXIT 0 MATCH "^[[:space:]]+mrc0[[:space:]]+[0-9a-f]{16}$"
             ARGS exec --devices mrc0=127.0.0.1 -- ibv_devices)
mrc_cli_test(NAME exec_args EXIT 0 MATCH "^a -b --c 3$" ARGS exec --devices mrc0=127.0.0.1 -- echo a -b --c 3)
