# `mrc` itself: help, version, unknown and missing subcommands; usage errors exit 2.
mrc_cli_test(NAME help_word EXIT 0 MATCH "Subcommands:" ARGS help)
mrc_cli_test(NAME help_word_sub EXIT 0 MATCH "--planes" ARGS help demo)
mrc_cli_test(NAME help_word_unknown EXIT 2 MATCH "unknown subcommand 'foo'" ARGS help foo)
mrc_cli_test(NAME help_flag EXIT 0 MATCH "Exit status" ARGS --help)
mrc_cli_test(NAME version EXIT 0 MATCH "^mrc [0-9]+\\.[0-9]+\\.[0-9]+.*application API \\(mrc.h\\): [0-9]" ARGS --version)
mrc_cli_test(NAME unknown_subcommand EXIT 2 MATCH "unknown subcommand 'foo' \\(one of: demo" ARGS foo)
mrc_cli_test(NAME no_subcommand EXIT 2 MATCH "a subcommand is required" ARGS)
mrc_cli_test(NAME unknown_option EXIT 2 MATCH "--bogus" ARGS demo --bogus)
