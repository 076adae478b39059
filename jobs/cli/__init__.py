"""The `streamagents` command line: the entry point (`main`) and one module per command area."""
