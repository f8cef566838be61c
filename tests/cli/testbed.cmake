# `mrc testbed`: bad arguments exit 2 with the option and what it takes, before any namespace exists
# (these are checked before the root check and the fabric build).
mrc_cli_test(NAME testbed_no_command EXIT 2 MATCH "usage: mrc-testbed" ARGS testbed)
mrc_cli_test(NAME testbed_unknown_command EXIT 2 MATCH "unknown command 'no-such'" ARGS testbed no-such)
mrc_cli_test(NAME testbed_hosts_not_number EXIT 2 MATCH "--hosts must be a whole number, got 'x'"
             ARGS testbed up --hosts x --planes 2 --spines 1 --mode ecmp --prefix clibad)
mrc_cli_test(NAME testbed_bad_mode EXIT 2 MATCH "--mode must be ecmp, flowlabel or srv6, got 'bogus'"
             ARGS testbed up --hosts 2 --planes 2 --spines 1 --mode bogus --prefix clibad)
mrc_cli_test(NAME testbed_bad_prefix EXIT 2 MATCH "--prefix must match" ARGS testbed down --prefix BAD!)
