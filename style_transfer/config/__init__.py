"""The settings of a run, torch-free: ``StyleConfig`` (``style``: each setting declared once, with how it is given and
shown: ``fields``), its checks (``checks``), the one text parser (``text``), the choices (``choices``) and
``RunOptions`` (``run_options``)."""
