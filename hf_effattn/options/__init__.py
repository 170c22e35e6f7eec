"""What the commands and scripts take and how they answer bad input: one-line user errors, the argparse types, the
local parts' options, options given as keyword arguments, the names and defaults the subcommands' parsers offer."""
