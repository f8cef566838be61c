# `mrc decode`: hex and pcap input, JSON output with docs/wire-format.md names, exit 2 with the reason
# and byte offset for undecodable input (docs/cli.md).
mrc_cli_test(NAME decode_hex_sack EXIT 0
             MATCH "\"opcode_name\":\"SACK\".*\"seth\":\\{\"m\":1,\"pr\":false,\"ack_psn_offset\":-3"
             ARGS decode --hex DC00FFFF00000010000000630020FFFD0001C0DE0000000000000063000400010000000000000005040000038500001082F30861)
mrc_cli_test(NAME decode_hex_two EXIT 0 MATCH "\"frame\":2,.*\"opcode_name\":\"ACK\""
             ARGS decode --hex DC00FFFF00000010000000630020FFFD0001C0DE0000000000000063000400010000000000000005040000038500001082F30861 --hex D100FFFF00000010000000641F000005A41A04B9)
mrc_cli_test(NAME decode_truncated EXIT 2 MATCH "packet 1: truncated at byte 2"
             ARGS decode --hex DC00)
mrc_cli_test(NAME decode_short_sack EXIT 2 MATCH "truncated at byte 16" ARGS decode --hex DC00FFFF000000100000006300000000)
mrc_cli_test(NAME decode_unknown_opcode EXIT 2 MATCH "unknown opcode at byte 0"
             ARGS decode --hex 0000FFFF0000001000000064)
mrc_cli_test(NAME decode_bad_tver EXIT 2 MATCH "bad transport version at byte 1"
             ARGS decode --hex D101FFFF00000010000000641F000005A41A04B9)
mrc_cli_test(NAME decode_bad_ep_op EXIT 2 MATCH "bad field at byte 13"
             ARGS decode --hex D800FFFF000000020000BEEF000300000000000F000000000400000100000000)
mrc_cli_test(NAME decode_not_hex EXIT 2 MATCH "--hex #1: not a hex digit: 'z'" ARGS decode --hex zz)
mrc_cli_test(NAME decode_odd_hex EXIT 2 MATCH "odd number of hex digits" ARGS decode --hex ABC)
mrc_cli_test(NAME decode_missing_file EXIT 2 MATCH "nope.pcap: cannot open" ARGS decode nope.pcap)
mrc_cli_test(NAME decode_file_and_hex EXIT 2 MATCH "not both" ARGS decode x.pcap --hex D1)
mrc_cli_test(NAME decode_bad_port EXIT 2 MATCH "--port: must be an integer in \\[1, 65535\\]"
             ARGS decode --port 0 x.pcap)
mrc_cli_test(NAME decode_empty_stdin EXIT 2 MATCH "no packets in the input" ARGS decode)
mrc_cli_test(NAME decode_help EXIT 0 MATCH "--port" ARGS decode --help)

# Every hand-written interop vector, as hex on stdin and inside a text2pcap capture (ports 4791 and
# 4971), decoded field by field.
find_program(PYTHON3_PROGRAM python3 REQUIRED)
add_test(NAME cli_decode_vectors
         COMMAND ${PYTHON3_PROGRAM} ${PROJECT_SOURCE_DIR}/tests/wire/check_vectors.py decode $<TARGET_FILE:mrc>
                 ${PROJECT_SOURCE_DIR}/tests/wire/interop_vectors.txt ${CMAKE_CURRENT_BINARY_DIR}/decode_vectors_out)
set_tests_properties(cli_decode_vectors PROPERTIES LABELS cli TIMEOUT 60)
# The input is read as it comes: a live capture on a pipe is decoded while the pipe is open, an endless
# input (/dev/zero) is refused at once in bounded memory, and a pcap record too large or cut short is
# reported with its frame and file byte (fixtures/decode_stream.py).
add_test(NAME cli_decode_stream COMMAND ${PYTHON3_PROGRAM} ${CMAKE_CURRENT_SOURCE_DIR}/fixtures/decode_stream.py
                                        $<TARGET_FILE:mrc>)
set_tests_properties(cli_decode_stream PROPERTIES LABELS cli TIMEOUT 120)
