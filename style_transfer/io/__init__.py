"""Files in and out: paths checked before use (``files``), images (``images``), the record inside image files
(``metadata``) and its builder and replayer (``provenance``). Torch only where a tensor is asked for."""
