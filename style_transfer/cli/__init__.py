"""The command line: ``stylize`` (``stylize``), its options and error lines shared by every command (``options``),
what a run shows and writes as it goes (``watch``, ``recorders``), ``stylize-info`` and ``stylize-compare-backward``."""
