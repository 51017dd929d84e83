"""The `faultloop` command line: the only layer that parses arguments."""
