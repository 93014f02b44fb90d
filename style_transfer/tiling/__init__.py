"""Evaluations over crops when a size does not fit: the tiled evaluation (``tiling``), the crops (``crops``), which
tile each size takes (``plans``) and memory estimates before a run (``memory``)."""
