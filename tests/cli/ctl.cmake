# `mrc ctl`: bad files, bad configs and bad options get a fast, clear answer with exit 2 (bad
# input) naming the file and line (and key) or the option and its allowed range; offline there is
# no endpoint, so commands that need one say so at once instead of waiting.
set(ctl_fx ${PROJECT_SOURCE_DIR}/tests/api)
set(ctl_example ${PROJECT_SOURCE_DIR}/config/profiles.toml)

# ---- the file itself -----------------------------------------------------------------------------
mrc_cli_test(NAME ctl_apply_dir EXIT 2 MATCH "/config: is a directory" NOT "applied"
             ARGS ctl --offline apply ${PROJECT_SOURCE_DIR}/config)
mrc_cli_test(NAME ctl_config_dir EXIT 2 MATCH "/config: is a directory"
             ARGS ctl --offline --config ${PROJECT_SOURCE_DIR}/config show)
mrc_cli_test(NAME ctl_apply_missing EXIT 2 MATCH "/no-such-file.toml: no such file$"
             ARGS ctl --offline apply ${ctl_fx}/no-such-file.toml)
mrc_cli_test(NAME ctl_apply_not_regular EXIT 2 MATCH "/dev/null: is not a regular file"
             ARGS ctl --offline apply /dev/null)
mrc_cli_test(NAME ctl_apply_empty EXIT 2 MATCH "ctl_empty.toml: defines no profile"
             ARGS ctl --offline apply ${ctl_fx}/ctl_empty.toml)
mrc_cli_test(NAME ctl_apply_binary EXIT 2 MATCH "ctl_binary.toml:1: not TOML: "
             ARGS ctl --offline apply ${ctl_fx}/ctl_binary.toml)
# A file over the size a profile file may have (sparse) is refused by its size before any of it is
# read: read whole, one of 8 GiB aborted `mrc ctl` (an uncaught std::bad_alloc) after taking the
# memory there was.
mrc_cli_oversized_file_test(NAME ctl_apply_huge BYTES 269484032 LIMIT 268435456 ARGS ctl --offline apply)
# Unreadable: root reads anything, so as root the command runs as nobody (skipped without setpriv).
set(ctl_unreadable ${CMAKE_CURRENT_BINARY_DIR}/ctl_unreadable.toml)
add_test(NAME cli_ctl_apply_unreadable
         COMMAND sh -c "printf '[[cc_profile]]\\nid = 6\\nalgorithm = \"none\"\\n' > \"$2\" && chmod 000 \"$2\" || exit 1
                        run=''
                        if [ \"$(id -u)\" = 0 ]; then
                          command -v setpriv >/dev/null || exit 77
                          run='setpriv --reuid=65534 --regid=65534 --clear-groups'
                        fi
                        exec \"$0\" 2 \"$2: permission denied\" --not applied -- $run \"$1\" ctl --offline apply \"$2\""
                 ${CMAKE_CURRENT_SOURCE_DIR}/expect.sh $<TARGET_FILE:mrc> ${ctl_unreadable})
set_tests_properties(cli_ctl_apply_unreadable PROPERTIES LABELS cli TIMEOUT 30 SKIP_RETURN_CODE 77)

# ---- offline: no endpoint, so no events or probes ------------------------------------------------
mrc_cli_test(NAME ctl_events_offline EXIT 2 TIMEOUT 10 MATCH "events: --offline has no endpoint"
             ARGS ctl events --offline)
mrc_cli_test(NAME ctl_offline_events EXIT 2 TIMEOUT 10 MATCH "events: --offline has no endpoint"
             ARGS ctl --offline --config ${ctl_example} events --count 0)
mrc_cli_test(NAME ctl_probe_offline EXIT 2 TIMEOUT 10 MATCH "probe: --offline has no endpoint"
             ARGS ctl --offline probe --dgid ::1 --ev 9c41)

# ---- the shipped example: works with the defaults, EVs on source ports >= 1024 -------------------
mrc_cli_test(NAME ctl_example_default_ports EXIT 0 MATCH "^applied .*profiles.toml$" NOT "warning|rror"
             ARGS ctl --offline apply ${ctl_example})
mrc_cli_test(NAME ctl_example_ports_follow_file EXIT 0 MATCH "^ports 0x6," ARGS ctl --offline --config ${ctl_example} show)
mrc_cli_test(NAME ctl_example_too_few_ports EXIT 2
             MATCH "profiles.toml:[0-9]+: EV profile 1: port 2 is above --ports 1 \\(this file needs --ports 2;"
             ARGS ctl --offline --ports 1 apply ${ctl_example})
mrc_cli_test(NAME ctl_example_generated_sports EXIT 0 MATCH "^ +63 port 2 .* udp_sport 16448 "
             NOT "udp_sport ([0-9]|[0-9][0-9]|[0-9][0-9][0-9]|10[01][0-9]|102[0-3]) "
             ARGS ctl --offline --config ${ctl_example} evs 2)
mrc_cli_test(NAME ctl_low_ports_warn EXIT 0
             MATCH "warning: .*ctl_low_ports.toml:13: EV profile 1: 4 of its 4 EVs are on UDP source ports below 1024 \\(0\\.\\.3\\)"
             ARGS ctl --offline apply ${ctl_fx}/ctl_low_ports.toml)

# ---- broken configs: file, line, key, problem ----------------------------------------------------
mrc_cli_test(NAME ctl_cfg_wrong_type EXIT 2
             MATCH "ctl_bad_type.toml:3: 'id' must be an integer in \\[1, 9223372036854775807\\], not the string \"13\""
             ARGS ctl --offline apply ${ctl_fx}/ctl_bad_type.toml)
mrc_cli_test(NAME ctl_cfg_unknown_key EXIT 2 MATCH "ctl_bad_key.toml:4: unknown key 'gama' in cc_profile 5"
             ARGS ctl --offline apply ${ctl_fx}/ctl_bad_key.toml)
mrc_cli_test(NAME ctl_cfg_duplicate_id EXIT 2
             MATCH "ctl_dup_id.toml:8: ev_format 13 is defined twice \\(first at line 3\\)"
             ARGS ctl --offline apply ${ctl_fx}/ctl_dup_id.toml)
mrc_cli_test(NAME ctl_cfg_missing_key EXIT 2 MATCH "ctl_missing_key.toml:2: ev_format 13: missing 'mode' \\(one of stev, srv6, udp\\)"
             ARGS ctl --offline apply ${ctl_fx}/ctl_missing_key.toml)
mrc_cli_test(NAME ctl_cfg_port_range EXIT 2 MATCH "ctl_bad_port.toml:14: 'port' must be an integer in \\[1, 32\\], not 300"
             ARGS ctl --offline apply ${ctl_fx}/ctl_bad_port.toml)
mrc_cli_test(NAME ctl_cfg_copies_zero EXIT 2 MATCH "ctl_copies_zero.toml:12: 'copies' must be an integer in \\[1, 65536\\], not 0"
             ARGS ctl --offline apply ${ctl_fx}/ctl_copies_zero.toml)
mrc_cli_test(NAME ctl_cfg_count_mismatch EXIT 2
             MATCH "ctl_count_mismatch.toml:11: 'count' is 3 but 'evs' lists 4 EVs \\(copies included\\)"
             ARGS ctl --offline apply ${ctl_fx}/ctl_count_mismatch.toml)
mrc_cli_test(NAME ctl_cfg_bad_ev EXIT 2 MATCH "ctl_bad_ev.toml:14: 'ev' \"9G42\" is not an EV: EV has a non-hex digit"
             ARGS ctl --offline apply ${ctl_fx}/ctl_bad_ev.toml)
mrc_cli_test(NAME ctl_cfg_nan EXIT 2 MATCH "ctl_nan.toml:5: 'gamma' must be a finite number, not nan"
             ARGS ctl --offline apply ${ctl_fx}/ctl_nan.toml)
mrc_cli_test(NAME ctl_cfg_cc_range EXIT 2 MATCH "ctl_cc_range.toml:6: CC profile 5: gamma must be in \\(0, 1. \\(nothing was changed\\)$"
             ARGS ctl --offline apply ${ctl_fx}/ctl_cc_range.toml)
mrc_cli_test(NAME ctl_cfg_cc_none_settings EXIT 2
             MATCH "ctl_cc_none_settings.toml:5: 'base_rtt' needs algorithm = \"uet-1.0-nscc\""
             ARGS ctl --offline apply ${ctl_fx}/ctl_cc_none_settings.toml)
mrc_cli_test(NAME ctl_cfg_auto_extra EXIT 2 MATCH "ctl_auto_fields.toml:5: 'format' does not go with mode = \"auto\""
             ARGS ctl --offline apply ${ctl_fx}/ctl_auto_fields.toml)
mrc_cli_test(NAME ctl_cfg_no_format EXIT 2
             MATCH "ctl_no_format.toml:5: EV profile 1: EV format profile 99 does not exist \\(nothing was changed\\)$"
             ARGS ctl --offline apply ${ctl_fx}/ctl_no_format.toml)
mrc_cli_test(NAME ctl_cfg_deny_unknown EXIT 2 MATCH "ctl_deny_unknown.toml:15: EV profile 1: deny: EV not in the profile \\(nothing was changed\\)$"
             ARGS ctl --offline apply ${ctl_fx}/ctl_deny_unknown.toml)
mrc_cli_test(NAME ctl_cfg_min_active EXIT 2 MATCH "ctl_min_active.toml:11: EV profile 1: ev_min_active is above ev_count"
             ARGS ctl --offline apply ${ctl_fx}/ctl_min_active.toml)
mrc_cli_test(NAME ctl_cfg_fmt_width EXIT 2
             MATCH "ctl_fmt_width.toml:5: EV format 13: format fields total 33 bits; this mode holds 32$"
             ARGS ctl --offline apply ${ctl_fx}/ctl_fmt_width.toml)
mrc_cli_test(NAME ctl_cfg_rule_line EXIT 2
             MATCH "ctl_bad_rule.toml:10: EV profile 1: field 0: wider than its format field \\(nothing was changed\\)$"
             ARGS ctl --offline apply ${ctl_fx}/ctl_bad_rule.toml)
mrc_cli_test(NAME ctl_cfg_syntax EXIT 2 MATCH "ctl_bad_syntax.toml:3: not TOML: "
             ARGS ctl --offline apply ${ctl_fx}/ctl_bad_syntax.toml)
mrc_cli_test(NAME ctl_cfg_no_errno_text EXIT 2 MATCH "ctl_no_format.toml"
             NOT "No such file or directory|Invalid argument|Argument list too long"
             ARGS ctl --offline apply ${ctl_fx}/ctl_no_format.toml)

# ---- options and arguments -----------------------------------------------------------------------
mrc_cli_test(NAME ctl_ports_zero EXIT 2 MATCH "--ports: must be an integer in \\[1, 32\\], got '0'" ARGS ctl --offline --ports 0 show)
mrc_cli_test(NAME ctl_ports_negative EXIT 2 MATCH "--ports: must be an integer in \\[1, 32\\], got '-1'" ARGS ctl --offline --ports -1 show)
mrc_cli_test(NAME ctl_ports_nan EXIT 2 MATCH "--ports: must be an integer in \\[1, 32\\], got 'nan'" ARGS ctl --offline --ports nan show)
mrc_cli_test(NAME ctl_evs_negative EXIT 2 MATCH "profile: must be an integer in \\[0, 18446744073709551615\\], got '-1'"
             ARGS ctl --offline evs -1)
mrc_cli_test(NAME ctl_evs_huge EXIT 2 MATCH "profile: must be an integer in \\[0, 18446744073709551615\\], got '18446744073709551616'"
             ARGS ctl --offline evs 18446744073709551616)
mrc_cli_test(NAME ctl_evs_unknown EXIT 2 MATCH "no EV profile 7 \\(--offline starts with profile 0 only: add --config FILE\\)$"
             NOT "No such file" ARGS ctl --offline evs 7)
mrc_cli_test(NAME ctl_evs_unknown_with_config EXIT 2 MATCH "no EV profile 7 \\(the EV profiles are 0, 1, 2, 3\\)$"
             ARGS ctl --offline --config ${ctl_example} evs 7)
mrc_cli_test(NAME ctl_probe_bad_dgid EXIT 2 MATCH "--dgid: must be an IPv4 or IPv6 address, got 'fe80::1::2'"
             ARGS ctl --socket /nonexistent probe --dgid fe80::1::2 --ev 9c41)
mrc_cli_test(NAME ctl_probe_bad_ev EXIT 2 MATCH "--ev: must be an EV of 1..64 hex digits \\(big-endian\\), got 'zz' \\(EV has a non-hex digit\\)"
             ARGS ctl --socket /nonexistent probe --dgid ::1 --ev zz)
mrc_cli_test(NAME ctl_probe_bad_mode EXIT 2 MATCH "--mode: must be one of stev, srv6, udp, got 'stv'"
             ARGS ctl --socket /nonexistent probe --dgid ::1 --ev 9c41 --mode stv)
mrc_cli_test(NAME ctl_probe_bad_port EXIT 2 MATCH "--port: must be an integer in \\[1, 32\\], got '0'"
             ARGS ctl --socket /nonexistent probe --dgid ::1 --ev 9c41 --port 0)
mrc_cli_test(NAME ctl_probe_bad_count EXIT 2 MATCH "--count: must be an integer in \\[1, 1024\\], got '-3'"
             ARGS ctl --socket /nonexistent probe --dgid ::1 --ev 9c41 --count -3)
mrc_cli_test(NAME ctl_probe_bad_timeout EXIT 2 MATCH "--timeout-ms: must be an integer in \\[1, 3600000\\], got 'nan'"
             ARGS ctl --socket /nonexistent probe --dgid ::1 --ev 9c41 --timeout-ms nan)
mrc_cli_test(NAME ctl_probe_huge_timeout EXIT 2 MATCH "--timeout-ms: must be an integer in \\[1, 3600000\\], got '99999999999'"
             ARGS ctl --socket /nonexistent probe --dgid ::1 --ev 9c41 --timeout-ms 99999999999)
mrc_cli_test(NAME ctl_events_bad_count EXIT 2 MATCH "--count: must be an integer in \\[0, 4294967295\\], got '-1'"
             ARGS ctl --socket /nonexistent events --count -1)
mrc_cli_test(NAME ctl_deny_bad_port EXIT 2 MATCH "port: must be an integer in \\[1, 32\\], got '99'"
             ARGS ctl --offline --config ${ctl_example} deny 1 9C410001 99)
mrc_cli_test(NAME ctl_deny_bad_ev EXIT 2 MATCH "ev: must be an EV of 1..64 hex digits \\(big-endian\\), got 'xyz'"
             ARGS ctl --offline --config ${ctl_example} deny 1 xyz 1)
mrc_cli_test(NAME ctl_deny_unknown_profile EXIT 2 MATCH "deny: no EV profile 9 \\(the EV profiles are 0, 1, 2, 3\\)$"
             ARGS ctl --offline --config ${ctl_example} deny 9 9C410001 1)
mrc_cli_test(NAME ctl_deny_unknown_ev EXIT 2 MATCH "deny: EV 9c410001 on port 2 is not in EV profile 1$"
             ARGS ctl --offline --config ${ctl_example} deny 1 9C410001 2)
mrc_cli_test(NAME ctl_deny_ok EXIT 0 MATCH "^EV profile 1: EV 9c410001 on port 1 DENIED$"
             ARGS ctl --offline --config ${ctl_example} deny 1 9C410001 1)
mrc_cli_test(NAME ctl_no_socket EXIT 2 MATCH "no control socket: give --socket PATH" ARGS ctl show)
# An empty runtime directory of its own: other tests' endpoints must not be found (D46).
set_tests_properties(cli_ctl_no_socket PROPERTIES ENVIRONMENT "MRC_CTL_DIR=${CMAKE_CURRENT_BINARY_DIR}/ctl_dir_empty")
mrc_cli_test(NAME ctl_list_off EXIT 2 MATCH "list: MRC_CTL_DIR=none" ARGS ctl list)
set_tests_properties(cli_ctl_list_off PROPERTIES ENVIRONMENT "MRC_CTL_DIR=none")
mrc_cli_test(NAME ctl_pid_unknown EXIT 2 MATCH "no control socket of process 4194304 in .*mrc ctl list"
             ARGS ctl --pid 4194304 show)
mrc_cli_test(NAME ctl_socket_missing EXIT 2 MATCH "--socket /nonexistent/ctl.sock: no such file"
             ARGS ctl --socket /nonexistent/ctl.sock show)
mrc_cli_test(NAME ctl_socket_dir EXIT 2 MATCH "--socket ${PROJECT_SOURCE_DIR}/config: is a directory, not a control socket"
             ARGS ctl --socket ${PROJECT_SOURCE_DIR}/config show)
mrc_cli_test(NAME ctl_socket_not_socket EXIT 2 MATCH "profiles.toml: is not a control socket"
             ARGS ctl --socket ${ctl_example} show)
mrc_cli_test(NAME ctl_config_needs_offline EXIT 2 MATCH "--config goes with --offline"
             ARGS ctl --socket /nonexistent --config ${ctl_example} show)
mrc_cli_test(NAME ctl_offline_and_socket EXIT 2 MATCH "--offline excludes --socket|--socket excludes --offline"
             ARGS ctl --offline --socket /nonexistent show)

# ---- the reply timeout: a value that is no number of seconds is refused, not quietly 10 s ---------
mrc_cli_test(NAME ctl_list_bad_timeout EXIT 2 TIMEOUT 10
             MATCH "MRC_CTL_TIMEOUT=ten: not a number of seconds in 0.001-86400" ARGS ctl list)
mrc_cli_test(NAME ctl_socket_bad_timeout EXIT 2 TIMEOUT 10
             MATCH "MRC_CTL_TIMEOUT=0: not a number of seconds in 0.001-86400"
             ARGS ctl --socket ${CMAKE_CURRENT_BINARY_DIR}/ctl_bad_timeout.sock show)
set_tests_properties(cli_ctl_list_bad_timeout PROPERTIES ENVIRONMENT "MRC_CTL_TIMEOUT=ten")
set_tests_properties(cli_ctl_socket_bad_timeout PROPERTIES ENVIRONMENT "MRC_CTL_TIMEOUT=0")
