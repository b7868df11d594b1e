"The `scholarqa` subcommands, one family to a module (nbs/10a_cli_options … 10g_cli_train); the root parser is `scholarqa.cli`."
