"""The web app (``stylize-serve``): a page to upload, watch the picture form, cancel and download.

``app.create_app`` builds the FastAPI app; ``jobs`` runs jobs through ``run.Run`` with one worker per
device; ``gallery`` keeps results in the data folder; ``static/`` holds the page (plain HTML, CSS and
JavaScript, nothing from other hosts). Needs the ``web`` extra: ``pip install 'style_transfer[web]'``.
Importing this package imports nothing heavy.
"""
