# `mrc perf`: every numeric option is range-checked when parsed, and every option that can be checked
# on this side is checked before connecting; the message names the option and the allowed range,
# and the exit code is 2. The client cases point at port 1 (nothing listens there) and, when they get
# past the parser, at plane addresses of their own (127.<plane>.95.<n>, unused by other tests), so a
# check that does not fire shows up as a connection attempt (exit 1), not as a run against some server.
set(_c --client 127.0.0.1 -p 1)

# -n / --iters: no wrap of "-5" or 2^64, no 0.
mrc_cli_test(NAME perf_iters_negative EXIT 2 MATCH "--iters.*\\[1, 1000000000000\\]" ARGS perf ${_c} -n -5)
mrc_cli_test(NAME perf_iters_2p64 EXIT 2 MATCH "--iters.*\\[1, 1000000000000\\]"
             ARGS perf ${_c} -n 18446744073709551616)
mrc_cli_test(NAME perf_iters_zero EXIT 2 MATCH "--iters.*\\[1, 1000000000000\\]" ARGS perf ${_c} -n 0)
# -D / --duration: no silent fallback to the message count.
mrc_cli_test(NAME perf_duration_zero EXIT 2 MATCH "--duration.*seconds in \\[0.001, 86400\\]" ARGS perf ${_c} -D 0)
mrc_cli_test(NAME perf_duration_negative EXIT 2 MATCH "--duration.*seconds in \\[0.001, 86400\\]"
             ARGS perf ${_c} -D -1)
mrc_cli_test(NAME perf_duration_nan EXIT 2 MATCH "--duration.*seconds in \\[0.001, 86400\\]" ARGS perf ${_c} -D nan)
# --rate, --seed
mrc_cli_test(NAME perf_rate_negative EXIT 2 MATCH "--rate.*Gb/s in \\[0.001, 1000\\]" ARGS perf ${_c} --rate -5)
mrc_cli_test(NAME perf_rate_zero EXIT 2 MATCH "--rate.*Gb/s in \\[0.001, 1000\\]" ARGS perf ${_c} --rate 0)
mrc_cli_test(NAME perf_seed_negative EXIT 2 MATCH "--seed.*\\[0, 18446744073709551615\\]" ARGS perf ${_c} --seed -1)
mrc_cli_test(NAME perf_seed_2p64 EXIT 2 MATCH "--seed.*\\[0, 18446744073709551615\\]"
             ARGS perf ${_c} --seed 18446744073709551616)
# EVs, QP timeout, GSO, depths, counts
mrc_cli_test(NAME perf_evs_zero EXIT 2 MATCH "--evs.*\\[1, 256\\]" ARGS perf ${_c} --evs 0)
mrc_cli_test(NAME perf_evs_negative EXIT 2 MATCH "--evs.*\\[1, 256\\]" ARGS perf ${_c} --evs -1)
mrc_cli_test(NAME perf_backup_evs_negative EXIT 2 MATCH "--backup-evs.*\\[0, 256\\]" ARGS perf ${_c} --backup-evs -1)
mrc_cli_test(NAME perf_timeout_25 EXIT 2 MATCH "--timeout.*\\[0, 24\\]" ARGS perf ${_c} --timeout 25)
mrc_cli_test(NAME perf_gso_1 EXIT 2 MATCH "--gso.*0 \\(off\\) or an integer in \\[2, 64\\]" ARGS perf ${_c} --gso 1)
mrc_cli_test(NAME perf_gso_65 EXIT 2 MATCH "--gso.*0 \\(off\\) or an integer in \\[2, 64\\]" ARGS perf ${_c} --gso 65)
mrc_cli_test(NAME perf_gso_1_server EXIT 2 MATCH "--gso.*\\[2, 64\\]" ARGS perf --server -p 0 --gso 1)
mrc_cli_test(NAME perf_qps_zero EXIT 2 MATCH "--qps.*\\[1, 256\\]" ARGS perf ${_c} -q 0)
mrc_cli_test(NAME perf_qps_257 EXIT 2 MATCH "--qps.*\\[1, 256\\]" ARGS perf ${_c} -q 257)
mrc_cli_test(NAME perf_tx_depth_zero EXIT 2 MATCH "--tx-depth.*\\[1, 4096\\]" ARGS perf ${_c} -t 0)
mrc_cli_test(NAME perf_lat_iters_negative EXIT 2 MATCH "--lat-iters.*\\[0, 10000000\\]" ARGS perf ${_c} --lat-iters -1)
mrc_cli_test(NAME perf_lat_size_zero EXIT 2 MATCH "--lat-size.*\\[1, 1048576\\]" ARGS perf ${_c} --lat-size 0)
mrc_cli_test(NAME perf_interval_zero EXIT 2 MATCH "--interval.*\\[1, 60000\\]" ARGS perf ${_c} --interval 0)
# Sizes go through the size-suffix transform first, then the range: 1GiB passes, 2GiB and 0 do not.
mrc_cli_test(NAME perf_size_zero EXIT 2 MATCH "--size.*\\[1, 1073741824\\]" ARGS perf ${_c} -s 0)
mrc_cli_test(NAME perf_size_negative EXIT 2 MATCH "--size.*\\[1, 1073741824\\]" ARGS perf ${_c} -s -5)
mrc_cli_test(NAME perf_size_2gib EXIT 2 MATCH "--size.*\\[1, 1073741824\\]" ARGS perf ${_c} -s 2GiB)
mrc_cli_test(NAME perf_size_1gib_accepted EXIT 1 MATCH "no mrc perf server answered at 127.0.0.1:1"
             NOT "--size" ARGS perf ${_c} -s 1GiB -n 1 --local 127.1.95.10 --connect-timeout 0.2)
mrc_cli_test(NAME perf_window_small EXIT 2 MATCH "--window.*\\[4096, 1073741824\\]" ARGS perf ${_c} --window 100)
mrc_cli_test(NAME perf_window_2gib EXIT 2 MATCH "--window.*\\[4096, 1073741824\\]" ARGS perf ${_c} --window 2GiB)
# -q x -s beyond the 4 GiB total names -q and -s (and not --window, which was not given) ...
mrc_cli_test(NAME perf_qps_size_total EXIT 2 MATCH "-s 1 GiB .*x -q 5 = 5 GiB, more than the 4 GiB limit" NOT "--window"
             ARGS perf ${_c} -q 5 -s 1GiB)
# ... and --window when that is what was given.
mrc_cli_test(NAME perf_qps_window_total EXIT 2 MATCH "--window 1 GiB per QP x -q 8 = 8 GiB, more than the 4 GiB limit"
             ARGS perf ${_c} -q 8 --window 1GiB)
# --pmtu: 0 (auto) or 256..4096 in powers of two, said in the message.
mrc_cli_test(NAME perf_pmtu_3000 EXIT 2 MATCH "--pmtu.*0 \\(auto.*256, 512, 1024, 2048, 4096"
             ARGS perf ${_c} --pmtu 3000)
mrc_cli_test(NAME perf_pmtu_100 EXIT 2 MATCH "--pmtu.*256, 512, 1024, 2048, 4096" ARGS perf ${_c} --pmtu 100)
# Ports
mrc_cli_test(NAME perf_port_70000 EXIT 2 MATCH "--port.*\\[0, 65535\\]" ARGS perf --client 127.0.0.1 -p 70000)
mrc_cli_test(NAME perf_client_port_zero EXIT 2 MATCH "-p/--port: 0 .*the client needs the server's port.*\\[1, 65535\\]"
             ARGS perf --client 127.0.0.1 -p 0)
mrc_cli_test(NAME perf_udp_port_zero EXIT 2 MATCH "--udp-port.*\\[1, 65535\\]" ARGS perf ${_c} --udp-port 0)
mrc_cli_test(NAME perf_udp_port_70000 EXIT 2 MATCH "--udp-port.*\\[1, 65535\\]" ARGS perf ${_c} --udp-port 70000)
# Timeouts of the setup channel
mrc_cli_test(NAME perf_connect_timeout_zero EXIT 2 MATCH "--connect-timeout.*seconds in \\[0.1, 3600\\]"
             ARGS perf ${_c} --connect-timeout 0)
mrc_cli_test(NAME perf_hello_timeout_nan EXIT 2 MATCH "--hello-timeout.*seconds in \\[0.1, 3600\\]"
             ARGS perf --server -p 0 --hello-timeout nan)
# --max-memory (server): 1 MiB .. 4 GiB, with size suffixes.
mrc_cli_test(NAME perf_max_memory_zero EXIT 2 MATCH "--max-memory.*\\[1048576, 4294967296\\]"
             ARGS perf --server -p 0 --max-memory 0)
mrc_cli_test(NAME perf_max_memory_5gib EXIT 2 MATCH "--max-memory.*\\[1048576, 4294967296\\]"
             ARGS perf --server -p 0 --max-memory 5GiB)
mrc_cli_test(NAME perf_max_memory_negative EXIT 2 MATCH "--max-memory" ARGS perf --server -p 0 --max-memory -1)
mrc_cli_test(NAME perf_max_memory_words EXIT 2 MATCH "--max-memory" ARGS perf --server -p 0 --max-memory lots)
# Checked locally before connecting, on both sides (no server is started or shut down by them).
mrc_cli_test(NAME perf_pcap_bad_client EXIT 2 MATCH "--pcap: cannot open '/nonexistent/dir/x.pcap'"
             ARGS perf ${_c} --local 127.1.95.11 --pcap /nonexistent/dir/x.pcap)
mrc_cli_test(NAME perf_pcap_bad_server EXIT 2 MATCH "--pcap: cannot open '/nonexistent/dir/x.pcap'" TIMEOUT 20
             ARGS perf --server --bind 127.0.0.1 -p 0 --local 127.1.95.12 --pcap /nonexistent/dir/x.pcap)
mrc_cli_test(NAME perf_srv6_no_paths_client EXIT 2 MATCH "SRv6 mode needs --srv6-paths"
             ARGS perf ${_c} --local 127.1.95.13 --ev-mode srv6)
mrc_cli_test(NAME perf_srv6_no_paths_server EXIT 2 MATCH "SRv6 mode needs --srv6-paths" TIMEOUT 20
             ARGS perf --server --bind 127.0.0.1 -p 0 --local 127.1.95.14 --ev-mode srv6)
mrc_cli_test(NAME perf_stev_needs_ipv6 EXIT 2 MATCH "STEV \\(flow-label\\) mode needs IPv6 plane addresses"
             ARGS perf ${_c} --local 127.1.95.15 --ev-mode stev)
mrc_cli_test(NAME perf_remote_count EXIT 2 MATCH "--remote: 1 addresses for 2 local planes"
             ARGS perf ${_c} --local 127.1.95.16,127.2.95.16 --remote 127.1.95.17)
mrc_cli_test(NAME perf_local_not_ip EXIT 2 MATCH "--local: not an IP address: '1.2.3'" ARGS perf ${_c} --local 1.2.3)
# No server: a short default wait, said while waiting, and a clear error naming the address and the
# option when it gives up (exit 1: the run failed, the input was fine).
mrc_cli_test(NAME perf_no_server_says_what_it_waits_for EXIT 1
             MATCH "waiting for the mrc perf server at 127.0.0.1:1 \\(up to 0.3 s, --connect-timeout\\)"
             ARGS perf ${_c} --local 127.1.95.18 --connect-timeout 0.3)
mrc_cli_test(NAME perf_no_server_gives_up EXIT 1
             MATCH "no mrc perf server answered at 127.0.0.1:1 within 0.3 s \\(Connection refused\\).*--connect-timeout"
             ARGS perf ${_c} --local 127.1.95.19 --connect-timeout 0.3)
mrc_cli_test(NAME perf_no_server_default_5s EXIT 1 MATCH "no mrc perf server answered at 127.0.0.1:1 within 5 s"
             ARGS perf ${_c} --local 127.1.95.20)
