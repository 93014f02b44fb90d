"""The losses: the tutorial's ``gram_matrix``, ``ContentLoss`` and ``StyleLoss`` (``tutorial``); weighted, blended,
paper-form and total variation terms (``terms``); Wasserstein and sliced statistics (``statistics``); guided losses
and their masks (``masks``); the temporal term of video (``temporal``)."""
