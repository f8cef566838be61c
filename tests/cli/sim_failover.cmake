# Scenario 5's own goal for MRC (scenarios/scen5_failover.toml): full goodput within 5 base RTTs of
# the T0-T1 link's failure and no bytes lost. The CSV row: ... full_goodput_us, base_rtts, bytes_lost.
# It failed at 384.7 us (41 base RTTs) while the answers to the probes of the blamed EVs set RACK's
# RTT: 33 data packets declared lost on their way, one bin at 93 % (D83).
mrc_cli_test(NAME sim_scen5_mrc_recovers_within_5_base_rtts EXIT 0 TIMEOUT 300
             MATCH "^\"MRC 256 EVs, T0-T1 link killed\",8/8,([0-9.]+,){6}([0-9]|[1-4][0-9])\\.[0-9],[0-5]\\.[0-9],0,"
             ARGS sim ${PROJECT_SOURCE_DIR}/scenarios/scen5_failover.toml --variant 1 --csv --no-progress)
