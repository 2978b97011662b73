"""The `temper` command line: it only parses arguments and calls into the library."""
