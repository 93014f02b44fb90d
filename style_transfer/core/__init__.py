"""The tutorial: networks and their preprocessing (``vgg``), ``gram_matrix``, ``ContentLoss`` and ``StyleLoss``
(``losses``), the style model and the LBFGS loop (``transfer``). Nothing here knows about files, runs or front ends."""
